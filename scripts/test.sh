#!/usr/bin/env bash
# Installs what is missing, configures and builds a preset, and runs every test with ctest.
#   scripts/test.sh [--preset release|debug|asan|tsan|clang-tsa] [--build-only] [ctest args...]
# Exit code: 0 when everything built and every test passed.
set -euo pipefail
cd "$(dirname "$0")/.."

preset=release
build_only=0
ctest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --preset) preset="$2"; shift 2 ;;
    --preset=*) preset="${1#--preset=}"; shift ;;
    --build-only) build_only=1; shift ;;
    *) ctest_args+=("$1"); shift ;;
  esac
done

scripts/install-deps.sh --e2e --browser
if [ -f tests/e2e/package.json ]; then
  scripts/e2e-deps.sh
fi
if [ -f tests/e2e/python/requirements.txt ]; then
  scripts/py-deps.sh
fi

cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
if [ "$build_only" -eq 1 ]; then
  exit 0
fi

jobs=$(nproc)
cd "build/$preset"
# glibc tzset() races under TSan when threads log concurrently unless TZ is set.
export TZ="${TZ:-:/etc/localtime}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1 second_deadlock_stack=1}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1 abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1 halt_on_error=1}"
ctest --output-on-failure -j "$jobs" "${ctest_args[@]}"
