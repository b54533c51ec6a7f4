#!/usr/bin/env bash
# Installs what is missing, builds the release preset, creates the sample database if needed,
# and runs coordinatord in the foreground on 127.0.0.1:8080 (Ctrl-C stops it gracefully).
# Extra arguments are passed to coordinatord as flags, e.g.
#   scripts/run.sh --http_port=9090 --num_query_threads=4
#   scripts/run.sh --database=/path/to/your.sqlite
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target coordinatord coordinatord-passwd

port=8080
for arg in "$@"; do
  case "$arg" in --http_port=*) port="${arg#--http_port=}" ;; esac
done
cat <<MSG

Starting coordinatord on http://127.0.0.1:${port} (the first start generates the sample
TPC-H database into ./data, which takes a few seconds). Try, from another terminal:

  curl -s -X POST -H 'X-Trino-User: me' --data 'SELECT count(*) FROM lineitem' \\
       http://127.0.0.1:${port}/v1/statement

then GET the "nextUri" of each answer until there is none, or open
http://127.0.0.1:${port}/queries in a browser. Ctrl-C stops the daemon gracefully.

MSG
exec build/release/be/src/service/coordinatord --data_dir=data "$@"
