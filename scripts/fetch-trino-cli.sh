#!/usr/bin/env bash
# Downloads the Trino CLI (the executable jar io.trino:trino-cli, a pinned version, from Maven
# Central) that the e2e.trino-cli test runs, and checks its SHA-256. Quick no-op when the jar is
# already there and intact. Prints the jar's path. Needs curl; the jar needs Java 17
# (scripts/install-deps.sh --e2e installs openjdk-17-jre-headless).
#   scripts/fetch-trino-cli.sh [DIR]    (default: $QR_CACHE_DIR or ~/.cache/qr-coordinatord)
set -euo pipefail
version=476
sha256=fe4e9c7fb569cd67673afa1622945f6308e1e59bdb825419352b80887661757b
dir="${1:-${QR_CACHE_DIR:-$HOME/.cache/qr-coordinatord}}"
jar="$dir/trino-cli-$version-executable.jar"
url="https://repo1.maven.org/maven2/io/trino/trino-cli/$version/trino-cli-$version-executable.jar"

check() { echo "$sha256  $1" | sha256sum --check --status; }
if [ -f "$jar" ] && check "$jar"; then
  echo "$jar"
  exit 0
fi
mkdir -p "$dir"
tmp="$(mktemp "$dir/.trino-cli.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
echo "fetch-trino-cli.sh: downloading $url" >&2
curl -fsSL --retry 3 --max-time 300 -o "$tmp" "$url"
if ! check "$tmp"; then
  echo "fetch-trino-cli.sh: $url does not have the SHA-256 $sha256 (got $(sha256sum "$tmp" | cut -d' ' -f1))" >&2
  exit 1
fi
mv "$tmp" "$jar"
echo "$jar"
