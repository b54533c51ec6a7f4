#!/usr/bin/env bash
# The Trino CLI (scripts/fetch-trino-jar.sh cli: a pinned, checksum-checked jar) against a real
# coordinatord serving a small sample database: SHOW CATALOGS, SHOW TABLES, DESCRIBE, a query
# with --output-format CSV, EXPLAIN, and a failing query's error.
#   tests/e2e/cli/run-trino-cli-test.sh path/to/coordinatord path/to/source
# Exits 77 (ctest: skipped) when java is missing (scripts/install-deps.sh --e2e) or the jar
# was not fetched (scripts/e2e-deps.sh fetches it).
set -uo pipefail
daemon="${1:?usage: run-trino-cli-test.sh path/to/coordinatord path/to/source}"
source_dir="${2:?missing the source directory}"
if ! command -v java >/dev/null 2>&1; then
  echo "SKIP: java is not installed (scripts/install-deps.sh --e2e)"
  exit 77
fi
cache="${QR_CACHE_DIR:-$HOME/.cache/qr-coordinatord}"
if ! jar="$("$source_dir/scripts/fetch-trino-jar.sh" cli "$cache" 2>/dev/null)" ||
    [ ! -f "$jar" ]; then
  echo "SKIP: the Trino CLI jar is not in $cache (run scripts/e2e-deps.sh)"
  exit 77
fi

source "$source_dir/tests/testutil/daemon-test-lib.sh"
qr_test_init trino-cli-test
qr_cleanup_signal=TERM
# Bounded: 120 s (the sample database is generated first).
qr_start_daemon 120 "$daemon" --http_port=0 --data_dir="$work/data" \
  --sample_scale_factor=0.001 --shutdown_grace_period_s=0 --minloglevel=1

# cli ARGS...: the CLI's stdout in $work/out (its stderr in $work/err); returns its status.
cli() {
  java -jar "$jar" --server "http://127.0.0.1:$port" --user e2e --catalog sqlite --schema main \
    "$@" > "$work/out" 2> "$work/err" < /dev/null
}
expect() {  # expect NAME EXPECTED: $work/out must be EXPECTED
  local got
  got="$(cat "$work/out")"
  [ "$got" = "$2" ] || fail "$1: expected
$2
got
$got
stderr: $(grep -v jline "$work/err" | head -5)"
  echo "ok: $1"
}

cli --execute "SHOW CATALOGS" || fail "SHOW CATALOGS: $(cat "$work/err")"
expect "SHOW CATALOGS" '"sqlite"
"system"'

cli --execute "SHOW TABLES" || fail "SHOW TABLES: $(cat "$work/err")"
expect "SHOW TABLES" '"customer"
"lineitem"
"nation"
"orders"
"qr_sample_metadata"
"region"'

cli --execute "DESCRIBE sqlite.main.nation" || fail "DESCRIBE: $(cat "$work/err")"
expect "DESCRIBE" '"n_nationkey","bigint","",""
"n_name","varchar(25)","",""
"n_regionkey","bigint","",""
"n_comment","varchar(152)","",""'

cli --output-format CSV_HEADER --execute \
  "SELECT o_orderkey, o_orderdate, o_totalprice FROM orders ORDER BY o_orderkey LIMIT 2" ||
  fail "SELECT: $(cat "$work/err")"
[ "$(head -1 "$work/out")" = '"o_orderkey","o_orderdate","o_totalprice"' ] ||
  fail "SELECT: header $(head -1 "$work/out")"
[ "$(grep -cE '^"[12]","[0-9]{4}-[0-9]{2}-[0-9]{2}","[0-9]+(\.[0-9]+)?"$' "$work/out")" = 2 ] ||
  fail "SELECT: rows are not key, date, price: $(cat "$work/out")"
echo "ok: SELECT --output-format CSV_HEADER"

cli --execute "EXPLAIN SELECT count(*) FROM lineitem WHERE l_orderkey = 1" ||
  fail "EXPLAIN: $(cat "$work/err")"
grep -qE '^"- (SCAN|SEARCH) lineitem' "$work/out" ||
  fail "EXPLAIN: no plan step names lineitem: $(cat "$work/out")"
echo "ok: EXPLAIN"

if cli --execute "DESCRIBE missing"; then fail "DESCRIBE missing succeeded"; fi
grep -q "Table 'sqlite.main.missing' does not exist" "$work/err" ||
  fail "DESCRIBE missing: $(grep -v jline "$work/err" | head -3)"
echo "ok: DESCRIBE missing fails with TABLE_NOT_FOUND's message"
echo "PASS"
