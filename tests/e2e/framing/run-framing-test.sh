#!/usr/bin/env bash
# Runs the framing differential test (framing-differential.test.mjs) with Node's test runner:
#   tests/e2e/framing/run-framing-test.sh path/to/http-echo-server
# Needs only Node.js (no npm package); exits 77 (ctest: skipped) when node is missing or older
# than 20 (the reference parser is Node 20's llhttp; scripts/install-deps.sh --e2e installs it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export QR_HTTP_ECHO_SERVER="${1:?usage: run-framing-test.sh path/to/http-echo-server}"
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP: node is not installed (scripts/install-deps.sh --e2e)"
  exit 77
fi
major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 20 ]; then
  echo "SKIP: node $major is older than 20"
  exit 77
fi
exec node --test "$here/framing-differential.test.mjs"
