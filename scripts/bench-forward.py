#!/usr/bin/env python3
"""The cost of a forwarded request (issue 19, item 2): GET /v1/query/{id} of a query owned by
member A, asked of A itself (served locally) and of member B (forwarded to A over B's
keep-alive pool), with coordinator-loadgen's get mode. Starts its own etcd (Debian's
etcd-server) and two coordinatord on loopback ports in a temporary directory.

    scripts/bench-forward.py BUILD_DIR [--duration S] [--clients N] [--repeats R]

Prints one line per run (requests/s, p50/p99 latency, server CPU, context switches and syscalls
per request; syscalls need tracefs at /sys/kernel/tracing, e.g. `mount -t tracefs nodev
/sys/kernel/tracing`) and the medians of the forwarded/local ratios over the repeats. The
forwarded load runs twice: counted on both members, then on the forwarding member alone.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "cluster"))
import importlib.util  # noqa: E402

sys.dont_write_bytecode = True  # the helpers are loaded from the source tree
_spec = importlib.util.spec_from_file_location(
    "forward", os.path.join(sys.path[0], "cluster-forward-test.py"))
forward = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(forward)


def run_loadgen(loadgen, port, path, pids, duration, clients, out):
    subprocess.run([loadgen, "--mode=get", "--host=127.0.0.1", f"--port={port}",
                    f"--get_path={path}", f"--clients={clients}", f"--duration_s={duration}",
                    "--warmup_s=1", f"--pid={pids}", f"--json_out={out}"],
                   check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("build_dir")
    p.add_argument("--duration", type=float, default=5)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    daemon = os.path.join(args.build_dir, "be/src/service/coordinatord")
    loadgen = os.path.join(args.build_dir, "be/src/loadgen/coordinator-loadgen")
    work = tempfile.mkdtemp(prefix="qr-bench-forward.")
    etcd = forward.Etcd("/usr/bin/etcd", work)
    members = []
    try:
        etcd.start()
        a = forward.Coordinator(daemon, work, "a", etcd, "bench")
        b = forward.Coordinator(daemon, work, "b", etcd, "bench")
        members += [a, b]
        for x in members:
            forward.wait_for(f"{x.tag} to see both", lambda: x.live_members() == 2)
        first = a.json("POST", "/v1/statement", body=b"SELECT 1")
        forward.poll_round_robin([a], first, host=f"127.0.0.1:{a.port}")
        path = f"/v1/query/{first['id']}"
        ratios = {"p50": [], "p99": [], "rps": []}
        for r in range(args.repeats):
            res = {}
            # The forwarded run is made twice: counted on both members, and on the forwarding
            # member B alone (its share of the syscalls and switches).
            for name, x, pids in (("local", a, f"{a.proc.pid}"),
                                  ("forwarded", b, f"{a.proc.pid},{b.proc.pid}"),
                                  ("fwd-B-only", b, f"{b.proc.pid}")):
                j = run_loadgen(loadgen, x.port, path, pids, args.duration, args.clients,
                                os.path.join(work, f"{name}-{r}.json"))
                lat = j["request_latency_all"]
                res[name] = lat | {"rps": j["requests_per_s"], "errors": j["errors"]}
                per = j.get("server", {}).get("per_request", {})
                cpu = per.get("user_us", 0) + per.get("sys_us", 0)
                syscalls = per.get("syscalls")
                print(f"repeat {r} {name:10}: {j['requests_per_s']:8.0f} req/s  "
                      f"p50 {lat['p50_us']:6d} us  p99 {lat['p99_us']:6d} us  "
                      f"server CPU {cpu:5.1f} us/request (counted members)  "
                      f"context switches {per.get('switches', 0):.2f}/request  "
                      f"syscalls {'-' if syscalls is None else f'{syscalls:.2f}'}/request  "
                      f"errors {j['errors']}")
            ratios["p50"].append(res["forwarded"]["p50_us"] / max(1, res["local"]["p50_us"]))
            ratios["p99"].append(res["forwarded"]["p99_us"] / max(1, res["local"]["p99_us"]))
            ratios["rps"].append(res["forwarded"]["rps"] / max(1, res["local"]["rps"]))
        print("medians forwarded/local: " +
              ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in ratios.items()))
        return 0
    finally:
        for x in members:
            x.proc.terminate()
            x.proc.wait()
        if etcd.proc is not None:
            etcd.proc.kill()
            etcd.proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
