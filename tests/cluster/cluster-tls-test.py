#!/usr/bin/env python3
"""TLS between cluster members and to etcd (issue 19, docs/operations.md "TLS between members"
and "TLS to etcd"), against a real etcd serving HTTPS only and requiring client certificates
(--client-cert-auth), and coordinators serving HTTPS, with certificates of a CA the test makes
(openssl); every member reaches etcd at https://127.0.0.1:PORT with --etcd_ca_file and its
own certificate as --etcd_client_cert_file:

  - three members with --cluster_ca_file naming that CA, one of them advertised by host name
    (https://localhost:PORT, checked against its certificate's DNS entry), the others by
    address (IP entries): a query submitted to A is polled to completion through B, C and A
    in turn (every follow-up on B and C forwarded over TLS: their forwarded{result="ok"}
    counts grow, their pooled connections are reused: fewer opened than forwarded), and
    /v1/query on every member lists every member's queries with no member failing;
  - a fourth member whose --cluster_ca_file is another CA: A's query polled through it fails
    with the certificate verification named (counted as forwarded{result="error"}, never
    "ok"), and its /v1/query names the three others as not answering; its CA file replaced by
    a broken one and SIGHUP: counted as a failed reload, logged, nothing changes; replaced by
    the right CA and SIGHUP: its next request for A's query is forwarded and answered;
  - a member whose --etcd_ca_file is the other CA never registers: its state stays
    "unreachable" and its log names the certificate verification; one without a client
    certificate is refused by etcd alike;
  - an unreadable or malformed --cluster_ca_file stops a member at start-up naming the flag,
    and so do --etcd_* files given without an https:// endpoint.
Waits on conditions with deadlines, never fixed sleeps.

    cluster-tls-test.py PATH-TO-COORDINATORD [PATH-TO-ETCD]
Exits 77 (skipped) only when there is no etcd binary.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # the shared helpers are loaded from the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_testlib import (DEADLINE_S, Coordinator, Etcd, cleanup,  # noqa: E402
                             etcd_binary_or_skip, fail, free_port, owner_of, wait_for)

USER = "tls-test"
CLUSTER = "qr-tls"


def openssl(*args):
    r = subprocess.run(["openssl", *args], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"openssl {' '.join(args)}: {r.stderr}")


def make_ca(work, name):
    key, crt = f"{work}/{name}.key", f"{work}/{name}.crt"
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key, "-out", crt, "-days", "1", "-subj", f"/CN=qr test {name}",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return key, crt


def make_member_cert(work, name, ca):
    """A server certificate for 127.0.0.1 and localhost signed by 'ca' (key, cert)."""
    key, csr, crt, ext = (f"{work}/{name}.key", f"{work}/{name}.csr", f"{work}/{name}.crt",
                          f"{work}/{name}.ext")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key, "-out", csr, "-subj", f"/CN=qr test member {name}")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                "extendedKeyUsage=serverAuth,clientAuth\n")
    openssl("x509", "-req", "-in", csr, "-CA", ca[1], "-CAkey", ca[0], "-CAcreateserial",
            "-days", "1", "-extfile", ext, "-out", crt)
    return key, crt


def member(daemon, work, tag, etcd, ca_file, cert, port=None, advertised=None,
           etcd_ca_file=None, etcd_client_cert=True):
    extra = [f"--tls_cert_file={cert[1]}", f"--tls_key_file={cert[0]}",
             f"--cluster_ca_file={ca_file}", "--cluster_forward_timeout_ms=5000",
             f"--etcd_ca_file={etcd_ca_file or f'{work}/ca.crt'}",
             "--num_http_threads=1"]  # one pool per member: reuse shows in the counts
    if etcd_client_cert:
        extra += [f"--etcd_client_cert_file={cert[1]}", f"--etcd_client_key_file={cert[0]}"]
    if port is not None:
        extra.append(f"--http_port={port}")
    if advertised is not None:
        extra.append(f"--advertised_uri={advertised}")
    return Coordinator(daemon, work, tag, etcd, CLUSTER, extra=extra, user=USER,
                       tls_ca=f"{work}/ca.crt")


def poll_round_robin(members, answer):
    """Follows nextUri to the end, each fetch on the next member; returns the last answer."""
    i = 0
    while "nextUri" in answer:
        x = members[i % len(members)]
        i += 1
        uri = answer["nextUri"]
        if not uri.startswith(x.base + "/"):
            # Follow-ups name the member the client asked last; ask the next one instead.
            uri = x.base + uri[uri.index("/", len("https://")):]
        answer = x.json("GET", uri[len(x.base):], host=f"127.0.0.1:{x.port}")
    return answer


def v1_query(x):
    status, headers, body = x.request("GET", "/v1/query")
    if status != 200:
        fail(f"{x.tag}: /v1/query answered {status}: {body[:300]}")
    return [q["queryId"] for q in json.loads(body)], headers


def start_up_errors(daemon, work):
    """A bad --cluster_ca_file stops a member before it serves, naming the flag (also one
    started alone: it is checked whenever given)."""
    junk = f"{work}/junk.pem"
    with open(junk, "w") as f:
        f.write("not a certificate\n")
    for ca_file, expect, cluster in ((f"{work}/missing.pem", "cannot be read", []),
                                     (junk, "expected PEM CA certificates",
                                      ["--etcd_endpoints=127.0.0.1:1"])):
        r = subprocess.run(
            [daemon, "--http_port=0", f"--data_dir={work}/data", "--sample_scale_factor=0.001",
             *cluster, f"--cluster_ca_file={ca_file}"],
            capture_output=True, text=True, timeout=DEADLINE_S)
        if r.returncode == 0 or f"--cluster_ca_file '{ca_file}'" not in r.stderr or \
                expect not in r.stderr:
            fail(f"--cluster_ca_file={ca_file}: exit {r.returncode}, {r.stderr[-1000:]}")
    r = subprocess.run(
        [daemon, "--http_port=0", f"--data_dir={work}/data", "--sample_scale_factor=0.001",
         "--etcd_endpoints=127.0.0.1:1", f"--etcd_ca_file={work}/ca.crt"],
        capture_output=True, text=True, timeout=DEADLINE_S)
    if r.returncode == 0 or "--etcd_endpoints names none" not in r.stderr:
        fail(f"--etcd_ca_file without an https:// endpoint: exit {r.returncode}, "
             f"{r.stderr[-1000:]}")
    print("ok: a missing or malformed --cluster_ca_file stops the member, naming the flag; "
          "so do --etcd_* files without an https:// endpoint")


def etcd_refuses(daemon, work, etcd, certs, rogue_ca):
    """Members that cannot verify etcd, or that etcd cannot verify, never register."""
    for tag, kw, why in (("e", {"etcd_ca_file": rogue_ca[1]}, "certificate verify failed"),
                         ("f", {"etcd_client_cert": False}, "")):
        x = member(daemon, work, tag, etcd, f"{work}/ca.crt", certs[tag], **kw)
        try:
            wait_for(f"{tag} to fail to reach etcd",
                     lambda: x.metric("qr_cluster_etcd_errors_total") and
                     x.state() == "unreachable" and why in open(x.err.name).read())
            if x.member_id() != 0:
                fail(f"{tag} registered as {x.member_id()} through an unverified etcd")
        finally:
            x.stop()
    print("ok: a member with another CA for etcd, or without a client certificate, never "
          "registers")


def client_tls_reloads(x, target, result):
    return x.metric(f'qr_client_tls_reloads_total{{target="{target}",result="{result}"}}')


def replace_file(path, source_text):
    """Renews 'path' as a certificate tool does: a new file renamed over the old one."""
    with open(path + ".new", "w") as f:
        f.write(source_text)
    os.rename(path + ".new", path)


def reload_cluster_ca(d, d_ca, good_ca, query_id, work):
    """SIGHUP re-reads D's --cluster_ca_file (and its etcd files): a broken file is counted
    and logged and changes nothing; the right CA makes D's next connections verify the others."""
    replace_file(d_ca, "not a certificate\n")
    d.proc.send_signal(signal.SIGHUP)
    # One SIGHUP reloads the cluster's files, logs the outcome, then reloads etcd's: wait for
    # the last of these, each counted or logged after the one before it.
    wait_for("D to count the failed reload and reload its etcd files (unchanged)",
             lambda: client_tls_reloads(d, "cluster", "failed") == 1 and
             client_tls_reloads(d, "etcd", "ok") == 1)
    wait_for("D to log the failed reload",
             lambda: "Cluster TLS files not reloaded" in open(d.err.name).read())
    if client_tls_reloads(d, "cluster", "ok") != 0:
        fail("D's failed reload of --cluster_ca_file is counted as ok")
    status, _, body = d.request("GET", f"/v1/query/{query_id}")
    if status == 200:
        fail("D reached A after a failed reload: the old CA should still be in use")
    with open(good_ca) as f:
        replace_file(d_ca, f.read())
    d.proc.send_signal(signal.SIGHUP)
    # Counted once the new context is in use, so D's next connection gets it.
    wait_for("D to count the reload", lambda: client_tls_reloads(d, "cluster", "ok") == 1)
    wait_for("D to log the reload", lambda: "Reloaded the TLS files for connections to other "
             "members" in open(d.err.name).read())
    info = d.json("GET", f"/v1/query/{query_id}")
    if info["queryId"] != query_id:
        fail(f"D's view of A's query after the reload: {info}")
    if not d.forwarded("ok"):
        fail("D forwarded nothing successfully after the reload")
    print("ok: SIGHUP reloads --cluster_ca_file: a broken file changes nothing (counted, "
          "logged), the right CA makes D's next connections verify the others")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    daemon = sys.argv[1]
    etcd_binary = etcd_binary_or_skip(sys.argv)
    if etcd_binary is None:
        return 77
    if shutil.which("openssl") is None:
        fail("no openssl command (Debian's openssl package)")
    work = tempfile.mkdtemp(prefix="qr-tls-test.")
    etcd = None
    coordinators = []
    try:
        ca = make_ca(work, "ca")
        rogue_ca = make_ca(work, "rogue-ca")
        certs = {tag: make_member_cert(work, tag, ca) for tag in "abcdef"}
        etcd_cert = make_member_cert(work, "etcd", ca)
        start_up_errors(daemon, work)

        etcd = Etcd(etcd_binary, work, tls=(etcd_cert[1], etcd_cert[0], ca[1]))
        etcd.start()
        etcd_refuses(daemon, work, etcd, certs, rogue_ca)
        c_port = free_port()
        a = member(daemon, work, "a", etcd, ca[1], certs["a"])
        b = member(daemon, work, "b", etcd, ca[1], certs["b"])
        c = member(daemon, work, "c", etcd, ca[1], certs["c"], port=c_port,
                   advertised=f"https://localhost:{c_port}")
        coordinators += [a, b, c]
        for x in coordinators:
            wait_for(f"{x.tag} to see three members",
                     lambda: x.member_id() != 0 and x.live_members() == 3)
        ids = {x.tag: x.member_id() for x in coordinators}
        print(f"member ids: {ids}")

        # A's query polled through B, C and A in turn: B's and C's follow-ups go to A over TLS.
        sql = "SELECT l_orderkey, l_linenumber FROM lineitem ORDER BY 1, 2"
        first = a.json("POST", "/v1/statement", body=sql.encode())
        qid = first["id"]
        if owner_of(qid) != ids["a"]:
            fail(f"query {qid} is not A's ({ids['a']})")
        last = poll_round_robin([b, c, a], first)
        if last["stats"]["state"] != "FINISHED":
            fail(f"round robin over TLS: {last['stats']['state']}: {last.get('error')}")
        total_ok = total_opened = 0
        for x in (b, c):
            ok, errors = x.forwarded("ok"), x.forwarded("error") or 0
            opened = x.metric("qr_cluster_forward_connections_opened_total")
            if not ok or errors:
                fail(f"{x.tag} forwarded ok={ok} error={errors}")
            total_ok, total_opened = total_ok + ok, total_opened + opened
        if total_ok < 3 or total_opened >= total_ok:
            fail(f"B and C opened {total_opened} connections for {total_ok} forwarded requests")
        print(f"ok: B and C forwarded {total_ok:.0f} requests over {total_opened:.0f} TLS "
              "connections")

        # B's query and C's (advertised by host name) through A: A reaches C over TLS by name.
        qb, _ = b.query("SELECT 2")
        qc, _ = c.query("SELECT 3")
        for qid_other, owner in ((qb, b), (qc, c)):
            info = a.json("GET", f"/v1/query/{qid_other}")
            if info["queryId"] != qid_other or info["state"] != "FINISHED":
                fail(f"A's view of {owner.tag}'s query {qid_other}: {info}")

        # The cluster view over TLS: every member lists every member's queries.
        ours = {qid, qb, qc}
        for x in coordinators:
            listed, headers = v1_query(x)
            if not ours <= set(listed) or headers.get("X-Qr-Cluster-Failed-Members"):
                fail(f"{x.tag}'s /v1/query misses {ours - set(listed)} ({headers})")
        print("ok: every member's /v1/query lists the three members' queries, over TLS")

        # D trusts another CA: it cannot verify the others, so nothing it asks of them works.
        # Its CA file is a copy, replaced below and reloaded with SIGHUP.
        d_ca = f"{work}/d-cluster-ca.pem"
        shutil.copyfile(rogue_ca[1], d_ca)
        d = member(daemon, work, "d", etcd, d_ca, certs["d"])
        coordinators.append(d)
        wait_for("d to see four members", lambda: d.member_id() != 0 and d.live_members() == 4)
        second = a.json("POST", "/v1/statement", body=b"SELECT 4")
        status, _, body = d.request("GET", f"/v1/query/{second['id']}")
        if status == 200 or "certificate verify failed" not in body:
            fail(f"D's request for A's query over an unverified TLS connection: {status} {body}")
        if d.forwarded("ok") or not d.forwarded("error"):
            fail(f"D forwarded ok={d.forwarded('ok')} error={d.forwarded('error')}")
        _, headers = v1_query(d)
        failed = sorted(int(i) for i in headers.get("X-Qr-Cluster-Failed-Members", "").split(",")
                        if i)
        if failed != sorted(ids.values()):
            fail(f"D's /v1/query does not name A, B and C as failed: {headers}")
        wait_for("D's log to say why it could not reach the others",
                 lambda: "certificate verify failed" in open(d.err.name).read())
        print(f"ok: D (another CA) gets errors, not answers: {status}, {body[:160]}")
        reload_cluster_ca(d, d_ca, ca[1], second["id"], work)

        for x in coordinators:
            x.stop()
        print("PASS")
        return 0
    finally:
        cleanup(coordinators, etcd, work)


if __name__ == "__main__":
    sys.exit(main())
