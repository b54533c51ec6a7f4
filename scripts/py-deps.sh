#!/usr/bin/env bash
# Creates the Python virtual environment of the end-to-end tests in tests/e2e/.venv and
# installs the packages of tests/e2e/python/requirements.txt into it exactly as pinned (each
# wheel checked against its sha256; no dependency resolution, nothing built from source).
# Quick no-op when the venv was made from the same requirements file and Python (a hash stamp
# in the venv). Non-interactive.
#   scripts/py-deps.sh [--force]
# python3 and its venv module come from Debian: scripts/install-deps.sh --e2e.
set -euo pipefail
cd "$(dirname "$0")/../tests/e2e"

force=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    *) echo "py-deps.sh: unknown option '$arg' (accepted: --force)" >&2; exit 2 ;;
  esac
done

python=/usr/bin/python3
if [ ! -x "$python" ] || ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
  echo "py-deps.sh: python3 with its venv module is missing; run scripts/install-deps.sh --e2e first" >&2
  exit 1
fi

requirements=python/requirements.txt
stamp=.venv/.qr-py-deps.sha256
want="$( (cat "$requirements"; "$python" --version) | sha256sum | cut -d' ' -f1)"
if [ "$force" -eq 0 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi

echo "py-deps.sh: installing the Python packages of tests/e2e into tests/e2e/.venv"
rm -rf .venv
"$python" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-input \
  --require-hashes --no-deps --only-binary=:all: -r "$requirements" </dev/null
echo "$want" > "$stamp"
