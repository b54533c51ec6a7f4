#!/usr/bin/env bash
# The result spool against dd on the same directory, interleaved (docs/benchmarks.md, "Result
# spool"): spool-benchmark writes and reads back --mb MiB of 256 KiB pages through a
# ResultBuffer whose memory buffer is full; dd writes and reads the same amount in 1 MiB blocks.
#   scripts/bench-spool.sh [--dir DIR] [--mb N] [--repeats N]
# Needs a release build (scripts/test.sh --build-only).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=data/spill
mb=512
repeats=3
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --mb) mb="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
bench=build/release/be/src/benchmarks/spool-benchmark
[ -x "$bench" ] || { echo "build first: scripts/test.sh --build-only" >&2; exit 1; }
mkdir -p "$dir"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
     "$(df -h "$dir" | awk 'NR==2 {print $1, $2}'), load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$repeats"); do
  echo "--- repeat $i"
  "$bench" --dir="$dir" --mb="$mb"
  f="$dir/qr-spill-dd.$$"
  echo -n "dd w   "; dd if=/dev/zero of="$f" bs=1M count="$mb" 2>&1 | tail -1
  echo -n "dd r   "; dd if="$f" of=/dev/null bs=1M 2>&1 | tail -1
  rm -f "$f"
done
