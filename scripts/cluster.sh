#!/usr/bin/env bash
# Starts a local cluster on this machine for trying it out (issue 19): one etcd (loopback ports,
# a temporary data directory), N coordinatord on loopback ports joined through it with a
# generated cluster secret, and nginx in front (round robin, no stickiness, keep-alive
# upstreams). Runs in the foreground: Ctrl-C or SIGTERM (or `scripts/cluster.sh stop` from
# another terminal) stops the coordinators (each revokes its lease), nginx and etcd.
#
#   scripts/cluster.sh [-n N] [-p PORT] [-d DIR] [--data DIR] [--tls] [--binary PATH]
#                      [-- coordinatord flags...]
#   scripts/cluster.sh stop [-d DIR]
#
#   -n N           coordinators (default 3, 1 to 64)
#   -p PORT        nginx listens on 127.0.0.1:PORT (default 8080); coordinator i on PORT+i,
#                  etcd's client and peer ports are PORT+98 and PORT+99
#   -d DIR         logs, nginx's config, the cluster secret, spill dirs (default build/cluster)
#   --data DIR     the sample database's directory (default ./data, as scripts/run.sh)
#   --tls          TLS everywhere, with a CA and certificates generated into DIR/tls (openssl):
#                  nginx serves HTTPS and verifies the members, the members serve HTTPS and
#                  verify each other (--cluster_ca_file), etcd serves HTTPS only and requires
#                  the members' client certificates (--etcd_ca_file, --etcd_client_cert_file)
#   --binary PATH  use this coordinatord (skips installing and building)
# The sample database is generated once into the data directory and shared.
set -euo pipefail
cd "$(dirname "$0")/.."

n=3
port=8080
dir=build/cluster
binary=""
data=data
tls=0
command=start
if [ "${1:-}" = stop ]; then command=stop; shift; fi
while [ $# -gt 0 ]; do
  case "$1" in
    -n) n="${2:?-n needs a number}"; shift 2 ;;
    -p) port="${2:?-p needs a port}"; shift 2 ;;
    -d) dir="${2:?-d needs a directory}"; shift 2 ;;
    --data) data="${2:?--data needs a directory}"; shift 2 ;;
    --tls) tls=1; shift ;;
    --binary) binary="${2:?--binary needs a path}"; shift 2 ;;
    --) shift; break ;;
    *) echo "cluster.sh: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
extra_flags=("$@")

if [ "$command" = stop ]; then
  if [ ! -f "$dir/cluster.pid" ]; then
    echo "cluster.sh: no cluster running from $dir ($dir/cluster.pid is missing)" >&2
    exit 1
  fi
  pid="$(cat "$dir/cluster.pid")"
  kill -TERM "$pid"
  # The running script removes its pid file once everything stopped (it may then linger as a
  # zombie until its parent reaps it, so the pid alone does not say it stopped).
  while [ -f "$dir/cluster.pid" ] && kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
  echo "cluster.sh: stopped"
  exit 0
fi

if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 64 ]; then
  echo "cluster.sh: -n must be 1 to 64" >&2; exit 2
fi
if ! [[ "$port" =~ ^[0-9]+$ ]] || [ "$port" -lt 1 ] || [ "$((port + 99))" -gt 65535 ]; then
  echo "cluster.sh: -p must leave room for PORT+99 below 65536" >&2; exit 2
fi

if [ -z "$binary" ]; then
  scripts/install-deps.sh --cluster
  cmake --preset release >/dev/null
  cmake --build --preset release --target coordinatord
  binary=build/release/be/src/service/coordinatord
fi
tools=(etcd nginx)
[ "$tls" -eq 1 ] && tools+=(openssl)
for tool in "${tools[@]}"; do
  if ! command -v "$tool" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$tool" ]; then
    echo "cluster.sh: $tool is missing (scripts/install-deps.sh --cluster installs it)" >&2; exit 1
  fi
done
nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"

mkdir -p "$dir" "$data"
dir="$(cd "$dir" && pwd)"
if [ -f "$dir/cluster.pid" ] && kill -0 "$(cat "$dir/cluster.pid")" 2>/dev/null; then
  echo "cluster.sh: a cluster already runs from $dir (pid $(cat "$dir/cluster.pid"))" >&2
  exit 1
fi
etcd_client=$((port + 98))
etcd_peer=$((port + 99))
for p in "$port" $(seq $((port + 1)) $((port + n))) "$etcd_client" "$etcd_peer"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    echo "cluster.sh: port $p is in use (choose another base with -p)" >&2; exit 1
  fi
done

pids=()
nginx_pid=""
etcd_pid=""
etcd_data=""
stopping=0
stop_all() {
  [ "$stopping" -eq 1 ] && return
  stopping=1
  trap '' INT TERM  # a second Ctrl-C must not interrupt the orderly stop
  echo "cluster.sh: stopping"
  # Coordinators first: on SIGTERM each finishes its queries and revokes its lease.
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ -n "$nginx_pid" ]; then kill -QUIT "$nginx_pid" 2>/dev/null || true; wait "$nginx_pid" 2>/dev/null || true; fi
  if [ -n "$etcd_pid" ]; then kill -TERM "$etcd_pid" 2>/dev/null || true; wait "$etcd_pid" 2>/dev/null || true; fi
  [ -n "$etcd_data" ] && rm -rf "$etcd_data"
  rm -f "$dir/cluster.pid"
  echo "cluster.sh: stopped (logs in $dir)"
}
trap 'stop_all; exit 0' INT TERM
trap 'stop_all' EXIT
echo $$ > "$dir/cluster.pid"

# Polls a condition (a shell command) every 0.2 s until it holds or DEADLINE s pass.
wait_for() {
  local what="$1" deadline=$((SECONDS + $2)); shift 2
  until "$@"; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "cluster.sh: timed out waiting for $what (logs in $dir)" >&2; exit 1
    fi
    sleep 0.2
  done
}
scheme=http
curl_tls=()
if [ "$tls" -eq 1 ]; then
  scheme=https
  curl_tls=(--cacert "$dir/tls/ca.crt")
fi
metric() {  # metric PORT NAME: the value of an unlabelled-or-labelled sample in /metrics
  curl -sf "${curl_tls[@]}" -H 'X-Trino-User: cluster.sh' "$scheme://127.0.0.1:$1/metrics" |
    awk -v name="$2" '$1 == name { print $2 }'
}

# --tls: a CA, and a certificate for 127.0.0.1 and localhost (server and client use) per
# process, all in $dir/tls (regenerated on every start; the keys are readable by root only).
make_cert() {  # make_cert NAME
  local t="$dir/tls"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$t/$1.key" \
    -out "$t/$1.csr" -subj "/CN=qr local cluster $1" 2>>"$t/openssl.log"
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' \
    >"$t/$1.ext"
  openssl x509 -req -in "$t/$1.csr" -CA "$t/ca.crt" -CAkey "$t/ca.key" -CAcreateserial \
    -days 30 -extfile "$t/$1.ext" -out "$t/$1.crt" 2>>"$t/openssl.log"
}
if [ "$tls" -eq 1 ]; then
  rm -rf "$dir/tls"
  (umask 077 && mkdir -p "$dir/tls")
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/tls/ca.key" \
    -out "$dir/tls/ca.crt" -days 30 -subj "/CN=qr local cluster CA" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
    2>>"$dir/tls/openssl.log"
  for name in etcd nginx $(seq 1 "$n"); do make_cert "$name"; done
fi

etcd_data="$(mktemp -d "${TMPDIR:-/tmp}/qr-cluster-etcd.XXXXXX")"
# Each process runs in a session of its own (setsid): a Ctrl-C in the terminal reaches this
# script only, which stops the coordinators before etcd.
etcd_tls=()
etcd_curl=()
if [ "$tls" -eq 1 ]; then
  etcd_tls=(--cert-file="$dir/tls/etcd.crt" --key-file="$dir/tls/etcd.key" --client-cert-auth
            --trusted-ca-file="$dir/tls/ca.crt")
  etcd_curl=(--cacert "$dir/tls/ca.crt" --cert "$dir/tls/nginx.crt" --key "$dir/tls/nginx.key")
fi
setsid etcd --name=qr-local --data-dir="$etcd_data" \
  --listen-client-urls="$scheme://127.0.0.1:$etcd_client" \
  --advertise-client-urls="$scheme://127.0.0.1:$etcd_client" \
  --listen-peer-urls="http://127.0.0.1:$etcd_peer" \
  --initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer" \
  --initial-cluster="qr-local=http://127.0.0.1:$etcd_peer" "${etcd_tls[@]}" \
  >"$dir/etcd.log" 2>&1 </dev/null &
etcd_pid=$!
etcd_healthy() {
  curl -sf "${etcd_curl[@]}" "$scheme://127.0.0.1:$etcd_client/health" | grep -q '"health":"true"'
}
wait_for "etcd to answer /health" 60 etcd_healthy

secret="$dir/cluster.secret"
(umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$secret")
chmod 600 "$secret"

for i in $(seq 1 "$n"); do
  mkdir -p "$dir/spill-$i"
  member_tls=()
  if [ "$tls" -eq 1 ]; then
    member_tls=(--tls_cert_file="$dir/tls/$i.crt" --tls_key_file="$dir/tls/$i.key"
                --cluster_ca_file="$dir/tls/ca.crt" --etcd_ca_file="$dir/tls/ca.crt"
                --etcd_client_cert_file="$dir/tls/$i.crt" --etcd_client_key_file="$dir/tls/$i.key")
  fi
  : > "$dir/coordinatord-$i.out"  # a run before left its "listening on" line there
  setsid "$binary" --http_port=$((port + i)) --data_dir="$data" --spill_dir="$dir/spill-$i" \
    --etcd_endpoints="$scheme://127.0.0.1:$etcd_client" --cluster_name=local \
    --advertised_uri="$scheme://127.0.0.1:$((port + i))" --cluster_secret_file="$secret" \
    --http_trusted_proxies=127.0.0.1 "${member_tls[@]}" "${extra_flags[@]}" \
    >"$dir/coordinatord-$i.out" 2>"$dir/coordinatord-$i.log" </dev/null &
  pids+=($!)
  listening() { grep -qs "listening on" "$dir/coordinatord-$1.out" || ! kill -0 "${pids[$1 - 1]}"; }
  # The first one generates the sample database (once) before the others open it.
  wait_for "coordinatord $i to listen" 300 listening "$i"
  if ! kill -0 "${pids[$i - 1]}" 2>/dev/null; then
    echo "cluster.sh: coordinatord $i exited; see $dir/coordinatord-$i.log" >&2
    tail -5 "$dir/coordinatord-$i.log" >&2; exit 1
  fi
done

servers=""
for i in $(seq 1 "$n"); do servers+="    server 127.0.0.1:$((port + i));"$'\n'; done
user_line=""
if [ "$(id -u)" -eq 0 ]; then user_line="user root;"; fi  # workers write the temp dirs below
listen_tls=""
upstream_tls=""
if [ "$tls" -eq 1 ]; then
  listen_tls="ssl;
    ssl_certificate $dir/tls/nginx.crt;
    ssl_certificate_key $dir/tls/nginx.key"
  # The members' certificates are verified as they name localhost (and 127.0.0.1).
  upstream_tls="proxy_ssl_verify on;
      proxy_ssl_trusted_certificate $dir/tls/ca.crt;
      proxy_ssl_name localhost;
      proxy_ssl_server_name on;
      proxy_ssl_session_reuse on;"
fi
cat >"$dir/nginx.conf" <<CONF
# Written by scripts/cluster.sh: round robin over the coordinators, no stickiness.
$user_line
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/nginx-error.log warn;
events { worker_connections 1024; }
http {
  access_log $dir/nginx-access.log;
  client_body_temp_path $dir/nginx-tmp/body;
  proxy_temp_path $dir/nginx-tmp/proxy;
  fastcgi_temp_path $dir/nginx-tmp/fastcgi;
  uwsgi_temp_path $dir/nginx-tmp/uwsgi;
  scgi_temp_path $dir/nginx-tmp/scgi;
  upstream coordinators {
$servers    keepalive 32;
  }
  server {
    listen 127.0.0.1:$port $listen_tls;
    client_max_body_size 16m;
    location / {
      proxy_pass $scheme://coordinators;
      $upstream_tls
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      # The client's Host (nginx's address) crosses to the coordinator, so nextUri names nginx.
      proxy_set_header Host \$http_host;
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
      proxy_read_timeout 120s;
      proxy_buffering off;
    }
  }
}
CONF
mkdir -p "$dir/nginx-tmp"
setsid "$nginx_bin" -p "$dir" -e "$dir/nginx-error.log" -c "$dir/nginx.conf" -g 'daemon off;' \
  </dev/null >>"$dir/nginx-error.log" 2>&1 &
nginx_pid=$!
nginx_up() {
  curl -sf "${curl_tls[@]}" -o /dev/null -H 'X-Trino-User: cluster.sh' \
    "$scheme://127.0.0.1:$port/v1/info"
}
wait_for "nginx to answer" 60 nginx_up

all_members() {
  local i
  for i in $(seq 1 "$n"); do
    [ "$(metric $((port + i)) qr_cluster_members)" = "$n" ] || return 1
  done
}
wait_for "every member to see $n members" 120 all_members

cat <<MSG

Local cluster of $n coordinators is up (cluster 'local', etcd at $scheme://127.0.0.1:$etcd_client).
  through nginx (round robin):  $scheme://127.0.0.1:$port
MSG
for i in $(seq 1 "$n"); do
  echo "  coordinator $i (member $(metric $((port + i)) qr_cluster_member_id)):      $scheme://127.0.0.1:$((port + i))"
done
curl_hint=""
if [ "$tls" -eq 1 ]; then
  curl_hint="--cacert $dir/tls/ca.crt "
  echo "TLS: the CA and every certificate and key are in $dir/tls"
fi
cat <<MSG
Logs, nginx.conf and the cluster secret: $dir
Try:
  curl -s $curl_hint-X POST -H 'X-Trino-User: me' --data 'SELECT * FROM system.runtime.nodes' \\
       $scheme://127.0.0.1:$port/v1/statement
and follow each answer's nextUri (it names nginx); any member answers. Ctrl-C, or
scripts/cluster.sh stop -d $dir from another terminal, stops everything.

MSG
# Waits until a signal arrives or a process of the cluster exits.
while true; do
  for pid in "${pids[@]}" "$nginx_pid" "$etcd_pid"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "cluster.sh: process $pid exited; stopping the cluster (logs in $dir)" >&2
      exit 1
    fi
  done
  wait -n "${pids[@]}" "$nginx_pid" "$etcd_pid" || true
done
