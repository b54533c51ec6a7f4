#!/usr/bin/env bash
# Fetches Boost 1.88's headers (the pinned PyPI wheel libboost-headers==1.88.0, checked against
# its sha256) into DIR/boost-1.88.0/include for process-wide-locks-benchmark's
# boost::concurrent_flat_map peer, which is compiled in a translation unit of its own so that it
# never meets the Debian Boost 1.74 the rest of the project uses (docs/benchmarks.md). Only
# headers: nothing is installed into Python. Quick no-op when already there. Non-interactive.
#   scripts/fetch-boost-headers.sh [DIR]   (default: build/third_party, CMake's default too)
# python3 and pip come from Debian: scripts/install-deps.sh --bench (which also runs this).
set -euo pipefail
cd "$(dirname "$0")/.."

version=1.88.0
sha256=658a3b7c2d8cc9594d7f83aecbfdbfc4355a35aff3a19d5d4b0a02320e25833d
wheel=libboost_headers-${version}-py3-none-any.whl
dir=${1:-build/third_party}
dest="$dir/boost-$version"
if [ -f "$dest/.qr-wheel.sha256" ] && [ "$(cat "$dest/.qr-wheel.sha256")" = "$sha256" ]; then
  exit 0
fi

echo "fetch-boost-headers.sh: downloading libboost-headers==$version into $dest"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --disable-pip-version-check --no-input --no-deps \
  --only-binary=:all: "libboost-headers==$version" -d "$tmp" </dev/null
echo "$sha256  $tmp/$wheel" | sha256sum --check --quiet
python3 -m zipfile -e "$tmp/$wheel" "$tmp/x"
rm -rf "$dest"
mkdir -p "$dest"
mv "$tmp/x/libboost_headers/include" "$dest/include"
rm -f "$dest/include/__init__.py"
test -f "$dest/include/boost/unordered/concurrent_flat_map.hpp"
echo "$sha256" > "$dest/.qr-wheel.sha256"
