#!/usr/bin/env bash
# ctest smoke test of process-wide-locks-benchmark and scripts/render-benchmarks.py (label
# "bench"): a few seconds of every benchmark kind on the default variant and the global mutex
# (and on the lock-free registries of the Refs and Shared mixes),
# with short rounds and two passes, then checks of the JSON (every mix did operations and no
# write failed, every iteration mode probed, the grids ran) and a render of it into a temporary
# document (without the plot: matplotlib is a --bench dependency only).
#   registry-bench-smoke-test.sh PROCESS-WIDE-LOCKS-BENCHMARK RENDER-BENCHMARKS.PY
set -euo pipefail
bench=$1
render=$2
work=$(mktemp -d /tmp/qr-registry-bench-smoke.XXXXXX)
trap 'rm -rf "$work"' EXIT

variants='GlobalMutex|ShardedQueryMap256|BareFlatFind|GlobalBoostMutex|SpinLock4ShardsExclusive'
variants+='|QueryExecMgr4Shards|QueryExecMgr256Shards|BoostConcurrentFlatMap|SeqlockTagMap256|Machine'
variants+='|HazardSeqlockTag4Shards|QueryExecMgr256|StableSeqlockTag256|HazardSeqlockTag256'
variants+='|ShardLockRequestMap256|StableRefRegistry256|ClientRequestStateMap256Shards'
"$bench" --passes=2 --mix_threads=1,2 --mix_entries=1000 --mix_round_ms=20 \
  --iteration_round_ms=20 --grid=5x100 --grid_min_time_s=0.01 --get_min_time_s=0.01 \
  --get_vs_bare_rounds=10 --iteration_probe_realtime=false \
  --benchmark_filter="<($variants)>" \
  --benchmark_format=json --benchmark_out="$work/run.json" >"$work/out" 2>"$work/err" ||
  { cat "$work/err"; exit 1; }
for reference in false true; do
  "$bench" --callgrind_variant=ShardedQueryMap256 --callgrind_ops=1000 \
    --callgrind_reference=$reference >/dev/null 2>"$work/err" || { cat "$work/err"; exit 1; }
done
for registry in QueryStateRegistry256 ShardLockQueryExecMgr256 StableRefRegistry256 \
    ShardLockRequestMap256; do
  "$bench" --callgrind_variant=$registry --callgrind_ops=1000 >/dev/null 2>"$work/err" ||
    { cat "$work/err"; exit 1; }
done

python3 - "$work/run.json" <<'PY'
import json, os, sys
runs = json.load(open(sys.argv[1]))["benchmarks"]
seen, errors = set(), []
MIXES = ("BM_LookupOnly", "BM_ReadHeavy", "BM_Churn", "BM_HotQuery")
# Operations and probes are summed over the two passes: a 20 ms round on a loaded machine
# (ctest runs beside other tests) can pass before a thread is first scheduled; both passes
# coming up empty means the benchmark is broken, not busy.
ops, probes = {}, {}
for b in runs:
    name = b["run_name"]
    kind = name.split("<")[0]
    seen.add(kind)
    # The map mixes, and the same over the registries (Refs) and shared_ptr maps (Shared).
    if kind.removesuffix("Refs").removesuffix("Shared") in MIXES:
        ops[name] = ops.get(name, 0) + b.get("ops_per_s", 0)
        if "rtt_before_ns" not in b or "placement:" not in b.get("label", ""):
            errors.append(f"{name}: no placement state")
        # A registry's Add fails, by design, while a preempted reader still holds the query
        # ended before it (BM_RegistryMix); every other mix's writes cannot fail.
        if not kind.endswith("Refs") and b.get("write_failures", 0) != 0:
            errors.append(f"{name}: {b['write_failures']} failed writes")
    if kind.startswith(("BM_GetVsBare", "BM_GetRefVsBare")) and not b.get("ratio_to_bare", 0) > 0:
        errors.append(f"{name}: no ratio")
    if (kind == "BM_CacheLineRoundTrip" and len(os.sched_getaffinity(0)) >= 2
            and not b.get("round_trip_ns", 0) > 0):
        errors.append(f"{name}: no round trip (fewer than two CPUs?)")
    if kind == "BM_LookupDuringIteration":
        seen.add("mode:" + name.split("/mode:")[1].split("/")[0])
        probes[name] = probes.get(name, 0) + b.get("probes", 0)
errors += [f"{n}: no operations in either pass" for n, v in ops.items() if not v > 0]
errors += [f"{n}: no probes in either pass" for n, v in probes.items() if not v > 0]
for want in ("BM_LookupOnly", "BM_ReadHeavy", "BM_Churn", "BM_HotQuery", "BM_QueryLifecycle",
             "BM_RequestLifecycle", "BM_LookupDuringIteration", "BM_UncontendedGet",
             "BM_GetVsBare", "BM_GetVsBareDependent", "BM_GetRefVsBare",
             "BM_GetRefVsBareDependent", "BM_CacheLineRoundTrip",
             "mode:lock_held", "mode:snapshot", "mode:none",
             *(m + family for m in MIXES for family in ("Refs", "Shared"))):
    if want not in seen:
        errors.append(f"{want}: did not run")
if errors:
    print("\n".join(errors))
    sys.exit(1)
print(f"{len(runs)} runs checked")
PY

python3 "$render" --json "$work/run.json" --doc "$work/doc.md" --no-plot
for section in "cache-line round trip" "Targets of the issue" "Fixed-thread mixes" "Lookups while another thread" \
               "Uncontended single-thread Get" "Executor side" "Coordinator side"; do
  grep -q "$section" "$work/doc.md" || { echo "rendered document lacks '$section'"; exit 1; }
done
echo "registry benchmark smoke test: ok"
