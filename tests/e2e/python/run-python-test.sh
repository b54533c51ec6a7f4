#!/usr/bin/env bash
# Runs one Python end-to-end test file with the venv of scripts/py-deps.sh:
#   tests/e2e/python/run-python-test.sh path/to/coordinatord <test file>
# Exits 77 (ctest: skipped) when the venv or its packages are missing:
# scripts/install-deps.sh --e2e installs python3-venv, scripts/py-deps.sh the packages.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export QR_COORDINATORD="${1:?usage: run-python-test.sh path/to/coordinatord test-file}"
test_file="${2:?missing test file}"
python="$here/../.venv/bin/python"
if [ ! -x "$python" ] || ! "$python" -c 'import trino' 2>/dev/null; then
  echo "SKIP: the Python client is not installed in tests/e2e/.venv (run scripts/py-deps.sh)"
  exit 77
fi
exec "$python" "$here/$test_file"
