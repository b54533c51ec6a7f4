#!/usr/bin/env bash
# The query history's cost and speed (docs/benchmarks.md, "Query history"):
#  1. SELECT 1 through coordinator-loadgen against coordinatord with the history off and on
#     (--query_history_sync=batch, interval, none), interleaved in one run, --repeats times;
#  2. with --strace, the daemon's syscalls per query (strace -c -f; history off, batch,
#     interval);
#  3. history-benchmark (the writer's records/s and MB/s per sync mode, Append()'s cost);
#  4. the daemon's restart time over a history of --restart_mb MiB (0: skipped).
#   scripts/bench-history.sh [--build DIR] [--dir DIR] [--seconds N] [--repeats N]
#                            [--strace] [--restart_mb N]
# Needs a release build (scripts/test.sh --build-only, or --build with another build dir).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/release
dir=data/history-bench
seconds=5
repeats=3
use_strace=0
restart_mb=1024
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --strace) use_strace=1; shift ;;
    --restart_mb) restart_mb="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
daemon=$build/be/src/service/coordinatord
loadgen=$build/be/src/loadgen/coordinator-loadgen
bench=$build/be/src/benchmarks/history-benchmark
for b in "$daemon" "$loadgen" "$bench"; do
  [ -x "$b" ] || { echo "build first: $b is missing" >&2; exit 1; }
done
mkdir -p "$dir"
dir=$(realpath "$dir")
pid=""
trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; true' EXIT
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
     "$(df -h "$dir" | awk 'NR==2 {print $1, $2}'), load $(cut -d' ' -f1-3 /proc/loadavg)"

# start_daemon LABEL FLAGS...: sets pid and port.
start_daemon() {
  local label=$1
  shift
  : > "$dir/stdout-$label"  # exists before the daemon's shell gets to the redirection
  "$daemon" --http_port=0 --data_dir="$dir/data" "$@" > "$dir/stdout-$label" \
    2> "$dir/stderr-$label" < /dev/null &
  pid=$!
  port=""
  for _ in $(seq 1200); do
    port=$(sed -n 's/^coordinatord listening on http:\/\/[^:]*:\([0-9]*\) .*/\1/p' \
           "$dir/stdout-$label")
    [ -n "$port" ] && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$dir/stderr-$label"; exit 1; }
    sleep 0.1
  done
  echo "coordinatord did not start" >&2
  exit 1
}
stop_daemon() {
  kill -TERM "$pid"
  wait "$pid" || true
  pid=""
}
history_flags() {  # MODE -> flags
  [ "$1" = off ] && return 0
  echo "--query_history_dir=$dir/history-$1 --query_history_sync=$1"
}
load() {  # extra loadgen flags...
  "$loadgen" --port="$port" --pid="$pid" --mode=queries --clients=8 --sql='SELECT 1' \
    --expect_rows=1 --count_syscalls=false "$@"
}
metric() { curl -s "http://127.0.0.1:$port/metrics" | awk -v m="$1" '$1 == m {print $2}'; }

echo "=== SELECT 1, 8 clients, ${seconds} s each, history off and on, interleaved"
for i in $(seq "$repeats"); do
  for mode in off batch interval none; do
    rm -rf "$dir/history-$mode"
    # shellcheck disable=SC2046
    start_daemon "$mode" $(history_flags "$mode")
    qps=$(load --duration_s="$seconds" --warmup_s=1 | sed -n 's/.*queries [0-9]* (\([0-9.]*\)\/s.*/\1/p')
    echo "repeat $i  $mode  queries/s $qps  history records $(metric qr_history_records_total)" \
         " batches $(metric qr_history_batches_total) syncs $(metric qr_history_sync_seconds_count)" \
         " dropped $(metric qr_history_dropped_records_total)"
    stop_daemon
  done
done

if [ "$use_strace" = 1 ]; then
  echo "=== syscalls per query (strace -c -f, 5000 queries of SELECT 1, 8 clients)"
  for mode in off batch interval; do
    rm -rf "$dir/history-$mode"
    # shellcheck disable=SC2046
    start_daemon "strace-$mode" $(history_flags "$mode")
    load --duration_s=1 --warmup_s=0.5 > /dev/null
    strace -c -f -o "$dir/strace-$mode" -p "$pid" 2> /dev/null &
    spid=$!
    load --max_queries=5000 --duration_s=600 --warmup_s=0 > /dev/null
    kill -INT "$spid"
    wait "$spid" || true
    stop_daemon
    # strace -c columns: % time, seconds, usecs/call, calls, [errors], syscall.
    awk -v m="$mode" '$NF == "total" {printf "%s: %.2f syscalls per query\n", m, $4 / 5000}
         $NF ~ /^(fdatasync|write|futex|pwrite64)$/ {printf "%s:   %s %.3f per query\n", m, $NF, $4 / 5000}' \
        "$dir/strace-$mode"
  done
fi

echo "=== history-benchmark (the writer alone, files in $dir)"
BENCH_HISTORY_DIR="$dir" "$bench" --benchmark_min_time=2

if [ "$restart_mb" -gt 0 ]; then
  echo "=== restart over a ${restart_mb} MiB history (64 MiB segments, --query_log_size 200)"
  rm -rf "$dir/history-large"
  "$bench" --fill_dir="$dir/history-large" --fill_mb="$restart_mb"
  sync
  for cache in warm cold; do
    [ "$cache" = cold ] && { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || cache=warm-again; }
    start=$(date +%s%N)
    start_daemon "restart-$cache" --query_history_dir="$dir/history-large" \
      --query_history_max_mb=$((restart_mb * 2))
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    echo "$cache page cache: listening after $ms ms;" \
         "$(grep -o 'Query history .*' "$dir/stderr-restart-$cache")"
    stop_daemon
  done
fi
