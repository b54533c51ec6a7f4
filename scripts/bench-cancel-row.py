#!/usr/bin/env python3
"""How long a canceled query holds its executor when the cancel lands inside one long row
(issue 14: every statement stops within 100 ms of a cancel).

    scripts/bench-cancel-row.py --port PORT [--runs 5] [--kinds KIND,...]

KIND: upper concat length trim substr like json numeric compare abs (default: all).

Against a running coordinatord (default flags). For each kind, a client POSTs a statement whose
one row is a long run of SQLite's own calls on large values (straight-line code in SQLite's
VM: no jump between the calls, where SQLite would check an interrupt), waits until an executor
turns busy, DELETEs the query 20 ms later, then polls /metrics until qr_executor_threads_busy
is back to 0: the time from the DELETE to then is "executor free after the cancel". Then the
same statement runs uncanceled, for its whole time. Results are in docs/benchmarks.md
("Checkpoints in SQLite's allocations").
"""
import argparse
import json
import re
import time
import urllib.request

# Two tables: one row holds at most --max_value_mb (2 MiB by default).
X = ("WITH t(x) AS MATERIALIZED (SELECT printf('%.*c', 2000000, 'a')), "
     "u(s) AS MATERIALIZED (SELECT printf('%.*c', 2000000, ' ')) SELECT ")
# Two 2 MB digit strings: converted to numbers and compared, nothing allocates.
D = ("WITH t(x) AS MATERIALIZED (SELECT printf('%.*c', 2000000, '1')), "
     "u(y) AS MATERIALIZED (SELECT printf('%.*c', 2000000, '1')) SELECT ")


def row(kind):
    if kind == "upper":  # 100 upper() calls on one 2 MB value
        return X + ", ".join("length(upper(x)) c%d" % i for i in range(100)) + " FROM t, u"
    if kind == "length":  # 100 length() counts of it (no allocation)
        return X + ", ".join("length(x) c%d" % i for i in range(100)) + " FROM t, u"
    if kind == "trim":  # 100 trim() calls on 2 MB of spaces (no allocation)
        return X + ", ".join("length(trim(s)) c%d" % i for i in range(100)) + " FROM t, u"
    if kind == "substr":  # 100 walks to the end of it, one character taken (no allocation)
        return X + ", ".join("substr(x, %d, 1) c%d" % (1999000 + i, i) for i in range(100)) + \
            " FROM t, u"
    if kind == "like":  # 100 LIKEs on it (no allocation)
        return X + ", ".join("x LIKE '%%b%d%%' c%d" % (i, i) for i in range(100)) + " FROM t, u"
    if kind == "concat":  # 100 concatenations of it
        return X + ", ".join("length(x || '%d') c%d" % (i, i) for i in range(100)) + " FROM t, u"
    if kind == "numeric":  # 100 conversions of it to a number
        return D + ", ".join("x + %d c%d" % (i, i) for i in range(100)) + " FROM t, u"
    if kind == "compare":  # 100 comparisons of two equal 2 MB strings
        return D + ", ".join("x = y c%d" % i for i in range(100)) + " FROM t, u"
    if kind == "abs":  # 100 abs() of it (a conversion inside a built-in)
        return D + ", ".join("abs(x) c%d" % i for i in range(100)) + " FROM t, u"
    if kind == "json":  # ten parses of distinct 1 MiB JSON arrays
        arr = "'[' || printf('%%.*c', 1048570, '1') || '%s]'"
        return "SELECT " + " + ".join("json_valid(%s)" % (arr % (" " * i)) for i in range(10))
    raise SystemExit("unknown kind " + kind)


def request(port, method, path, body=None):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=body,
                                 method=method, headers={"X-Trino-User": "bench"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.status, r.read()


def busy(port):
    _, body = request(port, "GET", "/metrics")
    m = re.search(rb"^qr_executor_threads_busy (\d+)", body, re.M)
    return int(m.group(1))


def submit(port, sql):
    _, body = request(port, "POST", "/v1/statement", sql.encode())
    return json.loads(body)


def path_of(uri):
    return "/" + uri.split("/", 3)[3]


def canceled_run(port, sql):
    while busy(port) != 0:
        time.sleep(0.01)
    first = submit(port, sql)
    while busy(port) == 0:
        time.sleep(0.001)
    time.sleep(0.02)
    start = time.perf_counter()
    request(port, "DELETE", path_of(first["nextUri"]))
    while busy(port) != 0:
        time.sleep(0.0005)
    return (time.perf_counter() - start) * 1000


def whole_run(port, sql):
    start = time.perf_counter()
    r = submit(port, sql)
    while "nextUri" in r:
        _, body = request(port, "GET", path_of(r["nextUri"]))
        r = json.loads(body)
    if r["stats"]["state"] != "FINISHED":
        raise SystemExit("the uncanceled statement ended %s: %s" % (r["stats"]["state"],
                                                                     r.get("error")))
    return (time.perf_counter() - start) * 1000


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--kinds",
                   default="upper,concat,length,trim,substr,like,json,numeric,compare,abs")
    a = p.parse_args()
    print("| row | executor free after the cancel (ms) | whole row, not canceled (ms) |")
    print("|---|---|---|")
    for kind in a.kinds.split(","):
        sql = row(kind)
        canceled = [canceled_run(a.port, sql) for _ in range(a.runs)]
        whole = [whole_run(a.port, sql) for _ in range(3)]
        print("| %s | %s | %s |" % (kind, ", ".join("%.1f" % t for t in canceled),
                                    ", ".join("%.0f" % t for t in whole)))


if __name__ == "__main__":
    main()
