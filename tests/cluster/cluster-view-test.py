#!/usr/bin/env python3
"""The cluster view (issue 19, item 3), against a real etcd and three coordinators with
password authentication and a cluster secret:

  - queries run on each member appear in every member's /queries?json, /v1/query and
    system.runtime.queries (each once; counts match);
  - paging /queries?json with a small limit walks the completed queries of all members
    exactly once, in order, whichever member is asked;
  - visibility holds across the hop: bob sees only his own queries, cluster-wide;
  - a client's local-only marker is ignored and a forged principal refused (401);
  - another member's query is canceled from the list (POST /cancel_query, as the page's
    Cancel button does) and its page (/query_detail) opens through any member;
  - a SIGSTOPped member is marked as not answering ("members", the page's notice data, the
    X-Qr-Cluster-Failed-Members header of /v1/query) while the others' rows are returned;
  - '/' lists the members; the qr_cluster_view_* metrics count the fan-outs and failures.
Waits on conditions with deadlines, never fixed sleeps.

    cluster-view-test.py PATH-TO-COORDINATORD [PATH-TO-ETCD]
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
import urllib.parse

sys.dont_write_bytecode = True  # the shared helpers are loaded from the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_testlib import (Coordinator, Etcd, cleanup, start_test, fail,  # noqa: E402
                             owner_of, wait_for, write_password_file, write_secret_file)

SECRET = "cluster-view-test-secret-0123456789"
SLOW_SQL = ("WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r "
            "WHERE x < 2000000000) SELECT count(*) FROM r")


def queries_json(x, auth, **params):
    return x.json("GET", "/queries?json&" + urllib.parse.urlencode(params), auth=auth)


def listed_ids(page):
    return [q["query_id"] for q in page["in_flight"] + page["completed"]]


def v1_query(x, auth):
    status, headers, body = x.request("GET", "/v1/query", auth=auth)
    if status != 200:
        fail(f"{x.tag}: /v1/query answered {status}: {body[:300]}")
    return json.loads(body), headers


def runtime_queries(x, auth):
    _, rows = x.query("SELECT query_id, user FROM system.runtime.queries", auth=auth)
    return rows


def no_duplicates(what, ids):
    if len(ids) != len(set(ids)):
        fail(f"{what} lists a query more than once: {sorted(ids)}")


def walk(x, auth, limit):
    """Every page of the completed list through 'x'; the ids in the order shown."""
    seen, cursor = [], None
    for _ in range(1000):
        params = {"limit": limit}
        if cursor:
            params["cursor"] = cursor
        page = queries_json(x, auth, **params)
        if len(page["completed"]) > limit:
            fail(f"{x.tag}: a page of {len(page['completed'])} rows for limit {limit}")
        seen += [q["query_id"] for q in page["completed"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return seen
    fail("paging did not end")


def main():
    started = start_test(__doc__, "qr-view-test.")
    if started is None:
        return 77
    daemon, etcd_binary, work = started
    etcd = Etcd(etcd_binary, work)
    members = []
    try:
        etcd.start()
        users = os.path.join(work, "users.passwd")
        write_password_file(users, ("admin", "alice", "bob"))
        secret = os.path.join(work, "cluster.secret")
        write_secret_file(secret, SECRET)
        # A lease that outlives the SIGSTOP below: the stopped member stays a member.
        flags = (f"--auth_password_file={users}", "--allow_insecure_auth", "--admin_users=admin",
                 f"--cluster_secret_file={secret}", "--cluster_view_timeout_ms=1000",
                 "--cluster_lease_ttl_s=30")
        for tag in "abc":
            members.append(Coordinator(daemon, work, tag, etcd, "qr-view", extra=flags))
        a, b, c = members
        for x in members:
            wait_for(f"{x.tag} to see three members",
                     lambda: x.member_id(auth="admin") != 0 and x.live_members("admin") == 3)
        ids = {x.tag: x.member_id(auth="admin") for x in members}
        print(f"member ids: {ids}")

        # Queries on every member: alice two, bob one each.
        mine = {"alice": [], "bob": []}
        for x in members:
            for user, n in (("alice", 2), ("bob", 1)):
                for _ in range(n):
                    qid, _ = x.query("SELECT count(*) FROM nation", auth=user)
                    if owner_of(qid) != ids[x.tag]:
                        fail(f"{qid} is not {x.tag}'s")
                    mine[user].append(qid)
        ours = set(mine["alice"] + mine["bob"])

        # Every member lists every member's queries, once.
        for x in members:
            page = queries_json(x, "admin", limit=1000)
            if page.get("scope") != "cluster" or len(page["members"]) != 3 or \
                    not all(m["ok"] for m in page["members"]):
                fail(f"{x.tag}: /queries?json is not the whole cluster: "
                     f"{page.get('scope')} {page.get('members')}")
            if [m["self"] for m in page["members"]].count(True) != 1:
                fail(f"{x.tag}: members do not name this one once: {page['members']}")
            listed = listed_ids(page)
            no_duplicates(f"{x.tag}'s /queries?json", listed)
            if not ours <= set(listed):
                fail(f"{x.tag}'s /queries?json misses {ours - set(listed)}")
            if page["completed_matched"] != len(page["completed"]):
                fail(f"{x.tag}: completed_matched {page['completed_matched']} for "
                     f"{len(page['completed'])} rows")
            if any("cursor" in q for q in page["completed"]):
                fail(f"{x.tag}: the merged rows carry the members' cursors")
            infos, headers = v1_query(x, "admin")
            v1 = [q["queryId"] for q in infos]
            no_duplicates(f"{x.tag}'s /v1/query", v1)
            if not ours <= set(v1) or "X-Qr-Cluster-Failed-Members" in headers:
                fail(f"{x.tag}'s /v1/query misses {ours - set(v1)} ({headers})")
            rows = runtime_queries(x, "admin")
            sql_ids = [r[0] for r in rows]
            no_duplicates(f"{x.tag}'s system.runtime.queries", sql_ids)
            if not ours <= set(sql_ids):
                fail(f"{x.tag}'s system.runtime.queries misses {ours - set(sql_ids)}")
        print(f"ok: {len(ours)} queries of three members in each member's /queries?json, "
              "/v1/query and system.runtime.queries, once each")

        # Paging with a small limit: all of them, once, in order, through any member.
        whole = [q["query_id"] for q in queries_json(a, "admin", limit=1000)["completed"]]
        for x in members:
            for limit in (1, 2, 5):
                walked = walk(x, "admin", limit)
                if walked != whole:
                    fail(f"{x.tag}: paging by {limit} walked {len(walked)} rows "
                         f"({len(set(walked))} distinct), not the {len(whole)} of one page")
        ascending = walk(b, "admin", 3)
        print(f"ok: paging by 1, 2 and 5 walks all {len(whole)} completed queries once "
              f"through each member ({len(ascending)} again by 3)")

        # Visibility across the hop: bob sees only his own, on every member.
        for x in members:
            page = queries_json(x, "bob", limit=1000)
            users_seen = {q["user"] for q in page["in_flight"] + page["completed"]}
            if users_seen != {"bob"} or not set(mine["bob"]) <= set(listed_ids(page)):
                fail(f"{x.tag}: bob's /queries?json shows {users_seen}, "
                     f"misses {set(mine['bob']) - set(listed_ids(page))}")
            infos, _ = v1_query(x, "bob")
            if {q["session"]["user"] for q in infos} != {"bob"} or \
                    not set(mine["bob"]) <= {q["queryId"] for q in infos}:
                fail(f"{x.tag}: bob's /v1/query: {[(q['queryId'], q['session']['user']) for q in infos]}")
            rows = runtime_queries(x, "bob")
            if {r[1] for r in rows} != {"bob"} or not set(mine["bob"]) <= {r[0] for r in rows}:
                fail(f"{x.tag}: bob's system.runtime.queries: {rows}")
        print("ok: bob sees only his queries, cluster-wide, in all three listings")

        # A client's local-only marker is ignored; a forged principal is refused.
        status, _, body = a.request("GET", "/queries?json", auth="bob",
                                    headers={"X-Qr-Forwarded-By": "7"})
        if status != 200 or json.loads(body).get("scope") != "cluster":
            fail(f"a client's X-Qr-Forwarded-By narrowed the view: {status} {body[:200]}")
        now = int(time.time() * 1000)
        fields = "qr-forward-v1;" + "".join(
            f"{len(v.encode())}:{v}" for v in ("admin", "GET", "/queries?json", str(now)))
        mac = hmac.new(b"not-the-cluster-secret-0123", fields.encode(), hashlib.sha256)
        forged = f"v1;{now};{mac.hexdigest()};{base64.b64encode(b'admin').decode()}"
        status, _, _ = a.request("GET", "/queries?json", auth="bob",
                                 headers={"X-Qr-Forwarded-By": "7",
                                          "X-Qr-Forwarded-Principal": forged})
        if status != 401:
            fail(f"a forged principal on /queries?json: {status}")
        print("ok: a client's local-only marker is ignored, a forged principal refused (401)")

        # Cancel another member's query from the list, and open its page, through B.
        first = a.json("POST", "/v1/statement", body=SLOW_SQL.encode(), auth="alice")
        a.json("GET", first["nextUri"][len(a.base):], auth="alice")
        slow = first["id"]

        def in_flight_on_b():
            page = queries_json(b, "alice", state="RUNNING")
            return [q for q in page["in_flight"] if q["query_id"] == slow]
        wait_for(f"A's query {slow} to be listed RUNNING on B", in_flight_on_b)
        detail = b.json("GET", f"/query_detail?json&query_id={slow}", auth="alice")
        if json.dumps(detail).find(slow) < 0:
            fail(f"/query_detail of A's query through B does not name it")
        # As the page's Cancel button: the user named in X-Trino-User (a form cannot).
        canceled = b.json("POST", f"/cancel_query?query_id={slow}", auth="alice",
                          headers={"X-Trino-User": "alice"})
        if canceled.get("canceled") is not True:
            fail(f"cancel of A's query through B: {canceled}")

        def canceled_everywhere():
            for x in members:
                rows = [q for q in queries_json(x, "alice", limit=1000)["completed"]
                        if q["query_id"] == slow]
                if not rows or rows[0]["state"] != "CANCELED":
                    return False
            return True
        wait_for(f"{slow} to be listed CANCELED by every member", canceled_everywhere)
        print("ok: A's query canceled from B's list; its page opens through B")

        # C stopped: marked as not answering, A's and B's rows still there.
        os.kill(c.proc.pid, signal.SIGSTOP)
        try:
            wait_for("C to be stopped", lambda: open(f"/proc/{c.proc.pid}/stat").read()
                     .rsplit(")", 1)[1].split()[0] == "T")
            page = queries_json(a, "admin", limit=1000)
            silent = [m for m in page["members"] if not m["ok"]]
            if [m["id"] for m in silent] != [ids["c"]] or not silent[0].get("error"):
                fail(f"the stopped member is not marked: {page['members']}")
            listed = set(listed_ids(page))
            for qid in ours:
                expect = owner_of(qid) != ids["c"]
                if (qid in listed) != expect:
                    fail(f"with C stopped, {qid} (owner {owner_of(qid)}) listed: {qid in listed}")
            infos, headers = v1_query(b, "admin")
            if headers.get("X-Qr-Cluster-Failed-Members") != str(ids["c"]):
                fail(f"/v1/query does not name the stopped member: {headers}")
            rows = runtime_queries(a, "admin")
            owners = {owner_of(r[0]) for r in rows}
            if ids["c"] in owners or ids["b"] not in owners:
                fail(f"system.runtime.queries with C stopped: owners {owners}")
            print(f"ok: stopped member {ids['c']} marked ({silent[0]['error']}); "
                  "the others' rows returned")
        finally:
            os.kill(c.proc.pid, signal.SIGCONT)
        wait_for("the cluster view to be whole again",
                 lambda: all(m["ok"] for m in queries_json(a, "admin")["members"]))
        failures = a.metric("qr_cluster_view_member_failures_total", auth="admin")
        fan_outs = a.metric("qr_cluster_view_requests_total", auth="admin")
        count = a.metric("qr_cluster_view_seconds_count", auth="admin")
        if not failures or not fan_outs or count != fan_outs:
            fail(f"qr_cluster_view metrics: {fan_outs} fan-outs, {failures} failures, "
                 f"{count} timed")
        print(f"ok: metrics: {fan_outs:.0f} fan-outs, {failures:.0f} member failures")

        # The members on '/' and the switch on the page.
        index = a.get("/", auth="admin")
        if "Cluster members" not in index or index.count("(this member)") != 1 or \
                not all(x.uri in index for x in members):
            fail(f"'/' does not list the members: {index[-1500:]}")
        local = queries_json(a, "admin", scope="local", limit=1000)
        if local.get("scope") != "local" or \
                any(owner_of(q) != ids["a"] for q in listed_ids(local)):
            fail(f"scope=local lists other members' queries or no scope: {local.get('scope')}")
        if 'id="f-scope"' not in a.get("/www/queries.html", auth="admin") and \
                'id="f-scope"' not in a.get("/queries", auth="admin"):
            fail("the /queries page has no cluster/local switch")
        print("ok: '/' lists the members; scope=local lists this member's only")

        for x in members:
            x.stop()
        print("ok: clean stops")
        return 0
    finally:
        cleanup(members, etcd, work)


if __name__ == "__main__":
    sys.exit(main())
