"""The peers and the machine state of process-wide-locks-benchmark's results, for
render-benchmarks.py: the cache-line round trip between the two CPUs at the start and end of
every pass (BM_CacheLineRoundTrip<Machine>), and the other concurrent maps side by side with the
default ShardedQueryMap as ratios, each point marked with the placement state it ran in (the
rtt_before_ns / rtt_after_ns counters and the "placement:" label of every mix point).
"""

from benchdoc import median, table

PEERS = ["BoostConcurrentFlatMap", "TbbConcurrentHashMap", "LibcuckooMap"]
MIXES = [
    ("LookupOnly", "lookup-only"),
    ("ReadHeavy", "read-heavy (94/3/3)"),
    ("Churn", "churn (50/25/25)"),
    ("HotQuery", "hot query"),
]


def placement_of(run):
    label = run.get("label", "")
    return label.split("placement:", 1)[1] if "placement:" in label else "?"


def round_trip_section(res):
    rows = []
    trips = {}
    # Read from the raw runs: Results keys a point by its entries and threads, not by pass.
    for b in res.raw:
        name = b.get("run_name", "")
        if not name.startswith("BM_CacheLineRoundTrip<"):
            continue
        params = dict(p.split(":", 1) for p in name.split("/")[1:] if ":" in p)
        trips.setdefault(int(params.get("pass", 0)), {})[params.get("at", "?")] = b
    if not trips:
        return ""
    for p in sorted(trips):
        cells = [str(p)]
        for at in ("start", "end"):
            b = trips[p].get(at)
            cells.append("-" if b is None else
                         f"{b.get('round_trip_ns', 0):.0f} ns ({placement_of(b)})")
        rows.append(cells)
    points = [r for r in res.raw if "rtt_before_ns" in r]
    near = sum(1 for r in points if placement_of(r) == "near")
    far = sum(1 for r in points if placement_of(r) == "far")
    mixed = sum(1 for r in points if placement_of(r) == "mixed")
    ctx = res.context
    return "\n".join([
        "### The machine: cache-line round trip between the two CPUs", "",
        "Two threads pinned to the first two CPUs of the process hand one cache line back and "
        "forth (median of 21 batches of 1,000 round trips), at the start and the end of every "
        "pass, and before and after every mix point. At or above "
        f"{float(ctx.get('placement_far_ns', 150)):.0f} ns a round trip is *far* (the vCPUs share "
        "no cache), below it *near*; a point whose two measurements disagree is *mixed*. "
        f"At the start of the run: {ctx.get('cache_line_round_trip_at_start', '?')}. Mix points "
        f"per state over all passes: {near} near, {far} far, {mixed} mixed.", "",
        table(["pass", "start", "end"], rows)])


def peers_section(res, default):
    peers = [p for p in PEERS if any(p in res.variants.get(m, []) for m, _ in MIXES)]
    if not peers or not any(default in res.variants.get(m, []) for m, _ in MIXES):
        return ""
    out = ["### The peers side by side with the default", "",
           f"Operations per second of `{default}` and, for every peer, its ratio to "
           f"`{default}` at the same point (the median over the passes of each pass's ratio; "
           "above 1 the peer is faster). *placement*: the state the default's point ran in, "
           "per pass (n = near, f = far, m = mixed: flipped during the point)."]
    summary = {}
    for mix, label in MIXES:
        for entries in res.points(mix, 3):
            threads = res.points(mix, 4)
            header = ["", *[f"{t} thr" for t in threads]]
            rows = [[f"**{default}** ops/s"] +
                    [rate(res.get(mix, default, "ops_per_s", entries=entries, threads=t))
                     for t in threads]]
            for p in peers:
                row = [f"{p} / default"]
                for t in threads:
                    r = res.paired_ratio("ops_per_s",
                                         dict(op=mix, variant=p, entries=entries, threads=t),
                                         dict(op=mix, variant=default, entries=entries,
                                              threads=t))
                    row.append("-" if r is None else f"{r:.2f}x")
                    for a, b in zip(group(res, mix, p, entries, t),
                                    group(res, mix, default, entries, t)):
                        if b.get("ops_per_s"):
                            state = placement_of(b)
                            summary.setdefault((p, mix, state), []).append(
                                a.get("ops_per_s", 0) / b["ops_per_s"])
                rows.append(row)
            rows.append(["placement"] +
                        ["".join(placement_of(b)[0] for b in group(res, mix, default, entries, t))
                         or "-" for t in threads])
            out += ["", f"#### {label}, {entries:,} live entries", "", table(header, rows)]
    srows = []
    for p in peers:
        for mix, label in MIXES:
            cells = [p, label]
            for state in ("near", "far", "mixed"):
                v = summary.get((p, mix, state))
                cells.append("-" if not v else
                             f"{median(v):.2f}x (min {min(v):.2f}, max {max(v):.2f}; {len(v)})")
            srows.append(cells)
    out += ["", "#### By placement state: the peer's ratio to the default over all points", "",
            "Median, smallest and largest of the per-pass ratios of every thread count and size "
            "of a mix, split by the state the default's point ran in (number of ratios in "
            "parentheses).", "",
            table(["peer", "mix", "near", "far", "mixed"], srows)]
    return "\n".join(out)


def group(res, op, variant, entries, threads):
    return res.grouped.get((op, variant, "", entries, threads, 0, 0), [])


def rate(x):
    if x is None:
        return "-"
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= div:
            return f"{x / div:.3g}{unit}"
    return f"{x:.3g}"
