#!/usr/bin/env bash
# Builds the SQLite that coordinatord links: Debian 12's own source of the library we linked
# before (sqlite3 3.40.1-2+deb12u2, with every patch of Debian's series, its security fixes
# included), plus the patches in third_party/sqlite/, amalgamated into DIR/sqlite-VERSION/
# (sqlite3.c, sqlite3.h, sqlite_cfg.h). CMake compiles it with Debian's options
# (cmake/sqlite.cmake) and runs this script at configure time; docs/architecture.md, "The
# interrupt before every opcode", says why the project carries a patch.
# Quick no-op when the output matches the pinned sources and the patches. Non-interactive.
#   scripts/fetch-sqlite.sh [DIR]   (default: build/third_party)
# Needs curl, xz, patch, make, a C compiler and tclsh (scripts/install-deps.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

version=3.40.1
debian_revision=2+deb12u2
# Where the two tarballs are, tried in order: Debian's archive keeps a source only while a
# release references it (a newer stable update removes this one from the pool), its snapshot
# service keeps every version, and the sha256 sums pin the bytes whatever the source.
pools=(http://deb.debian.org/debian/pool/main/s/sqlite3
       https://snapshot.debian.org/archive/debian/20250701T000000Z/pool/main/s/sqlite3)
orig=sqlite3_${version}.orig.tar.xz
orig_sha256=aaa776260ab4dc976db34aa7891819484c8676b5b2783123ebc6301e2ca5d655
debian=sqlite3_${version}-${debian_revision}.debian.tar.xz
debian_sha256=0843bc12e4364076477935ce313a6d0796fd899a989ff18ebb6545540e10e4ca
dir=${1:-build/third_party}
dest="$dir/sqlite-$version-$debian_revision"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
dest="$dir/sqlite-$version-$debian_revision"

# The stamp names everything the output is made of: the two tarballs and our patches.
stamp=$( (echo "$orig_sha256 $debian_sha256"; cat third_party/sqlite/*.patch) | sha256sum |
  cut -d' ' -f1)
exec 9>"$dir/.sqlite.lock"
flock 9  # two configures at once (presets) build it once
if [ -f "$dest/.qr-stamp" ] && [ "$(cat "$dest/.qr-stamp")" = "$stamp" ]; then
  exit 0
fi

echo "fetch-sqlite.sh: building SQLite $version-$debian_revision" \
     "(Debian's source + third_party/sqlite) into $dest"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
download() {  # name sha256: from the cache in DIR, else from the first of 'pools' that has it
  if [ -f "$dir/$1" ] && echo "$2  $dir/$1" | sha256sum --check --quiet 2>/dev/null; then
    return 0
  fi
  local pool
  for pool in "${pools[@]}"; do
    if curl --fail --silent --show-error --retry 3 -o "$tmp/$1" "$pool/$1" &&
       echo "$2  $tmp/$1" | sha256sum --check --quiet; then
      mv "$tmp/$1" "$dir/$1"
      return 0
    fi
    echo "fetch-sqlite.sh: $1 not at $pool (or not the pinned bytes); trying the next" >&2
  done
  echo "fetch-sqlite.sh: could not fetch $1 (sha256 $2) from ${pools[*]}" >&2
  exit 1
}
download "$orig" "$orig_sha256"
download "$debian" "$debian_sha256"

src="$tmp/src"
mkdir -p "$src"
tar xJf "$dir/$orig" -C "$src" --strip-components=1
tar xJf "$dir/$debian" -C "$src"
while read -r p; do
  case "$p" in ''|'#'*) continue ;; esac
  patch -d "$src" -p1 --quiet --forward < "$src/debian/patches/$p"
done < "$src/debian/patches/series"
for p in "$root"/third_party/sqlite/*.patch; do
  patch -d "$src" -p1 --quiet --forward < "$p"
done

mkdir -p "$src/bld"
(cd "$src/bld" && ../configure --enable-threadsafe --enable-fts4 --enable-fts5 --enable-json \
   > "$tmp/configure.log" 2>&1 && make sqlite3.c > "$tmp/make.log" 2>&1) || {
  tail -n 30 "$tmp/configure.log" "$tmp/make.log" 2>/dev/null >&2
  exit 1
}
# Debian's 10-665363-disable-malloc-usable-size.patch takes malloc_usable_size() out of
# configure.ac, which Debian regenerates; our configure is the tarball's own.
sed -i '/HAVE_MALLOC_USABLE_SIZE/d' "$src/bld/sqlite_cfg.h"
# Our patch is in (a patch that applies nowhere fails above; this catches one emptied).
grep -q 'coordinatord: sqlite3_interrupt() stops the statement before any opcode' \
  "$src/bld/sqlite3.c"

rm -rf "$dest"
mkdir -p "$dest"
cp "$src/bld/sqlite3.c" "$src/bld/sqlite3.h" "$src/bld/sqlite_cfg.h" "$dest/"
echo "$stamp" > "$dest/.qr-stamp"
