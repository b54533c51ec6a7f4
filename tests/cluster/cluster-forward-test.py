#!/usr/bin/env python3
"""Forwarding to the owner (issue 19, item 2), against a real etcd and three coordinators.

  - a query submitted to A is polled to completion with every nextUri fetched from another
    member than the last (round robin, as through a load balancer without stickiness), all
    requests naming the balancer in Host: every nextUri names the balancer, the rows equal
    those of the same query run directly on A, and B and C count forwarded requests;
  - GET /v1/query/{id}, /query_detail, /query_statement and /query_plan through another
    member;
    DELETE of a nextUri and POST /cancel_query through another member cancel A's query;
  - a request already forwarded once (X-Qr-Forwarded-By) is not forwarded again (404), and
    ids without an owner are answered as before (404);
  - A killed with SIGKILL: B and C answer its queries with REMOTE_HOST_GONE (a QueryResults
    document for a nextUri, 410 JSON elsewhere) at once, before and after its lease expired,
    naming its member id and URI;
  - with password authentication and --cluster_secret_file, the owner logs the client's
    address (signed across the hop; forged ones refused), and forwarding keeps the user (the
    owner applies its visibility rules to the forwarded user) and a principal header sent by
    a client, forged or signed for another request, is refused with 401.
Waits on conditions with deadlines, never fixed sleeps.

    cluster-forward-test.py PATH-TO-COORDINATORD [PATH-TO-ETCD]
Exits 77 (skipped) only when there is no etcd binary.
"""

import base64
import hashlib
import hmac
import json
import os
import signal
import sys
import time

sys.dont_write_bytecode = True  # the shared helpers are loaded from the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_testlib import (DEADLINE_S, Coordinator as Member, Etcd, cleanup,  # noqa: E402
                             start_test, fail, owner_of, wait_for,
                             write_password_file, write_secret_file)

USER = "forward-test"
LB = "lb.test:9999"  # what a load balancer in front would be called
SLOW_SQL = ("WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r "
            "WHERE x < 2000000000) SELECT count(*) FROM r")
SECRET = "forward-test-secret-0123456789abcdef"


def Coordinator(daemon, work, tag, etcd, cluster, extra=()):
    # The members are on loopback: without authentication they answer only to the names they
    # are told (--http_allowed_hosts), here the balancer's.
    return Member(daemon, work, tag, etcd, cluster,
                  extra=("--cluster_forward_timeout_ms=3000",
                         f"--http_allowed_hosts={LB.split(':')[0]}", *extra), user=USER)


def target_of(uri, base):
    if not uri.startswith(base + "/"):
        fail(f"URI {uri} does not name {base}")
    return uri[len(base):]


def submit(c, sql, host=LB, auth=None):
    return c.json("POST", "/v1/statement", body=sql.encode(), host=host, auth=auth)


def poll_round_robin(members, answer, host=LB, auth=None, start=0):
    """Follows nextUri to the end, each fetch on the next member; returns (rows, last)."""
    rows, i = list(answer.get("data", [])), start
    while "nextUri" in answer:
        c = members[i % len(members)]
        i += 1
        answer = c.json("GET", target_of(answer["nextUri"], f"http://{host}"), host=host,
                        auth=auth)
        rows += answer.get("data", [])
    return rows, answer


def start_slow(submitter, poller):
    """Submits SLOW_SQL to 'submitter' and fetches its first nextUri through 'poller' (a
    query is RUNNING for /v1/query once its client polled); returns the answer."""
    first = submit(submitter, SLOW_SQL)
    answer = poller.json("GET", target_of(first["nextUri"], f"http://{LB}"), host=LB)
    if "nextUri" not in answer:
        fail(f"the slow query ended at once: {answer}")
    wait_running(poller, answer["id"])
    return answer


def wait_running(c, qid, host=LB, auth=None):
    def running():
        info = c.json("GET", f"/v1/query/{qid}", host=host, auth=auth)
        return info["state"] == "RUNNING"
    wait_for(f"query {qid} to run", running)


def wait_canceled(c, qid):
    def canceled():
        info = c.json("GET", f"/v1/query/{qid}", host=LB)
        return info["state"] == "FAILED" and info["errorCode"]["name"] == "USER_CANCELED"
    wait_for(f"query {qid} to be canceled (seen through {c.tag})", canceled)


def main():
    started = start_test(__doc__, "qr-forward-test.")
    if started is None:
        return 77
    daemon, etcd_binary, work = started
    etcd = Etcd(etcd_binary, work)
    coordinators = []
    try:
        etcd.start()
        for tag in "abc":
            coordinators.append(Coordinator(daemon, work, tag, etcd, "qr-forward"))
        a, b, c = coordinators
        for x in coordinators:
            wait_for(f"{x.tag} to see three members",
                     lambda: x.member_id() != 0 and x.live_members() == 3)
        ids = {x.tag: x.member_id() for x in coordinators}
        print(f"member ids: {ids}")

        # Round robin: submit to A, then B, C, A, B, ... with Host naming the balancer.
        sql = "SELECT * FROM lineitem ORDER BY l_orderkey, l_linenumber"
        direct, last = poll_round_robin([a], submit(a, sql))
        first = submit(a, sql)
        qid = first["id"]
        if owner_of(qid) != ids["a"]:
            fail(f"query {qid} is not A's ({ids['a']})")
        if not first["nextUri"].startswith(f"http://{LB}/"):
            fail(f"nextUri {first['nextUri']} does not follow the Host {LB}")
        rows, last = poll_round_robin([b, c, a], first)
        if last["stats"]["state"] != "FINISHED" or rows != direct or len(rows) < 1000:
            fail(f"round robin: {last['stats']['state']}, {len(rows)} rows vs {len(direct)}")
        if not last["infoUri"].startswith(f"http://{LB}/"):
            fail(f"infoUri {last['infoUri']} does not follow the Host {LB}")
        for x in (b, c):
            if not x.forwarded("ok"):
                fail(f"{x.tag} counted no forwarded request")
        print(f"ok: {len(rows)} rows polled round robin through B, C and A, equal to A's own")

        # Another member's query through B: /v1/query/{id}, /query_detail, /query_statement.
        info = b.json("GET", f"/v1/query/{qid}")
        if info["queryId"] != qid or info["state"] != "FINISHED":
            fail(f"/v1/query/{qid} through B: {info}")
        detail = c.json("GET", f"/query_detail?json&query_id={qid}")
        if json.dumps(detail).find(qid) < 0:
            fail(f"/query_detail through C does not name {qid}")
        status, _, text = b.request("GET", f"/query_statement?query_id={qid}")
        if status != 200 or text != sql:
            fail(f"/query_statement through B: {status} {text[:200]}")
        # The plan of A's query is explained by A (before, C answered it as unknown: 404).
        plan = c.json("GET", f"/query_plan?query_id={qid}")
        if "lineitem" not in (plan.get("plan") or ""):
            fail(f"/query_plan through C: {plan}")
        print("ok: /v1/query/{id}, /query_detail, /query_statement and /query_plan through "
              "other members")

        # Cancel through another member: DELETE of the nextUri, then /cancel_query.
        slow = start_slow(a, c)
        status, _, body = b.request("DELETE", target_of(slow["nextUri"], f"http://{LB}"),
                                    host=LB)
        if status != 204:
            fail(f"DELETE of the nextUri through B: {status} {body}")
        wait_canceled(c, slow["id"])
        slow = start_slow(a, b)
        canceled = c.json("POST", f"/cancel_query?query_id={slow['id']}")
        if canceled.get("canceled") is not True or canceled.get("query_id") != slow["id"]:
            fail(f"/cancel_query through C: {canceled}")
        wait_canceled(b, slow["id"])
        print("ok: A's queries canceled through B (DELETE) and C (/cancel_query)")

        # Loop-proof: an already forwarded request is answered by whoever gets it.
        status, _, _ = b.request("GET", f"/v1/query/{qid}", headers={"X-Qr-Forwarded-By": "9"})
        if status != 410:
            fail(f"a request marked forwarded was not answered locally: {status}")
        ownerless = "0123456789abcdef:0000000000000000"
        status, _, _ = b.request("GET", f"/v1/statement/executing/{ownerless}/x/1")
        if status != 404:
            fail(f"an id without owner: {status}")
        print("ok: a forwarded request is never forwarded again; ownerless ids as before")

        # A killed: its queries fail with REMOTE_HOST_GONE, at once, on every other member.
        running = start_slow(a, b)
        next_target = target_of(running["nextUri"], f"http://{LB}")
        os.kill(a.proc.pid, signal.SIGKILL)
        a.proc.wait()

        def gone_answer(x):
            started = time.monotonic()
            answer = x.json("GET", next_target, host=LB)
            took = time.monotonic() - started
            err = answer.get("error") or {}
            if err.get("errorName") != "REMOTE_HOST_GONE" or err.get("errorCode") != 65558 or \
                    answer["stats"]["state"] != "FAILED" or "nextUri" in answer:
                fail(f"{x.tag} answered for the killed member's query: {answer}")
            if took > 10:
                fail(f"{x.tag} took {took:.1f} s to answer REMOTE_HOST_GONE")
            return err["message"]
        print("before the lease expired: " + gone_answer(b))
        for x in (b, c):
            wait_for(f"{x.tag} to drop the killed member", lambda: x.live_members() == 2)
        message = gone_answer(c)
        print("after: " + message)
        if f"member {ids['a']}" not in message or a.uri not in message or \
                "gone since" not in message:
            fail(f"the REMOTE_HOST_GONE message lacks the member, its URI or when: {message}")
        status, _, body = b.request("GET", f"/v1/query/{running['id']}")
        if status != 410 or json.loads(body)["error"]["errorName"] != "REMOTE_HOST_GONE":
            fail(f"/v1/query/{{id}} of the killed member's query: {status} {body}")
        if not c.forwarded("gone"):
            fail("C counted no gone request")
        print("ok: the killed member's queries fail with REMOTE_HOST_GONE on B and C")
        for x in (b, c):
            x.proc.send_signal(signal.SIGTERM)
            if x.proc.wait(timeout=DEADLINE_S) != 0:
                fail(f"coordinatord {x.tag} did not stop cleanly")

        # Authentication with a cluster secret.
        users = os.path.join(work, "users.passwd")
        write_password_file(users, ("alice", "bob"))
        secret_file = os.path.join(work, "cluster.secret")
        write_secret_file(secret_file, SECRET)
        auth_flags = (f"--auth_password_file={users}", "--allow_insecure_auth",
                      f"--cluster_secret_file={secret_file}")
        d = Coordinator(daemon, work, "d", etcd, "qr-auth", auth_flags)
        e = Coordinator(daemon, work, "e", etcd, "qr-auth", auth_flags)
        coordinators += [d, e]
        for x in (d, e):
            wait_for(f"{x.tag} to see two members",
                     lambda: x.metric("qr_cluster_members", auth="alice") == 2)
        q = submit(d, "SELECT count(*) FROM nation", auth="alice")
        # bob's credentials are valid, but the query is alice's: the owner answers 404.
        status, _, _ = e.request("GET", target_of(q["nextUri"], f"http://{LB}"), host=LB,
                                 auth="bob")
        if status != 404:
            fail(f"bob's poll of alice's query through E: {status} (forwarded as someone else?)")
        rows, last = poll_round_robin([e, d], q, auth="alice")
        if last["stats"]["state"] != "FINISHED" or rows != [[25]]:
            fail(f"alice's query through E: {last['stats']['state']} {rows}")
        info = e.json("GET", f"/v1/query/{q['id']}", auth="alice")
        if info["session"]["user"] != "alice":
            fail(f"/v1/query/{{id}} through E: {info['session']}")
        print("ok: with authentication, forwarding keeps the user (alice's rows; bob 404)")

        # A client cannot forge the principal header: garbage, another secret, another target.
        target = f"/v1/query/{q['id']}"
        now = int(time.time() * 1000)

        def signed(secret, user, method, tgt):
            fields = "qr-forward-v1;" + "".join(
                f"{len(v.encode())}:{v}" for v in (user, method, tgt, str(now)))
            mac = hmac.new(secret.encode(), fields.encode(), hashlib.sha256).hexdigest()
            return f"v1;{now};{mac};{base64.b64encode(user.encode()).decode()}"
        for header in ("alice", signed("another-secret-0123456789", "alice", "GET", target),
                       signed(SECRET, "alice", "GET", target + "x")):
            for x in (d, e):
                status, _, body = x.request(
                    "GET", target, auth="bob",
                    headers={"X-Qr-Forwarded-Principal": header, "X-Qr-Forwarded-By": "1"})
                if status != 401:
                    fail(f"{x.tag} accepted a forged principal {header!r}: {status} {body}")
        # Signed with the secret, as a member does: accepted as alice.
        status, _, body = d.request("GET", target, headers={
            "X-Qr-Forwarded-Principal": signed(SECRET, "alice", "GET", target),
            "X-Qr-Forwarded-By": "1", "X-Trino-User": "alice"})
        if status != 200 or json.loads(body)["queryId"] != q["id"]:
            fail(f"a principal signed with the secret was refused: {status} {body}")
        print("ok: forged principal headers refused with 401; a signed one accepted")

        # The owner logs the client's address, not the forwarding member's: D's query
        # canceled through E names the client's port in D's log.
        doomed = submit(d, SLOW_SQL, auth="alice")
        status, _, body = e.request("DELETE", target_of(doomed["nextUri"], f"http://{LB}"),
                                    host=LB, auth="alice")
        if status != 204:
            fail(f"DELETE of D's nextUri through E: {status} {body}")
        expect = f"from 127.0.0.1:{e.last_local_port} (DELETE of its nextUri)"
        wait_for(f"D to log the cancel '{expect}'", lambda: expect in open(d.err.name).read())
        for header in ("127.0.0.1:1", signed("another-secret-0123456789", "alice", "GET", target)):
            status, _, body = d.request("GET", target, auth="alice",
                                        headers={"X-Qr-Forwarded-Client": header})
            if status != 401 or "forwarded client address" not in body:
                fail(f"D accepted a forged client address {header!r}: {status} {body}")
        print("ok: the owner logs the forwarded client's address; forged ones refused with 401")

        for x in (d, e):
            x.stop()
        print("ok: clean stops")
        return 0
    finally:
        cleanup(coordinators, etcd, work)

if __name__ == "__main__":
    sys.exit(main())
