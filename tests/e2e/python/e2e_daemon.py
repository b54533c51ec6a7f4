"""A coordinatord of its own for one Python end-to-end test file (tests/e2e/python).

start() runs the daemon named by QR_COORDINATORD on a free port with a temporary data
directory and waits, with a deadline, until it logs where it listens; stop() ends it and
removes the directory.
"""

import os
import queue
import re
import shutil
import subprocess
import tempfile
import threading

# A statement that runs until it is canceled or times out.
ENDLESS = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
           "SELECT count(*) FROM c")


def start(prefix):
    """Starts the daemon; returns {proc, host, port, data_dir}."""
    binary = os.environ["QR_COORDINATORD"]
    data_dir = tempfile.mkdtemp(prefix=prefix)
    env = dict(os.environ, TZ=os.environ.get("TZ", ":/etc/localtime"))
    # In a session of its own, as systemd starts a service: with the kernel's autogroups, the
    # nice value of its demoted long queries then counts against its own threads only, not
    # against every process of the test run (at nice 19 a query next to a busy neighbour
    # test gets ~1.5% of a core).
    proc = subprocess.Popen(
        [binary, "--http_port=0", "--data_dir=" + data_dir, "--shutdown_grace_period_s=0",
         "--minloglevel=1"],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=env,
        start_new_session=True)
    lines = queue.Queue()

    def read():
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    while True:
        line = lines.get(timeout=120)
        if line is None:
            raise RuntimeError("coordinatord exited before listening (code %s)" % proc.wait())
        m = re.search(r"listening on http://([0-9.]+):(\d+)", line)
        if m:
            break
    return dict(proc=proc, host=m.group(1), port=int(m.group(2)), data_dir=data_dir)


def stop(daemon):
    """Stops what start() started (a partial or empty 'daemon' too)."""
    proc = daemon.get("proc")
    if proc is not None:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    shutil.rmtree(daemon.get("data_dir", ""), ignore_errors=True)
