#!/usr/bin/env bash
# The audit lines reach the log file when they are logged (issue 15): a query is submitted,
# the daemon is SIGKILLed at once, and its "submitted" line must be in --log_dir (glog buffers
# INFO lines for up to 30 s by default: a crash lost them).
#   coordinatord-audit-log-test.sh PATH-TO-COORDINATORD
set -uo pipefail
daemon=$1
source "$(dirname "$0")/../testutil/daemon-test-lib.sh"
qr_test_init audit-log-test
mkdir -p "$work/logs"

# Bounded: 120 s (the sample database is generated first).
qr_start_daemon 120 "$daemon" --http_port=0 --data_dir="$work/data" --sample_scale_factor=0.001 \
  --log_dir="$work/logs"

answer=$(curl -s -X POST -H 'X-Trino-User: auditor' --data 'SELECT 42' \
  "http://127.0.0.1:$port/v1/statement")
id=$(sed -n 's/.*"id":"\([^"]*\)".*/\1/p' <<< "$answer")
[ -n "$id" ] || fail "no query id in the answer: $answer"
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
