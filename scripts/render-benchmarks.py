#!/usr/bin/env python3
"""Renders process-wide-locks-benchmark's results into docs/benchmarks.md and a plot.

Reads the google-benchmark JSON (medians of the repetitions when there are several), the
callgrind instruction counts and the machine description that scripts/bench.sh collects, and
rewrites the generated block of the "Registry micro-benchmarks" section of the markdown file
(between the registry-bench:generated markers). Everything else in the file, including the
hand-written notes of that section, is kept as it is. Without the markers the section is
appended. The targets of the issue are evaluated from the numbers, so the "met / not met"
lines always match the tables next to them.

    render-benchmarks.py --json RUN.json [--callgrind CG.json] [--machine M.json]
                         [--command CMD] [--doc docs/benchmarks.md]
                         [--plot docs/images/registry-throughput.png]
                         [--candidates A,B]
"""

import argparse
import json
import os
import re
import sys

import benchdoc
import benchpeers
from benchdoc import median, table

DOC = benchdoc.DocSection("## Registry micro-benchmarks (process-wide-locks-benchmark)",
                          "registry-bench", "render-benchmarks.py", "the last scripts/bench.sh run")

MIXES = [
    ("LookupOnly", "lookup-only (100% Get)"),
    ("ReadHeavy", "read-heavy (94% Get / 3% Add / 3% Delete)"),
    ("Churn", "churn (50% Get / 25% Add / 25% Delete)"),
    ("HotQuery", "one hot query (every thread Gets the same id)"),
]
BASELINE = "GlobalMutex"
NAME_RE = re.compile(r"^BM_(\w+)<([^>]+)>(.*)$")


class Results:
    """The benchmark runs, keyed by (operation, variant, parameters).

    A benchmark appears once per pass (--passes) and per repetition (--benchmark_repetitions);
    every numeric field is the median over all of its runs. google-benchmark's own aggregates
    are ignored, so both ways of repeating are treated alike.
    """

    def __init__(self, path):
        with open(path) as f:
            data = json.load(f)
        self.context = data.get("context", {})
        self.raw = [b for b in data.get("benchmarks", []) if b.get("run_type") != "aggregate"]
        grouped = {}
        self.variants = {}  # operation -> variants in first-seen order
        for b in data.get("benchmarks", []):
            if b.get("run_type") == "aggregate":
                continue
            m = NAME_RE.match(b["run_name"])
            if not m:
                continue
            op, variant, rest = m.groups()
            params = {}
            for part in rest.split("/"):
                if ":" in part:
                    k, v = part.split(":", 1)
                    params[k] = v
            key = (op, variant, params.get("mode", ""), int(params.get("entries", 0)),
                   int(params.get("threads", 0)), int(params.get("queries", 0)),
                   int(params.get("accesses", 0)))
            grouped.setdefault(key, []).append(b)
            self.variants.setdefault(op, [])
            if variant not in self.variants[op]:
                self.variants[op].append(variant)
        self.grouped = grouped  # every run of a point, in pass order
        self.runs = {k: median_run(v) for k, v in grouped.items()}
        self.repetitions = max([len(v) for v in grouped.values()] or [1])

    def get(self, op, variant, field, mode="", entries=0, threads=0, queries=0, accesses=0):
        return field_of(self.runs.get((op, variant, mode, entries, threads, queries, accesses)),
                        field)

    def paired_ratio(self, field, a, b):
        """The median over the passes of a/b, each pass's 'a' divided by the same pass's 'b'.

        'a' and 'b' are dicts of get()'s keyword arguments plus "op" and "variant". Within a
        pass the two points run seconds apart, so a burst of load from other processes mostly
        hits both sides of one ratio instead of one side of the medians' ratio (on the shared
        benchmark machine the global mutex's throughput alone swings 3x between passes).
        """
        def key(p):
            return (p["op"], p["variant"], p.get("mode", ""), p.get("entries", 0),
                    p.get("threads", 0), p.get("queries", 0), p.get("accesses", 0))
        ra, rb = self.grouped.get(key(a)), self.grouped.get(key(b))
        if not ra or not rb:
            return None
        ratios = []
        for x, y in zip(ra, rb):
            vx, vy = field_of(x, field), field_of(y, field)
            if vx is not None and vy:
                ratios.append(vx / vy)
        return median(ratios) if ratios else None

    def points(self, op, key_index):
        return sorted({k[key_index] for k in self.runs if k[0] == op})

    def grid(self, op):
        return sorted({(k[5], k[6]) for k in self.runs if k[0] == op})


def field_of(b, field):
    """'field' of one run (or median run); real_ns and cpu_ns are its times in ns."""
    if b is None:
        return None
    if field in ("real_ns", "cpu_ns"):
        scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b.get("time_unit", "ns")]
        return b["real_time" if field == "real_ns" else "cpu_time"] * scale
    return b.get(field)


def median_run(runs):
    """One run whose numeric fields are the medians of 'runs'."""
    out = dict(runs[0])
    for k, v in runs[0].items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = median([r[k] for r in runs if isinstance(r.get(k), (int, float))])
    return out


def rate(x):
    if x is None:
        return "-"
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= div:
            return f"{x / div:.3g}{unit}"
    return f"{x:.3g}"


def num(x, digits=3):
    if x is None:
        return "-"
    if x >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def times(r):
    return "-" if r is None else f"{r:.2f}x"


def default_variant(res):
    return "ShardedQueryMap" + str(res.context.get("registry_num_shards", "64"))


# ---------------------------------------------------------------------------------------------
# Sections


def machine_section(res, machine, command):
    ctx = res.context
    lines = ["### Machine and command", ""]
    if machine:
        lines.append(f"- CPU: {machine.get('cpu', '?')}")
        lines.append(f"- Kernel: {machine.get('kernel', '?')}; compiler: "
                     f"{machine.get('compiler', '?')}")
        lines.append(f"- Load average (1/5/15 min) before the run: "
                     f"{machine.get('load_before', '?')}; after: "
                     f"{machine.get('load_after', '?')} (other engineers' builds, and this "
                     "benchmark's own 64- and 1000-thread points)")
        if machine.get("benchmark_seconds"):
            lines.append(f"- The benchmark binary ran for {machine['benchmark_seconds'] / 60:.1f} "
                         "minutes (callgrind and rendering not included)")
    lines.append(f"- Run at {ctx.get('date', '?')} on {ctx.get('num_cpus', '?')} CPUs; "
                 f"google-benchmark library build: {ctx.get('library_build_type', '?')}; "
                 f"oneTBB: {ctx.get('tbb', '?')}; libcuckoo: {ctx.get('libcuckoo', '?')}; "
                 f"boost::concurrent_flat_map: {ctx.get('boost_concurrent_flat_map', '?')}")
    lines.append(f"- Every number is the median of {res.repetitions} repetitions, made as "
                 f"{ctx.get('passes', '1')} whole passes over all benchmarks one after the other "
                 "(so a burst of load from other processes hits one repetition of every "
                 "variant rather than every repetition of one); within a pass the variants of a "
                 "point run back to back. Every ratio (in the tables and the targets) is the "
                 "median over the passes of that pass's ratio, both sides measured seconds "
                 "apart, not a ratio of two medians that may come from different passes. Each "
                 "repetition of a mix is "
                 f"{ctx.get('mix_rounds', '?')} timed rounds of {ctx.get('mix_round_ms', '?')} "
                 "ms. `--registry_num_shards` default: "
                 f"{ctx.get('registry_num_shards', '?')}.")
    if command:
        lines += ["", "```", command, "```"]
    return "\n".join(lines)


def lifecycle_section(res, op, title, what):
    variants = res.variants.get(op, [])
    if not variants:
        return ""
    base = variants[0]
    header = ["queries x accesses"]
    for v in variants:
        header.append(f"{v} ns/op" + ("" if v == base else " (speed-up)"))
    header += [f"{v} ctx sw/op" for v in variants]
    rows = []
    for q, a in res.grid(op):
        row = [f"{q} x {a}"]
        for v in variants:
            ns = res.get(op, v, "ns_per_op", queries=q, accesses=a)
            r = res.paired_ratio("ns_per_op", dict(op=op, variant=base, queries=q, accesses=a),
                                 dict(op=op, variant=v, queries=q, accesses=a))
            row.append(num(ns) if v == base else f"{num(ns)} ({times(r)})")
        for v in variants:
            row.append(num(res.get(op, v, "ctx_switches_per_op", queries=q, accesses=a), 2))
        rows.append(row)
    return "\n".join([f"### {title}", "", what, "", table(header, rows)])


def mix_tables(res):
    out = ["### Fixed-thread mixes: throughput (ratio to the global mutex)", "",
           "Operations per second of the whole process (all threads), and in parentheses the "
           f"ratio to `{BASELINE}` at the same point. Bold: the current default "
           f"(`{default_variant(res)}`)."]
    details = []
    for mix, label in MIXES:
        op = mix
        variants = res.variants.get(op, [])
        if not variants:
            continue
        for entries in res.points(op, 3):
            threads = [t for t in res.points(op, 4)]
            header = ["variant"] + [f"{t} thr" for t in threads]
            rows = []
            for v in variants:
                name = f"**{v}**" if v == default_variant(res) else v
                row = [name]
                for t in threads:
                    ops = res.get(op, v, "ops_per_s", entries=entries, threads=t)
                    r = res.paired_ratio("ops_per_s",
                                         dict(op=op, variant=v, entries=entries, threads=t),
                                         dict(op=op, variant=BASELINE, entries=entries, threads=t))
                    row.append(f"{rate(ops)} ({times(r)})")
                rows.append(row)
            out += ["", f"#### {label}, {entries:,} live entries", "", table(header, rows)]
            drows = []
            for v in variants:
                row = [v]
                for t in threads:
                    ns = res.get(op, v, "ns_per_op", entries=entries, threads=t)
                    cpu = res.get(op, v, "cpu_ns_per_op", entries=entries, threads=t)
                    cs = res.get(op, v, "ctx_switches_per_op", entries=entries, threads=t)
                    row.append(f"{num(ns)} / {num(cpu)} / {num(cs, 2)}")
                drows.append(row)
            details += ["", f"#### {label}, {entries:,} live entries: ns/op / CPU ns/op / "
                        "context switches per op", "", table(header, drows)]
    out += ["", "<details><summary>Per-operation costs of every mix (wall ns/op = 1e9 / "
            "ops_per_s; CPU ns/op = process CPU time / ops; context switches per op = "
            "getrusage(RUSAGE_SELF) ru_nvcsw + ru_nivcsw delta / ops)</summary>"]
    out += details
    out += ["", "</details>"]
    return "\n".join(out)


def iteration_section(res):
    op = "LookupDuringIteration"
    variants = res.variants.get(op, [])
    if not variants:
        return ""
    out = ["### Lookups while another thread renders every entry", "",
           "N lookup threads, one thread rendering all entries into an HTML table again and "
           "again, and one probe thread. The render runs inside `DoFuncForAllEntries` (each row "
           "formatted under the shard lock; for GlobalMutex under the one lock) or from "
           "`Snapshot()` (copied out shard by shard, formatted with no lock held). The probe "
           "sleeps ~50 us, then times one Get of a random live key: an open-loop request "
           "arriving at a random moment (timing the lookup threads' own lookups instead would "
           "hide the blocking: a thread stuck for 1 ms does one slow lookup rather than "
           "thousands of fast ones). The probe runs at SCHED_FIFO when permitted, so that it "
           "measures the map rather than the wait for a CPU; the lookup and render threads are "
           "normal threads. Cells: probe p99 in ns, lock-held / snapshot, and the ratio "
           "snapshot / lock-held (the target: <= 0.10); the third number is the same point with "
           "the render thread idle (mode `none`): the floor of the probe's latency with the "
           "same lookup threads, which neither mode can beat; then the same for p99.9, which shows "
           "lock holds that hit fewer than 1% of the probes (with 256 shards a probe meets "
           "the shard being rendered 1 time in 256). * = fewer than 200 probes in one of "
           "the three (the probe itself was blocked for long stretches; 0 = none at all). The probe "
           "takes its real-time priority before the round starts: taken after, it would wait for "
           "its first CPU like any normal thread, which with 64 busy threads on 2 cores is most "
           "of a round."]
    realtime = [b.get("probe_realtime") for k, b in res.runs.items() if k[0] == op]
    if realtime and not all(realtime):
        out.append("")
        out.append("**The probe did not get SCHED_FIFO in this run** (no CAP_SYS_NICE): its "
                   "percentiles include waits for a CPU.")
    for field, label in (("lookup_p99_ns", "p99"), ("lookup_p999_ns", "p99.9")):
        for entries in res.points(op, 3):
            threads = res.points(op, 4)
            header = ["variant"] + [f"{t} thr" for t in threads]
            rows = []
            for v in variants:
                row = [v]
                for t in threads:
                    held = res.get(op, v, field, "lock_held", entries, t)
                    snap = res.get(op, v, field, "snapshot", entries, t)
                    idle = res.get(op, v, field, "none", entries, t)
                    few = min(res.get(op, v, "probes", mode, entries, t) or 0
                              for mode in ("lock_held", "snapshot", "none")
                              if mode != "none" or idle is not None) < 200
                    r = res.paired_ratio(
                        field, dict(op=op, variant=v, mode="snapshot", entries=entries, threads=t),
                        dict(op=op, variant=v, mode="lock_held", entries=entries, threads=t))
                    row.append(f"{num(held)} / {num(snap)}"
                               + ("" if idle is None else f" / {num(idle)}")
                               + f" ({times(r)})" + (" *" if few else ""))
                rows.append(row)
            out += ["", f"#### {entries:,} live entries: probe {label} ns, lock-held / snapshot "
                    "/ no iteration (snapshot / lock-held)", "", table(header, rows)]
    out += ["", iteration_summary(res, variants)]
    return "\n".join(out)


def iteration_summary(res, variants):
    """Per variant: at how many points Snapshot's p99 is <= 1/10 of the lock-held render's, and
    the same counted only where the lock-held render hurts (its p99 above 2x the no-iteration
    floor): the target compares the two modes, which says little where neither moves the p99."""
    op = "LookupDuringIteration"
    rows = []
    for v in variants:
        met = total = hurt = hurt_met = 0
        for e in res.points(op, 3):
            for t in res.points(op, 4):
                def pt(mode):
                    return dict(op=op, variant=v, mode=mode, entries=e, threads=t)
                r = res.paired_ratio("lookup_p99_ns", pt("snapshot"), pt("lock_held"))
                if r is None:
                    continue
                total += 1
                met += r <= 0.1
                floor = res.paired_ratio("lookup_p99_ns", pt("lock_held"), pt("none"))
                if floor is not None and floor > 2:
                    hurt += 1
                    hurt_met += r <= 0.1
        rows.append([v, f"{met} of {total}", f"{hurt} of {total}",
                     f"{hurt_met} of {hurt}" if hurt else "-"])
    return ("#### Summary: Snapshot p99 <= 1/10 of the lock-held render's p99\n\n"
            "\"lock-held p99 > 2x the floor\": the points where the lock-held render's p99 is "
            "more than 2x the no-iteration floor (the render visibly delays lookups); \"where "
            "it is\": of those, the points where Snapshot's p99 is <= 1/10 of the lock-held "
            "render's.\n\n"
            + table(["variant", "Snapshot <= 1/10 of lock-held (all points)",
                     "lock-held p99 > 2x the floor", "Snapshot <= 1/10 where it is"], rows))


def bare_for(variant):
    # Every sharded map without "Std" in its name has absl::flat_hash_map inside.
    return "BareStdFind" if variant.endswith("Std") else "BareFlatFind"


def get_section(res, callgrind):
    variants = res.variants.get("UncontendedGet", [])
    if not variants:
        return ""
    entries_list = res.points("UncontendedGet", 3)
    header = ["variant"]
    for e in entries_list:
        header += [f"{e:,}: ns (throughput)", f"{e:,}: ns (latency)"]
    interleaved = entries_list if res.variants.get("GetVsBare") else []
    for e in interleaved:
        header += [f"{e:,}: interleaved ratio (throughput / latency)"]
    cg_entries = callgrind.get("entries") if callgrind else None
    if callgrind:
        header.append(f"instructions/Get ({cg_entries:,} entries)")
    rows = []
    for v in variants:
        bare = bare_for(v)
        row = [v]
        for e in entries_list:
            for op in ("UncontendedGet", "UncontendedGetDependent"):
                ns = res.get(op, v, "cpu_ns", entries=e, threads=1)
                r = res.paired_ratio("cpu_ns", dict(op=op, variant=v, entries=e, threads=1),
                                     dict(op=op, variant=bare, entries=e, threads=1))
                row.append(num(ns) if v.startswith("Bare") else f"{num(ns)} ({times(r)})")
        for e in interleaved:
            rt = res.get("GetVsBare", v, "ratio_to_bare", entries=e, threads=1)
            rl = res.get("GetVsBareDependent", v, "ratio_to_bare", entries=e, threads=1)
            row.append("-" if rt is None and rl is None else f"{times(rt)} / {times(rl)}")
        if callgrind:
            ins = callgrind["instructions_per_get"].get(v)
            b = callgrind["instructions_per_get"].get(bare)
            row.append("-" if ins is None else
                       (f"{ins:.1f}" if v.startswith("Bare") else f"{ins:.1f} ({times(ratio(ins, b))})"))
        rows.append(row)
    return "\n".join([
        "### Uncontended single-thread Get next to a bare find", "",
        "One thread, Gets of live keys in a random order; CPU time of the benchmark thread per "
        "Get (google-benchmark's cpu_time: time spent waiting for a CPU taken by other "
        "processes is not in it). Parentheses: the cost relative to a "
        "bare `find` on an unlocked map of the same inner type (`BareStdFind` = "
        "`std::unordered_map`, `BareFlatFind` = `absl::flat_hash_map`). *Throughput*: "
        "independent Gets back to back (the CPU overlaps the cache misses of consecutive "
        "bare finds; a locked Get's atomic read-modify-writes are full barriers and cannot). "
        "*Latency*: each key depends on the previous Get's result, so nothing overlaps: the "
        "cost of one Get in the middle of other work. Instructions: valgrind "
        "--tool=callgrind, collected only inside the Get loop (the loop's own ~8 "
        "instructions per Get are included for every variant; the loop is flattened for "
        "every variant so that each map's find is inlined as at the daemon's call sites). "
        "*Interleaved ratio*: `BM_GetVsBare`, the variant and its bare inner map timed in "
        "alternating chunks of 4,096 Gets (thread CPU time, 200 rounds, the order alternating), "
        "the median of the per-round ratios: a burst of load from other processes lasts "
        "longer than a round, so it slows both sides of one ratio, where the two separate runs "
        "of the columns before can land in different bursts. With 100,000 entries both tables "
        "compete for the caches in this mode, so both sides miss more than in a run alone. "
        "The target row uses the interleaved ratios where they exist.", "",
        table(header, rows)])


# ---------------------------------------------------------------------------------------------
# Targets


def fmt_points(points, limit=6):
    s = ", ".join(points[:limit])
    if len(points) > limit:
        s += f", ... ({len(points)} in all)"
    return s


def evaluate_targets(res, callgrind, variant):
    """[(target, measured, verdict)] for 'variant'."""
    rows = []
    # 1. Read-heavy, 8 threads, 1k entries: >= 4x the global mutex.
    r = res.paired_ratio("ops_per_s",
                         dict(op="ReadHeavy", variant=variant, entries=1000, threads=8),
                         dict(op="ReadHeavy", variant=BASELINE, entries=1000, threads=8))
    rows.append(("read-heavy, 8 threads, 1k entries: >= 4x the global mutex",
                 times(r), verdict(r is not None and r >= 4)))
    # 2. 64 threads >= 70% of 2 threads, every mix and size. In wall-clock throughput as the
    # issue states it, and per CPU second (1 / cpu_ns_per_op): on a machine shared with other
    # work, 64 threads get a bigger share of the CPUs than 2 do, which flatters the wall-clock
    # ratio; the CPU cost per operation does not depend on the share.
    for field, what, invert in (("ops_per_s", "wall-clock ops/s", False),
                                ("cpu_ns_per_op", "ops per CPU-second", True)):
        worst, bad = None, []
        for mix, _ in MIXES:
            for e in res.points(mix, 3):
                at64 = dict(op=mix, variant=variant, entries=e, threads=64)
                at2 = dict(op=mix, variant=variant, entries=e, threads=2)
                r = (res.paired_ratio(field, at2, at64) if invert
                     else res.paired_ratio(field, at64, at2))
                if r is None:
                    continue
                if worst is None or r < worst[0]:
                    worst = (r, f"{mix}/{e}")
                if r < 0.7:
                    bad.append(f"{mix}/{e}: {r:.0%}")
        rows.append((f"64 threads >= 70% of its own 2-thread throughput, {what} (every mix, "
                     "both sizes)",
                     "-" if worst is None else
                     f"worst {worst[0]:.0%} ({worst[1]})" + (f"; below: {fmt_points(bad)}" if bad else ""),
                     verdict(worst is not None and not bad)))
    # 3. Uncontended Get <= 1.5x a bare find on the same inner map.
    bare = bare_for(variant)
    parts, ok = [], True
    if callgrind and variant in callgrind["instructions_per_get"]:
        ri = ratio(callgrind["instructions_per_get"][variant],
                   callgrind["instructions_per_get"].get(bare))
        parts.append(f"instructions {times(ri)}")
        ok = ok and ri is not None and ri <= 1.5
    for e in res.points("UncontendedGet", 3):
        for op, what in (("UncontendedGet", "throughput"), ("UncontendedGetDependent", "latency")):
            # The interleaved measurement where there is one (BM_GetVsBare: both maps in
            # alternating sub-millisecond chunks), else the separate runs' paired ratio.
            rn = res.get(op.replace("UncontendedGet", "GetVsBare"), variant, "ratio_to_bare",
                         entries=e, threads=1)
            if rn is None:
                rn = res.paired_ratio("cpu_ns", dict(op=op, variant=variant, entries=e, threads=1),
                                      dict(op=op, variant=bare, entries=e, threads=1))
            if rn is not None:
                parts.append(f"{e // 1000}k {what} {times(rn)}")
                ok = ok and rn <= 1.5
    rows.append((f"uncontended Get <= 1.5x a bare find ({bare})", "; ".join(parts) or "-",
                 verdict(bool(parts) and ok)))
    # 4. Lookup p99 with Snapshot <= 1/10 of lock-held iteration's.
    op = "LookupDuringIteration"
    if variant in res.variants.get(op, []):
        worst, bad, floors = None, [], []
        for e in res.points(op, 3):
            for t in res.points(op, 4):
                r = res.paired_ratio(
                    "lookup_p99_ns",
                    dict(op=op, variant=variant, mode="snapshot", entries=e, threads=t),
                    dict(op=op, variant=variant, mode="lock_held", entries=e, threads=t))
                if r is None:
                    continue
                if worst is None or r > worst[0]:
                    worst = (r, f"{e}/{t}thr")
                if r > 0.1:
                    bad.append(f"{e}/{t}thr: {r:.2f}")
                # Where lock-held is already within 2x of the no-iteration floor, no mode can be
                # 10x below it: say so next to the verdict.
                floor = res.paired_ratio(
                    "lookup_p99_ns",
                    dict(op=op, variant=variant, mode="lock_held", entries=e, threads=t),
                    dict(op=op, variant=variant, mode="none", entries=e, threads=t))
                if floor is not None:
                    floors.append(floor)
        floor_note = ""
        if floors:
            near = sum(1 for f in floors if f <= 2)
            floor_note = (f"; lock-held p99 / no-iteration p99: median {median(floors):.2f}x, "
                          f"within 2x of the floor at {near} of {len(floors)} points")
        rows.append(("lookup p99 during a full iteration: Snapshot <= 1/10 of lock-held",
                     "-" if worst is None else
                     f"worst {worst[0]:.2f} ({worst[1]})"
                     + (f"; above 0.1: {fmt_points(bad)}" if bad else "") + floor_note,
                     verdict(worst is not None and not bad)))
    else:
        rows.append(("lookup p99 during a full iteration: Snapshot <= 1/10 of lock-held",
                     "not measured for this variant", "-"))
    # 5. At or ahead of oneTBB and libcuckoo, read-heavy and hot-query, every thread count.
    for other in ("TbbConcurrentHashMap", "LibcuckooMap"):
        if not any(other in res.variants.get(m, []) for m in ("ReadHeavy", "HotQuery")):
            rows.append((f"at or ahead of {other} (read-heavy, hot query)", "variant not built", "-"))
            continue
        behind = []
        for mix in ("ReadHeavy", "HotQuery"):
            for e in res.points(mix, 3):
                for t in res.points(mix, 4):
                    r = res.paired_ratio("ops_per_s",
                                         dict(op=mix, variant=variant, entries=e, threads=t),
                                         dict(op=mix, variant=other, entries=e, threads=t))
                    if r is not None and r < 1.0:
                        behind.append(f"{mix}/{e}/{t}thr at {r:.0%}")
        rows.append((f"at or ahead of {other} (read-heavy and hot query, every thread count)",
                     "ahead everywhere" if not behind else "behind at " + fmt_points(behind, 8),
                     verdict(not behind)))
    return rows


def verdict(ok):
    return "met" if ok else "**not met**"


def targets_section(res, callgrind, candidates):
    out = ["### Targets of the issue, evaluated from this run", ""]
    for v in [default_variant(res)] + [c for c in candidates if c != default_variant(res)]:
        if not any(v in vs for vs in res.variants.values()):
            continue
        label = "default" if v == default_variant(res) else "for comparison"
        out += [f"#### `{v}` ({label})", "",
                table(["target", "measured", "verdict"], evaluate_targets(res, callgrind, v)), ""]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# Plot


def plot(res, path, plotted):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    entries_list = res.points("ReadHeavy", 3) or [1000]
    fig, axes = plt.subplots(len(entries_list), len(MIXES), figsize=(20, 5.2 * len(entries_list)),
                             squeeze=False)
    styles = ["-", "--", "-.", ":"]
    markers = ["o", "s", "^", "v", "D", "P", "X", "*", "h", "<", ">", "p"]
    cmap = plt.get_cmap("tab10")
    for row, entries in enumerate(entries_list):
        for col, (mix, label) in enumerate(MIXES):
            ax = axes[row][col]
            threads = res.points(mix, 4)
            for i, v in enumerate([v for v in plotted if v in res.variants.get(mix, [])]):
                ys = [res.get(mix, v, "ops_per_s", entries=entries, threads=t) for t in threads]
                xs = [t for t, y in zip(threads, ys) if y is not None]
                ys = [y / 1e6 for y in ys if y is not None]
                ax.plot(xs, ys, label=v, color=cmap(i % 10), linestyle=styles[i % len(styles)],
                        marker=markers[i % len(markers)], linewidth=2 if v.startswith("Spin") else 1.3)
            ax.set_xscale("log", base=2)
            ax.set_xticks(threads)
            ax.set_xticklabels([str(t) for t in threads])
            ax.set_title(f"{label.split(' (')[0]}, {entries:,} entries", fontsize=11)
            ax.set_xlabel("threads (2 cores)")
            if col == 0:
                ax.set_ylabel("million ops/s (process)")
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
    legend = {}
    for ax in axes.flat:
        for h, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, h)
    if legend:
        fig.legend(list(legend.values()), list(legend.keys()), loc="lower center",
                   ncol=min(5, len(legend)), fontsize=10)
    fig.suptitle("process-wide-locks-benchmark: throughput against threads per variant "
                 f"(medians of {res.repetitions})", fontsize=13)
    fig.tight_layout(rect=(0, 0.08, 1, 0.96))
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, dpi=90)


# ---------------------------------------------------------------------------------------------
# The document


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--callgrind")
    ap.add_argument("--machine")
    ap.add_argument("--command", default="")
    ap.add_argument("--doc", default="docs/benchmarks.md")
    ap.add_argument("--plot", default="docs/images/registry-throughput.png")
    ap.add_argument("--no-plot", action="store_true",
                    help="leave the plot (and matplotlib) out: for the ctest smoke test")
    ap.add_argument("--plot-link", default="images/registry-throughput.png",
                    help="the plot's path as the document links it")
    ap.add_argument("--candidates", default="",
                    help="variants whose targets are evaluated next to the current default")
    ap.add_argument("--plotted", default="GlobalMutex,SharedMutex,ShardedStdMutex64,SpinLockShards256,"
                    "ShardedQueryMap64,ShardedQueryMap256,ShardedQueryMap256Std,LegacySpinShards64Std,"
                    "TbbConcurrentHashMap,LibcuckooMap",
                    help="variants drawn in the plot (at most 10 stay distinguishable)")
    args = ap.parse_args()

    res = Results(args.json)
    callgrind = json.load(open(args.callgrind)) if args.callgrind and os.path.exists(args.callgrind) else None
    machine = json.load(open(args.machine)) if args.machine and os.path.exists(args.machine) else None
    candidates = [c for c in args.candidates.split(",") if c]

    parts = [machine_section(res, machine, args.command),
             benchpeers.round_trip_section(res),
             targets_section(res, callgrind, candidates),
             benchpeers.peers_section(res, default_variant(res))]
    if not args.no_plot and (res.variants.get("ReadHeavy") or res.variants.get("LookupOnly")):
        plot(res, args.plot, args.plotted.split(","))
        parts.append(f"### Throughput against threads\n\n![throughput against threads per "
                     f"variant]({args.plot_link})")
    parts += [
        mix_tables(res),
        iteration_section(res),
        get_section(res, callgrind),
        lifecycle_section(
            res, "QueryLifecycle", "Executor side: the original grid (QueryExecMgr)",
            "One thread per query: CreateQueryState, then `accesses` x (GetQueryState + "
            "ReleaseQueryState), then the last release. ns/op = wall time from releasing all "
            "threads until the last one finishes, divided by queries x accesses (creating and "
            "waking the threads is part of it, as in the original experiment; it dominates "
            "the small points). Speed-up = the global mutex's ns/op divided by the variant's."),
        lifecycle_section(
            res, "RequestLifecycle", "Coordinator side: ClientRequestStateMap",
            "One thread per query: make a ClientRequestState, Add it, `accesses` x Get (copies "
            "the shared_ptr: two atomic reference-count updates per Get), Delete it."),
    ]
    DOC.write(args.doc, "\n\n".join(p for p in parts if p))
    print(f"render-benchmarks.py: wrote {args.doc}" +
          (f" and {args.plot}" if res.variants.get("ReadHeavy") and not args.no_plot else ""))


if __name__ == "__main__":
    sys.exit(main())
