#!/usr/bin/env python3
"""The query history survives SIGKILL (issue 18, item 1).

Clients run queries against a real coordinatord with --query_history_dir; once enough have
finished, the daemon is SIGKILLed under load and started again over the same directory. Every
query a client saw finish more than one sync interval (plus a grace for a loaded machine's
scheduling, SCHEDULING_GRACE_S) before the kill must be listed again by
/queries?json, and the start-up must have found no corrupt record (a torn tail is allowed: it
is what a write cut short leaves). Runs once per sync mode (batch, interval).

    coordinatord-history-kill-test.py PATH-TO-COORDINATORD
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

CLIENTS = 8
QUERIES_BEFORE_KILL = 1000
# Queries that must already be due (finished a sync interval and the grace before the kill)
# when it comes: the test proves something on a fast machine as on a slow one.
DUE_BEFORE_KILL = 200
SYNC_INTERVAL_MS = 200
# The writer is a thread like any other: on a loaded 2-core CI machine, under the sanitizers,
# it may run this much later than its interval says. A query must be in the history once it
# finished one interval plus this before the kill.
SCHEDULING_GRACE_S = 1.0
USER = "loader"
DEADLINE_S = 120


def start(daemon, work, mode, tag):
    out = open(os.path.join(work, f"stdout-{tag}"), "w+")
    err = open(os.path.join(work, f"stderr-{tag}"), "w")
    proc = subprocess.Popen(
        [daemon, "--http_port=0", f"--data_dir={work}/data", "--sample_scale_factor=0.001",
         f"--query_history_dir={work}/history-{mode}", f"--query_history_sync={mode}",
         f"--query_history_sync_interval_ms={SYNC_INTERVAL_MS}", "--query_log_size=1000000",
         f"--admin_users={USER}", "--max_in_flight_queries_per_user=1000"],
        stdout=out, stderr=err, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        out.seek(0)
        m = re.search(r"listening on http://[^:]*:(\d+) ", out.read())
        if m:
            return proc, int(m.group(1))
        if proc.poll() is not None:
            sys.exit(f"FAIL: coordinatord exited: {open(err.name).read()}")
        time.sleep(0.05)  # polling the daemon's stdout for its port, bounded
    proc.kill()
    sys.exit("FAIL: coordinatord did not start")


def request(method, url, body=None):
    req = urllib.request.Request(url, data=body, method=method, headers={"X-Trino-User": USER})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def client_loop(port, stop, done, cond):
    """Runs queries until 'stop'; appends (query id, when the client saw it finish)."""
    base = f"http://127.0.0.1:{port}"
    n = 0
    while not stop.is_set():
        n += 1
        try:
            answer = request("POST", base + "/v1/statement", f"SELECT {n}".encode())
            while "nextUri" in answer:
                answer = request("GET", answer["nextUri"])
        except Exception:  # the daemon was killed
            return
        if answer["stats"]["state"] == "FINISHED":
            with cond:
                done.append((answer["id"], time.monotonic()))
                cond.notify_all()


def list_completed(port):
    """Every completed query id of /queries?json, page by page (its cursor)."""
    listed, cursor = set(), ""
    while True:
        page = request("GET", f"http://127.0.0.1:{port}/queries?json&limit=1000&cursor={cursor}")
        listed.update(q["query_id"] for q in page["completed"])
        if page["next_cursor"] is None:
            return listed
        cursor = urllib.parse.quote(page["next_cursor"])


def run(daemon, work, mode):
    proc, port = start(daemon, work, mode, mode + "-1")
    stop, cond, done = threading.Event(), threading.Condition(), []
    clients = [threading.Thread(target=client_loop, args=(port, stop, done, cond))
               for _ in range(CLIENTS)]
    for c in clients:
        c.start()
    margin = SYNC_INTERVAL_MS / 1000 + SCHEDULING_GRACE_S

    def ready():
        # Re-evaluated at every finished query (each notifies).
        due_by = time.monotonic() - margin
        return (len(done) >= QUERIES_BEFORE_KILL and
                sum(1 for _, t in done if t < due_by) >= DUE_BEFORE_KILL)

    with cond:
        if not cond.wait_for(ready, timeout=DEADLINE_S):
            proc.kill()
            stop.set()
            sys.exit(f"FAIL ({mode}): only {len(done)} queries finished")
        kill_time = time.monotonic()
        os.kill(proc.pid, signal.SIGKILL)
        finished = list(done)
    proc.wait()
    stop.set()
    for c in clients:
        c.join()
    required = {qid for qid, t in finished if t < kill_time - margin}

    proc, port = start(daemon, work, mode, mode + "-2")
    try:
        listed = list_completed(port)
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait()
    missing = required - listed
    if missing:
        sys.exit(f"FAIL ({mode}): {len(missing)} of {len(required)} queries finished before "
                 f"the kill are not in the history, e.g. {sorted(missing)[:3]}")
    counters = dict(re.findall(rb"^(qr_history_restored_\w+) (\d+)$", metrics, re.M))
    if counters.get(b"qr_history_restored_corrupt_segments") != b"0":
        sys.exit(f"FAIL ({mode}): corrupt records after SIGKILL: {counters}")
    print(f"ok ({mode}): {len(required)} of {len(finished)} finished queries were due, all "
          f"restored ({len(listed)} listed; torn tails: "
          f"{counters.get(b'qr_history_restored_torn_tails', b'?').decode()})")


def main():
    daemon = sys.argv[1]
    work = tempfile.mkdtemp(prefix="qr-history-kill-test.")
    try:
        for mode in ("batch", "interval"):
            run(daemon, work, mode)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
