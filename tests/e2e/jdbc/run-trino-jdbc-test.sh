#!/usr/bin/env bash
# The Trino JDBC driver (scripts/fetch-trino-jar.sh jdbc: a pinned, checksum-checked jar) driven
# by TrinoJdbcTest.java against a real coordinatord serving a database made here with one table
# of each Trino type the daemon maps (DATE, TIMESTAMP(3), DECIMAL(12,2), VARCHAR(20), BOOLEAN)
# next to the sample tables.
#   tests/e2e/jdbc/run-trino-jdbc-test.sh path/to/coordinatord path/to/source
# Exits 77 (ctest: skipped) when java, javac or python3 is missing (scripts/install-deps.sh
# --e2e) or the jar was not fetched (scripts/e2e-deps.sh fetches it).
set -uo pipefail
daemon="${1:?usage: run-trino-jdbc-test.sh path/to/coordinatord path/to/source}"
source_dir="${2:?missing the source directory}"
for tool in java javac python3; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIP: $tool is not installed (scripts/install-deps.sh --e2e)"
    exit 77
  fi
done
cache="${QR_CACHE_DIR:-$HOME/.cache/qr-coordinatord}"
if ! jar="$("$source_dir/scripts/fetch-trino-jar.sh" jdbc "$cache" 2>/dev/null)" ||
    [ ! -f "$jar" ]; then
  echo "SKIP: the Trino JDBC jar is not in $cache (run scripts/e2e-deps.sh)"
  exit 77
fi

source "$source_dir/tests/testutil/daemon-test-lib.sh"
qr_test_init trino-jdbc-test
qr_cleanup_signal=TERM

# The sample tables' names (the driver's getTables is checked against them) plus `typed`.
python3 - "$work/test.db" <<'PY' || fail "cannot create the test database"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for name in ("customer", "lineitem", "nation", "qr_sample_metadata", "region"):
    db.execute(f"CREATE TABLE {name} (k INTEGER)")
db.execute("CREATE TABLE orders (o_orderkey INTEGER PRIMARY KEY, o_orderdate DATE NOT NULL)")
db.executemany("INSERT INTO orders VALUES (?, ?)",
               [(1, "1994-12-31"), (2, "1995-01-01"), (3, "1996-06-30")])
db.execute("CREATE TABLE typed (id INTEGER PRIMARY KEY, d DATE, ts TIMESTAMP(3), "
           "amount DECIMAL(12,2), name VARCHAR(20), flag BOOLEAN)")
db.execute("INSERT INTO typed VALUES (1, '2024-01-02', '2024-01-02 03:04:05.123', 12.5, "
           "'first', 1)")
db.execute("INSERT INTO typed VALUES (2, NULL, '2024-01-02T03:04:05Z', '-0.005', 'second', 0)")
db.commit()
PY

qr_start_daemon 60 "$daemon" --http_port=0 --data_dir="$work/data" \
  --database="$work/test.db" --shutdown_grace_period_s=0 --minloglevel=1

# Single-file source launch (JDK 11+): compiled in memory against the driver jar.
java -cp "$jar" "$source_dir/tests/e2e/jdbc/TrinoJdbcTest.java" "$port" < /dev/null
