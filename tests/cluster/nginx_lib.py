"""Helpers of tests/cluster/cluster-nginx-test.py: an etcd, coordinators and nginx in front.

The etcd, ports and query-id helpers are cluster_testlib's; failures here raise TestFailure
(the test reports them and keeps its logs). Every wait polls a condition with a deadline;
nothing sleeps for a fixed time.
"""

import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

from cluster_testlib import Etcd, free_port, owner_of  # noqa: F401 (re-exported to the test)

LEASE_TTL_S = 2
DEADLINE_S = 60
USER = "nginx-test"


class TestFailure(Exception):
    pass


def fail(msg):
    raise TestFailure(msg)


def wait_for(what, pred, deadline_s=DEADLINE_S):
    """Polls 'pred' until it returns a true value (returned) or the deadline passes (fail)."""
    deadline = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = pred()
        except (OSError, urllib.error.URLError, ValueError, KeyError, http.client.HTTPException) \
                as e:
            last = e
        else:
            if last:
                return last
        time.sleep(0.05)  # polling the processes' state, bounded by the deadline
    fail(f"timed out after {deadline_s} s waiting for {what} (last: {last!r})")


def find_binary(name):
    return shutil.which(name) or next(
        (p for p in (f"/usr/bin/{name}", f"/usr/sbin/{name}") if os.access(p, os.X_OK)), None)


class Coordinator:
    """A coordinatord on a port chosen here, joined to 'etcd' (a restart can reuse the port)."""

    def __init__(self, daemon, work, tag, etcd, secret_file, port=None):
        self.tag = tag
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        os.makedirs(os.path.join(work, f"spill-{tag}"), exist_ok=True)
        self.out = open(os.path.join(work, f"stdout-{tag}"), "w+")
        self.err = open(os.path.join(work, f"stderr-{tag}"), "w")
        # In a session of its own, as systemd starts a service: with the kernel's autogroups, the
        # nice value of its demoted long queries then counts against its own threads only, not
        # against every process of the test run (at nice 19 a query next to a busy neighbour
        # test gets ~1.5% of a core).
        self.proc = subprocess.Popen(
            [daemon, f"--http_port={self.port}", f"--data_dir={work}/data",
             "--sample_scale_factor=0.001", f"--spill_dir={work}/spill-{tag}",
             f"--etcd_endpoints={etcd.endpoint}", "--cluster_name=qr-nginx",
             f"--advertised_uri={self.base}", f"--cluster_lease_ttl_s={LEASE_TTL_S}",
             f"--cluster_secret_file={secret_file}", "--http_trusted_proxies=127.0.0.1",
             "--etcd_request_timeout_ms=1000", "--shutdown_grace_period_s=0",
             "--cluster_forward_timeout_ms=3000"],
            stdout=self.out, stderr=self.err, stdin=subprocess.DEVNULL,
            start_new_session=True)

        def listening():
            if self.proc.poll() is not None:
                fail(f"coordinatord {tag} exited: {open(self.err.name).read()[-2000:]}")
            self.out.seek(0)
            return "listening on" in self.out.read()
        wait_for(f"coordinatord {tag} to listen", listening)

    def get(self, path):
        req = urllib.request.Request(self.base + path, headers={"X-Trino-User": USER})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.read().decode()

    def metric(self, name):
        m = re.search(r"^" + re.escape(name) + r" (\S+)$", self.get("/metrics"), re.M)
        return float(m.group(1)) if m else None

    def member_id(self):
        return int(self.metric("qr_cluster_member_id"))

    def members(self):
        return int(self.metric("qr_cluster_members"))

    def state(self):
        for s in ("disabled", "connecting", "registered", "unreachable"):
            if self.metric(f'qr_cluster_state{{state="{s}"}}') == 1:
                return s
        return None

    def forwarded_ok(self):
        return self.metric('qr_cluster_forwarded_requests_total{result="ok"}')

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=DEADLINE_S)


class Nginx:
    """nginx on a free loopback port, round robin over 'backends' (ports), no stickiness,
    keep-alive upstream connections, the client's Host passed on (so nextUri names nginx)."""

    def __init__(self, binary, work, backends):
        self.binary, self.work = binary, work
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.base = f"http://{self.host}"
        self.conf = os.path.join(work, "nginx.conf")
        os.makedirs(os.path.join(work, "nginx-tmp"), exist_ok=True)
        self.write_conf(backends)
        self.proc = subprocess.Popen(
            [binary, "-p", work, "-e", os.path.join(work, "nginx-error.log"), "-c", self.conf,
             "-g", "daemon off;"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "nginx.stderr"), "w"),
            stdin=subprocess.DEVNULL)
        wait_for("nginx to answer", lambda: self.proc.poll() is None and
                 urllib.request.urlopen(urllib.request.Request(
                     self.base + "/v1/info", headers={"X-Trino-User": USER}), timeout=5)
                 .status == 200)

    def write_conf(self, backends):
        w = self.work
        servers = "".join(f"    server 127.0.0.1:{p};\n" for p in backends)
        user = "user root;\n" if os.getuid() == 0 else ""
        with open(self.conf, "w") as f:
            f.write(f"""{user}worker_processes 1;
pid {w}/nginx.pid;
error_log {w}/nginx-error.log notice;
events {{ worker_connections 1024; }}
http {{
  log_format upstream '$remote_addr "$request" $status $upstream_addr';
  access_log {w}/nginx-access.log upstream;
  client_body_temp_path {w}/nginx-tmp/body;
  proxy_temp_path {w}/nginx-tmp/proxy;
  fastcgi_temp_path {w}/nginx-tmp/fastcgi;
  uwsgi_temp_path {w}/nginx-tmp/uwsgi;
  scgi_temp_path {w}/nginx-tmp/scgi;
  upstream coordinators {{
{servers}    keepalive 32;
  }}
  server {{
    listen 127.0.0.1:{self.port};
    location / {{
      proxy_pass http://coordinators;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_buffering off;
    }}
  }}
}}
""")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(timeout=DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Client:
    """A Trino protocol client on one keep-alive connection to 'base' (nginx or a member)."""

    def __init__(self, base, user=USER, host=None):
        """'host': the Host header to send (e.g. nginx's address while talking to a member
        directly, as nginx does); by default that of 'base'. nextUri then names it."""
        u = urllib.parse.urlsplit(base)
        self.host, self.port, self.user = u.hostname, u.port, user
        self.host_header = host or f"{self.host}:{self.port}"
        self.conn = None

    def request(self, method, target, body=None):
        """Returns (status, parsed JSON, else the text, else None). Reconnects once when a kept-alive connection
        was closed by the other side."""
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
            try:
                self.conn.request(method, target, body=body,
                                  headers={"X-Trino-User": self.user, "Host": self.host_header})
                resp = self.conn.getresponse()
                data = resp.read()
                if resp.getheader("Connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
                try:
                    return resp.status, json.loads(data) if data else None
                except ValueError:
                    return resp.status, data.decode(errors="replace")
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.conn.close()
                self.conn = None
                if attempt == 1:
                    raise
        raise AssertionError("unreachable")

    def target(self, uri):
        prefix = f"http://{self.host_header}"
        if not uri.startswith(prefix + "/"):
            fail(f"URI {uri} does not name {prefix}")
        return uri[len(prefix):]

    def submit(self, sql, retries=5):
        """POSTs 'sql', retrying on 502/503 as Trino's clients do (a submission in flight to a
        member killed under it); returns (first answer, number of retries)."""
        for attempt in range(retries + 1):
            status, answer = self.request("POST", "/v1/statement", sql.encode())
            if status == 200:
                return answer, attempt
            if status not in (502, 503):
                fail(f"POST {sql!r}: {status} {answer}")
        fail(f"POST {sql!r}: still {status} after {retries} retries")

    def poll(self, answer):
        """Follows nextUri to the end; returns (rows, last answer)."""
        rows = list(answer.get("data", []))
        while "nextUri" in answer:
            status, answer = self.request("GET", self.target(answer["nextUri"]))
            if status != 200:
                fail(f"GET nextUri answered {status}: {answer}")
            rows += answer.get("data", [])
        return rows, answer

    def run(self, sql):
        answer, _ = self.submit(sql)
        rows, last = self.poll(answer)
        if last["stats"]["state"] != "FINISHED":
            fail(f"{sql!r} ended {last['stats']['state']}: {last.get('error')}")
        return last["id"], rows
