#!/usr/bin/env bash
# The audit lines reach the log file when they are logged (issue 15): a query is submitted,
# the daemon is SIGKILLed at once, and its "submitted" line must be in --log_dir (glog buffers
# INFO lines for up to 30 s by default: a crash lost them).
#   coordinatord-audit-log-test.sh PATH-TO-COORDINATORD
set -uo pipefail
daemon=$1
work=$(mktemp -d /tmp/qr-audit-log-test.XXXXXX)
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/logs"

"$daemon" --http_port=0 --data_dir="$work/data" --sample_scale_factor=0.001 \
  --log_dir="$work/logs" > "$work/stdout" 2> "$work/stderr" < /dev/null &
pid=$!
# Wait for the "listening" line (bounded: 120 s, the sample database is generated first).
port=""
for _ in $(seq 1200); do
  port=$(sed -n 's/^coordinatord listening on http:\/\/[^:]*:\([0-9]*\) .*/\1/p' "$work/stdout")
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || { echo "FAIL: coordinatord exited:"; cat "$work/stderr"; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "FAIL: coordinatord did not start within 120 s"; exit 1; }

answer=$(curl -s -X POST -H 'X-Trino-User: auditor' --data 'SELECT 42' \
  "http://127.0.0.1:$port/v1/statement")
id=$(sed -n 's/.*"id":"\([^"]*\)".*/\1/p' <<< "$answer")
[ -n "$id" ] || { echo "FAIL: no query id in the answer: $answer"; exit 1; }
kill -KILL "$pid"
wait "$pid" 2>/dev/null
pid=""

if grep -rqF "Query $id submitted by user 'auditor' from '127.0.0.1:" "$work/logs"; then
  echo "ok: the submit line of query $id survived SIGKILL:"
  grep -rhF "Query $id submitted" "$work/logs"
  exit 0
fi
echo "FAIL: the submit line of query $id is not in --log_dir after SIGKILL; the log has:"
cat "$work"/logs/*INFO* 2>/dev/null | tail -5
exit 1
