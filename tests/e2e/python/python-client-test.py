"""The Python client (PyPI trino, pinned in requirements.txt) against a real coordinatord.

Query parameters in both prepared-statement modes of the client (EXECUTE IMMEDIATE, and the
legacy PREPARE / EXECUTE / DEALLOCATE PREPARE with the X-Trino-Prepared-Statement header), an
injection attempt that must stay a value, USE, SET SESSION / RESET SESSION honoured by the
server, transactions refused, pandas.read_sql of a parameterized query, SQLAlchemy's
inspect() over the trino dialect (schemas, tables, columns with their types), and the
registry in SQL (system.runtime.queries, CALL system.runtime.kill_query).

Run by tests/e2e/python/run-python-test.sh with QR_COORDINATORD naming the daemon binary.
Every wait has a deadline; nothing sleeps for a fixed time.
"""

import datetime
import decimal
import queue
import threading
import time
import unittest
import warnings

import trino
import trino.exceptions

import e2e_daemon

DAEMON = {}

ENDLESS = e2e_daemon.ENDLESS


def setUpModule():
    DAEMON.update(e2e_daemon.start("qr-e2e-py-"))


def tearDownModule():
    e2e_daemon.stop(DAEMON)


def connect(**kwargs):
    return trino.dbapi.connect(host=DAEMON["host"], port=DAEMON["port"], user="py-e2e",
                               **kwargs)


def fetch(conn, sql, params=None):
    cur = conn.cursor()
    cur.execute(sql, params)
    return cur.fetchall()


class ParametersTest(unittest.TestCase):

    def check_modes(self, sql, params, expected):
        for legacy in (True, False):
            with self.subTest(legacy_prepared_statements=legacy):
                conn = connect(legacy_prepared_statements=legacy)
                self.assertEqual(fetch(conn, sql, params), expected)
                # The legacy path deallocates what it prepared.
                self.assertEqual(conn._client_session.prepared_statements, {})

    def test_qmark_parameter_in_both_modes(self):
        expected = fetch(connect(), "SELECT n_name FROM nation WHERE n_nationkey = 3")
        self.assertEqual(len(expected), 1)
        self.check_modes("SELECT n_name FROM nation WHERE n_nationkey = ?", (3,), expected)

    def test_default_mode_probes_execute_immediate(self):
        conn = connect()
        self.assertEqual(fetch(conn, "SELECT ? + 1", (41,)), [[42]])
        self.assertFalse(conn._use_legacy_prepared_statements())

    def test_injection_attempt_stays_a_value(self):
        attack = "x' OR 1=1 --"
        self.check_modes("SELECT count(*) FROM nation WHERE n_name = ?", (attack,), [[0]])
        self.check_modes("SELECT ?", (attack,), [[attack]])
        self.check_modes("SELECT ?, ?", ("'; SELECT 1; --", "a''b"), [["'; SELECT 1; --", "a''b"]])

    def test_typed_parameters(self):
        cutoff = datetime.date(1995, 1, 1)
        expected = fetch(connect(),
                         "SELECT count(*) FROM orders WHERE o_orderdate < '1995-01-01'")
        self.assertGreater(expected[0][0], 0)
        self.check_modes("SELECT count(*) FROM orders WHERE o_orderdate < ?", (cutoff,),
                         expected)
        self.check_modes(
            "SELECT ?, ?, ?, ?, ?, hex(?)",
            (None, 2.5, decimal.Decimal("1.25"), "naïve", -7, b"\x00\xff"),
            [[None, 2.5, 1.25, "naïve", -7, "00FF"]])
        self.check_modes("SELECT ?", (datetime.datetime(2024, 1, 2, 3, 4, 5),),
                         [["2024-01-02 03:04:05.000000"]])

    def test_cursor_describe(self):
        described = connect().cursor().describe(
            "SELECT n_name, n_nationkey + 1 AS k FROM nation WHERE n_regionkey = ?")
        self.assertEqual([(d.name, d.schema, d.table, d.type, bool(d.aliased))
                          for d in described],
                         [("n_name", "main", "nation", "varchar", False),
                          ("k", None, None, "unknown", True)])

    def test_parameter_count_must_match(self):
        with self.assertRaises(trino.exceptions.TrinoUserError) as ctx:
            fetch(connect(legacy_prepared_statements=False), "SELECT ?, ?", (1,))
        self.assertEqual(ctx.exception.error_name, "INVALID_PARAMETER_USAGE")

    def test_pandas_read_sql_with_params(self):
        try:
            import pandas
        except ImportError:
            self.skipTest("pandas is not installed (scripts/py-deps.sh)")
        conn = connect()
        expected = fetch(conn, "SELECT n_nationkey, n_name FROM nation WHERE n_regionkey = 1 "
                               "ORDER BY n_nationkey")
        with warnings.catch_warnings():
            # pandas warns that it was given a DBAPI connection rather than SQLAlchemy's.
            warnings.simplefilter("ignore", UserWarning)
            frame = pandas.read_sql(
                "SELECT n_nationkey, n_name FROM nation WHERE n_regionkey = ? "
                "ORDER BY n_nationkey", conn, params=(1,))
        self.assertEqual(list(frame.columns), ["n_nationkey", "n_name"])
        self.assertEqual(frame.values.tolist(), expected)


class SessionTest(unittest.TestCase):

    def test_use_sets_catalog_and_schema(self):
        conn = connect()
        fetch(conn, "USE sqlite.main")
        self.assertEqual(conn._client_session.catalog, "sqlite")
        self.assertEqual(conn._client_session.schema, "main")
        with self.assertRaises(trino.exceptions.TrinoUserError) as ctx:
            fetch(conn, "USE nowhere")
        self.assertEqual(ctx.exception.error_name, "SCHEMA_NOT_FOUND")

    def test_set_session_limit_is_honoured_and_reset(self):
        conn = connect()
        fetch(conn, "SET SESSION query_max_execution_time = '1s'")
        self.assertEqual(conn._client_session.properties,
                         {"query_max_execution_time": "1s"})
        with self.assertRaises(trino.exceptions.TrinoQueryError) as ctx:
            fetch(conn, ENDLESS)
        self.assertEqual(ctx.exception.error_name, "EXCEEDED_TIME_LIMIT")
        fetch(conn, "RESET SESSION query_max_execution_time")
        self.assertEqual(conn._client_session.properties, {})

    def test_unknown_session_property_is_refused(self):
        with self.assertRaises(trino.exceptions.TrinoUserError) as ctx:
            fetch(connect(), "SET SESSION join_distribution_type = 'BROADCAST'")
        self.assertEqual(ctx.exception.error_name, "INVALID_SESSION_PROPERTY")

    def test_transactions_are_not_supported(self):
        with self.assertRaises(trino.exceptions.TrinoUserError) as ctx:
            fetch(connect(), "START TRANSACTION")
        self.assertEqual(ctx.exception.error_name, "NOT_SUPPORTED")


class SqlAlchemyTest(unittest.TestCase):
    """What Superset and other SQLAlchemy tools do to browse: the trino dialect's inspect()."""

    def test_inspect_lists_schemas_tables_and_typed_columns(self):
        try:
            import sqlalchemy
        except ImportError:
            self.skipTest("sqlalchemy is not installed (scripts/py-deps.sh)")
        engine = sqlalchemy.create_engine(
            "trino://py-e2e@%s:%d/sqlite" % (DAEMON["host"], DAEMON["port"]))
        try:
            inspector = sqlalchemy.inspect(engine)
            self.assertIn("main", inspector.get_schema_names())
            tables = inspector.get_table_names(schema="main")
            for table in ("nation", "region", "orders", "lineitem"):
                self.assertIn(table, tables)
            columns = {c["name"]: c for c in inspector.get_columns("lineitem", schema="main")}
            self.assertEqual(len(columns), 16)
            # The dialect's own classes for some types (its DOUBLE): compared by name.
            types = {name: type(c["type"]).__name__ for name, c in columns.items()}
            self.assertEqual(types["l_orderkey"], "BIGINT")
            self.assertEqual(types["l_quantity"], "DOUBLE")
            self.assertEqual(types["l_shipdate"], "DATE")
            self.assertEqual(types["l_comment"], "VARCHAR")
            self.assertEqual(columns["l_comment"]["type"].length, 44)
            self.assertFalse(columns["l_comment"]["nullable"])
            with engine.connect() as conn:
                rows = conn.execute(sqlalchemy.text(
                    "SELECT n_name FROM nation WHERE n_nationkey = :k"), {"k": 3}).fetchall()
            self.assertEqual(rows, [("CANADA",)])
        finally:
            engine.dispose()


class RuntimeTablesTest(unittest.TestCase):

    def test_queries_table_lists_a_running_query_and_kill_query_ends_it(self):
        runner = connect()
        cur = runner.cursor()
        errors = queue.Queue()

        def run():
            try:
                cur.execute(ENDLESS)
                cur.fetchall()
                errors.put(None)
            except trino.exceptions.TrinoQueryError as e:
                errors.put(e)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        admin = connect()
        query_id = None
        deadline = time.monotonic() + 60
        while query_id is None and time.monotonic() < deadline:
            rows = fetch(admin, "SELECT query_id FROM system.runtime.queries "
                                "WHERE state = 'RUNNING' AND query LIKE 'WITH RECURSIVE%'")
            if rows:
                query_id = rows[0][0]
        self.assertIsNotNone(query_id, "the endless query never showed as RUNNING")
        # A procedure call is a statement of its own (not the SQL of EXECUTE): the id, hex
        # digits and a colon, goes in as a literal.
        self.assertRegex(query_id, r"^[0-9a-f]{16}:[0-9a-f]{16}$")
        fetch(admin, "CALL system.runtime.kill_query(query_id => '%s', message => 'e2e')"
              % query_id)
        error = errors.get(timeout=60)
        self.assertIsNotNone(error)
        self.assertEqual(error.error_name, "USER_CANCELED")
        self.assertIn("Query killed. Message: e2e", error.message)
        thread.join(timeout=60)


if __name__ == "__main__":
    unittest.main(verbosity=2)
