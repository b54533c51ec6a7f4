# Sourced by the shell tests that run a real coordinatord: a work directory removed at exit,
# `fail`, and a daemon started on a port of its choosing and waited for.
#
#   source "$source_dir/tests/testutil/daemon-test-lib.sh"
#   qr_test_init NAME                       # $work: a fresh directory, removed at exit
#   qr_start_daemon 120 "$daemon" --http_port=0 --data_dir="$work/data" ...
#   curl "http://127.0.0.1:$port/..."       # $pid and $port are set
#   qr_stop_daemon                          # SIGTERM and wait; $qr_rc is its exit status
#
# At exit a daemon still running is killed with $qr_cleanup_signal (default KILL).

# qr_test_init NAME: $work = /tmp/qr-NAME.XXXXXX; the exit trap stops the daemon and removes it.
qr_test_init() {
  work=$(mktemp -d "/tmp/qr-$1.XXXXXX") || { echo "FAIL: mktemp"; exit 1; }
  pid=""
  port=""
  trap qr_cleanup EXIT
}

qr_cleanup() {
  if [ -n "${pid:-}" ]; then
    kill -"${qr_cleanup_signal:-KILL}" "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
  rm -rf "$work"
}

fail() {
  echo "FAIL: $*"
  exit 1
}

# qr_start_daemon TIMEOUT_S COMMAND...: runs COMMAND (a coordinatord given --http_port=0) with
# its stdout and stderr in $work; returns once it prints its "listening" line, with $pid and
# $port set. Fails (printing its stderr) if it exits first, or after TIMEOUT_S seconds.
qr_start_daemon() {
  local timeout_s=$1
  shift
  # Emptied here, not only by the background job's redirection: that runs asynchronously, and
  # a restart would otherwise read the port of the daemon before from the old file.
  : > "$work/stdout"
  "$@" > "$work/stdout" 2> "$work/stderr" < /dev/null &
  pid=$!
  port=""
  local i
  for ((i = 0; i < timeout_s * 10; i++)); do
    port=$(sed -n 's/^coordinatord listening on http:\/\/[^:]*:\([0-9]*\) .*/\1/p' "$work/stdout")
    [ -n "$port" ] && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$work/stderr"; fail "coordinatord exited"; }
    sleep 0.1
  done
  fail "coordinatord did not start within $timeout_s s"
}

# qr_stop_daemon: SIGTERM, then waits for it; $qr_rc is its exit status.
qr_stop_daemon() {
  kill -TERM "$pid"
  wait "$pid"
  qr_rc=$?
  pid=""
}
