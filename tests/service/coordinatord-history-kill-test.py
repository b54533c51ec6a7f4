#!/usr/bin/env python3
"""The query history survives SIGKILL (issue 18, item 1).

Clients run queries against a real coordinatord with --query_history_dir; once enough have
finished, the test takes the set of queries the clients saw finish, reads from /metrics how
many queries had ended by then, waits until the history writer has written at least that
many records (the writer takes records in the order queries end, so those include every
query of the set), and SIGKILLs the daemon while the clients keep running. It then starts the
daemon again over the same directory: every query of the set must be listed again by
/queries?json, and the start-up must have found no corrupt record (a torn tail is allowed:
it is what a write cut short leaves). Runs once per sync mode (batch, interval).

The test waits on the daemon's counters, never on time: on a loaded machine the writer may
run late, which is a performance question (docs/benchmarks.md), not a lost record.

    coordinatord-history-kill-test.py PATH-TO-COORDINATORD
"""

import json
import os
import queue
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
SYNC_INTERVAL_MS = 200
USER = "loader"
DEADLINE_S = 120


def start(daemon, work, mode, tag):
    """Starts coordinatord; returns (process, port) once it listens."""
    err = open(os.path.join(work, f"stderr-{tag}"), "w")
    # In a session of its own, as systemd starts a service: with the kernel's autogroups, the
    # nice value of its demoted long queries then counts against its own threads only, not
    # against every process of the test run (at nice 19 a query next to a busy neighbour
    # test gets ~1.5% of a core).
    proc = subprocess.Popen(
        [daemon, "--http_port=0", f"--data_dir={work}/data", "--sample_scale_factor=0.001",
         f"--query_history_dir={work}/history-{mode}", f"--query_history_sync={mode}",
         f"--query_history_sync_interval_ms={SYNC_INTERVAL_MS}", "--query_log_size=1000000",
         f"--admin_users={USER}", "--max_in_flight_queries_per_user=1000"],
        stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True,
        start_new_session=True)
    lines = queue.Queue()

    def read():  # drains stdout until the daemon exits, so it never blocks on a full pipe
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    while True:
        try:
            line = lines.get(timeout=DEADLINE_S)
        except queue.Empty:
            proc.kill()
            sys.exit("FAIL: coordinatord did not start")
        if line is None:
            sys.exit(f"FAIL: coordinatord exited: {open(err.name).read()}")
        m = re.search(r"listening on http://[^:]*:(\d+) ", line)
        if m:
            return proc, int(m.group(1))


def metrics(port):
    """The unlabelled samples of /metrics, by name."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read()
    return {k.decode(): int(float(v)) for k, v in
            re.findall(rb"^([a-z_]+) ([0-9.e+]+)$", text, re.M)}


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
    with cond:
        if not cond.wait_for(lambda: len(done) >= QUERIES_BEFORE_KILL, timeout=DEADLINE_S):
            proc.kill()
            stop.set()
            sys.exit(f"FAIL ({mode}): only {len(done)} queries finished")
        required = {qid for qid, _ in done}
    # Every query of 'required' ended before this read, so it is counted in 'ended'.
    m = metrics(port)
    ended = m["qr_queries_finished_total"] + m["qr_queries_failed_total"] + \
        m["qr_queries_canceled_total"]
    deadline = time.monotonic() + DEADLINE_S
    while m["qr_history_records_total"] + m["qr_history_dropped_records_total"] < ended:
        if time.monotonic() > deadline:
            proc.kill()
            stop.set()
            sys.exit(f"FAIL ({mode}): the writer wrote {m['qr_history_records_total']} of "
                     f"{ended} records in {DEADLINE_S} s")
        m = metrics(port)  # each scrape is a round trip to the daemon: a bounded poll
    if m["qr_history_dropped_records_total"] != 0:
        proc.kill()
        stop.set()
        sys.exit(f"FAIL ({mode}): the writer dropped records: {m}")
    with cond:
        os.kill(proc.pid, signal.SIGKILL)
        finished = len(done)
    proc.wait()
    stop.set()
    for c in clients:
        c.join()

    proc, port = start(daemon, work, mode, mode + "-2")
    try:
        listed = list_completed(port)
        restored = metrics(port)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait()
    missing = required - listed
    if missing:
        sys.exit(f"FAIL ({mode}): {len(missing)} of {len(required)} queries finished before "
                 f"the kill are not in the history, e.g. {sorted(missing)[:3]}")
    if restored.get("qr_history_restored_corrupt_segments") != 0:
        sys.exit(f"FAIL ({mode}): corrupt records after SIGKILL: {restored}")
    print(f"ok ({mode}): all {len(required)} queries written before the kill were restored "
          f"({finished} finished by the kill, {len(listed)} listed; torn tails: "
          f"{restored.get('qr_history_restored_torn_tails')})")


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
