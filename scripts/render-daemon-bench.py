#!/usr/bin/env python3
"""Renders scripts/bench-daemon.sh's results into docs/benchmarks.md.

    render-daemon-bench.py --results DIR [--doc docs/benchmarks.md]

DIR holds one coordinator-loadgen JSON report per run (r<repeat>-<server>-<workload>.json,
mixed.json) plus machine.json, commands.txt and failures.txt. Ratios are computed within each
repeat, then the median over the repeats is quoted. Only the section "Daemon under load
(coordinator-loadgen)" of the document is replaced: its generated block between the markers;
the hand-written notes block is kept.
"""
import argparse
import glob
import json
import os
import re
import sys

import benchdoc
from benchdoc import median as med, table

DOC = benchdoc.DocSection("## Daemon under load (coordinator-loadgen)", "daemon-bench",
                          "render-daemon-bench.py", "scripts/bench-daemon.sh")

WORKLOADS = [  # (server, workload, description)
    ("nginx", "get", "static status.json, raw GET, 64 conns"),
    ("sharded", "poll", "poll: status lookups + nextUri, 64 conns"),
    ("global", "poll", "poll: status lookups + nextUri, 64 conns"),
    ("trino", "poll", "poll: status lookups + nextUri, 64 conns"),
    ("sharded", "select1", "SELECT 1 end to end, 8 clients"),
    ("global", "select1", "SELECT 1 end to end, 8 clients"),
    ("trino", "select1", "SELECT 1 end to end, 8 clients"),
    ("sharded", "select1x64", "SELECT 1 end to end, 64 clients"),
    ("global", "select1x64", "SELECT 1 end to end, 64 clients"),
    ("sharded", "q1", "TPC-H Q1 (SF 0.01), 8 clients"),
    ("global", "q1", "TPC-H Q1 (SF 0.01), 8 clients"),
    ("trino", "q1", "TPC-H Q1 (tpch.tiny), 8 clients"),
]
SERVER_NAMES = {"nginx": "nginx (anchor)", "sharded": "coordinatord", "global":
                "coordinatord, 1 shard", "trino": "Trino 476"}


class Results:
    def __init__(self, directory):
        self.dir = directory
        self.runs = {}  # (repeat, server, workload) -> report
        for path in glob.glob(os.path.join(directory, "r*-*-*.json")):
            m = re.match(r"r(\d+)-([a-z0-9]+)-([a-z0-9]+)\.json$", os.path.basename(path))
            if m:
                self.runs[(int(m.group(1)), m.group(2), m.group(3))] = json.load(open(path))
        self.repeats = sorted({k[0] for k in self.runs})
        mixed = os.path.join(directory, "mixed.json")
        self.mixed = json.load(open(mixed)) if os.path.exists(mixed) else None
        self.machine = self.load_json("machine.json") or {}

    def load_json(self, name):
        path = os.path.join(self.dir, name)
        return json.load(open(path)) if os.path.exists(path) else None

    def text(self, name):
        path = os.path.join(self.dir, name)
        return open(path).read().strip() if os.path.exists(path) else ""

    def values(self, server, workload, fn):
        """fn(report) for every repeat that has this run."""
        out = []
        for r in self.repeats:
            rep = self.runs.get((r, server, workload))
            if rep is not None:
                try:
                    out.append(fn(rep))
                except (KeyError, TypeError, ZeroDivisionError):
                    pass
        return out

    def ratios(self, a, b, fn):
        """fn(run a) / fn(run b) within each repeat; a, b = (server, workload)."""
        out = []
        for r in self.repeats:
            ra, rb = self.runs.get((r,) + a), self.runs.get((r,) + b)
            if ra is None or rb is None:
                continue
            try:
                va, vb = fn(ra), fn(rb)
            except (KeyError, TypeError):
                continue
            if vb:
                out.append(va / vb)
        return out


def fmt(v, digits=0, unit=""):
    if v is None:
        return "n/a"
    if isinstance(v, float) and digits == 0 and abs(v) >= 100:
        return f"{v:,.0f}{unit}"
    return f"{v:,.{digits}f}{unit}"


def per_repeat(values, digits):
    return " / ".join(fmt(v, digits) for v in values) if len(values) > 1 else ""


def server_stat(rep, *path):
    v = rep["server"]
    for p in path:
        v = v[p]
    return v


def latency(rep):
    """The latency that matters for the workload: queries end to end, else all requests."""
    return rep["query_latency"] if rep.get("queries") else rep["request_latency_all"]


def rss_mib(rep):
    return server_stat(rep, "rss_kb", "max") / 1024.0


def results_table(res):
    header = ["server", "workload", "requests/s", "queries/s", "requests/query",
              "p50 / p99 latency (ms)", "server CPU per request (us user + sys)",
              "switches / request", "syscalls / request", "server RSS (MiB)",
              "loadgen CPU per request (us)", "errors"]
    rows = []
    for server, workload, desc in WORKLOADS:
        if not res.values(server, workload, lambda r: 1):
            continue
        v = lambda fn: med(res.values(server, workload, fn))
        is_query = workload in ("select1", "select1x64", "q1")
        p50 = v(lambda r: latency(r)["p50_us"] / 1000.0)
        p99 = v(lambda r: latency(r)["p99_us"] / 1000.0)
        user = v(lambda r: server_stat(r, "per_request", "user_us"))
        sys_ = v(lambda r: server_stat(r, "per_request", "sys_us"))
        errors = sum(res.values(server, workload, lambda r: r["error_count"]))
        rows.append([
            SERVER_NAMES[server], desc, fmt(v(lambda r: r["requests_per_s"])),
            fmt(v(lambda r: r["queries_per_s"]), 1) if is_query else "",
            fmt(v(lambda r: r["requests_per_query"]), 2) if is_query else "",
            f"{fmt(p50, 2)} / {fmt(p99, 2)}",
            f"{fmt(user, 1)} + {fmt(sys_, 1)}",
            fmt(v(lambda r: server_stat(r, "per_request", "switches")), 3),
            fmt(v(lambda r: server_stat(r, "per_request", "syscalls")), 1),
            fmt(v(rss_mib), 1),
            fmt(v(lambda r: (r["loadgen"]["user_s"] + r["loadgen"]["sys_s"]) * 1e6 / r["requests"]), 1),
            str(errors)])
    return "\n".join([
        f"### Results (medians of {len(res.repeats)} repeats)", "",
        "Latency is per query for the query workloads, per request otherwise. Server CPU, "
        "context switches (all threads, voluntary + involuntary) and syscalls are the "
        "server's own, read from /proc/<pid> and perf tracepoint counters over the measured "
        "window, divided by the requests the loadgen completed in it. RSS is the largest "
        "sample during the run (nginx: its two workers summed).", "",
        table(header, rows)])


def server_cpu_us(rep):
    return (rep["server"]["user_s"] + rep["server"]["sys_s"]) * 1e6 / rep["requests"]


def both_cpu_us(rep):
    """Server plus loadgen CPU per request: what bounds requests/s when the cores are shared."""
    lg = rep["loadgen"]
    return server_cpu_us(rep) + (lg["user_s"] + lg["sys_s"]) * 1e6 / rep["requests"]


def ratio_rows(res):
    rps = lambda r: r["requests_per_s"]
    per_server_cpu = lambda r: 1.0 / server_cpu_us(r)
    per_both_cpu = lambda r: 1.0 / both_cpu_us(r)
    qps = lambda r: r["queries_per_s"]
    rows = [
        ("coordinatord poll requests/s / nginx requests/s", ("sharded", "poll"), ("nginx", "get"), rps, 2),
        ("coordinatord, 1 shard, poll / nginx", ("global", "poll"), ("nginx", "get"), rps, 2),
        ("coordinatord poll / nginx, requests per server CPU-second", ("sharded", "poll"),
         ("nginx", "get"), per_server_cpu, 2),
        ("coordinatord poll / nginx, requests per CPU-second of server + loadgen",
         ("sharded", "poll"), ("nginx", "get"), per_both_cpu, 2),
        ("coordinatord / Trino, poll requests/s", ("sharded", "poll"), ("trino", "poll"), rps, 1),
        ("coordinatord / Trino, SELECT 1 queries/s", ("sharded", "select1"), ("trino", "select1"), qps, 1),
        ("coordinatord / Trino, Q1 queries/s", ("sharded", "q1"), ("trino", "q1"), qps, 2),
        ("sharded / 1 shard, poll requests/s", ("sharded", "poll"), ("global", "poll"), rps, 3),
        ("sharded / 1 shard, poll requests per server CPU-second", ("sharded", "poll"),
         ("global", "poll"), per_server_cpu, 3),
        ("sharded / 1 shard, SELECT 1 queries/s", ("sharded", "select1"), ("global", "select1"), qps, 3),
        ("sharded / 1 shard, SELECT 1 with 64 clients, queries/s", ("sharded", "select1x64"),
         ("global", "select1x64"), qps, 3),
        ("sharded / 1 shard, Q1 queries/s", ("sharded", "q1"), ("global", "q1"), qps, 3),
        ("Trino RSS / coordinatord RSS (SELECT 1 runs)", ("trino", "select1"), ("sharded", "select1"), rss_mib, 1),
    ]
    out = []
    for name, a, b, fn, digits in rows:
        vals = res.ratios(a, b, fn)
        if vals:
            out.append([name, fmt(med(vals), digits), per_repeat(vals, digits)])
    return out


def ratios_table(res):
    rows = ratio_rows(res)
    if not rows:
        return ""
    return "\n".join([
        "### Ratios (within each repeat, then the median)", "",
        "Requests/s depend on how much of the 2 cores the other processes on the machine leave; "
        "requests per CPU-second (the inverse of the CPU time per request) do not, so both are "
        "shown. When server and loadgen share the cores and nothing else runs, requests/s "
        "follow the server + loadgen figure.", "",
        table(["ratio", "median", "per repeat"], rows)])


def mixed_rss(mixed):
    samples = mixed["server"]["rss_kb"]["samples"] if mixed and "server" in mixed else []
    if not samples:
        return None, None, samples
    lo, hi = min(samples), max(samples)
    return (hi - lo) / lo, (samples[-1] - samples[0]) / samples[0], samples


def targets_table(res):
    rows = []
    def verdict(ok):
        return "n/a" if ok is None else ("**met**" if ok else "**not met**")
    poll = res.ratios(("sharded", "poll"), ("nginx", "get"), lambda r: r["requests_per_s"])
    m = med(poll)
    rows.append(["Status lookups (poll, 64 connections) >= 50% of nginx's requests/s",
                 fmt(m * 100 if m else None, 0, "%"), verdict(None if m is None else m >= 0.5)])
    sel = res.ratios(("sharded", "select1"), ("trino", "select1"), lambda r: r["queries_per_s"])
    m = med(sel)
    rows.append(["SELECT 1, 8 clients: >= 30x Trino's queries/s", fmt(m, 1, "x"),
                 verdict(None if m is None else m >= 30)])
    rpq = med(res.values("sharded", "select1", lambda r: r["max_requests_per_query"]))
    rows.append(["SELECT 1: at most 4 HTTP requests per query",
                 f"{fmt(med(res.values('sharded', 'select1', lambda r: r['requests_per_query'])), 2)}"
                 f" on average, at most {fmt(rpq)}",
                 verdict(None if rpq is None else rpq <= 4)])
    rss = res.ratios(("sharded", "select1"), ("trino", "select1"), rss_mib)
    m = med(rss)
    rows.append(["RSS under a tenth of Trino's", fmt(m * 100 if m else None, 1, "% of Trino's"),
                 verdict(None if m is None else m < 0.1)])
    for workload, name in (("poll", "poll, 64 connections"), ("select1x64", "SELECT 1, 64 clients"),
                           ("select1", "SELECT 1, 8 clients")):
        sw = med(res.values("sharded", workload, lambda r: server_stat(r, "per_request", "switches")))
        sy = med(res.values("sharded", workload, lambda r: server_stat(r, "per_request", "sys_us")))
        rows.append([f"At saturation ({name}): <= 0.5 context switches per request, system CPU "
                     "per request reported", f"{fmt(sw, 3)} switches, {fmt(sy, 1)} us sys",
                     verdict(None if sw is None else sw <= 0.5)])
    errors = sum(r.get("error_count", 0) for r in res.runs.values())
    if res.mixed:
        errors += res.mixed.get("error_count", 0)
    rows.append(["Zero errors (every run)", str(errors), verdict(errors == 0)])
    span, growth, samples = mixed_rss(res.mixed)
    if span is not None:
        rows.append([f"Daemon RSS within 10% over the {res.mixed['seconds']:.0f} s mixed run "
                     "after warm-up", f"{span * 100:.1f}% between smallest and largest sample "
                     f"({growth * 100:+.1f}% first to last)", verdict(span <= 0.10)])
    else:
        rows.append(["Daemon RSS within 10% over a 5-minute mixed run", "not run", "n/a"])
    return "\n".join(["### Targets of the issue", "", table(["target", "measured (median)", ""], rows)])


def mixed_section(res):
    mx = res.mixed
    if not mx:
        return ""
    s = mx.get("server", {})
    lines = [f"### Mixed run ({mx['seconds']:.0f} s after a 30 s warm-up)", "",
             f"{mx['clients']['statement_or_get']} SELECT 1 clients, {mx['clients']['poll']} "
             f"status-lookup clients over {mx['clients']['long_queries']} long queries, "
             f"{mx['clients']['cancel']} submit-then-cancel clients, one daemon with "
             "`--num_query_threads=32 --max_running_queries=64`.", ""]
    rows = [["requests/s", fmt(mx["requests_per_s"])],
            ["SELECT 1 queries/s (p50 / p99 ms)",
             f"{fmt(mx['queries_per_s'], 1)} ({fmt(mx['query_latency']['p50_us'] / 1e3, 2)} / "
             f"{fmt(mx['query_latency']['p99_us'] / 1e3, 2)})"]]
    if "cancel_cycle_latency" in mx:
        c = mx["cancel_cycle_latency"]
        rows.append(["cancel cycles/s (submit, GET, DELETE, GET; p50 / p99 ms)",
                     f"{fmt(c['per_s'], 1)} ({fmt(c['p50_us'] / 1e3, 2)} / {fmt(c['p99_us'] / 1e3, 2)})"])
    if "per_request" in s:
        rows.append(["server CPU per request (us user + sys), switches, syscalls",
                     f"{fmt(s['per_request']['user_us'], 1)} + {fmt(s['per_request']['sys_us'], 1)}, "
                     f"{fmt(s['per_request']['switches'], 3)}, {fmt(s['per_request'].get('syscalls'), 1)}"])
    span, growth, samples = mixed_rss(mx)
    if samples:
        rows.append(["RSS samples (MiB): first, min, max, last",
                     ", ".join(f"{v / 1024:.1f}" for v in (samples[0], min(samples), max(samples),
                                                          samples[-1]))])
    rows.append(["errors", str(mx.get("error_count", 0))])
    lines.append(table(["", ""], rows))
    return "\n".join(lines)


def threads_section(res):
    rows = []
    for server, workload in (("sharded", "select1"), ("sharded", "select1x64"), ("sharded", "poll"),
                             ("sharded", "q1")):
        vals = res.values(server, workload, lambda r: server_stat(r, "switches_per_request_by_thread"))
        if not vals:
            continue
        names = sorted({n for v in vals for n in v})
        parts = []
        for n in names:
            m = med([v.get(n, 0.0) for v in vals])
            if m >= 0.001:
                parts.append(f"`{n}*` {m:.3f}")
        q = med(res.values(server, workload, lambda r: server_stat(r, "per_query", "switches")))
        sq = med(res.values(server, workload, lambda r: server_stat(r, "per_query", "syscalls")))
        per_query = f"; per query: {fmt(q, 2)} switches, {fmt(sq, 1)} syscalls" if workload != "poll" else ""
        rows.append([f"coordinatord, {workload}", ", ".join(parts) + per_query])
    if not rows:
        return ""
    return "\n".join(["### Where the daemon's context switches happen (per request, by thread)",
                      "", table(["run", "switches per request by thread name"], rows)])


def machine_section(res):
    m = res.machine
    load_after = res.text("load-after.txt")
    lines = ["### Machine, servers and commands", ""]
    lines.append(f"- Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, "
                 f"{m.get('mem_gib', '?')} GiB, Linux {m.get('kernel', '?')}; {m.get('date', '')}, "
                 f"commit {m.get('commit', '?')}; load average before "
                 f"{m.get('load_before', '?')}{', ' + load_after.split(': ')[-1].strip(chr(34)) + ' after' if load_after else ''}"
                 " (the machine is shared: other processes make the numbers noisy, the ratios "
                 "within a repeat less so).")
    lines.append(f"- Command: `{m.get('invocation', 'scripts/bench-daemon.sh')}` "
                 f"({m.get('repeats')} repeats of {m.get('duration_s')} s measured after a 2 s "
                 "warm-up, one coordinator-loadgen with one I/O thread per run, everything on "
                 "loopback).")
    lines.append("- coordinatord: release build, default flags (2 HTTP threads, one executor "
                 "thread per core), a fresh daemon per run; `1 shard` = "
                 "`--registry_num_shards=1` (one global registry lock).")
    lines.append(f"- nginx: Debian's {m.get('nginx', 'nginx')} (nginx-light), 2 worker "
                 "processes, access_log off, serving a static copy of a status answer "
                 "(`GET /v1/query/{id}` of a live query) to `coordinator-loadgen --mode=get`.")
    info = res.load_json("trino-info.json")
    java = res.text("trino-java.txt")
    if info:
        lines.append(f"- Trino {info.get('nodeVersion', {}).get('version', '476')} "
                     f"(io.trino:trino-server:476 from Maven Central) on {java or 'JDK 25'}, "
                     "`-Xmx2G`, coordinator with node-scheduler.include-coordinator=true, only "
                     "the tpch (`tpch.column-naming=STANDARD`) and memory plugins; warmed up "
                     "with 40 s of load before the first repeat. Its long query for the poll "
                     "mode is `SELECT l_orderkey FROM tpch.sf1000.lineitem` (WITH RECURSIVE "
                     "is depth-limited in Trino).")
    elif m.get("with_trino"):
        lines.append("- Trino: **did not run** (see Failures).")
    else:
        lines.append("- Trino: not run (pass `--with-trino`).")
    lines.append("- Workloads: `poll` keeps 16 long statements in flight (coordinatord: an "
                 "endless recursive CTE whose unread rows park it on result backpressure) "
                 "while 64 clients each GET `/v1/query/{id}` of a random one, then its nextUri "
                 "(`maxWait=0s`) unless another client holds it; `select1` (8 clients), "
                 "`select1x64` (64 clients, to saturate the daemon) and `q1` run the statement "
                 "end to end (POST, then every nextUri) and check the row count.")
    commands = res.text("commands.txt")
    if commands:
        lines += ["", "<details><summary>coordinator-loadgen commands</summary>", "", "```"]
        seen = set()
        for line in commands.splitlines():
            key = re.sub(r"^r\d+-", "", line)
            if key not in seen:
                seen.add(key)
                lines.append(re.sub(r"^r\d+-", "", line))
        lines += ["```", "", "</details>"]
    return "\n".join(lines)


def failures_section(res):
    failures = res.text("failures.txt")
    if not failures:
        return ""
    return "\n".join(["### Failures", "", "```", failures, "```"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", required=True)
    ap.add_argument("--doc", default="docs/benchmarks.md")
    args = ap.parse_args()
    res = Results(args.results)
    parts = [machine_section(res), failures_section(res), targets_table(res), ratios_table(res),
             results_table(res), threads_section(res), mixed_section(res)]
    DOC.write(args.doc, "\n\n".join(p for p in parts if p))
    print(f"render-daemon-bench.py: wrote {args.doc}")


if __name__ == "__main__":
    sys.exit(main())
