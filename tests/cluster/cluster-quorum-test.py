#!/usr/bin/env python3
"""A member whose etcd node loses its leader moves on, against a real 3-node etcd cluster.

Starts three etcd nodes of one cluster (Debian's etcd-server) on loopback ports and one
coordinatord whose --etcd_endpoints lists them, the first one first (its watch and lease
connections go there). Then stops the other two nodes: the first one is still up, still
answers on its TCP connections (so no keep-alive probe fails), but has no leader. Checks:
  - the member's watch on that node ends with etcd's "no leader" within seconds (its requests
    carry Grpc-Metadata-Hasleader: true). Before, the watch stayed open and silent for as long
    as the node stayed cut off, and the member's view of the cluster froze meanwhile;
  - the member still serves queries;
  - the two nodes restarted: quorum is back, the member is registered again and sees itself.
Waits on conditions with deadlines, never fixed sleeps.

    cluster-quorum-test.py PATH-TO-COORDINATORD [PATH-TO-ETCD]
Exits 77 (skipped) only when there is no etcd binary.
"""

import os
import sys

sys.dont_write_bytecode = True  # the shared helpers are loaded from the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_testlib import (Coordinator, Etcd, cleanup, start_test,  # noqa: E402
                             fail, wait_for)


def main():
    started = start_test(__doc__, "qr-cluster-quorum-test.")
    if started is None:
        return 77
    daemon, etcd_binary, work = started
    nodes = []
    for name in ("n1", "n2", "n3"):
        os.makedirs(os.path.join(work, name))
        nodes.append(Etcd(etcd_binary, os.path.join(work, name), name=name))
    Etcd.join(nodes)
    coordinators = []
    try:
        for n in nodes:
            n.start(wait=False)  # a node is healthy once a quorum runs
        for n in nodes:
            n.wait_healthy()
        endpoints = ",".join(n.endpoint for n in nodes)
        member = Coordinator(daemon, work, "a", nodes[0], endpoints=endpoints)
        coordinators.append(member)
        wait_for("the member to register", lambda: member.state() == "registered")
        wait_for("the member to see itself", lambda: len(member.member_ids_seen()) == 1)

        def log():
            return open(member.err.name).read()

        def watch_ended_for_no_leader():
            return [line for line in log().splitlines()
                    if "/v3/watch" in line and "no leader" in line]

        if watch_ended_for_no_leader():
            fail("the watch ended for 'no leader' before any node stopped")
        nodes[1].stop()
        nodes[2].stop()
        lines = wait_for("the watch on the leaderless node to end",
                         watch_ended_for_no_leader)
        print(f"the watch ended: {lines[0]}")
        if nodes[0].proc.poll() is not None:
            fail("etcd n1 exited: the watch ended with it, not for having no leader")
        _, rows = member.query("SELECT 1")
        if rows != [[1]]:
            fail(f"SELECT 1 answered {rows} without etcd's quorum")

        nodes[1].start(wait=False)
        nodes[2].start(wait=False)
        for n in nodes:
            n.wait_healthy()
        wait_for("the member to be registered again", lambda: member.state() == "registered")
        wait_for("the member to see itself again", lambda: len(member.member_ids_seen()) == 1)
        member.stop()
        coordinators.clear()
        print("PASS")
        return 0
    finally:
        cleanup(coordinators, None, work)
        for n in nodes:
            if n.proc is not None and n.proc.poll() is None:
                n.proc.kill()
                n.proc.wait()


if __name__ == "__main__":
    sys.exit(main())
