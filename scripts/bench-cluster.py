#!/usr/bin/env python3
"""SELECT 1 through nginx with 1 and 3 coordinators (issue 19, item 4), side by side with the
direct (no nginx) single coordinator as the baseline. Starts its own etcd (Debian's
etcd-server), three coordinatord in one cluster and two nginx (round robin, keep-alive
upstreams, as scripts/cluster.sh): one in front of member A alone, one in front of all three.
Each repeat runs coordinator-loadgen's queries mode (SELECT 1 end to end: POST, then every
nextUri) against A directly, nginx-1 and nginx-3, back to back.

    scripts/bench-cluster.py BUILD_DIR [--duration S] [--clients N] [--repeats R]

Prints one markdown table row per run (queries/s, query p50/p99, request p50/p99,
coordinators' CPU per query) and the medians over the repeats.
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "cluster"))
import nginx_lib as lib  # noqa: E402


def run_loadgen(loadgen, port, pids, duration, clients, out):
    subprocess.run([loadgen, "--mode=queries", "--sql=SELECT 1", "--host=127.0.0.1",
                    f"--port={port}", f"--clients={clients}", f"--duration_s={duration}",
                    "--warmup_s=1", "--count_syscalls=false", f"--pid={pids}",
                    f"--json_out={out}"],
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
    etcd_bin, nginx_bin = lib.find_binary("etcd"), lib.find_binary("nginx")
    if not etcd_bin or not nginx_bin:
        sys.exit("bench-cluster.py: etcd or nginx missing (scripts/install-deps.sh --cluster)")
    work = tempfile.mkdtemp(prefix="qr-bench-cluster.")
    os.chmod(work, 0o755)
    secret = os.path.join(work, "cluster.secret")
    with open(secret, "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    os.chmod(secret, 0o600)
    etcd = lib.Etcd(etcd_bin, work)
    members, proxies = [], []
    try:
        etcd.start()
        for tag in "abc":
            members.append(lib.Coordinator(daemon, work, tag, etcd, secret))
        for x in members:
            lib.wait_for(f"{x.tag} to see three members", lambda: x.members() == 3)
        a = members[0]
        for name, backends in (("nginx-1", [a]), ("nginx-3", members)):
            sub = os.path.join(work, name)
            os.makedirs(sub)
            os.chmod(sub, 0o755)
            proxies.append(lib.Nginx(nginx_bin, sub, [x.port for x in backends]))
        all_pids = ",".join(str(x.proc.pid) for x in members)
        targets = [("direct, 1 coordinator", a.port, str(a.proc.pid)),
                   ("nginx, 1 coordinator", proxies[0].port, str(a.proc.pid)),
                   ("nginx, 3 coordinators", proxies[1].port, all_pids)]
        print(f"machine: {platform.node()}, {os.cpu_count()} CPUs "
              f"({platform.processor() or platform.machine()}), shared; "
              f"{time.strftime('%Y-%m-%d %H:%M %Z')}")
        print(f"command: scripts/bench-cluster.py BUILD_DIR --duration {args.duration:g} "
              f"--clients {args.clients} --repeats {args.repeats}\n")
        print("| run | queries/s | query p50 | query p99 | request p50 | request p99 | "
              "coordinators' CPU per query | errors |")
        print("|---|---|---|---|---|---|---|---|")
        medians = {name: {"qps": [], "p50": [], "p99": []} for name, _, _ in targets}
        for r in range(args.repeats):
            for name, port, pids in targets:
                j = run_loadgen(loadgen, port, pids, args.duration, args.clients,
                                os.path.join(work, f"{name.replace(' ', '_')}-{r}.json"))
                q, req = j["query_latency"], j["request_latency_all"]
                per = j.get("server", {}).get("per_request", {})
                cpu = (per.get("user_us", 0) + per.get("sys_us", 0)) * j["requests_per_query"]
                print(f"| {name}, repeat {r} | {j['queries_per_s']:,.0f} | {q['p50_us']:,} us | "
                      f"{q['p99_us']:,} us | {req['p50_us']:,} us | {req['p99_us']:,} us | "
                      f"{cpu:.0f} us | {j['error_count']} |", flush=True)
                medians[name]["qps"].append(j["queries_per_s"])
                medians[name]["p50"].append(q["p50_us"])
                medians[name]["p99"].append(q["p99_us"])
        print("\nmedians over the repeats (queries/s, query p50, query p99):")
        for name, m in medians.items():
            print(f"  {name}: {statistics.median(m['qps']):,.0f}/s, "
                  f"{statistics.median(m['p50']):,.0f} us, {statistics.median(m['p99']):,.0f} us")
        return 0
    finally:
        for n in proxies:
            n.stop()
        for x in members:
            x.stop()
        if etcd.proc is not None and etcd.proc.poll() is None:
            etcd.proc.kill()
            etcd.proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
