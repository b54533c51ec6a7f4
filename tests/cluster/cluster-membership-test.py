#!/usr/bin/env python3
"""Cluster membership through etcd (issue 19, item 1), against a real etcd.

Starts its own etcd (Debian's etcd-server) on loopback ports with a temporary data directory
and three coordinatord with --etcd_endpoints and a short lease TTL, then checks:
  - each coordinator gets a distinct member id, and its query ids carry it (the owner bits),
    one of them through a list whose first etcd endpoint is dead;
  - each sees all three in system.runtime.nodes and /healthz;
  - their connections to etcd have TCP keep-alive (the kernel's keep-alive timer is armed);
  - a member killed with SIGKILL leaves the others' view once its lease expires;
  - with etcd stopped the coordinators still serve queries and report etcd unreachable
    (/metrics qr_cluster_state, /healthz);
  - etcd restarted over its data: they are registered again and see each other;
  - etcd restarted empty (all keys and leases lost): they register again.
Waits on conditions with deadlines, never fixed sleeps.

    cluster-membership-test.py PATH-TO-COORDINATORD [PATH-TO-ETCD]
Exits 77 (skipped) only when there is no etcd binary.
"""

import os
import signal
import sys

sys.dont_write_bytecode = True  # the shared helpers are loaded from the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_testlib import (Coordinator, Etcd, cleanup, start_test,  # noqa: E402
                             fail, free_port, owner_of, tcp_timers_to, wait_for)


def main():
    started = start_test(__doc__, "qr-cluster-test.")
    if started is None:
        return 77
    daemon, etcd_binary, work = started
    etcd = Etcd(etcd_binary, work)
    coordinators = []
    try:
        etcd.start()
        # The first one generates the sample database the others then open.
        coordinators.append(Coordinator(daemon, work, "a", etcd))
        # 'b' names a dead endpoint first: it must fail over to the live one.
        dead = f"127.0.0.1:{free_port()}"
        coordinators.append(Coordinator(daemon, work, "b", etcd,
                                        endpoints=f"{dead},{etcd.endpoint}"))
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

        # The connections to etcd probe a silent peer (TCP keep-alive): a watch on a dead
        # etcd machine fails instead of waiting forever.
        for c in coordinators:
            wait_for(f"{c.tag}'s connections to etcd to have the keep-alive timer",
                     lambda: 2 in tcp_timers_to(c.proc.pid, etcd.client_port))
        print("ok: the connections to etcd use TCP keep-alive")

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
            c.stop()
        print("ok: clean stops")
        return 0
    finally:
        cleanup(coordinators, etcd, work)

if __name__ == "__main__":
    sys.exit(main())
