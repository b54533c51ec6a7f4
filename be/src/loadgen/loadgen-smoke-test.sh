#!/usr/bin/env bash
# ctest smoke test of coordinator-loadgen (label "bench"): a coordinatord on a free port, then
# about 2 s of the queries mode and 1 s of the poll mode against it. Fails if the loadgen reports
# any error or the daemon does not start.
#   loadgen-smoke-test.sh COORDINATORD COORDINATOR-LOADGEN
set -euo pipefail
daemon=$1
loadgen=$2
work=$(mktemp -d /tmp/qr-loadgen-smoke.XXXXXX)
daemon_pid=""
cleanup() {
  if [ -n "$daemon_pid" ]; then kill "$daemon_pid" 2>/dev/null; wait "$daemon_pid" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT

"$daemon" --http_port=0 --data_dir="$work/data" --shutdown_grace_period_s=1 \
  >"$work/out" 2>"$work/err" &
daemon_pid=$!
for _ in $(seq 300); do
  grep -q listening "$work/out" && break
  kill -0 "$daemon_pid" || { cat "$work/err" >&2; exit 1; }
  sleep 0.1
done
port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$work/out")
[ -n "$port" ] || { echo "coordinatord did not start" >&2; cat "$work/err" >&2; exit 1; }

"$loadgen" --port="$port" --pid="$daemon_pid" --mode=queries --clients=4 --sql="SELECT 1" \
  --expect_rows=1 --duration_s=1.5 --warmup_s=0.5 --json_out="$work/queries.json"
"$loadgen" --port="$port" --pid="$daemon_pid" --mode=poll --poll_clients=8 --long_queries=2 \
  --duration_s=1 --warmup_s=0.2
grep -q '"requests_per_query": 3' "$work/queries.json" ||
  grep -q '"requests_per_query": [1-4][.,]' "$work/queries.json" ||
  { echo "SELECT 1 took more than 4 requests per query" >&2; exit 1; }
