#!/usr/bin/env bash
# Drives coordinatord with coordinator-loadgen next to an nginx anchor (and, with --with-trino, a
# real Trino coordinator), and renders docs/benchmarks.md, section "Daemon under load
# (coordinator-loadgen)".
#
#   scripts/bench-daemon.sh [--with-trino] [--repeats N] [--duration S] [--mixed-duration S]
#                           [--quick] [--no-build] [--keep] [--doc PATH]
#
# Each repeat runs, back to back: nginx serving a static copy of a status answer (raw GETs,
# 64 connections); then coordinatord with the default sharded registry and with
# --registry_num_shards=1 (one global lock), each in the poll mode (64 status-lookup
# connections), with SELECT 1 (8 clients) and with TPC-H Q1 (8 clients), a fresh daemon per
# run; then Trino 476 (SELECT 1, Q1, poll). Ratios are taken within a repeat; the document
# quotes medians over the repeats. Finally one long mixed run (--mixed-duration, default 300 s;
# 0 skips it) watches the daemon's RSS. Every server runs on loopback with its state in a temp
# dir. Trino (io.trino:trino-server:476 from Maven Central, ~820 MB) is cached in
# ~/.cache/qr-bench and run with the Temurin 25 JDK and only its tpch and memory plugins; if
# it cannot be fetched or started, the other sections are still produced and the document says
# what failed. A full run with Trino takes about 20 minutes on 2 cores. --quick (1 repeat, 5 s
# runs, 60 s mixed) renders into build/release/bench-daemon/ unless --doc says otherwise.
# Exit code: 0 if every run was free of errors; 1 otherwise (the document is still written).
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

invocation="scripts/bench-daemon.sh${*:+ $*}"
with_trino=0
repeats=3
duration=10
mixed_duration=300
quick=0
build=1
keep=0
doc=""
# --quick sets shorter defaults; options given explicitly still win, wherever they appear.
for arg in "$@"; do
  if [ "$arg" = --quick ]; then
    quick=1; repeats=1; duration=5; mixed_duration=60
  fi
done
while [ $# -gt 0 ]; do
  case "$1" in
    --with-trino) with_trino=1; shift ;;
    --repeats) repeats="$2"; shift 2 ;;
    --repeats=*) repeats="${1#--repeats=}"; shift ;;
    --duration) duration="$2"; shift 2 ;;
    --duration=*) duration="${1#--duration=}"; shift ;;
    --mixed-duration) mixed_duration="$2"; shift 2 ;;
    --mixed-duration=*) mixed_duration="${1#--mixed-duration=}"; shift ;;
    --quick) quick=1; shift ;;
    --no-build) build=0; shift ;;
    --keep) keep=1; shift ;;
    --doc) doc="$2"; shift 2 ;;
    --doc=*) doc="${1#--doc=}"; shift ;;
    *) echo "bench-daemon.sh: unknown option '$1' (see the comment at the top of $0)" >&2; exit 2 ;;
  esac
done
if [ "$quick" -eq 1 ]; then
  doc=${doc:-build/release/bench-daemon/benchmarks.md}
fi
doc=${doc:-docs/benchmarks.md}

scripts/install-deps.sh --bench || { echo "bench-daemon.sh: installing nginx-light failed" >&2; exit 2; }
if [ "$build" -eq 1 ]; then
  cmake --preset release >/dev/null && \
    cmake --build --preset release --target coordinatord coordinator-loadgen || exit 2
fi
daemon_bin=$repo/build/release/be/src/service/coordinatord
loadgen=$repo/build/release/be/src/loadgen/coordinator-loadgen
python=/usr/bin/python3
[ -x "$python" ] || python=python3

work=$(mktemp -d /tmp/qr-bench-daemon.XXXXXX)
chmod 755 "$work"  # nginx's workers run as 'nobody' when started as root
results=$work/results
mkdir -p "$results"
data_dir=${QR_BENCH_DATA_DIR:-$HOME/.cache/qr-bench/data}  # the generated sample DB, reused
cache=${QR_BENCH_CACHE:-$HOME/.cache/qr-bench}
mkdir -p "$data_dir" "$cache"
: > "$results/failures.txt"
: > "$results/commands.txt"
started_pids=()
status=0

cleanup() {
  for pid in "${started_pids[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${started_pids[@]}"; do wait "$pid" 2>/dev/null; done
  if [ "$keep" -eq 1 ]; then echo "bench-daemon.sh: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

note_failure() { echo "$*" | tee -a "$results/failures.txt" >&2; }
free_port() {
  "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
stop_pid() {  # stop_pid PID: SIGTERM, wait for it, and forget it (its pid may be reused)
  kill "$1" 2>/dev/null
  for _ in $(seq 300); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$1" 2>/dev/null && kill -9 "$1" 2>/dev/null
  wait "$1" 2>/dev/null
  local kept=() pid
  for pid in "${started_pids[@]}"; do [ "$pid" = "$1" ] || kept+=("$pid"); done
  started_pids=("${kept[@]}")
}

# start_daemon NAME FLAGS...: sets daemon_pid and daemon_port.
start_daemon() {
  local name=$1; shift
  : > "$work/$name.out"  # emptied now: the background job's redirection runs asynchronously
  "$daemon_bin" --http_port=0 --data_dir="$data_dir" --shutdown_grace_period_s=2 "$@" \
    >"$work/$name.out" 2>"$work/$name.err" &
  daemon_pid=$!
  started_pids+=("$daemon_pid")
  for _ in $(seq 600); do
    grep -q listening "$work/$name.out" 2>/dev/null && break
    kill -0 "$daemon_pid" 2>/dev/null || break
    sleep 0.1
  done
  daemon_port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$work/$name.out")
  if [ -z "$daemon_port" ]; then
    note_failure "coordinatord ($name) did not start: $(tail -3 "$work/$name.err")"
    return 1
  fi
}

# run_loadgen RESULT PORT PIDS ARGS...: one loadgen run, its JSON in $results/RESULT.json.
run_loadgen() {
  local result=$1 port=$2 pids=$3; shift 3
  local cmd=("$loadgen" --port="$port" --pid="$pids" --json_out="$results/$result.json" "$@")
  echo "$result: coordinator-loadgen --port=PORT --pid=PID ${*@Q}" >>"$results/commands.txt"
  echo "== $result"
  if ! "${cmd[@]}" >"$results/$result.txt" 2>&1; then
    status=1
    note_failure "$result: coordinator-loadgen failed: $(grep -A3 ERRORS "$results/$result.txt" | head -4 | tr '\n' ' ')"
  fi
  sed -n '1,2p' "$results/$result.txt"
}

# The workloads. Q1 is TPC-H Q1 with DELTA = 90 days, in each engine's date syntax.
q1_select="SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, sum(l_extendedprice) AS sum_base_price, sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price, sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge, avg(l_quantity) AS avg_qty, avg(l_extendedprice) AS avg_price, avg(l_discount) AS avg_disc, count(*) AS count_order FROM lineitem"
q1_tail="GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus"
q1_sqlite="$q1_select WHERE l_shipdate <= date('1998-12-01', '-90 days') $q1_tail"
q1_trino="$q1_select WHERE l_shipdate <= DATE '1998-12-01' - INTERVAL '90' DAY $q1_tail"
long_sqlite="WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT x FROM c"
long_trino="SELECT l_orderkey FROM tpch.sf1000.lineitem"
warm=2
common=(--duration_s="$duration" --warmup_s="$warm")
poll_args=(--mode=poll --poll_clients=64 --long_queries=16)
select1_args=(--mode=queries --clients=8 --sql="SELECT 1" --expect_rows=1)

# ---- The machine
{
  echo "{"
  echo "\"cpu\": \"$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)\","
  echo "\"cores\": $(nproc),"
  echo "\"mem_gib\": $(awk '/MemTotal/ {printf "%.1f", $2/1048576}' /proc/meminfo),"
  echo "\"kernel\": \"$(uname -r)\","
  echo "\"load_before\": \"$(cut -d' ' -f1-3 /proc/loadavg)\","
  echo "\"date\": \"$(date -u +%Y-%m-%dT%H:%MZ)\","
  echo "\"commit\": \"$(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo '+dirty')\","
  echo "\"nginx\": \"$(nginx -v 2>&1 | sed 's/.*: //')\","
  echo "\"invocation\": \"$invocation\","
  echo "\"repeats\": $repeats, \"duration_s\": $duration, \"mixed_duration_s\": $mixed_duration,"
  echo "\"with_trino\": $with_trino"
  echo "}"
} >"$results/machine.json"

# ---- A status answer for nginx to serve: GET /v1/query/{id} of a live long query.
start_daemon status-sample || exit 1
status_file=$work/www/status.json
mkdir -p "$work/www"
"$python" - "$daemon_port" "$long_sqlite" "$status_file" <<'EOF' || { note_failure "could not capture a status answer"; exit 1; }
import json, sys, urllib.request
port, sql, out = sys.argv[1], sys.argv[2], sys.argv[3]
base = f"http://127.0.0.1:{port}"
def call(method, url, body=None):
    req = urllib.request.Request(url if url.startswith("http") else base + url, data=body,
                                 method=method, headers={"X-Trino-User": "loadgen"})
    with urllib.request.urlopen(req) as f:
        return f.read()
q = json.loads(call("POST", "/v1/statement", sql.encode()))
first = json.loads(call("GET", q["nextUri"]))
open(out, "wb").write(call("GET", "/v1/query/" + q["id"]))
call("DELETE", first["nextUri"])
EOF
stop_pid "$daemon_pid"
chmod -R a+rX "$work/www"
echo "status answer: $(wc -c <"$status_file") bytes"

# ---- nginx: the anchor
nginx_pid=""
start_nginx() {
  local dir=$work/nginx
  nginx_port=$(free_port)
  mkdir -p "$dir/tmp" "$dir/logs"
  cat >"$dir/nginx.conf" <<EOF
worker_processes 2;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
daemon off;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 100000000;
  keepalive_timeout 75s;
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  server {
    listen 127.0.0.1:$nginx_port;
    root $work/www;
    default_type application/json;
    location / { }
  }
}
EOF
  nginx -p "$dir" -e "$dir/logs/error.log" -c "$dir/nginx.conf" >"$dir/logs/stdout.log" 2>&1 &
  nginx_pid=$!
  started_pids+=("$nginx_pid")
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$nginx_port/status.json" -o /dev/null && break
    sleep 0.1
  done
  nginx_workers=$(pgrep -P "$nginx_pid" | paste -sd, -)
  if [ -z "$nginx_workers" ] || ! curl -sf "http://127.0.0.1:$nginx_port/status.json" -o /dev/null; then
    note_failure "nginx did not start: $(tail -3 "$dir/logs/error.log" 2>/dev/null)"
    nginx_pid=""
    return 1
  fi
  echo "nginx -p DIR -e DIR/logs/error.log -c DIR/nginx.conf (worker_processes 2, access_log off)" \
    >"$results/nginx-command.txt"
}
start_nginx

# ---- Trino
trino_pid=""
trino_port=""
trino_home=$cache/trino-server-476
java_home=/usr/lib/jvm/temurin-25-jdk-amd64
fetch_trino() {
  local tarball=$cache/trino-server-476.tar.gz
  local url=https://repo1.maven.org/maven2/io/trino/trino-server/476/trino-server-476.tar.gz
  if [ ! -f "$tarball" ]; then
    echo "downloading $url"
    curl -fsSL -o "$tarball.part" "$url" || { note_failure "Trino: download of $url failed"; return 1; }
    mv "$tarball.part" "$tarball"
  fi
  local want have
  want=$(curl -fsSL "$url.sha1" 2>/dev/null | cut -c1-40)
  have=$(sha1sum "$tarball" | cut -c1-40)
  if [ -n "$want" ] && [ "$want" != "$have" ]; then
    rm -f "$tarball"
    note_failure "Trino: $tarball has sha1 $have, Maven Central says $want (removed; run again)"
    return 1
  fi
  if [ ! -x "$trino_home/bin/launcher" ] || [ -n "$(ls "$trino_home/plugin" | grep -vx 'tpch\|memory')" ]; then
    rm -rf "$trino_home"
    # Only what a tpch + memory coordinator needs: the other ~60 plugins stay in the tarball.
    tar -xzf "$tarball" -C "$cache" trino-server-476/bin trino-server-476/lib \
      trino-server-476/plugin/tpch trino-server-476/plugin/memory ||
      { note_failure "Trino: unpacking $tarball failed"; return 1; }
  fi
}
start_trino() {
  [ -x "$java_home/bin/java" ] || { note_failure "Trino: no JDK at $java_home"; return 1; }
  fetch_trino || return 1
  local etc=$work/trino/etc
  trino_port=$(free_port)
  mkdir -p "$etc/catalog" "$work/trino/data"
  cat >"$etc/node.properties" <<EOF
node.environment=bench
node.id=qr-bench-trino
node.data-dir=$work/trino/data
node.bind-ip=127.0.0.1
node.internal-address=127.0.0.1
EOF
  cat >"$etc/jvm.config" <<'EOF'
-server
-Xmx2G
-XX:InitialRAMPercentage=10
-XX:+UseG1GC
-XX:G1HeapRegionSize=32M
-XX:+ExplicitGCInvokesConcurrent
-XX:+ExitOnOutOfMemoryError
-XX:-OmitStackTraceInFastThrow
-XX:ReservedCodeCacheSize=256M
-XX:PerMethodRecompilationCutoff=10000
-XX:PerBytecodeRecompilationCutoff=10000
-Djdk.attach.allowAttachSelf=true
-Djdk.nio.maxCachedBufferSize=2000000
-Dfile.encoding=UTF-8
-XX:+EnableDynamicAgentLoading
EOF
  cat >"$etc/config.properties" <<EOF
coordinator=true
node-scheduler.include-coordinator=true
http-server.http.port=$trino_port
discovery.uri=http://127.0.0.1:$trino_port
query.max-memory=1GB
EOF
  printf 'connector.name=tpch\ntpch.column-naming=STANDARD\n' >"$etc/catalog/tpch.properties"
  printf 'connector.name=memory\n' >"$etc/catalog/memory.properties"
  cp "$etc"/*.properties "$etc/jvm.config" "$results/" 2>/dev/null
  JAVA_HOME=$java_home PATH=$java_home/bin:$PATH "$trino_home/bin/launcher" run \
    --etc-dir="$etc" --data-dir="$work/trino/data" >"$work/trino/launcher.log" 2>&1 &
  trino_pid=$!
  started_pids+=("$trino_pid")
  echo "starting Trino 476 on port $trino_port (takes a minute)"
  for _ in $(seq 300); do
    kill -0 "$trino_pid" 2>/dev/null || break
    curl -s "http://127.0.0.1:$trino_port/v1/info" | grep -q '"starting":false' && break
    sleep 1
  done
  if ! curl -s "http://127.0.0.1:$trino_port/v1/info" | grep -q '"starting":false'; then
    note_failure "Trino did not start: $(grep -m3 -iE 'error|exception' "$work/trino/launcher.log" | cut -c1-300 | tr '\n' ' ')"
    stop_pid "$trino_pid"
    trino_pid=""
    return 1
  fi
  # The launcher execs the JVM, so its pid is the server's.
  curl -s "http://127.0.0.1:$trino_port/v1/info" >"$results/trino-info.json"
  "$java_home/bin/java" -version 2>&1 | head -1 >"$results/trino-java.txt"
}
# Waits (at most 60 s) until Trino's CPU use drops under 20% of a core: canceled queries keep
# it busy for a while, which would bleed into the next run.
wait_trino_idle() {
  local ticks=$(getconf CLK_TCK) before after
  for _ in $(seq 30); do
    before=$(awk '{print $14+$15}' "/proc/$trino_pid/stat")
    sleep 2
    after=$(awk '{print $14+$15}' "/proc/$trino_pid/stat")
    [ $((after - before)) -lt $((ticks * 2 / 5)) ] && return 0
  done
}
trino_args=(--catalog=tpch --schema=tiny)
if [ "$with_trino" -eq 1 ] && start_trino; then
  # JIT warm-up, not recorded.
  echo "warming Trino up"
  "$loadgen" --port="$trino_port" "${select1_args[@]}" --duration_s=20 --warmup_s=0 >/dev/null 2>&1
  "$loadgen" --port="$trino_port" --mode=queries --clients=8 --sql="$q1_trino" "${trino_args[@]}" \
    --expect_rows=4 --duration_s=20 --warmup_s=0 >/dev/null 2>&1
fi

# ---- The repeats
for r in $(seq "$repeats"); do
  echo "=== repeat $r of $repeats (load $(cut -d' ' -f1-3 /proc/loadavg))"
  if [ -n "$nginx_pid" ]; then
    run_loadgen "r$r-nginx-get" "$nginx_port" "$nginx_workers" --mode=get --clients=64 \
      --get_path=/status.json --label=nginx "${common[@]}"
  fi
  for variant in sharded global; do
    flags=()
    [ "$variant" = global ] && flags=(--registry_num_shards=1)
    for mode in poll select1 select1x64 q1; do
      start_daemon "r$r-$variant-$mode" "${flags[@]}" || { status=1; continue; }
      case $mode in
        poll) args=("${poll_args[@]}" --long_sql="$long_sqlite") ;;
        select1) args=("${select1_args[@]}") ;;
        select1x64) args=("${select1_args[@]}" --clients=64) ;;
        q1) args=(--mode=queries --clients=8 --sql="$q1_sqlite" --expect_rows=4) ;;
      esac
      run_loadgen "r$r-$variant-$mode" "$daemon_port" "$daemon_pid" "${args[@]}" \
        --label="coordinatord $variant" "${common[@]}"
      stop_pid "$daemon_pid"
    done
  done
  if [ -n "$trino_pid" ]; then
    run_loadgen "r$r-trino-select1" "$trino_port" "$trino_pid" "${select1_args[@]}" \
      --label=trino "${common[@]}"
    run_loadgen "r$r-trino-q1" "$trino_port" "$trino_pid" --mode=queries --clients=8 \
      --sql="$q1_trino" "${trino_args[@]}" --expect_rows=4 --label=trino "${common[@]}"
    run_loadgen "r$r-trino-poll" "$trino_port" "$trino_pid" "${poll_args[@]}" \
      --long_sql="$long_trino" --label=trino "${common[@]}"
    wait_trino_idle
  fi
done
[ -n "$trino_pid" ] && stop_pid "$trino_pid"
[ -n "$nginx_pid" ] && stop_pid "$nginx_pid"

# ---- The long mixed run: RSS over time. Long queries that nobody reads park on their
# executor thread, so the daemon gets enough executor threads and running slots for them.
if [ "$mixed_duration" -gt 0 ]; then
  if start_daemon mixed --num_query_threads=32 --max_running_queries=64; then
    run_loadgen mixed "$daemon_port" "$daemon_pid" --mode=mixed --clients=8 --poll_clients=64 \
      --long_queries=16 --cancel_clients=2 --long_sql="$long_sqlite" --label="coordinatord sharded" \
      --duration_s="$mixed_duration" --warmup_s=30 --rss_sample_s=5
    stop_pid "$daemon_pid"
  else
    status=1
  fi
fi

echo "\"load_after\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"" >"$results/load-after.txt"
"$python" scripts/render-daemon-bench.py --results "$results" --doc "$doc" || status=1
exit $status
