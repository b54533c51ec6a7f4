#!/usr/bin/env bash
# Installs the Debian 12 packages the project needs, only those missing. Idempotent and quick
# when everything is present; non-interactive (works with no stdin, as CI runs it).
#   scripts/install-deps.sh [--e2e] [--browser] [--bench]
# --bench also fetches Boost 1.88's headers into build/third_party (scripts/fetch-boost-headers.sh)
# for process-wide-locks-benchmark's boost::concurrent_flat_map peer.
set -euo pipefail

bench=0
packages=(
  build-essential cmake ninja-build clang libclang-rt-14-dev pkg-config curl ca-certificates
  libboost-dev libboost-thread-dev libgflags-dev libgoogle-glog-dev
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libabsl-dev
  libssl-dev
  tcl xz-utils patch make  # scripts/fetch-sqlite.sh: SQLite from Debian's source (CMake runs it)
  libtbb-dev libcuckoo-dev
  prometheus
  etcd-server etcd-client nginx-light
)
for arg in "$@"; do
  case "$arg" in
    --e2e) packages+=(nodejs npm openssl python3 python3-venv openjdk-17-jdk-headless) ;;
    --browser) packages+=(chromium) ;;
    --bench) packages+=(valgrind python3-matplotlib python3-pip); bench=1 ;;
    *) echo "install-deps.sh: unknown option '$arg' (accepted: --e2e --browser --bench)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  # A package counts as present only when dpkg says it is fully installed.
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done
# Node.js may come from outside Debian (e.g. a preinstalled toolchain); npm is what we need.
if [[ " ${missing[*]} " == *" npm "* ]] && command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then
  missing=("${missing[@]/npm}"); missing=("${missing[@]/nodejs}")
fi
read -r -a missing <<< "${missing[*]}"
fetch_bench_headers() {
  # Not fatal: without the headers the benchmark only skips its Boost 1.88 peer.
  if [ "$bench" -eq 1 ] && ! "$(dirname "$0")/fetch-boost-headers.sh"; then
    echo "install-deps.sh: could not fetch Boost 1.88's headers (PyPI unreachable?);" \
         "process-wide-locks-benchmark will skip BoostConcurrentFlatMap" >&2
  fi
}
if [ ${#missing[@]} -eq 0 ]; then
  fetch_bench_headers
  exit 0
fi

echo "install-deps.sh: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
fetch_bench_headers
