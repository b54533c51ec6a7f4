#!/usr/bin/env python3
"""Times one call of SQLite's built-in functions on values of N MiB (issue 14: one call cannot
be interrupted, so the value limit, --max_value_mb, bounds how long a cancel may wait).

    scripts/bench-builtin-calls.py [MIB ...]     (default: 2 16)

Uses Python's sqlite3 module, which links the system's libsqlite3 (Debian 12: 3.40.1, the
daemon's). Each call runs on bound parameters (no literal to parse), best of 3; the inputs are
each function's worst case for SQLite's implementation found so far: a JSON array of 1-digit
numbers (the densest input for the parser), strftime with a format of '%Y's. Results are in
docs/benchmarks.md, "The value limit and one built-in call".
"""
import sqlite3
import sys
import time


def cases(n):
    arr = "[" + ",".join(["1"] * (n // 2 - 1)) + "]"
    obj = "{" + ",".join('"k%d":%d' % (i, i) for i in range(n // 16)) + "}"
    s = "a" * n
    u = "\u00e9" * (n // 2)
    blob = b"\x00\xff" * (n // 4)
    return [
        ("json(x)", "json(?)", arr),
        ("json_valid(x)", "json_valid(?)", arr),
        ("json_set(x, '$[0]', 2)", "json_set(?, '$[0]', 2)", arr),
        ("json_extract(x, '$[#-1]')", "json_extract(?, '$[#-1]')", arr),
        ("json_extract(object, '$.k1')", "json_extract(?, '$.k1')", obj),
        ("json_each(x): parse and rows", "(SELECT count(*) FROM json_each(?))", arr),
        ("strftime(x, 'now'), x = '%Y'...", "strftime(?, 'now')", "%Y" * (n // 2)),
        ("trim(x), x = spaces", "trim(?)", " " * n),
        ("upper(x)", "upper(?)", s),
        ("length(x), 2-byte characters", "length(?)", u),
        ("hex(x), x = n/2 bytes", "hex(?)", blob),
        ("randomblob(n)", "randomblob(?)", n),
    ]


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [2, 16]
    db = sqlite3.connect(":memory:")
    print("SQLite %s; milliseconds per call, best of 3" % sqlite3.sqlite_version)
    print("| call | " + " | ".join("%d MiB" % m for m in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    rows = {}
    for mib in sizes:
        for name, expr, arg in cases(mib << 20):
            best = float("inf")
            for _ in range(3):
                start = time.perf_counter()
                try:
                    db.execute("SELECT " + expr, (arg,)).fetchone()
                except sqlite3.Error as e:
                    sys.exit("%s at %d MiB failed: %s" % (name, mib, e))
                best = min(best, time.perf_counter() - start)
            rows.setdefault(name, []).append(best * 1000)
    for name, ms in rows.items():
        print("| `%s` | " % name + " | ".join("%.1f" % t for t in ms) + " |")


if __name__ == "__main__":
    main()
