#!/usr/bin/env bash
# Runs process-wide-locks-benchmark and renders its results into docs/benchmarks.md (section
# "Registry micro-benchmarks") and docs/images/registry-throughput.png.
#
#   scripts/bench.sh [--quick] [--filter REGEX] [--repetitions N] [--no-build] [--no-callgrind]
#                    [--doc PATH] [-- extra process-wide-locks-benchmark flags]
#
# Steps: installs what is missing (scripts/install-deps.sh --bench), builds the release preset's
# benchmark target, runs it with JSON output (--repetitions whole passes, default 3; the
# document shows medians over them), counts the
# instructions of one uncontended Get per variant with valgrind --tool=callgrind, and renders.
# The full run takes about 10 minutes on 2 cores. --quick (about 2 minutes: fewer thread counts
# and points, 1 repetition) and --filter runs render into build/release/bench/ instead of
# docs/, unless --doc says otherwise: a partial run must not replace the full tables.
# Other processes on the machine make the numbers noisy; the load average is recorded.
set -euo pipefail
cd "$(dirname "$0")/.."

invocation="scripts/bench.sh${*:+ $*}"
quick=0
filter=""
repetitions=3
build=1
callgrind=1
doc=""
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1; shift ;;
    --filter) filter="$2"; shift 2 ;;
    --filter=*) filter="${1#--filter=}"; shift ;;
    --repetitions) repetitions="$2"; shift 2 ;;
    --repetitions=*) repetitions="${1#--repetitions=}"; shift ;;
    --no-build) build=0; shift ;;
    --no-callgrind) callgrind=0; shift ;;
    --doc) doc="$2"; shift 2 ;;
    --doc=*) doc="${1#--doc=}"; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "bench.sh: unknown option '$1' (see the comment at the top of $0)" >&2; exit 2 ;;
  esac
done

scripts/install-deps.sh --bench
# Debian's matplotlib belongs to the system interpreter, which may not be first on PATH.
python=/usr/bin/python3
[ -x "$python" ] || python=python3

if [ "$build" -eq 1 ]; then
  cmake --preset release >/dev/null
  cmake --build --preset release --target process-wide-locks-benchmark
fi
bin=build/release/be/src/benchmarks/process-wide-locks-benchmark
out=build/release/bench
mkdir -p "$out"

args=(--benchmark_out="$out/process-wide-locks.json" --benchmark_out_format=json)
plot="docs/images/registry-throughput.png"
plot_link="images/registry-throughput.png"
if [ "$quick" -eq 1 ]; then
  repetitions=1
  args+=(--mix_threads=1,2,8,64 --mix_entries=1000 --mix_round_ms=20 --mix_rounds=1
         --iteration_round_ms=40 --grid=5x100,500x1000,1000x5000 --grid_min_time_s=0.02
         --get_min_time_s=0.02)
fi
# Repetitions as whole passes over all benchmarks (--passes in process-wide-locks-benchmark.cc).
args+=(--passes="$repetitions")
if [ -n "$filter" ]; then
  args+=(--benchmark_filter="$filter")
fi
if [ -z "$doc" ]; then
  if [ "$quick" -eq 1 ] || [ -n "$filter" ]; then
    doc="$out/registry-benchmarks.md"
    plot="$out/registry-throughput.png"
    plot_link="registry-throughput.png"
  else
    doc="docs/benchmarks.md"
  fi
fi

# The machine, for the document.
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
lscpu_field() { lscpu | sed -n "s/^$1:[[:space:]]*//p" | head -1; }
cpu="$(lscpu_field 'Model name'), $(lscpu_field 'CPU(s)') CPUs ($(lscpu_field 'Core(s) per socket') cores x $(lscpu_field 'Thread(s) per core') threads per core), L2 $(lscpu_field 'L2 cache'), L3 $(lscpu_field 'L3 cache'), hypervisor: $(lscpu_field 'Hypervisor vendor')"
cpu="${cpu%, hypervisor: }"

command="$bin ${args[*]} ${extra[*]:-}"
echo "bench.sh: $command"
started=$(date +%s)
"$bin" "${args[@]}" "${extra[@]}"
benchmark_seconds=$(( $(date +%s) - started ))
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# Instructions of one uncontended Get per variant (1000 entries), counted inside the Get loop
# only (--toggle-collect), 200000 Gets each.
cg_json="$out/callgrind.json"
rm -f "$cg_json"
if [ "$callgrind" -eq 1 ]; then
  cg_ops=200000
  cg_entries=1000
  entries_json=""
  for v in BareStdFind BareFlatFind GlobalMutex ShardedQueryMap64 ShardedQueryMap256 SpinLockShards256 ShardedQueryMap256Std \
           LegacySpinShards64Std TbbConcurrentHashMap LibcuckooMap BoostConcurrentFlatMap \
           GetCostShard256 GetCostSlot256 GetCostEnter256 GetCostExit256; do
    cg_out="$out/callgrind.$v.out"
    if valgrind --tool=callgrind --callgrind-out-file="$cg_out" --collect-atstart=no \
         '--toggle-collect=*CallgrindGetLoop*' "$bin" --callgrind_variant="$v" \
         --callgrind_ops="$cg_ops" --callgrind_entries="$cg_entries" >/dev/null 2>&1; then
      total=$(sed -n 's/^summary: *//p' "$cg_out")
      entries_json+="${entries_json:+, }\"$v\": $(awk -v t="$total" -v n="$cg_ops" 'BEGIN { printf "%.2f", t / n }')"
    else
      echo "bench.sh: callgrind run of $v failed or the variant is not built; skipped" >&2
    fi
  done
  cat > "$cg_json" <<EOF
{"entries": $cg_entries, "ops": $cg_ops, "instructions_per_get": {$entries_json},
 "command": "valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*CallgrindGetLoop*' $bin --callgrind_variant=VARIANT --callgrind_ops=$cg_ops --callgrind_entries=$cg_entries"}
EOF
fi

"$python" - "$out/machine.json" "$cpu" "$(uname -sr)" "$(g++ --version | head -1)" \
  "$load_before" "$load_after" "$benchmark_seconds" <<'EOF'
import json, sys
path, cpu, kernel, compiler, before, after, seconds = sys.argv[1:]
json.dump({"cpu": cpu, "kernel": kernel, "compiler": compiler, "load_before": before,
           "load_after": after, "benchmark_seconds": int(seconds)}, open(path, "w"))
EOF

render_args=(--json "$out/process-wide-locks.json" --machine "$out/machine.json"
             --command "$invocation  # runs: $command" --doc "$doc" --plot "$plot"
             --plot-link "$plot_link"
             --candidates "SpinLockShards256,ShardedQueryMap64,ShardedQueryMap256Std,LegacySpinShards64Std")
if [ -f "$cg_json" ]; then
  render_args+=(--callgrind "$cg_json")
fi
"$python" scripts/render-benchmarks.py "${render_args[@]}"
