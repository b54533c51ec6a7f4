#!/usr/bin/env bash
# Noisy neighbours (issue 14): how much 64 misbehaving clients of one user slow down 8
# well-behaved clients running SELECT 1, and what the misbehaving ones get. Renders a table
# (docs/benchmarks.md, "Noisy neighbours (issue 14)").
#
#   scripts/bench-noisy.sh [--daemon=PATH] [--loadgen=PATH] [--kinds=K1,K2,...] [--repeats=N]
#                          [--duration=S] [--quiet-duration=S] [--attackers=N] [--clients=N]
#                          [--label=TEXT] [--out=DIR] [--vmem-mb=N] [--data-dir=DIR]
#                          [--daemon-args="--flag=value ..."] [--render-only]
#
# For every repeat and every attack kind (default: never-poll wide-row instr-bomb huge-sort
# reget slow-fetch), back to back: a fresh coordinatord on a free port (the sample database in
# --data-dir, generated on first use), a quiet run (--clients SELECT 1 clients alone,
# --quiet-duration s), then the attack (--attackers attackers beside the same clients,
# --duration s), then a health check (a SELECT 1 must complete within 5 s), then SIGTERM (and
# SIGKILL if the daemon has not exited 15 s later). A fresh daemon per kind keeps one attack's
# leftovers (a wedged executor, queries nobody cancels) out of the next; the quiet run just
# before each attack, on the same daemon, is the baseline of its ratio, so a burst of load
# from the rest of the machine tends to hit both. --daemon runs an older build with the same
# loadgen. The daemon runs with an address-space limit (--vmem-mb, default 8192) as a safety
# net for the shared machine: an allocation past it fails as it would under the OOM killer,
# and the table says so if the daemon died. Defaults take about 2 minutes per repeat.
# --render-only prints the table of the runs already in --out (e.g. the runs of several
# invocations, renamed r1-*, r2-*, ..., with --repeats saying how many).
# Exit code: 0 if the table was produced.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

daemon=$repo/build/release/be/src/service/coordinatord
loadgen=$repo/build/release/be/src/loadgen/coordinator-loadgen
kinds="never-poll,wide-row,instr-bomb,huge-sort,reget,slow-fetch"
repeats=1
duration=10
quiet_duration=5
attackers=64
clients=8
label=""
out=""
vmem_mb=8192
data_dir=${QR_BENCH_DATA_DIR:-$HOME/.cache/qr-bench/noisy-data}
daemon_args=""
render_only=0
for arg in "$@"; do
  case "$arg" in
    --daemon=*) daemon=${arg#*=} ;;
    --loadgen=*) loadgen=${arg#*=} ;;
    --kinds=*) kinds=${arg#*=} ;;
    --repeats=*) repeats=${arg#*=} ;;
    --duration=*) duration=${arg#*=} ;;
    --quiet-duration=*) quiet_duration=${arg#*=} ;;
    --attackers=*) attackers=${arg#*=} ;;
    --clients=*) clients=${arg#*=} ;;
    --label=*) label=${arg#*=} ;;
    --out=*) out=${arg#*=} ;;
    --vmem-mb=*) vmem_mb=${arg#*=} ;;
    --data-dir=*) data_dir=${arg#*=} ;;
    --daemon-args=*) daemon_args=${arg#*=} ;;
    --render-only) render_only=1 ;;
    *) echo "bench-noisy.sh: unknown option '$arg' (see the comment at the top of $0)" >&2
       exit 2 ;;
  esac
done
for bin in "$daemon" "$loadgen"; do
  [ -x "$bin" ] || { echo "bench-noisy.sh: '$bin' is not an executable" >&2; exit 2; }
done
label=${label:-$daemon}
out=${out:-$(mktemp -d /tmp/qr-bench-noisy.XXXXXX)}
mkdir -p "$out" "$data_dir"
work=$(mktemp -d /tmp/qr-bench-noisy-work.XXXXXX)
mkdir -p "$work/tmp"
daemon_pid=""
cleanup() {
  if [ -n "$daemon_pid" ]; then kill -KILL "$daemon_pid" 2>/dev/null; wait "$daemon_pid" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT

# Starts a daemon; sets daemon_pid and port. Its temporary files go to $work/tmp.
start_daemon() {
  local log=$1
  : > "$log.out"  # emptied now: the background job's redirection runs asynchronously
  TMPDIR=$work/tmp bash -c 'ulimit -v $(( '"$vmem_mb"' * 1024 )); exec "$@"' daemon "$daemon" \
    --http_port=0 --data_dir="$data_dir" --shutdown_grace_period_s=2 $daemon_args >"$log.out" 2>"$log.err" &
  daemon_pid=$!
  port=""
  for _ in $(seq 3000); do  # the first start generates the sample database
    port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$log.out")
    [ -n "$port" ] && return 0
    kill -0 "$daemon_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "bench-noisy.sh: $daemon did not start:" >&2
  tail -5 "$log.err" >&2
  return 1
}

# SIGTERM, then SIGKILL after 15 s; prints what happened.
stop_daemon() {
  if ! kill -0 "$daemon_pid" 2>/dev/null; then
    wait "$daemon_pid"
    local rc=$?
    echo "died during the run (exit status $rc$([ $rc -gt 128 ] && echo ", signal $((rc - 128))"))"
    daemon_pid=""
    return
  fi
  kill -TERM "$daemon_pid"
  for _ in $(seq 150); do
    kill -0 "$daemon_pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$daemon_pid" 2>/dev/null; then
    kill -KILL "$daemon_pid"
    wait "$daemon_pid" 2>/dev/null
    echo "did not exit within 15 s of SIGTERM: killed"
  else
    wait "$daemon_pid"
    echo "exited with status $? on SIGTERM"
  fi
  daemon_pid=""
}

run_loadgen() {  # name attack duration warmup [extra flags]
  local name=$1 attack=$2 secs=$3 warmup=$4
  shift 4
  "$loadgen" --port="$port" --pid="$daemon_pid" --mode=noisy --attack="$attack" \
    --attackers="$attackers" --clients="$clients" --sql="SELECT 1" --expect_rows=1 \
    --duration_s="$secs" --warmup_s="$warmup" --count_syscalls=false --label="$label $name" \
    --json_out="$out/$name.json" "$@" >"$out/$name.txt" 2>&1
  echo "  $name: exit $? ($(grep -m1 'good clients' "$out/$name.txt" | sed 's/.*good clients/good clients/'))"
}

# Prints the table of the runs in $out.
render() {
  python3 - "$out" "$repeats" "$kinds" <<'EOF'
import json, os, statistics, sys
out, repeats, kinds = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")

def load(name):
    try:
        with open(os.path.join(out, name + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None

def fmt(v, digits=1):
    return "-" if v is None else f"{v:.{digits}f}"

def good(j, key):
    return None if j is None else j["noisy"]["good"][key]

def cpu(j):
    s = (j or {}).get("server", {})
    return None if "user_s" not in s else 100 * (s["user_s"] + s["sys_s"]) / j["seconds"]

def rss_peak(j):
    s = (j or {}).get("server", {})
    return None if "rss_kb" not in s else s["rss_kb"]["max"] / 1024

print(open(os.path.join(out, "machine.txt")).read().strip())
print()
print("| kind | good q/s | p50 ms | p99 ms | p99 / quiet p99 | max ms | unfinished | server CPU | "
      "RSS peak MiB | attackers' outcomes (per run) | daemon after the attack |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
quiet = [load(f"r{r}-{k}-quiet") for r in range(1, repeats + 1) for k in kinds]
q = [j for j in quiet if j]
print(f"| quiet ({len(q)} runs) | {fmt(med([good(j, 'queries_per_s') for j in q]), 0)} | "
      f"{fmt(med([good(j, 'p50_us') / 1e3 for j in q]), 2)} | "
      f"{fmt(med([good(j, 'p99_us') / 1e3 for j in q]), 2)} | 1 | "
      f"{fmt(med([good(j, 'max_us') / 1e3 for j in q]))} | "
      f"{fmt(med([good(j, 'unfinished') for j in q]), 0)} | {fmt(med([cpu(j) for j in q]), 0)}% | "
      f"{fmt(med([rss_peak(j) for j in q]))} | - | - |")
for k in kinds:
    runs = []
    for r in range(1, repeats + 1):
        a, qq = load(f"r{r}-{k}-attack"), load(f"r{r}-{k}-quiet")
        try:
            health, hwm, status = open(os.path.join(out, f"r{r}-{k}-status.txt")).read().rstrip("\n").split("\t")
        except (OSError, ValueError):
            health, hwm, status = "?", "", "?"
        runs.append((a, qq, health, hwm, status))
    ok = [(a, qq) for a, qq, *_ in runs if a]
    ratio = med([good(a, "p99_us") / good(qq, "p99_us") for a, qq in ok if qq and good(qq, "p99_us")])
    outcomes = {}
    for a, _ in ok:
        for key, n in a["noisy"]["attack_outcomes"].items():
            outcomes.setdefault(key, []).append(n)
        for key, n in a["noisy"]["server_metrics"].items():
            if key.startswith(("qr_queries_rejected_total", "qr_queries_abandoned_total")) and n:
                outcomes.setdefault("server " + key.replace('"', ""), []).append(n)
    text = "; ".join(f"{k2} {statistics.median(v + [0] * (len(ok) - len(v))):.0f}"
                     for k2, v in sorted(outcomes.items()))
    after = "; ".join(sorted({f"{s}, SELECT 1 after: {'ok' if h not in ('0', '?') else 'none in 5 s'}"
                              for _, _, h, _, s in runs}))
    print(f"| {k} | {fmt(med([good(a, 'queries_per_s') for a, _ in ok]), 0)} | "
          f"{fmt(med([good(a, 'p50_us') / 1e3 for a, _ in ok]), 2)} | "
          f"{fmt(med([good(a, 'p99_us') / 1e3 for a, _ in ok]), 2)} | {fmt(ratio, 2)} | "
          f"{fmt(med([good(a, 'max_us') / 1e3 for a, _ in ok]))} | "
          f"{fmt(med([good(a, 'unfinished') for a, _ in ok]), 0)} | "
          f"{fmt(med([cpu(a) for a, _ in ok]), 0)}% | {fmt(med([rss_peak(a) for a, _ in ok]))} | "
          f"{text or '-'} | {after} |")
EOF
}

if [ "$render_only" -eq 1 ]; then render; exit; fi
echo "bench-noisy.sh: $label; results in $out"
{
  echo "label=$label"
  echo "daemon=$daemon $daemon_args"
  echo "nproc=$(nproc)"
  echo "cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
  echo "start=$(date -Iseconds) load=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/machine.txt"
IFS=, read -r -a kind_list <<<"$kinds"
for rep in $(seq "$repeats"); do
  for kind in "${kind_list[@]}"; do
    name=r$rep-$kind
    echo "repeat $rep, $kind (load $(cut -d' ' -f1 /proc/loadavg))"
    start_daemon "$out/$name-daemon" || { echo "did not start" >"$out/$name-status.txt"; continue; }
    run_loadgen "$name-quiet" none "$quiet_duration" 1
    run_loadgen "$name-attack" "$kind" "$duration" 2
    if kill -0 "$daemon_pid" 2>/dev/null; then
      run_loadgen "$name-health" none 5 0 --clients=1
      health=$(jq -r '.noisy.good.completed' "$out/$name-health.json" 2>/dev/null)
    else
      health=0
    fi
    rss_hwm=$(grep -s VmHWM "/proc/$daemon_pid/status" | awk '{print $2}')
    stop_daemon >"$work/stop.txt"  # not in $(...): the daemon is this shell's child
    status=$(cat "$work/stop.txt")
    echo "  daemon: SELECT 1 within 5 s after the attack: ${health:-?} completed; $status"
    printf '%s\t%s\t%s\n' "${health:-0}" "${rss_hwm:-}" "$status" >"$out/$name-status.txt"
  done
done
echo "end=$(date -Iseconds) load=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"

render
