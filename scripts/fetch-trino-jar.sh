#!/usr/bin/env bash
# Downloads a pinned Trino client jar from Maven Central and checks its SHA-256: `cli` (the
# executable jar io.trino:trino-cli, run by the e2e.trino-cli test) or `jdbc` (the driver
# io.trino:trino-jdbc, used by the e2e.trino-jdbc test). Quick no-op when the jar is already
# there and intact. Prints the jar's path. Needs curl; the jars need Java 17
# (scripts/install-deps.sh --e2e installs openjdk-17-jdk-headless).
#   scripts/fetch-trino-jar.sh cli|jdbc [DIR]  (default: $QR_CACHE_DIR or ~/.cache/qr-coordinatord)
set -euo pipefail
version=476
case "${1:-}" in
  cli)
    file="trino-cli-$version-executable.jar"
    sha256=fe4e9c7fb569cd67673afa1622945f6308e1e59bdb825419352b80887661757b ;;
  jdbc)
    file="trino-jdbc-$version.jar"
    sha256=a3736d21609a5a317d2ce88b3835e312e9b6f41393c1d4b09f2ad6e7aeb3bb90 ;;
  *) echo "usage: fetch-trino-jar.sh cli|jdbc [DIR]" >&2; exit 2 ;;
esac
dir="${2:-${QR_CACHE_DIR:-$HOME/.cache/qr-coordinatord}}"
jar="$dir/$file"
url="https://repo1.maven.org/maven2/io/trino/trino-$1/$version/$file"

check() { echo "$sha256  $1" | sha256sum --check --status; }
if [ -f "$jar" ] && check "$jar"; then
  echo "$jar"
  exit 0
fi
mkdir -p "$dir"
tmp="$(mktemp "$dir/.trino-$1.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
echo "fetch-trino-jar.sh: downloading $url" >&2
curl -fsSL --retry 3 --max-time 300 -o "$tmp" "$url"
if ! check "$tmp"; then
  echo "fetch-trino-jar.sh: $url does not have the SHA-256 $sha256 (got $(sha256sum "$tmp" | cut -d' ' -f1))" >&2
  exit 1
fi
mv "$tmp" "$jar"
echo "$jar"
