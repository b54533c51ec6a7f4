#!/usr/bin/env bash
# Builds the libFuzzer targets (preset `fuzz`) and runs each for a bounded time, starting from
# its seed corpus in tests/fuzz/corpus (copied to a working corpus: the repository is never
# modified). Exits non-zero when any target finds a crash, a hang, a leak or a violated property;
# the input that did it is kept (see the message). docs/fuzzing.md has more.
#   scripts/fuzz.sh [--seconds N] [--work DIR] [--no-build] [target...]
#     --seconds N   run each target for N seconds (default 30)
#     --work DIR    keep the working corpora, the logs, the crash inputs and the sample database
#                   in DIR (reused by later runs, so the corpora keep growing); default: a
#                   temporary directory, removed at the end unless something was found
#     --no-build    use the binaries already in build/fuzz
#     target        parse-id-fuzzer http-parse-fuzzer http-request-fuzzer statement-fuzzer
#                   (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

all_targets=(parse-id-fuzzer http-parse-fuzzer http-request-fuzzer statement-fuzzer)
seconds=30
work=""
build=1
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --seconds=*) seconds="${1#--seconds=}"; shift ;;
    --work) work="$2"; shift 2 ;;
    --work=*) work="${1#--work=}"; shift ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *)
      if [[ " ${all_targets[*]} " != *" $1 "* ]]; then
        echo "fuzz.sh: unknown target '$1'; the targets are: ${all_targets[*]}" >&2
        exit 2
      fi
      targets+=("$1"); shift ;;
  esac
done
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz.sh: --seconds takes a positive number of seconds, got '$seconds'" >&2
  exit 2
fi
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")

if [ "$build" -eq 1 ]; then
  scripts/install-deps.sh
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz --target "${targets[@]}"
fi

keep_work=1
if [ -z "$work" ]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/qr-fuzz.XXXXXX")
  keep_work=0
fi
mkdir -p "$work"
work=$(cd "$work" && pwd)
# One sample database for every target and run (generated on first use).
export QR_FUZZ_DATA_DIR="$work/data"
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# Per-target libFuzzer flags: seeds, dictionary, input size.
seeds_of() {
  case "$1" in
    http-parse-fuzzer) echo "tests/fuzz/corpus/http-request-fuzzer" ;;  # same inputs
    *) echo "tests/fuzz/corpus/$1" ;;
  esac
}
flags_of() {
  case "$1" in
    parse-id-fuzzer) echo "-max_len=128" ;;
    http-parse-fuzzer|http-request-fuzzer) echo "-max_len=16384 -dict=$root/tests/fuzz/http.dict" ;;
    statement-fuzzer) echo "-max_len=4096 -dict=$root/tests/fuzz/sql.dict" ;;
  esac
}

passed=0
failed=0
summary=()
for t in "${targets[@]}"; do
  bin="$root/build/fuzz/tests/fuzz/$t"
  if [ ! -x "$bin" ]; then
    echo "fuzz.sh: $bin is missing: build it (drop --no-build)" >&2
    exit 2
  fi
  corpus="$work/corpus/$t"
  artifacts="$work/artifacts/$t"
  log="$work/$t.log"
  mkdir -p "$corpus" "$artifacts"
  for f in "$(seeds_of "$t")"/*; do
    [ -e "$corpus/${f##*/}" ] || cp "$f" "$corpus/"
  done
  echo "=== $t: ${seconds} s, corpus $corpus ==="
  rc=0
  # libFuzzer stops itself after -max_total_time; the outer timeout only guards against a
  # process that cannot stop (e.g. a deadlock while exiting).
  # shellcheck disable=SC2046
  (cd "$artifacts" && timeout --kill-after=10 $((seconds + 120)) "$bin" \
      -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="$artifacts/" $(flags_of "$t") "$corpus") >"$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  found=$(find "$artifacts" -type f | head -1)
  if [ "$rc" -eq 0 ] && [ -z "$found" ]; then
    passed=$((passed + 1))
    line="$t: ok, ${runs:-?} runs, ${rate:-?} exec/s, corpus $(find "$corpus" -type f | wc -l) inputs"
  else
    failed=$((failed + 1))
    keep_work=1
    line="$t: FAILED (exit $rc) after ${runs:-?} runs; input: ${found:-none saved}"
    echo "--- last lines of $log ---"
    grep -v '^#[0-9]' "$log" | tail -60
    echo "--- reproduce with: QR_FUZZ_DATA_DIR=$QR_FUZZ_DATA_DIR $bin ${found:-<input>}"
  fi
  echo "$line"
  summary+=("$line")
done

echo "=== fuzz summary ==="
printf '%s\n' "${summary[@]}"
if [ "$keep_work" -eq 1 ]; then
  echo "working corpora, logs and crash inputs are in $work"
else
  rm -rf "$work"
fi
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
