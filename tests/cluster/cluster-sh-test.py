#!/usr/bin/env python3
"""scripts/cluster.sh, the local cluster of docs/operations.md, started as a user would (with
--binary, so nothing is built), plain and with --tls:

  - it comes up (etcd, two coordinators, nginx in front) and says so;
  - through nginx, a query is followed to FINISHED along its nextUri (which names nginx),
    each follow-up landing on either member (round robin), the members forwarding to the
    owner: forwarded{result="ok"} grows and nothing fails;
  - both members see two members; with --tls the members serve HTTPS (verified against the
    CA the script generated), reach each other and etcd over TLS, and plain HTTP is refused;
  - `cluster.sh stop` stops everything and removes its pid file.
Waits on conditions with deadlines, never fixed sleeps.

    cluster-sh-test.py PATH-TO-COORDINATORD [PATH-TO-ETCD]
Exits 77 (skipped) only when there is no etcd or nginx binary.
"""

import http.client
import json
import os
import random
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import urllib.parse

sys.dont_write_bytecode = True  # the shared helpers are loaded from the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_testlib import DEADLINE_S, etcd_binary_or_skip, fail, wait_for  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "cluster.sh")
MEMBERS = 2


def port_free(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def base_port():
    """A base below the kernel's ephemeral range (other tests' free ports come from there)
    with the ports the script takes free: base..base+MEMBERS, base+98, base+99."""
    for _ in range(200):
        base = random.randrange(12000, 32000, 100)
        if all(port_free(p) for p in [*range(base, base + MEMBERS + 1), base + 98, base + 99]):
            return base
    fail("no free range of ports for the cluster")


def request(scheme, port, method, target, ca=None, body=None):
    """One request to 127.0.0.1:'port'; returns (status, body text)."""
    conn = (http.client.HTTPSConnection("127.0.0.1", port, timeout=30,
                                        context=ssl.create_default_context(cafile=ca))
            if scheme == "https" else http.client.HTTPConnection("127.0.0.1", port, timeout=30))
    try:
        conn.request(method, target, body=body, headers={"X-Trino-User": "cluster-sh-test"})
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def metric(scheme, port, name, ca):
    _, text = request(scheme, port, "GET", "/metrics", ca)
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def run(daemon, work, tls):
    scheme = "https" if tls else "http"
    base = base_port()
    cluster_dir = os.path.join(work, f"cluster-{scheme}")
    ca = os.path.join(cluster_dir, "tls", "ca.crt") if tls else None
    out = open(os.path.join(work, f"cluster-sh-{scheme}.out"), "w+")
    argv = ["bash", SCRIPT, "-n", str(MEMBERS), "-p", str(base), "-d", cluster_dir,
            "--data", os.path.join(work, "data"), "--binary", daemon,
            *(["--tls"] if tls else []), "--", "--sample_scale_factor=0.001",
            "--shutdown_grace_period_s=0"]
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        def up():
            out.seek(0)
            text = out.read()
            if proc.poll() is not None:
                fail(f"cluster.sh exited with {proc.returncode}: {text[-3000:]}")
            return "is up" in text
        wait_for(f"cluster.sh {'--tls ' if tls else ''}to come up", up, deadline_s=180)

        # A query through nginx, followed along nextUri to the end.
        status, body = request(scheme, base, "POST", "/v1/statement", ca,
                               body=b"SELECT count(*) FROM lineitem")
        answer = json.loads(body)
        if status != 200 or "nextUri" not in answer:
            fail(f"POST through nginx: {status} {body[:300]}")
        rows = answer.get("data", [])
        while "nextUri" in answer:
            uri = urllib.parse.urlsplit(answer["nextUri"])
            if (uri.scheme, uri.port) != (scheme, base):
                fail(f"nextUri {answer['nextUri']} does not name nginx at {scheme}://...:{base}")
            status, body = request(scheme, base, "GET", uri.path, ca)
            if status != 200:
                fail(f"GET {uri.path} through nginx: {status} {body[:300]}")
            answer = json.loads(body)
            rows += answer.get("data", [])
        if answer["stats"]["state"] != "FINISHED" or len(rows) != 1 or not rows[0][0] > 0:
            fail(f"the query through nginx: {answer['stats']['state']} {rows} "
                 f"{answer.get('error')}")
        forwarded = errors = 0
        for i in range(1, MEMBERS + 1):
            port = base + i
            if metric(scheme, port, "qr_cluster_members", ca) != MEMBERS:
                fail(f"member on {port} does not see {MEMBERS} members")
            forwarded += metric(scheme, port,
                                'qr_cluster_forwarded_requests_total{result="ok"}', ca)
            errors += metric(scheme, port,
                             'qr_cluster_forwarded_requests_total{result="error"}', ca)
        # nginx's round robin over two sends the first follow-up to the member that did not
        # take the POST.
        if errors or forwarded < 1:
            fail(f"forwarded: {forwarded} ok, {errors} failed")
        print(f"ok: {scheme}: a query through nginx finished; {forwarded:.0f} follow-ups were "
              "forwarded to its owner")
        if tls:
            try:
                request("http", base + 1, "GET", "/v1/info")
                fail("a member of the --tls cluster answered plain HTTP")
            except (http.client.HTTPException, OSError):
                pass
            print("ok: --tls: members serve HTTPS only, verified against the generated CA, "
                  "and reach each other and etcd over TLS")
    finally:
        stop = subprocess.run(["bash", SCRIPT, "stop", "-d", cluster_dir], capture_output=True,
                              text=True, timeout=DEADLINE_S)
        if proc.poll() is None:
            try:
                proc.wait(timeout=DEADLINE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                fail("cluster.sh did not stop")
    if stop.returncode != 0 or os.path.exists(os.path.join(cluster_dir, "cluster.pid")):
        fail(f"cluster.sh stop: {stop.returncode} {stop.stdout} {stop.stderr}")
    for i in range(1, MEMBERS + 1):  # the sanitizer builds' reports, as the other tests check
        err = open(os.path.join(cluster_dir, f"coordinatord-{i}.log")).read()
        if "Sanitizer" in err:
            report = err.find("Sanitizer")
            fail(f"coordinatord {i}: {err[max(0, report - 100):report + 6000]}")
    print(f"ok: {scheme}: cluster.sh stop stopped everything")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    daemon = os.path.abspath(sys.argv[1])
    etcd_binary = etcd_binary_or_skip(sys.argv)
    if etcd_binary is None:
        return 77
    if shutil.which("nginx") is None and not os.access("/usr/sbin/nginx", os.X_OK):
        print("SKIP: no nginx (scripts/install-deps.sh installs it)")
        return 77
    if shutil.which("openssl") is None:
        fail("no openssl command (Debian's openssl package)")
    work = tempfile.mkdtemp(prefix="qr-cluster-sh-test.")
    env_path = os.path.dirname(etcd_binary)
    os.environ["PATH"] = env_path + os.pathsep + os.environ.get("PATH", "")
    try:
        run(daemon, work, tls=False)
        run(daemon, work, tls=True)
        print("PASS")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
