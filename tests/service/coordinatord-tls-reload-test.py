#!/usr/bin/env python3
"""SIGHUP re-reads --tls_cert_file and --tls_key_file (a certificate renewed in place).

Runs the real daemon over HTTPS with certificate A, replaces the files with certificate B the
way certbot does (a new file renamed over the old), sends SIGHUP and waits until new
connections get B; a connection opened before keeps working. It then breaks the certificate
file and sends SIGHUP again: the reload must fail with a logged reason, /metrics must count
it, and new connections must still get B. Each wait is for the daemon's log line that says
the reload is done (written once the new certificate is in use and counted), bounded by a
deadline.

    coordinatord-tls-reload-test.py PATH-TO-COORDINATORD
"""

import http.client
import os
import queue
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

DEADLINE_S = 60


def fail(msg):
    sys.exit(f"FAIL: {msg}")


def make_cert(work, name):
    """A self-signed P-256 certificate for 127.0.0.1: (cert path, key path)."""
    cert, key = os.path.join(work, f"{name}.crt"), os.path.join(work, f"{name}.key")
    r = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", key, "-out", cert, "-days", str(30 if name == "a" else 90),
         "-subj", f"/CN=coordinatord test {name}", "-addext", "subjectAltName=IP:127.0.0.1"],
        capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"openssl req: {r.stderr}")
    return cert, key


def der_of(cert):
    with open(cert) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


def replace(src, dst):
    """Writes a copy of 'src' next to 'dst' and renames it over 'dst' (atomic)."""
    tmp = dst + ".new"
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def no_verify():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def served_cert(port):
    """The DER certificate a new connection gets."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
        with no_verify().wrap_socket(raw) as tls:
            return tls.getpeercert(binary_form=True)


def metrics_text(port):
    return urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", timeout=30,
                                  context=no_verify()).read().decode()


def metrics(port):
    text = metrics_text(port)
    return {name: float(value) for name, value in
            re.findall(r"^([a-z_]+(?:\{[^}]*\})?) ([0-9.e+]+)$", text, re.M)}


def get_info(conn):
    """GET /v1/info on a kept-alive connection; fails unless 200."""
    conn.request("GET", "/v1/info")
    r = conn.getresponse()
    r.read()
    if r.status != 200:
        fail(f"GET /v1/info answered {r.status}")


class Daemon:
    """coordinatord over HTTPS; its log (stderr) is read line by line as it comes."""

    def __init__(self, daemon, work, cert, key):
        self.proc = subprocess.Popen(
            [daemon, "--http_port=0", f"--data_dir={work}/data", "--sample_scale_factor=0.001",
             f"--tls_cert_file={cert}", f"--tls_key_file={key}"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            text=True)
        self.log = []  # every line so far, for failure messages
        self.log_lines = queue.Queue()
        stdout_lines = queue.Queue()

        def drain(stream, lines):  # until the daemon exits, so it never blocks on a full pipe
            for line in stream:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=drain, args=(self.proc.stdout, stdout_lines), daemon=True).start()
        threading.Thread(target=drain, args=(self.proc.stderr, self.log_lines),
                         daemon=True).start()
        while True:
            try:
                line = stdout_lines.get(timeout=DEADLINE_S)
            except queue.Empty:
                self.proc.kill()
                fail("coordinatord did not start")
            if line is None:  # it exited: fails with its log once the log ends
                self.wait_for_log("a start", r"(?!)")
            m = re.search(r"listening on https://[^:]*:(\d+) ", line)
            if m:
                self.port = int(m.group(1))
                return

    def wait_for_log(self, what, pattern):
        """Blocks until a log line matches 'pattern' (a regex), at most DEADLINE_S."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                line = self.log_lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                self.log_lines.put(None)  # the end stays the end
                fail(f"no log line for {what} ({pattern}); the log:\n{''.join(self.log)}")
            self.log.append(line)
            if re.search(pattern, line):
                return line


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    daemon = sys.argv[1]
    if shutil.which("openssl") is None:
        fail("no openssl command (Debian's openssl package)")
    work = tempfile.mkdtemp(prefix="qr-tls-reload-")
    proc = None
    try:
        a_cert, a_key = make_cert(work, "a")
        b_cert, b_key = make_cert(work, "b")
        live_cert, live_key = os.path.join(work, "live.crt"), os.path.join(work, "live.key")
        replace(a_cert, live_cert)
        replace(a_key, live_key)
        daemon_ = Daemon(daemon, work, live_cert, live_key)
        proc, port = daemon_.proc, daemon_.port
        if served_cert(port) != der_of(a_cert):
            fail("the daemon does not serve the certificate it started with")
        before = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=no_verify())
        get_info(before)

        # The renewal: key first, then the certificate, each renamed into place.
        replace(b_key, live_key)
        replace(b_cert, live_cert)
        os.kill(proc.pid, signal.SIGHUP)
        # Logged once the new certificate is in use and counted.
        daemon_.wait_for_log("the reload", r"Now serving TLS certificate '[^']*live.crt' "
                             r"\(/CN=coordinatord test b\)")
        if served_cert(port) != der_of(b_cert):
            fail("a new connection does not get the renewed certificate")
        # Still the same connection (a new one would get B).
        get_info(before)
        if before.sock.getpeercert(binary_form=True) != der_of(a_cert):
            fail("the connection opened before the reload changed certificate")
        before.close()
        m = metrics(port)
        if m.get('qr_tls_certificate_reloads_total{result="ok"}') != 1:
            fail(f"reloads not counted: {m}")
        end = subprocess.run(["openssl", "x509", "-noout", "-enddate", "-in", b_cert],
                             capture_output=True, text=True, check=True).stdout
        not_after = ssl.cert_time_to_seconds(end.strip().split("=", 1)[1])
        if m.get("qr_tls_certificate_expiry_timestamp_seconds") != not_after:
            fail(f"expiry {m.get('qr_tls_certificate_expiry_timestamp_seconds')}, "
                 f"expected {not_after}")

        if shutil.which("promtool"):  # Debian's prometheus package (scripts/install-deps.sh)
            lint = subprocess.run(["promtool", "check", "metrics"], input=metrics_text(port),
                                  capture_output=True, text=True)
            if lint.returncode != 0:
                fail(f"promtool check metrics:\n{lint.stdout}{lint.stderr}")

        # A broken file: the reload fails, is logged and counted, and B stays.
        with open(live_cert + ".new", "w") as f:
            f.write("not a certificate\n")
        os.replace(live_cert + ".new", live_cert)
        os.kill(proc.pid, signal.SIGHUP)
        # Logged after the failure was counted.
        daemon_.wait_for_log("the failed reload",
                             r"TLS certificate not reloaded \(new connections still get the old "
                             r"one\): bad TLS certificate file '[^']*live.crt'")
        failed = metrics(port).get('qr_tls_certificate_reloads_total{result="failed"}')
        if failed != 1:
            fail(f"the failed reload is counted {failed} times")
        if served_cert(port) != der_of(b_cert):
            fail("a failed reload changed the certificate")

        proc.send_signal(signal.SIGTERM)
        if proc.wait(timeout=DEADLINE_S) != 0:
            fail(f"coordinatord exited with {proc.returncode}:\n{''.join(daemon_.log)}")
        proc = None
        print("PASS")
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
