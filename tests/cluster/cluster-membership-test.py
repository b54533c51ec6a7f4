#!/usr/bin/env python3
"""Cluster membership through etcd (issue 19, item 1), against a real etcd.

Starts its own etcd (Debian's etcd-server) on loopback ports with a temporary data directory
and three coordinatord with --etcd_endpoints and a short lease TTL, then checks:
  - each coordinator gets a distinct member id, and its query ids carry it (the owner bits),
    one of them through a list whose first etcd endpoint is dead;
  - each sees all three in system.runtime.nodes and /healthz;
  - a member killed with SIGKILL leaves the others' view once its lease expires;
  - with etcd stopped the coordinators still serve queries and report etcd unreachable
    (/metrics qr_cluster_state, /healthz);
  - etcd restarted over its data: they are registered again and see each other;
  - etcd restarted empty (all keys and leases lost): they register again.
Waits on conditions with deadlines, never fixed sleeps.

    cluster-membership-test.py PATH-TO-COORDINATORD [PATH-TO-ETCD]
Exits 77 (skipped) only when there is no etcd binary.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

LEASE_TTL_S = 2
DEADLINE_S = 60
USER = "cluster-test"


def fail(msg):
    print("FAIL: " + msg, flush=True)
    raise SystemExit(1)


def wait_for(what, pred, deadline_s=DEADLINE_S):
    """Polls 'pred' until it returns a true value (returned) or the deadline passes (fail)."""
    deadline = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = pred()
        except (OSError, urllib.error.URLError, ValueError, KeyError) as e:
            last = e
        else:
            if last:
                return last
        time.sleep(0.05)  # polling the daemons' state, bounded by the deadline
    fail(f"timed out after {deadline_s} s waiting for {what} (last: {last!r})")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Etcd:
    def __init__(self, binary, work):
        self.binary, self.work = binary, work
        self.client_port, self.peer_port = free_port(), free_port()
        self.proc = None
        self.runs = 0

    @property
    def endpoint(self):
        return f"127.0.0.1:{self.client_port}"

    def start(self, wipe=False):
        data = os.path.join(self.work, "etcd-data")
        if wipe:
            shutil.rmtree(data, ignore_errors=True)
        self.runs += 1
        log = open(os.path.join(self.work, f"etcd-{self.runs}.log"), "w")
        peer = f"http://127.0.0.1:{self.peer_port}"
        client = f"http://{self.endpoint}"
        self.proc = subprocess.Popen(
            [self.binary, "--name=qr-test", f"--data-dir={data}",
             f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
             f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
             f"--initial-cluster=qr-test={peer}"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_for("etcd to answer /health",
                 lambda: self.proc.poll() is None and
                 json.loads(urllib.request.urlopen(client + "/health", timeout=5).read())
                 .get("health") == "true")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=DEADLINE_S)


class Coordinator:
    def __init__(self, daemon, work, tag, etcd, endpoints=None):
        self.tag = tag
        os.makedirs(os.path.join(work, f"spill-{tag}"), exist_ok=True)
        self.out = open(os.path.join(work, f"stdout-{tag}"), "w+")
        self.err = open(os.path.join(work, f"stderr-{tag}"), "w")
        self.proc = subprocess.Popen(
            [daemon, "--http_port=0", f"--data_dir={work}/data", "--sample_scale_factor=0.001",
             f"--spill_dir={work}/spill-{tag}", f"--etcd_endpoints={endpoints or etcd.endpoint}",
             "--cluster_name=qr-test", f"--cluster_lease_ttl_s={LEASE_TTL_S}",
             "--etcd_request_timeout_ms=1000", "--shutdown_grace_period_s=0"],
            stdout=self.out, stderr=self.err, stdin=subprocess.DEVNULL)

        def listening():
            if self.proc.poll() is not None:
                fail(f"coordinatord {tag} exited: {open(self.err.name).read()[-2000:]}")
            self.out.seek(0)
            m = re.search(r"listening on http://[^:]*:(\d+) ", self.out.read())
            return int(m.group(1)) if m else None
        self.port = wait_for(f"coordinatord {tag} to listen", listening)
        self.base = f"http://127.0.0.1:{self.port}"

    def get(self, path):
        req = urllib.request.Request(self.base + path, headers={"X-Trino-User": USER})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.read().decode()

    def query(self, sql):
        """Runs 'sql'; returns (query id, rows). Fails the test unless it finishes."""
        req = urllib.request.Request(self.base + "/v1/statement", data=sql.encode(),
                                     method="POST", headers={"X-Trino-User": USER})
        answer = json.loads(urllib.request.urlopen(req, timeout=30).read())
        rows = []
        while True:
            rows += answer.get("data", [])
            if "nextUri" not in answer:
                break
            req = urllib.request.Request(answer["nextUri"], headers={"X-Trino-User": USER})
            answer = json.loads(urllib.request.urlopen(req, timeout=30).read())
        if answer["stats"]["state"] != "FINISHED":
            fail(f"{self.tag}: {sql} ended {answer['stats']['state']}: {answer.get('error')}")
        return answer["id"], rows

    def metric(self, name):
        m = re.search(r"^" + re.escape(name) + r" (\S+)$", self.get("/metrics"), re.M)
        return float(m.group(1)) if m else None

    def state(self):
        for s in ("disabled", "connecting", "registered", "unreachable"):
            if self.metric(f'qr_cluster_state{{state="{s}"}}') == 1:
                return s
        return None

    def nodes(self):
        _, rows = self.query("SELECT node_id, http_uri, node_version, coordinator, state "
                             "FROM system.runtime.nodes ORDER BY node_id")
        return rows

    def member_ids_seen(self):
        return sorted(int(r[0]) for r in self.nodes())


def owner_of(query_id):
    """The member id in a Trino query id: 'lo' is the 16 hex digits after the ':' (our ids
    are 16 hex, ':', 16 hex); the owner is its top 16 bits."""
    return int(query_id.split(":")[1][:4], 16)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    daemon = sys.argv[1]
    etcd_binary = sys.argv[2] if len(sys.argv) > 2 else shutil.which("etcd") or "/usr/bin/etcd"
    if not os.access(etcd_binary, os.X_OK):
        print(f"SKIP: no etcd binary ({etcd_binary}); scripts/install-deps.sh installs "
              "Debian's etcd-server")
        return 77
    work = tempfile.mkdtemp(prefix="qr-cluster-test.")
    etcd = Etcd(etcd_binary, work)
    coordinators = []
    try:
        etcd.start()
        # The first one generates the sample database the others then open.
        coordinators.append(Coordinator(daemon, work, "a", etcd))
        # 'b' names a dead endpoint first: it must fail over to the live one.
        dead = f"127.0.0.1:{free_port()}"
        coordinators.append(Coordinator(daemon, work, "b", etcd, f"{dead},{etcd.endpoint}"))
        coordinators.append(Coordinator(daemon, work, "c", etcd))

        for c in coordinators:
            wait_for(f"{c.tag} to register", lambda: c.state() == "registered")
        ids = {c.tag: int(c.metric("qr_cluster_member_id")) for c in coordinators}
        print(f"member ids: {ids}")
        if 0 in ids.values() or len(set(ids.values())) != 3:
            fail(f"member ids are not distinct and non-zero: {ids}")
        for c in coordinators:
            qid, rows = c.query("SELECT 1")
            if owner_of(qid) != ids[c.tag]:
                fail(f"{c.tag}'s query {qid} names owner {owner_of(qid)}, not {ids[c.tag]}")
        everyone = sorted(ids.values())
        for c in coordinators:
            wait_for(f"{c.tag} to see all three members",
                     lambda: c.member_ids_seen() == everyone)
            rows = c.nodes()
            uris = sorted(r[1] for r in rows)
            want = sorted(f"http://127.0.0.1:{x.port}" for x in coordinators)
            if uris != want or any(r[3] is not True or r[4] != "active" for r in rows):
                fail(f"{c.tag}'s system.runtime.nodes: {rows}, expected uris {want}")
            health = c.get("/healthz")
            if health != f"OK\ncluster: registered, member {ids[c.tag]}, 3 members\n":
                fail(f"{c.tag}'s /healthz: {health!r}")
        print("ok: three members, distinct ids, each sees the others")

        # SIGKILL: no lease revocation; the others see it go when its lease expires.
        killed = coordinators.pop()
        os.kill(killed.proc.pid, signal.SIGKILL)
        killed.proc.wait()
        remaining = sorted(ids[c.tag] for c in coordinators)
        for c in coordinators:
            wait_for(f"{c.tag} to drop the killed member {ids[killed.tag]}",
                     lambda: c.member_ids_seen() == remaining)
        print(f"ok: killed member {ids[killed.tag]} left the others' view")

        # etcd down: queries still served, the state says unreachable.
        etcd.stop()
        for c in coordinators:
            wait_for(f"{c.tag} to report etcd unreachable", lambda: c.state() == "unreachable")
            c.query("SELECT count(*) FROM nation")
            if not c.get("/healthz").startswith("OK\ncluster: unreachable"):
                fail(f"{c.tag}'s /healthz with etcd down: {c.get('/healthz')!r}")
            if not c.metric("qr_cluster_etcd_errors_total"):
                fail(f"{c.tag} counted no etcd error")
        print("ok: etcd down, queries served, state unreachable")

        etcd.start()
        for c in coordinators:
            wait_for(f"{c.tag} to be registered again with both members",
                     lambda: c.state() == "registered" and c.member_ids_seen() == remaining)
        print("ok: etcd restarted over its data, membership recovered")

        # etcd restarted empty: the leases are gone, so each registers again.
        before = {c.tag: c.metric("qr_cluster_registrations_total") for c in coordinators}
        etcd.stop()
        etcd.start(wipe=True)
        for c in coordinators:
            wait_for(f"{c.tag} to register in the empty etcd",
                     lambda: c.metric("qr_cluster_registrations_total") > before[c.tag] and
                     c.state() == "registered" and len(c.member_ids_seen()) == 2)
        after = sorted(int(c.metric("qr_cluster_member_id")) for c in coordinators)
        if len(set(after)) != 2 or 0 in after:
            fail(f"member ids after re-registration: {after}")
        print(f"ok: etcd restarted empty, re-registered as {after}")

        # A clean stop (revoking the lease): exit status 0, and under the sanitizers no report.
        for c in coordinators:
            c.proc.send_signal(signal.SIGTERM)
            rc = c.proc.wait(timeout=DEADLINE_S)
            err = open(c.err.name).read()
            if rc != 0 or "Sanitizer" in err:
                report = err.find("Sanitizer")
                shown = err[max(0, report - 100):report + 6000] if report >= 0 else err[-3000:]
                fail(f"coordinatord {c.tag} stopped with {rc}: {shown}")
        print("ok: clean stops")
        return 0
    finally:
        for c in coordinators:
            if c.proc.poll() is None:
                c.proc.send_signal(signal.SIGTERM)
        for c in coordinators:
            try:
                c.proc.wait(timeout=DEADLINE_S)
            except subprocess.TimeoutExpired:
                c.proc.kill()
        if etcd.proc is not None and etcd.proc.poll() is None:
            etcd.proc.kill()
            etcd.proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
