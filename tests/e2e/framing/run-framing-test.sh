#!/usr/bin/env bash
# Runs the framing differential test (framing-differential.test.mjs) with Node's test runner:
#   tests/e2e/framing/run-framing-test.sh path/to/http-echo-server
# Needs only Node.js 20 or newer (the reference parser is Node 20's llhttp): the pinned one
# scripts/e2e-deps.sh installs, or node on PATH; exits 77 (ctest: skipped) without one
# (find-node.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export QR_HTTP_ECHO_SERVER="${1:?usage: run-framing-test.sh path/to/http-echo-server}"
# shellcheck source=../find-node.sh
source "$here/../find-node.sh"
exec "$node" --test "$here/framing-differential.test.mjs"
