#!/usr/bin/env bash
# coordinatord refuses bad flags at start-up with a message naming the flag (issue 15):
# negative or zero sizes, thread counts past the limit, an unusable --log_dir. --helpshort
# lists every flag DEFINEd under be/src that the daemon links exactly once, in a group, and
# --help lists them before the libraries'; --version prints the version and git revision
# (issue 16).
#   coordinatord-flags-test.sh PATH-TO-COORDINATORD SOURCE_DIR VERSION GIT_REVISION
set -uo pipefail
daemon=$1
source_dir=$2
want_version="coordinatord $3 (git $4)"
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
expect_refused "--long_query_policy must be nice or idle" --long_query_policy=batch
expect_refused "--long_query_yield_us must be 0 (never) or in [10, 1000000] microseconds, got 5" --long_query_yield_us=5
expect_refused "--max_long_queries_per_user must be >= 0, got -1" --max_long_queries_per_user=-1
expect_refused "--scheduler_slice_us must be 0 (the kernel's default) or in [100, 100000] microseconds, got 50" --scheduler_slice_us=50
expect_refused "--scheduler_slice_us must be 0" --scheduler_slice_us=100001
expect_refused "--max_failed_queries_per_user_per_s must be" --max_failed_queries_per_user_per_s=-1
expect_refused "--max_value_mb must be in [1, 953] (MiB), got 0" --max_value_mb=0
expect_refused "--max_value_mb must be in [1, 953] (MiB), got 954" --max_value_mb=954
expect_refused "--catalog_name: the catalog name 'Hive' is not a lower-case identifier" \
  --catalog_name=Hive
expect_refused "--catalog_name: the catalog name 'system' is Trino's" --catalog_name=system
expect_refused "cannot write log files in --log_dir=$work/missing" --log_dir="$work/missing"
expect_refused "--query_history_sync must be batch, interval or none" --query_history_sync=often
expect_refused "--query_history_segment_mb must be in" --query_history_segment_mb=0
expect_refused "--query_history_queue_size must be positive" --query_history_queue_size=0
expect_refused "--query_history_max_mb must be >= 0" --query_history_max_mb=-1
expect_refused "is less than one segment (--query_history_segment_mb=64)" \
  --query_history_dir="$work/history" --query_history_max_mb=32
expect_refused "--etcd_endpoints: etcd endpoint 'localhost' is not [http[s]://]host:port" \
  --etcd_endpoints=localhost
expect_refused "--etcd_endpoints: etcd endpoint 'a:99999' is not [http[s]://]host:port" \
  --etcd_endpoints=127.0.0.1:2379,a:99999
expect_refused "--cluster_name must be 1 to 64 letters" --cluster_name=a/b
expect_refused "--advertised_uri must be http://host:port" --advertised_uri=ftp://x:1
expect_refused "--cluster_lease_ttl_s must be in [2, 600]" --cluster_lease_ttl_s=1
expect_refused "--query_plan_timeout_ms must be in [50, 600000] ms, got 0" --query_plan_timeout_ms=0
expect_refused "--cluster_max_members must be in [1, 65535]" --cluster_max_members=70000
touch "$work/not-a-directory"
expect_refused "--query_history_dir: cannot create the query history directory" \
  --sample_scale_factor=0.001 --query_history_dir="$work/not-a-directory"
mkdir -p "$work/readonly" && chmod 0555 "$work/readonly"
if [ "$(id -u)" -ne 0 ]; then  # root writes through 0555
  expect_refused "cannot write log files in --log_dir=$work/readonly" --log_dir="$work/readonly"
fi

# --version: "coordinatord 0.2.0 (git 1a2b3c4)", as configured.
version=$("$daemon" --version 2>&1)
if [ "$version" != "$want_version" ]; then
  echo "FAIL: --version printed '$version', expected '$want_version'"
  failures=$((failures + 1))
elif ! grep -qE '^coordinatord [0-9]+\.[0-9]+\.[0-9]+ \(git ([0-9a-f]{7,}(-dirty)?|unknown)\)$' \
     <<< "$version"; then
  echo "FAIL: --version printed '$version': not 'coordinatord X.Y.Z (git HASH[-dirty]|unknown)'"
  failures=$((failures + 1))
else
  echo "ok: --version -> $version"
fi

failures_before_help=$failures
# --helpshort: every flag of ours that the daemon has (gflags' --helpxml names them all) is
# listed exactly once, under a group title, and none is ungrouped.
"$daemon" --helpshort > "$work/helpshort" 2>&1 || { echo "FAIL: --helpshort failed"; failures=$((failures + 1)); }
"$daemon" --help > "$work/help" 2>&1 || { echo "FAIL: --help failed"; failures=$((failures + 1)); }
"$daemon" --helpxml > "$work/helpxml" 2>/dev/null
# Flag names of DEFINE_<type>(name, ...) anywhere under be/src (a DEFINE may span lines).
defined=$(find "$source_dir/be/src" -name '*.cc' -exec cat {} + | tr '\n' ' ' |
  grep -oE 'DEFINE_(bool|int32|uint32|int64|uint64|double|string)\([[:space:]]*[A-Za-z0-9_]+' |
  sed -E 's/.*\([[:space:]]*//' | sort -u)
checked=0
for name in $defined; do
  grep -qF "<name>$name</name>" "$work/helpxml" || continue  # another binary's flag
  checked=$((checked + 1))
  count=$(grep -cE "^  --$name=" "$work/helpshort")
  if [ "$count" -ne 1 ]; then
    echo "FAIL: --helpshort lists --$name $count times (expected once, in a group)"
    failures=$((failures + 1))
  fi
  # --help: the same, before the libraries' flags.
  if [ "$(grep -cE "^  --$name=" "$work/help")" -ne 1 ]; then
    echo "FAIL: --help does not list --$name once"
    failures=$((failures + 1))
  fi
done
if grep -q '^Ungrouped' "$work/helpshort"; then
  echo "FAIL: --helpshort has ungrouped flags (add them to FlagGroups()):"
  sed -n '/^Ungrouped/,/^$/p' "$work/helpshort"
  failures=$((failures + 1))
fi
# A flag line belongs to the group titled above it: no flag before the first title.
first_flag=$(grep -nE '^  --' "$work/helpshort" | head -1 | cut -d: -f1)
first_title=$(grep -nE '^[A-Z].*:$' "$work/helpshort" | head -1 | cut -d: -f1)
if [ "$checked" -lt 40 ] || [ -z "$first_title" ] || [ "$first_flag" -lt "$first_title" ]; then
  echo "FAIL: --helpshort is not grouped, or too few flags of ours found ($checked)"
  failures=$((failures + 1))
fi
for unit in '--http_idle_timeout_s=60 (seconds)' '--max_spill_mb=8192 (MiB)' \
            '--max_statement_bytes=1048576 (bytes)' '--long_query_after_ms=20 (milliseconds)' \
            '--max_failed_queries_per_user_per_s=50 (per second)'; do
  grep -qF -- "  $unit" "$work/helpshort" || { echo "FAIL: --helpshort lacks '$unit'"; failures=$((failures + 1)); }
done
# --help: ours first; glog's flags only after, by name.
ours_line=$(grep -nE '^  --http_port=' "$work/help" | cut -d: -f1)
glog_line=$(grep -nE -- '--log_prefix' "$work/help" | head -1 | cut -d: -f1)
if [ -z "$ours_line" ] || [ -z "$glog_line" ] || [ "$glog_line" -lt "$ours_line" ]; then
  echo "FAIL: --help does not list our flags before glog's (--http_port at '$ours_line', --log_prefix at '$glog_line')"
  failures=$((failures + 1))
fi
if [ "$failures" -eq "$failures_before_help" ]; then
  echo "ok: --helpshort groups the $checked flags of ours defined under be/src; --help lists them first"
fi

[ "$failures" -eq 0 ] && echo "all checks as expected"
exit $((failures > 0))
