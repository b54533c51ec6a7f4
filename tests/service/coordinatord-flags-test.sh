#!/usr/bin/env bash
# coordinatord refuses bad flags at start-up with a message naming the flag (issue 15):
# negative or zero sizes, thread counts past the limit, an unusable --log_dir.
#   coordinatord-flags-test.sh PATH-TO-COORDINATORD
set -uo pipefail
daemon=$1
work=$(mktemp -d /tmp/qr-flags-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0

# expect_refused "what the message must contain" flags...
expect_refused() {
  local want=$1
  shift
  local out rc
  out=$(timeout 20 "$daemon" --http_port=0 --data_dir="$work/data" "$@" 2>&1 < /dev/null)
  rc=$?
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then
    echo "FAIL: coordinatord $* exited with $rc, expected a refusal"
    failures=$((failures + 1))
  elif ! grep -qF -- "$want" <<< "$out"; then
    echo "FAIL: coordinatord $*: the message does not say '$want':"
    echo "$out" | head -5
    failures=$((failures + 1))
  else
    echo "ok: coordinatord $* -> $(grep -F -- "$want" <<< "$out" | head -1)"
  fi
}

expect_refused "--max_statement_bytes must be in" --max_statement_bytes=-1
expect_refused "--max_statement_bytes must be in" --max_statement_bytes=0
expect_refused "--max_header_bytes must be in" --max_header_bytes=-5
expect_refused "set --num_query_threads to at most 1024" --num_query_threads=100000
expect_refused "set --num_query_threads to at most 1024" --max_running_queries=5000
expect_refused "--num_http_threads must be in" --num_http_threads=0
expect_refused "--long_query_nice must be in" --long_query_nice=40
expect_refused "cannot write log files in --log_dir=$work/missing" --log_dir="$work/missing"
mkdir -p "$work/readonly" && chmod 0555 "$work/readonly"
if [ "$(id -u)" -ne 0 ]; then  # root writes through 0555
  expect_refused "cannot write log files in --log_dir=$work/readonly" --log_dir="$work/readonly"
fi

[ "$failures" -eq 0 ] && echo "all refusals as expected"
exit $((failures > 0))
