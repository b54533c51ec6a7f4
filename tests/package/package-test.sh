#!/usr/bin/env bash
# The registry as a package (ctest -L package): in a fresh temporary directory,
#   1. configures a plain library-only build of the source tree (no sanitizers: what a user
#      builds), checks that it looked for none of the daemon's dependencies, installs it;
#   2. checks the installed headers include only the standard library, Abseil and each other,
#      compile on their own, and that the exported target carries no gflags, glog, Boost,
#      OpenSSL, SQLite or project build flags;
#   3. builds and runs examples/session-registry four ways: find_package of the install,
#      add_subdirectory and FetchContent of the checkout, and pkg-config;
#   4. checks that no example binary needs libgflags, libglog, libssl, libcrypto, libsqlite3
#      or a Boost library.
# Usage: package-test.sh SOURCE_DIR CMAKE CXX_COMPILER
set -euo pipefail
src=$(cd "$1" && pwd)
cmake=$2
cxx=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/qr-package-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The consumers are built plainly whatever the enclosing build's sanitizer preset is.
unset CXXFLAGS CFLAGS LDFLAGS CMAKE_PREFIX_PATH PKG_CONFIG_PATH
prefix=$work/prefix

fail() {
  echo "FAILED: $*" >&2
  exit 1
}
step() { echo "=== $*"; }
build() { nice -n 10 "$cmake" --build "$1" -j2 >"$1.log" 2>&1 || { cat "$1.log"; fail "build of $1"; }; }
configure() {
  local dir=$1
  shift
  "$cmake" -G Ninja -B "$dir" -DCMAKE_CXX_COMPILER="$cxx" "$@" >"$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; fail "configure of $dir"; }
}
# A consumer's configure must not have looked for the daemon's dependencies: find_package
# leaves a <Name>_DIR (or, for modules, other) cache entry behind.
expect_no_daemon_deps() {
  local cache=$1/CMakeCache.txt
  if grep -E '^(Boost|boost_[a-z_]+|gflags|glog|GTest|benchmark|nlohmann_json|SQLite3|OpenSSL)_[A-Z_]+:' \
       "$cache"; then
    fail "$1 looked for a dependency of the daemon (above, from $cache)"
  fi
}
expect_no_daemon_libs() {
  local needed
  needed=$(readelf -d "$1" | grep NEEDED || true)
  echo "$needed"
  if grep -Ei 'libgflags|libglog|libssl|libcrypto|libsqlite|libboost' <<<"$needed"; then
    fail "$1 needs a library of the daemon"
  fi
  "$1" || fail "$1 exited with $?"
}

step "library-only build and install of $src"
# Installed with --prefix into another directory than the configured prefix, as README does:
# nothing installed may point at the configured one.
configure "$work/lib" -S "$src" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$work/configured-prefix" -DQR_BUILD_DAEMON=OFF
expect_no_daemon_deps "$work/lib"
build "$work/lib"
"$cmake" --install "$work/lib" --prefix "$prefix" >"$work/install.log" || fail "cmake --install"
if grep -rn "configured-prefix" "$prefix"; then
  fail "the install points at the configured prefix, not where it was installed (above)"
fi
cat "$work/install.log"
[ -f "$prefix/include/query_registry/sharded-query-map-util.h" ] || fail "headers not installed"
[ -f "$prefix/lib/cmake/query_registry/query_registryConfigVersion.cmake" ] ||
  fail "no CMake package"
[ -f "$prefix/lib/pkgconfig/query_registry.pc" ] || fail "no pkg-config file"

step "installed headers: standard library, Abseil and siblings only"
for header in "$prefix"/include/query_registry/*.h; do
  while read -r include; do
    case "$include" in
      \"*\") [ -f "$(dirname "$header")/${include//\"/}" ] ||
               fail "$header includes $include, which is not an installed sibling" ;;
      \<absl/*\> | \<sys/rseq.h\>) ;;
      \<*/*\>) fail "$header includes $include (only the standard library and Abseil)" ;;
      \<*\>) ;;
      *) fail "$header: unexpected include $include" ;;
    esac
  done < <(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*([<"][^>"]*[>"]).*/\1/p' "$header")
  echo '#include <query_registry/'"$(basename "$header")"'>' >"$work/self-contained.cc"
  "$cxx" -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I "$prefix/include" \
    "$work/self-contained.cc" || fail "$(basename "$header") does not compile on its own"
done
if grep -rEn '\b(DECLARE|DEFINE)_[a-z0-9]+\(|\bFLAGS_|google::|\b(D?CHECK|LOG|VLOG)(_[A-Z]+)?\(' \
     "$prefix/include"; then
  fail "an installed header uses gflags or glog (above)"
fi

step "exported target: no daemon dependencies, no project build flags"
grep -n 'INTERFACE_' "$prefix"/lib/cmake/query_registry/query_registryTargets.cmake
if grep -Ein 'gflags|glog|boost|openssl|sqlite|qr_build_flags|qr_asio|fsanitize|-W' \
     "$prefix"/lib/cmake/query_registry/*.cmake; then
  fail "the exported package carries a daemon dependency or a build flag (above)"
fi

step "example, find_package(query_registry 0.2 CONFIG) of the install"
configure "$work/ex-package" -S "$src/examples/session-registry" -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_PREFIX_PATH="$prefix"
expect_no_daemon_deps "$work/ex-package"
build "$work/ex-package"
expect_no_daemon_libs "$work/ex-package/session-registry"

step "find_package(query_registry 0.1) and (query_registry 1.0) are refused"
mkdir -p "$work/version-check"
for wanted in 0.1 1.0; do
  cat >"$work/version-check/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(version_check LANGUAGES CXX)
find_package(query_registry $wanted CONFIG QUIET)
if(query_registry_FOUND)
  message(FATAL_ERROR "version 0.2 accepted for a request of $wanted")
endif()
CMAKE
  rm -rf "$work/version-check/build"
  configure "$work/version-check/build" -S "$work/version-check" -DCMAKE_PREFIX_PATH="$prefix"
done

step "example, add_subdirectory of the checkout"
configure "$work/ex-subdir" -S "$src/examples/session-registry" -DCMAKE_BUILD_TYPE=Release \
  -DQUERY_REGISTRY_FROM=subdirectory -DQUERY_REGISTRY_SOURCE_DIR="$src"
expect_no_daemon_deps "$work/ex-subdir"
build "$work/ex-subdir"
expect_no_daemon_libs "$work/ex-subdir/session-registry"
if find "$work/ex-subdir" -name coordinatord -o -name 'util-test' | grep .; then
  fail "add_subdirectory built more than the library"
fi

step "example, FetchContent of the checkout"
configure "$work/ex-fetch" -S "$src/examples/session-registry" -DCMAKE_BUILD_TYPE=Release \
  -DQUERY_REGISTRY_FROM=fetchcontent -DQUERY_REGISTRY_SOURCE_DIR="$src"
expect_no_daemon_deps "$work/ex-fetch"
build "$work/ex-fetch"
expect_no_daemon_libs "$work/ex-fetch/session-registry"

step "example, pkg-config"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
pkg-config --modversion query_registry | grep -qx 0.2.0 || fail "pkg-config version"
pkg-config --cflags query_registry | grep -q -- "-I$prefix/lib/pkgconfig/../../include" ||
  fail "pkg-config's include dir is not in the install: $(pkg-config --cflags query_registry)"
read -ra pc_flags < <(pkg-config --cflags --libs query_registry)
"$cxx" -std=c++20 -O1 -o "$work/session-registry-pc" \
  "$src"/examples/session-registry/{main,session-registry}.cc "${pc_flags[@]}" ||
  fail "pkg-config build"
expect_no_daemon_libs "$work/session-registry-pc"

echo "package test passed"
