#!/usr/bin/env bash
# Installs the Debian 12 packages the project needs, only those missing. Idempotent and quick
# when everything is present; non-interactive (works with no stdin, as CI runs it).
#   scripts/install-deps.sh [--e2e] [--browser] [--bench] [--cluster]
# Without options: what building and running coordinatord needs (scripts/run.sh). --cluster adds
# etcd and nginx (scripts/cluster.sh); --e2e adds those, Prometheus, Node.js/npm, Python and a
# JDK for the tests (scripts/test.sh). The services these Debian packages bring (etcd, nginx,
# prometheus) are not started or enabled: the tests and scripts run their own instances.
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
  python3  # README's curl examples read the JSON answers with it
)
cluster_packages=(etcd-server etcd-client nginx-light)
# Packages whose Debian scripts start (and enable) a system service, and its unit.
declare -A services=([etcd-server]=etcd [nginx-light]=nginx [prometheus]=prometheus)
for arg in "$@"; do
  case "$arg" in
    --e2e) packages+=(nodejs npm openssl python3 python3-venv openjdk-17-jdk-headless
                      prometheus "${cluster_packages[@]}") ;;
    --cluster) packages+=("${cluster_packages[@]}") ;;
    --browser) packages+=(chromium) ;;
    --bench) packages+=(valgrind python3-matplotlib python3-pip "${cluster_packages[@]}"); bench=1 ;;
    *) echo "install-deps.sh: unknown option '$arg' (accepted: --e2e --browser --bench --cluster)" >&2
       exit 2 ;;
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
# Through sudo too (its env_reset drops exported variables).
apt_get=($SUDO env DEBIAN_FRONTEND=noninteractive apt-get)
"${apt_get[@]}" update -qq
# Keep the packages' services from starting during the install: a policy-rc.d that denies
# every start (invoke-rc.d and deb-systemd-invoke honour it), unless one is already in place.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# scripts/install-deps.sh: no service starts during its install\nexit 101\n' |
    $SUDO tee "$policy" >/dev/null
  $SUDO chmod 755 "$policy"
  trap '$SUDO rm -f "$policy"' EXIT
fi
"${apt_get[@]}" install -y -qq --no-install-recommends "${missing[@]}" </dev/null
# ... nor at boot: disable the units of the service packages this run installed.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  for p in "${missing[@]}"; do
    if [ -n "${services[$p]:-}" ]; then
      $SUDO systemctl disable --now "${services[$p]}.service" >/dev/null 2>&1 || true
    fi
  done
fi
fetch_bench_headers
