#!/usr/bin/env bash
# /metrics passes Prometheus' own linter (promtool check metrics, from Debian's prometheus
# package, which scripts/install-deps.sh installs), with the default per-registry aggregates
# and with --metrics_per_shard, after a query has run; and the default stays small.
#   metrics-promtool-test.sh PATH-TO-COORDINATORD
# Exit code 77 (skipped) without promtool.
set -uo pipefail
daemon=$1
command -v promtool > /dev/null || { echo "promtool not found (apt install prometheus)"; exit 77; }
source "$(dirname "$0")/../testutil/daemon-test-lib.sh"
qr_test_init metrics-promtool-test

# Starts the daemon with the given flags; sets 'pid' and 'port'. Bounded: 120 s (the sample
# database is generated first).
start() {
  qr_start_daemon 120 "$daemon" --http_port=0 --data_dir="$work/data" \
    --sample_scale_factor=0.001 "$@"
}

stop() {
  qr_stop_daemon
}

# Runs a query to its end (following nextUri), so that the counters have moved.
run_query() {
  local answer next
  answer=$(curl -s -X POST -H 'X-Trino-User: promtool' --data 'SELECT 1' \
    "http://127.0.0.1:$port/v1/statement")
  next=$(sed -n 's/.*"nextUri":"\([^"]*\)".*/\1/p' <<< "$answer")
  for _ in $(seq 100); do
    [ -n "$next" ] || return 0
    answer=$(curl -s -H 'X-Trino-User: promtool' "$next")
    next=$(sed -n 's/.*"nextUri":"\([^"]*\)".*/\1/p' <<< "$answer")
  done
  echo "FAIL: SELECT 1 did not finish"
  exit 1
}

check() {
  local name=$1
  curl -s "http://127.0.0.1:$port/metrics" > "$work/$name.txt"
  if ! promtool check metrics < "$work/$name.txt" > "$work/$name.lint" 2>&1; then
    echo "FAIL: promtool check metrics ($name):"
    head -20 "$work/$name.lint"
    exit 1
  fi
  echo "ok: $name: $(wc -l < "$work/$name.txt") lines, $(wc -c < "$work/$name.txt") bytes, promtool clean"
}

start
run_query
check default
lines=$(wc -l < "$work/default.txt")
if grep -q 'shard="' "$work/default.txt" || [ "$lines" -gt 600 ]; then
  echo "FAIL: the default /metrics has per-shard series or $lines lines (> 600)"
  exit 1
fi
for family in process_cpu_seconds_total process_resident_memory_bytes process_open_fds \
    process_max_fds process_start_time_seconds qr_build_info qr_registry_entries \
    qr_registry_largest_shard_entries qr_registry_lock_contended_acquisitions_total; do
  grep -q "^$family[{ ]" "$work/default.txt" || { echo "FAIL: no $family sample"; exit 1; }
done
stop

start --metrics_per_shard
run_query
check per-shard
grep -q '^qr_registry_shard_entries{registry="coordinator",shard="0"}' "$work/per-shard.txt" ||
  { echo "FAIL: --metrics_per_shard lists no shard"; exit 1; }
stop
