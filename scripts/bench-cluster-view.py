#!/usr/bin/env python3
"""The cluster view's latency (issue 19, item 3): GET /queries?json and GET /v1/query asked of
one member of a cluster of 1, 3 and 8 coordinators (each with 1 executor and 1 HTTP thread),
each member holding the same number of completed queries, on one keep-alive connection, one
request at a time. Starts its own etcd (Debian's etcd-server) and the coordinators on loopback
ports in a temporary directory.

    scripts/bench-cluster-view.py BUILD_DIR [--members 1,3,8] [--requests N] [--queries Q]

Prints one line per cluster size and endpoint: p50, p90, p99 and the mean in ms.
"""

import argparse
import http.client
import os
import statistics
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # the helpers are loaded from the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "cluster"))
from cluster_testlib import Coordinator, Etcd, cleanup, wait_for  # noqa: E402


def measure(port, target, n):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    took = []
    for i in range(n + 10):
        start = time.perf_counter()
        conn.request("GET", target, headers={"X-Trino-User": "bench"})
        resp = conn.getresponse()
        resp.read()
        if resp.status != 200:
            raise SystemExit(f"{target}: {resp.status}")
        if i >= 10:  # warm-up: the pools' connections
            took.append((time.perf_counter() - start) * 1000)
    conn.close()
    took.sort()
    return {"p50": took[len(took) // 2], "p90": took[int(len(took) * 0.9)],
            "p99": took[int(len(took) * 0.99)], "mean": statistics.fmean(took)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--members", default="1,3,8")
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--queries", type=int, default=20, help="completed queries per member")
    args = ap.parse_args()
    daemon = os.path.join(args.build_dir, "be/src/service/coordinatord")
    for n in (int(x) for x in args.members.split(",")):
        work = tempfile.mkdtemp(prefix="qr-bench-view.")
        etcd = Etcd("/usr/bin/etcd", work)
        members = []
        try:
            etcd.start()
            for i in range(n):
                members.append(Coordinator(
                    daemon, work, f"m{i}", etcd, "bench-view", user="bench",
                    extra=("--num_query_threads=1", "--num_http_threads=1",
                           "--cluster_lease_ttl_s=30")))
            for x in members:
                wait_for(f"{x.tag} to see {n} members", lambda: x.live_members() == n)
            for x in members:
                for _ in range(args.queries):
                    x.query("SELECT 1")
            for target in ("/queries?json&limit=100", "/v1/query"):
                r = measure(members[0].port, target, args.requests)
                print(f"{n} members, {target}: p50 {r['p50']:.2f} ms, p90 {r['p90']:.2f} ms, "
                      f"p99 {r['p99']:.2f} ms, mean {r['mean']:.2f} ms", flush=True)
        finally:
            cleanup(members, etcd, work)


if __name__ == "__main__":
    main()
