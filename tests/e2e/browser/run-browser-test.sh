#!/usr/bin/env bash
# Runs the headless-browser tests of the debug pages with Node's test runner:
#   tests/e2e/browser/run-browser-test.sh path/to/coordinatord [TEST.test.mjs]
# (default: queries-page.test.mjs). QR_HISTORY_FILL names the history-fill tool for
# queries-scale.test.mjs.
# Exits 77 (ctest: skipped) when Chromium, Node or the npm packages are missing:
# scripts/install-deps.sh --e2e --browser installs Chromium and npm, scripts/e2e-deps.sh the
# packages and Node 20 (find-node.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export QR_COORDINATORD="${1:?usage: run-browser-test.sh path/to/coordinatord}"
chromium="${QR_CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$chromium" ]; then
  echo "SKIP: no Chromium at $chromium (scripts/install-deps.sh --browser installs it)"
  exit 77
fi
# shellcheck source=../find-node.sh
source "$here/../find-node.sh"
if [ ! -f "$here/../node_modules/playwright-core/package.json" ]; then
  echo "SKIP: playwright-core is not installed in tests/e2e (run scripts/e2e-deps.sh)"
  exit 77
fi
exec "$node" --test "$here/${2:-queries-page.test.mjs}"
