#!/usr/bin/env bash
# coordinatord's restart over a large query history (docs/benchmarks.md, "Restart with 100 MB
# to 1 GB of history"): for each size, history-benchmark --fill_dir writes the segments
# directly with the history's encoder; then coordinatord starts over them --repeats times and
# the script reports, per start, the time from the exec to its "listening on" line, the
# history's own "indexed in" time from its log, and the RSS once it listens; then the medians.
# The page cache is warm (the segments were just written and read).
#   scripts/bench-history-restart.sh [--build DIR] [--dir DIR] [--sizes "100 500 1024"]
#                                    [--repeats N]
# Sizes are MiB. Needs a release build (scripts/test.sh --build-only, or --build DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/release
dir=data/history-restart-bench
sizes="100 500 1024"
repeats=3
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --sizes) sizes="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
daemon=$build/be/src/service/coordinatord
bench=$build/be/src/benchmarks/history-benchmark
for b in "$daemon" "$bench"; do
  [ -x "$b" ] || { echo "build first: $b is missing" >&2; exit 1; }
done
mkdir -p "$dir"
dir=$(realpath "$dir")
pid=""
trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; true' EXIT
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
     "$(free -g | awk '/^Mem:/ {print $2 " GiB RAM"}'), $(df -h "$dir" | awk 'NR==2 {print $1}')," \
     "load $(cut -d' ' -f1-3 /proc/loadavg)"

median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

for mb in $sizes; do
  history="$dir/history-$mb"
  rm -rf "$history" "$dir/data"
  fill_start=$(date +%s%N)
  "$bench" --fill_dir="$history" --fill_mb="$mb"
  echo "filled in $(( ($(date +%s%N) - fill_start) / 1000000 )) ms"
  sync
  : > "$dir/results-$mb"
  for i in $(seq "$repeats"); do
    rm -f "$dir/listening"
    start=$(date +%s%N)
    # The reader stamps the "listening on" line as it arrives: no polling delay in the time.
    "$daemon" --http_port=0 --data_dir="$dir/data" --shutdown_grace_period_s=0 \
      --query_history_dir="$history" --query_history_max_mb=$((mb * 2)) \
      2> "$dir/stderr" < /dev/null \
      > >(while IFS= read -r line; do
            case "$line" in *"listening on"*) date +%s%N > "$dir/listening.tmp"
                                              mv "$dir/listening.tmp" "$dir/listening" ;; esac
          done) &
    pid=$!
    for _ in $(seq 6000); do
      [ -f "$dir/listening" ] && break
      kill -0 "$pid" 2>/dev/null || { cat "$dir/stderr"; exit 1; }
      sleep 0.01
    done
    [ -f "$dir/listening" ] || { echo "coordinatord did not start" >&2; exit 1; }
    ms=$(( ($(cat "$dir/listening") - start) / 1000000 ))
    rss_kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
    indexed=$(grep -o 'Query history .*' "$dir/stderr" | head -1)
    index_ms=$(sed -n 's/.* in \([0-9]*\) ms;.*/\1/p' <<< "$indexed")
    echo "$ms $rss_kb $index_ms" >> "$dir/results-$mb"
    echo "$mb MiB, start $i: listening after $ms ms, RSS $((rss_kb / 1024)) MiB; $indexed"
    kill -TERM "$pid"
    wait "$pid" || true
    pid=""
  done
  col() { cut -d' ' -f"$1" "$dir/results-$mb" | median; }
  echo "$mb MiB, median of $repeats: listening after $(col 1) ms," \
       "history read in $(col 3) ms, RSS $(( $(col 2) / 1024 )) MiB" \
       "($(du -sm "$history" | cut -f1) MiB on disk, $(ls "$history" | wc -l) segments)"
  rm -rf "$history"
done
