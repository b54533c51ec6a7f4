#!/usr/bin/env bash
# Runs one client end-to-end test file with Node's test runner:
#   tests/e2e/clients/run-client-test.sh path/to/coordinatord <npm package> <test file>
# Exits 77 (ctest: skipped) when Node or the npm package is missing:
# scripts/install-deps.sh --e2e installs npm, scripts/e2e-deps.sh the packages and Node 20
# (find-node.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export QR_COORDINATORD="${1:?usage: run-client-test.sh path/to/coordinatord package test-file}"
package="${2:?missing npm package name}"
test_file="${3:?missing test file}"
# shellcheck source=../find-node.sh
source "$here/../find-node.sh"
if [ ! -f "$here/../node_modules/$package/package.json" ]; then
  echo "SKIP: $package is not installed in tests/e2e (run scripts/e2e-deps.sh)"
  exit 77
fi
exec "$node" --test "$here/$test_file"
