#!/usr/bin/env python3
"""A cluster behind nginx (issue 19, item 4): a real etcd, three coordinators and nginx in front
(round robin, no stickiness, keep-alive upstreams, the client's Host passed on).

    cluster-nginx-test.py PATH-TO-COORDINATORD failover   (coordinatord.cluster-nginx)
      - a multi-page query through nginx: every nextUri names nginx, rows equal a direct run,
        the members count forwarded requests;
      - kill -9 of one member under load (client threads running queries through nginx): its
        in-flight queries fail with REMOTE_HOST_GONE for clients asking the others, every
        other query finishes with the right rows, the others drop it from their view, and a
        restarted member (on another port) rejoins with a fresh id (the claim cursor moved
        past its old one), its queries are forwarded to its new URI, and the dead process's
        query ids fail with REMOTE_HOST_GONE on every member, the restarted one included;
      - etcd stopped and restarted under load: every query finishes, each member serves its
        own queries while etcd is down, and system.runtime.nodes lists all three again.
    cluster-nginx-test.py PATH-TO-COORDINATORD clients    (coordinatord.cluster-nginx-clients)
      - the npm trino-client and the Python trino client run queries through nginx: every
        query finishes, row counts and sums equal a direct run, forwarded counts grow.
Exits 77 (skipped) only when etcd or nginx is missing; in 'clients' mode also when Node's
trino-client (scripts/e2e-deps.sh) or the Python venv (scripts/py-deps.sh) is missing.
"""

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nginx_lib as lib  # noqa: E402
from cluster_testlib import write_secret_file  # noqa: E402
from nginx_lib import Client, Coordinator, Etcd, Nginx, fail, owner_of, wait_for  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.join(HERE, "..", "e2e")
SLOW_SQL = ("WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r "
            "WHERE x < 2000000000) SELECT count(*) FROM r")
MEDIUM_SQL = ("WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r "
              "WHERE x < 300000) SELECT count(*) FROM r")
LOAD_SQL = ["SELECT count(*) FROM lineitem", "SELECT o_orderkey FROM orders",
            "SELECT n_name FROM nation ORDER BY n_name", MEDIUM_SQL]


class Load:
    """Client threads running LOAD_SQL in turn through 'base' until stopped; each query's
    outcome is recorded: (id, state, error name, rows)."""

    def __init__(self, base, threads=4):
        self.base, self.records, self.retries = base, [], 0
        self.lock, self.stop_event = threading.Lock(), threading.Event()
        self.errors = []
        self.threads = [threading.Thread(target=self.loop, args=(i,)) for i in range(threads)]
        for t in self.threads:
            t.start()

    def loop(self, i):
        client, n = Client(self.base, user=f"load-{i}"), i
        try:
            while not self.stop_event.is_set():
                sql = LOAD_SQL[n % len(LOAD_SQL)]
                n += 1
                answer, retries = client.submit(sql)
                rows, last = client.poll(answer)
                err = (last.get("error") or {}).get("errorName")
                with self.lock:
                    self.retries += retries
                    self.records.append((last["id"], sql, last["stats"]["state"], err, rows))
        except Exception as e:  # reported by finish(): a client that failed is a test failure
            self.errors.append(f"load thread {i}: {e!r}")

    def done(self):
        with self.lock:
            return len(self.records)

    def finish(self):
        self.stop_event.set()
        for t in self.threads:
            t.join(timeout=lib.DEADLINE_S)
        if self.errors:
            fail("; ".join(self.errors))
        return self.records


def check_load(records, expected, gone_owner=None):
    """Every query finished with the expected rows, except those of 'gone_owner', which may
    have failed with REMOTE_HOST_GONE; returns how many did."""
    gone = 0
    for qid, sql, state, err, rows in records:
        if state == "FINISHED":
            if rows != expected[sql]:
                fail(f"{qid} {sql!r}: {len(rows)} rows, expected {len(expected[sql])}")
        elif owner_of(qid) == gone_owner and err == "REMOTE_HOST_GONE":
            gone += 1
        else:
            fail(f"{qid} (owner {owner_of(qid)}) {sql!r} ended {state} {err}")
    return gone


def failover(daemon, work, etcd, nginx_bin, secret):
    a, b, c = members = [Coordinator(daemon, work, t, etcd, secret) for t in "abc"]
    # A member's own key may reach its watch before its registration sets its id.
    for x in members:
        wait_for(f"{x.tag} to see three members and know its id",
                 lambda: x.members() == 3 and x.member_id() != 0)
    ids = {x.tag: x.member_id() for x in members}
    print(f"member ids: {ids}", flush=True)
    nginx = Nginx(nginx_bin, work, [x.port for x in members])
    try:
        direct = Client(a.base)
        expected = {sql: direct.run(sql)[1] for sql in LOAD_SQL}
        sql = "SELECT * FROM lineitem ORDER BY l_orderkey, l_linenumber"
        _, want = direct.run(sql)
        lb = Client(nginx.base)
        before = sum(x.forwarded_ok() for x in members)
        answer, _ = lb.submit(sql)
        rows, last = lb.poll(answer)  # lb.poll checks that every nextUri names nginx
        if rows != want or last["stats"]["state"] != "FINISHED" or len(rows) < 1000:
            fail(f"through nginx: {last['stats']['state']}, {len(rows)} rows vs {len(want)}")
        if sum(x.forwarded_ok() for x in members) <= before:
            fail("no member forwarded a follow-up of a query polled through nginx")
        print(f"ok: {len(rows)} rows through nginx, equal to a direct run, follow-ups forwarded",
              flush=True)

        # kill -9 of C under load.
        load = Load(nginx.base)
        wait_for("the load to run queries", lambda: load.done() >= 8)
        slow = [Client(c.base, host=nginx.host).submit(SLOW_SQL)[0] for _ in range(2)]
        medium = [Client(x.base, host=nginx.host).submit(MEDIUM_SQL)[0] for x in (a, b)]
        os.kill(c.proc.pid, signal.SIGKILL)
        c.proc.wait()
        for answer in slow:
            _, last = lb.poll(answer)
            err = last.get("error") or {}
            if last["stats"]["state"] != "FAILED" or err.get("errorName") != "REMOTE_HOST_GONE" \
                    or f"member {ids['c']}" not in err.get("message", ""):
                fail(f"the killed member's query through nginx: {last}")
        for answer in medium:
            rows, last = lb.poll(answer)
            if last["stats"]["state"] != "FINISHED" or rows != expected[MEDIUM_SQL]:
                fail(f"a survivor's query through nginx: {last['stats']['state']} {rows}")
        print("ok: the killed member's queries fail with REMOTE_HOST_GONE through nginx, "
              "the survivors' finish", flush=True)
        for x in (a, b):
            wait_for(f"{x.tag} to drop the killed member", lambda: x.members() == 2)
        progress = load.done()
        wait_for("the load to go on after the kill", lambda: load.done() >= progress + 8)
        records = load.finish()
        gone = check_load(records, expected, gone_owner=ids["c"])
        print(f"ok: {len(records)} queries under load, {gone} of the killed member's failed "
              f"with REMOTE_HOST_GONE, the rest finished ({load.retries} submissions retried "
              "after 502)", flush=True)

        # Restarted on another port: a fresh id (the claim cursor moved past the dead one),
        # routing to its new URI, and the dead process's ids still unowned.
        c2 = Coordinator(daemon, work, "c2", etcd, secret)
        members = [a, b, c2]
        for x in members:
            wait_for(f"{x.tag} to see three members and know its id",
                     lambda: x.members() == 3 and x.member_id() != 0)
        if c2.member_id() in ids.values():
            fail(f"the restarted member got id {c2.member_id()}, one of the earlier {ids}")
        forwarded = {x.tag: x.forwarded_ok() for x in (a, b)}
        for x in (a, b, nginx):
            answer, _ = Client(c2.base, host=nginx.host).submit(MEDIUM_SQL)
            rows, last = Client(x.base, host=nginx.host).poll(answer)
            if last["stats"]["state"] != "FINISHED" or rows != expected[MEDIUM_SQL]:
                fail(f"the restarted member's query through {x.base}: {last}")
        for x in (a, b):
            if x.forwarded_ok() <= forwarded[x.tag]:
                fail(f"{x.tag} did not forward to the restarted member's new URI")
        for x in (a, c2):
            status, body = Client(x.base).request("GET", f"/v1/query/{slow[0]['id']}")
            if status != 410 or not isinstance(body, dict) or \
                    body.get("error", {}).get("errorName") != "REMOTE_HOST_GONE":
                fail(f"the dead process's query id through {x.tag}: {status} {body} "
                     "(expected REMOTE_HOST_GONE: no live member holds its id)")
        print(f"ok: restarted member rejoined as {c2.member_id()} (was {ids['c']}), its queries "
              "forwarded to its new URI, the dead process's ids REMOTE_HOST_GONE everywhere",
              flush=True)

        nginx.write_conf([x.port for x in members])
        nginx.proc.send_signal(signal.SIGHUP)
        # Round robin spreads requests, not queries: c2 gets a submission (the query carries
        # c2's new id) or forwards a poll. When a query takes as many requests as there are
        # members, every submission lands on the same member, so either may be all c2 sees.
        c2_forwarded = c2.forwarded_ok()
        wait_for("nginx to route to the restarted member",
                 lambda: owner_of(Client(nginx.base).run("SELECT 1")[0]) == c2.member_id() or
                 c2.forwarded_ok() > c2_forwarded)

        # etcd stopped and restarted under load.
        forwarded = sum(x.forwarded_ok() for x in members)
        load = Load(nginx.base)
        wait_for("the load to run queries", lambda: load.done() >= 8)
        etcd.stop()
        for x in members:
            wait_for(f"{x.tag} to see etcd unreachable", lambda: x.state() == "unreachable")
        for x in members:
            qid, rows = Client(x.base).run("SELECT count(*) FROM nation")
            if owner_of(qid) != x.member_id() or rows != [[25]]:
                fail(f"{x.tag} with etcd down: {qid} {rows}")
        progress = load.done()
        wait_for("the load to go on with etcd down", lambda: load.done() >= progress + 8)
        etcd.start()
        want_nodes = sorted(str(x.member_id()) for x in members)
        for x in members:
            wait_for(f"{x.tag} to list all three in system.runtime.nodes again",
                     lambda: x.state() == "registered" and sorted(
                         r[0] for r in Client(x.base).run(
                             "SELECT node_id FROM system.runtime.nodes")[1]) == want_nodes)
        progress = load.done()
        wait_for("the load to go on after etcd's restart", lambda: load.done() >= progress + 8)
        records = load.finish()
        check_load(records, expected)
        if sum(x.forwarded_ok() for x in members) <= forwarded:
            fail("nothing forwarded under load through nginx")
        print(f"ok: etcd stopped and restarted under load: {len(records)} queries finished, "
              "members served their own, system.runtime.nodes recovered", flush=True)
        for x in members:
            if x.stop() != 0:
                fail(f"coordinatord {x.tag} did not stop cleanly")
    finally:
        nginx.stop()
        for x in members:
            if x.proc.poll() is None:
                x.proc.kill()


def close(x, y):
    return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-6)


def clients(daemon, work, etcd, nginx_bin, secret):
    node = shutil.which("node")
    venv_python = os.path.join(E2E, ".venv", "bin", "python")
    if not node or not os.path.isfile(os.path.join(E2E, "node_modules", "trino-client",
                                                   "package.json")):
        print("SKIP: node or trino-client missing (scripts/install-deps.sh --e2e, "
              "scripts/e2e-deps.sh)")
        return 77
    if not os.access(venv_python, os.X_OK) or \
            subprocess.run([venv_python, "-c", "import trino"], capture_output=True).returncode:
        print("SKIP: the Python client is not in tests/e2e/.venv (scripts/py-deps.sh)")
        return 77
    members = [Coordinator(daemon, work, t, etcd, secret) for t in "abc"]
    nginx = None
    try:
        for x in members:
            wait_for(f"{x.tag} to see three members and know its id",
                     lambda: x.members() == 3 and x.member_id() != 0)
        nginx = Nginx(nginx_bin, work, [x.port for x in members])
        direct = Client(members[0].base)
        before = {x.tag: x.forwarded_ok() for x in members}
        runs = {
            "trino-client (npm)": [node, os.path.join(HERE, "nginx-clients.mjs"), nginx.base,
                                   os.path.abspath(E2E)],
            "trino (Python)": [venv_python, os.path.join(HERE, "nginx-python-client.py"),
                               "127.0.0.1", str(nginx.port)],
        }
        for name, argv in runs.items():
            out = subprocess.run(argv, capture_output=True, text=True, timeout=lib.DEADLINE_S * 2)
            if out.returncode != 0:
                fail(f"{name} exited {out.returncode}: {out.stderr[-3000:]}")
            results = json.loads(out.stdout)["results"]
            for r in results:
                _, rows = direct.run(r["sql"])
                want_sum = sum(c for row in rows for c in row
                               if isinstance(c, (int, float)) and not isinstance(c, bool))
                if r["state"] != "FINISHED" or r.get("error") or r["rows"] != len(rows) or \
                        not close(r["sum"], want_sum):
                    fail(f"{name}: {r['sql']!r}: {r['state']} {r.get('error')}, {r['rows']} rows "
                         f"sum {r['sum']} (direct: {len(rows)} rows, sum {want_sum})")
                for uri in r.get("uris", []):
                    if not uri.startswith(nginx.base + "/"):
                        fail(f"{name}: nextUri {uri} does not name nginx")
            uris = sum(len(r.get("uris", [])) for r in results)
            if "npm" in name and uris < len(results):
                fail(f"{name}: only {uris} nextUri seen in {len(results)} queries")
            print(f"ok: {name}: {len(results)} queries through nginx, rows and sums equal a "
                  "direct run" + (f" ({uris} nextUri checked to name nginx)" if uris else ""),
                  flush=True)
        grew = [x.tag for x in members if x.forwarded_ok() > before[x.tag]]
        if len(grew) < 2:
            fail(f"forwarded counts grew only on {grew}")
        print(f"ok: forwarded requests counted on {grew}", flush=True)
        for x in members:
            if x.stop() != 0:
                fail(f"coordinatord {x.tag} did not stop cleanly")
        return 0
    finally:
        if nginx:
            nginx.stop()
        for x in members:
            if x.proc.poll() is None:
                x.proc.kill()


def main():
    if len(sys.argv) < 3 or sys.argv[2] not in ("failover", "clients"):
        sys.exit(__doc__)
    daemon, mode = sys.argv[1], sys.argv[2]
    etcd_bin, nginx_bin = lib.find_binary("etcd"), lib.find_binary("nginx")
    if not etcd_bin or not nginx_bin:
        print(f"SKIP: etcd ({etcd_bin}) or nginx ({nginx_bin}) missing; "
              "scripts/install-deps.sh installs etcd-server and nginx-light")
        return 77
    work = tempfile.mkdtemp(prefix=f"qr-nginx-test-{mode}.")
    os.chmod(work, 0o755)  # nginx's workers may run as another user
    secret = os.path.join(work, "cluster.secret")
    write_secret_file(secret, os.urandom(32).hex())
    etcd = Etcd(etcd_bin, work)
    ok = False
    try:
        etcd.start()
        if mode == "failover":
            failover(daemon, work, etcd, nginx_bin, secret)
            rc = 0
        else:
            rc = clients(daemon, work, etcd, nginx_bin, secret)
        ok = True
        return rc
    except lib.TestFailure as e:
        print(f"FAIL: {e}\n(logs kept in {work})", flush=True)
        return 1
    finally:
        if etcd.proc is not None and etcd.proc.poll() is None:
            etcd.proc.kill()
            etcd.proc.wait()
        if ok:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
