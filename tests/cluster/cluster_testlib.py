"""Shared helpers of the cluster tests (tests/cluster/*-test.py): an etcd of their own on
loopback ports, coordinatord members, waits on conditions with deadlines (never fixed sleeps).
"""

import base64
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

LEASE_TTL_S = 2
DEADLINE_S = 60


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


def owner_of(query_id):
    """The member id in a Trino query id: 'lo' is the 16 hex digits after the ':' (our ids
    are 16 hex, ':', 16 hex); the owner is its top 16 bits."""
    return int(query_id.split(":")[1][:4], 16)


def etcd_binary_or_skip(argv):
    """The etcd binary (argv[2], else on the PATH, else Debian's); None when there is none."""
    binary = argv[2] if len(argv) > 2 else shutil.which("etcd") or "/usr/bin/etcd"
    if not os.access(binary, os.X_OK):
        print(f"SKIP: no etcd binary ({binary}); scripts/install-deps.sh installs "
              "Debian's etcd-server")
        return None
    return binary


def start_test(usage, work_prefix):
    """What a cluster test's main() starts from: (the daemon, argv[1]; the etcd binary; a new
    work directory named from 'work_prefix'). None when there is no etcd binary: the test is
    then skipped (exit 77). Exits with 'usage' when argv names no daemon."""
    if len(sys.argv) < 2:
        sys.exit(usage)
    etcd_binary = etcd_binary_or_skip(sys.argv)
    if etcd_binary is None:
        return None
    return sys.argv[1], etcd_binary, tempfile.mkdtemp(prefix=work_prefix)


def write_password_file(path, users):
    """A --auth_password_file where each user's password is '<user>-pw'."""
    with open(path, "w") as f:
        for user in users:
            salt = os.urandom(16)
            digest = hashlib.pbkdf2_hmac("sha256", f"{user}-pw".encode(), salt, 1000)
            f.write(f"{user}:pbkdf2-sha256:1000:{base64.b64encode(salt).decode()}:"
                    f"{base64.b64encode(digest).decode()}\n")


def write_secret_file(path, secret):
    with open(path, "w") as f:
        f.write(secret + "\n")
    os.chmod(path, 0o600)


class Etcd:
    """An etcd on loopback ports. With 'tls' ((cert, key, ca) PEM files) it serves its clients
    HTTPS only and requires a client certificate signed by 'ca' (--client-cert-auth). Alone by
    default; a member of a cluster of several after join(): each with its own 'work'."""

    def __init__(self, binary, work, tls=None, name="qr-test"):
        self.binary, self.work, self.tls, self.name = binary, work, tls, name
        self.client_port, self.peer_port = free_port(), free_port()
        self.initial_cluster = f"{name}=http://127.0.0.1:{self.peer_port}"
        self.proc = None
        self.runs = 0

    @staticmethod
    def join(members):
        """Makes 'members' (not started yet) one cluster: each starts with all of them."""
        everyone = ",".join(f"{m.name}=http://127.0.0.1:{m.peer_port}" for m in members)
        for m in members:
            m.initial_cluster = everyone

    @property
    def endpoint(self):
        return f"{'https://' if self.tls else ''}127.0.0.1:{self.client_port}"

    def start(self, wipe=False, wait=True):
        """Starts it; with 'wait', until /health says true (in a cluster: once a quorum of
        its members runs and has a leader)."""
        data = os.path.join(self.work, "etcd-data")
        if wipe:
            shutil.rmtree(data, ignore_errors=True)
        self.runs += 1
        log = open(os.path.join(self.work, f"etcd-{self.runs}.log"), "w")
        peer = f"http://127.0.0.1:{self.peer_port}"
        client = f"{'https' if self.tls else 'http'}://127.0.0.1:{self.client_port}"
        tls_flags, context = [], None
        if self.tls:
            cert, key, ca = self.tls
            tls_flags = [f"--cert-file={cert}", f"--key-file={key}", f"--trusted-ca-file={ca}",
                         "--client-cert-auth"]
            context = ssl.create_default_context(cafile=ca)
            context.load_cert_chain(cert, key)
        self.proc = subprocess.Popen(
            [self.binary, f"--name={self.name}", f"--data-dir={data}",
             f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
             f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
             f"--initial-cluster={self.initial_cluster}", *tls_flags],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.health_context = context
        if wait:
            self.wait_healthy()

    def wait_healthy(self):
        client = f"{'https' if self.tls else 'http'}://127.0.0.1:{self.client_port}"
        context = self.health_context
        wait_for(f"etcd {self.name} to answer /health",
                 lambda: self.proc.poll() is None and
                 json.loads(urllib.request.urlopen(client + "/health", timeout=5,
                                                   context=context).read())
                 .get("health") == "true")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=DEADLINE_S)


def tcp_timers_to(pid, port):
    """The timer kinds (/proc/net/tcp's 'tr' column) of process 'pid''s established TCP
    connections to local port 'port': 2 is the keep-alive timer, armed only on a socket with
    SO_KEEPALIVE; 0 no timer, 1 a retransmission pending."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if link.startswith("socket:["):
            inodes.add(link[len("socket:["):-1])
    timers = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)  # the column names
            for line in f:
                cols = line.split()
                remote_port = int(cols[2].rsplit(":", 1)[1], 16)
                if cols[3] == "01" and remote_port == port and cols[9] in inodes:
                    timers.append(int(cols[5].split(":")[0], 16))
    return timers


class Coordinator:
    """One coordinatord member of cluster 'cluster' (its etcd endpoints: 'endpoints', else
    the test's etcd). Requests name 'user' in X-Trino-User unless they authenticate. With
    'tls_ca' (a PEM CA file) the member serves HTTPS ('extra' names its certificate) and the
    test's requests verify it against that CA."""

    def __init__(self, daemon, work, tag, etcd, cluster="qr-test", endpoints=None, extra=(),
                 user="cluster-test", tls_ca=None):
        self.tag = tag
        self.user = user
        self.tls = ssl.create_default_context(cafile=tls_ca) if tls_ca else None
        os.makedirs(os.path.join(work, f"spill-{tag}"), exist_ok=True)
        self.out = open(os.path.join(work, f"stdout-{tag}"), "w+")
        self.err = open(os.path.join(work, f"stderr-{tag}"), "w")
        # In a session of its own, as systemd starts a service: with the kernel's autogroups, the
        # nice value of its demoted long queries then counts against its own threads only, not
        # against every process of the test run (at nice 19 a query next to a busy neighbour
        # test gets ~1.5% of a core).
        self.proc = subprocess.Popen(
            [daemon, "--http_port=0", f"--data_dir={work}/data", "--sample_scale_factor=0.001",
             f"--spill_dir={work}/spill-{tag}", f"--etcd_endpoints={endpoints or etcd.endpoint}",
             f"--cluster_name={cluster}", f"--cluster_lease_ttl_s={LEASE_TTL_S}",
             "--etcd_request_timeout_ms=1000", "--shutdown_grace_period_s=0", *extra],
            stdout=self.out, stderr=self.err, stdin=subprocess.DEVNULL, start_new_session=True)

        def listening():
            if self.proc.poll() is not None:
                fail(f"coordinatord {tag} exited: {open(self.err.name).read()[-2000:]}")
            self.out.seek(0)
            m = re.search(r"listening on https?://[^:]*:(\d+) ", self.out.read())
            return int(m.group(1)) if m else None
        self.port = wait_for(f"coordinatord {tag} to listen", listening)
        scheme = "https" if self.tls else "http"
        self.uri = self.base = f"{scheme}://127.0.0.1:{self.port}"

    def request(self, method, target, body=None, headers=None, host=None, auth=None):
        """One request on a fresh connection; returns (status, headers, body text)."""
        conn = (http.client.HTTPSConnection("127.0.0.1", self.port, timeout=30,
                                            context=self.tls) if self.tls else
                http.client.HTTPConnection("127.0.0.1", self.port, timeout=30))
        try:
            h = {"Host": host or f"127.0.0.1:{self.port}"}
            if auth is None:
                h["X-Trino-User"] = self.user
            else:
                h["Authorization"] = "Basic " + base64.b64encode(
                    f"{auth}:{auth}-pw".encode()).decode()
            h.update(headers or {})
            conn.request(method, target, body=body, headers=h)
            self.last_local_port = conn.sock.getsockname()[1]  # the client's port, for logs
            resp = conn.getresponse()
            return resp.status, dict(resp.getheaders()), resp.read().decode()
        finally:
            conn.close()

    def json(self, method, target, **kw):
        status, _, body = self.request(method, target, **kw)
        if status != 200:
            fail(f"{self.tag}: {method} {target} answered {status}: {body[:500]}")
        return json.loads(body)

    def get(self, path, auth=None):
        status, _, body = self.request("GET", path, auth=auth)
        if status != 200:
            raise OSError(f"{self.tag}: GET {path} answered {status}: {body[:300]}")
        return body

    def query(self, sql, auth=None):
        """Runs 'sql' on this member; returns (query id, rows). Fails unless it finishes."""
        answer = self.json("POST", "/v1/statement", body=sql.encode(), auth=auth)
        rows = []
        while True:
            rows += answer.get("data", [])
            if "nextUri" not in answer:
                break
            answer = self.json("GET", answer["nextUri"][len(self.base):], auth=auth)
        if answer["stats"]["state"] != "FINISHED":
            fail(f"{self.tag}: {sql} ended {answer['stats']['state']}: {answer.get('error')}")
        return answer["id"], rows

    def metric(self, name, auth=None):
        m = re.search(r"^" + re.escape(name) + r" (\S+)$", self.get("/metrics", auth), re.M)
        return float(m.group(1)) if m else None

    def state(self):
        for s in ("disabled", "connecting", "registered", "unreachable"):
            if self.metric(f'qr_cluster_state{{state="{s}"}}') == 1:
                return s
        return None

    def member_id(self, auth=None):
        return int(self.metric("qr_cluster_member_id", auth))

    def live_members(self, auth=None):
        return int(self.metric("qr_cluster_members", auth))

    def forwarded(self, result, auth=None):
        return self.metric(f'qr_cluster_forwarded_requests_total{{result="{result}"}}', auth)

    def nodes(self):
        _, rows = self.query("SELECT node_id, http_uri, node_version, coordinator, state "
                             "FROM system.runtime.nodes ORDER BY node_id")
        return rows

    def member_ids_seen(self):
        """The member ids in this coordinator's view of etcd: the rows listed 'active'.

        A member not (yet) in its own view is listed too, under its cluster state
        ('registered' between its registration and the watch event that brings it in),
        so counting every row would let a wait end before the view is complete."""
        return sorted(int(r[0]) for r in self.nodes() if r[4] == "active")

    def stop(self):
        """SIGTERM; fails unless it exits 0 without a sanitizer report."""
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=DEADLINE_S)
        err = open(self.err.name).read()
        if rc != 0 or "Sanitizer" in err:
            report = err.find("Sanitizer")
            shown = err[max(0, report - 100):report + 6000] if report >= 0 else err[-3000:]
            fail(f"coordinatord {self.tag} stopped with {rc}: {shown}")


def cleanup(coordinators, etcd, work):
    """Stops whatever still runs and removes the work directory."""
    for c in coordinators:
        if c.proc.poll() is None:
            c.proc.send_signal(signal.SIGCONT)  # a stopped one must be able to exit
            c.proc.send_signal(signal.SIGTERM)
    for c in coordinators:
        try:
            c.proc.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            c.proc.kill()
            c.proc.wait()
    if etcd is not None and etcd.proc is not None and etcd.proc.poll() is None:
        etcd.proc.kill()
        etcd.proc.wait()
    shutil.rmtree(work, ignore_errors=True)
