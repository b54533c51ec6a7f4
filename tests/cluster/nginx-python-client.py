"""The Python trino client through nginx in front of a cluster (run by cluster-nginx-test.py
with the venv of scripts/py-deps.sh):
    python nginx-python-client.py NGINX-HOST NGINX-PORT
Runs each statement of QUERIES three times from four threads (a connection each) with
trino.dbapi and prints one JSON object: {"results": [{"sql", "rows", "sum", "state"}...]};
'sum' adds every numeric cell.
"""

import concurrent.futures
import json
import sys

import trino

QUERIES = [
    "SELECT count(*) FROM lineitem",
    "SELECT l_orderkey, l_quantity FROM lineitem",
    "SELECT o_orderkey, o_totalprice FROM orders ORDER BY o_orderkey",
    "SELECT n_nationkey, n_regionkey FROM nation",
]


def run(host, port, sql):
    conn = trino.dbapi.connect(host=host, port=port, user="nginx-python",
                               source="qr-nginx-test", http_scheme="http")
    try:
        cur = conn.cursor()
        cur.execute(sql)
        rows = cur.fetchall()
        state = cur.stats["state"]
    finally:
        conn.close()
    total = sum(c for row in rows for c in row
                if isinstance(c, (int, float)) and not isinstance(c, bool))
    return {"sql": sql, "rows": len(rows), "sum": total, "state": state}


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda sql: run(host, port, sql), QUERIES * 3))
    print(json.dumps({"results": results}))


if __name__ == "__main__":
    main()
