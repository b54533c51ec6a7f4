"""presto-python-client (PyPI, pinned in requirements.txt) against a real coordinatord.

A Presto client speaks the X-Presto-* family of headers and reads only that family in the
answers: query parameters (the client's PREPARE, then EXECUTE with X-Presto-Prepared-Statement
and DEALLOCATE PREPARE, reading X-Presto-Added-Prepare), SET SESSION (X-Presto-Set-Session,
then sent back in X-Presto-Session), and the cancel of a running query (DELETE /v1/query/{id},
which must answer 204). Before the server answered in the client's family, every parameterized
query failed with "Prepared statement not found".

Run by tests/e2e/python/run-python-test.sh with QR_COORDINATORD naming the daemon binary.
Every wait has a deadline and polls a condition.
"""

import threading
import time
import unittest

import prestodb
import prestodb.exceptions

import e2e_daemon

DAEMON = {}

ENDLESS = e2e_daemon.ENDLESS


def setUpModule():
    DAEMON.update(e2e_daemon.start("qr-e2e-presto-py-"))


def tearDownModule():
    e2e_daemon.stop(DAEMON)


def connect():
    return prestodb.dbapi.connect(host=DAEMON["host"], port=DAEMON["port"], user="presto-e2e",
                                  catalog="sqlite", schema="main")


def fetch(conn, sql, params=None):
    cur = conn.cursor()
    cur.execute(sql, params)
    return cur.fetchall()


class PrestoClientTest(unittest.TestCase):

    def test_plain_query(self):
        self.assertEqual(fetch(connect(), "SELECT count(*) FROM nation"), [[25]])

    def test_parameters_go_through_prepare_and_execute(self):
        conn = connect()
        expected = fetch(conn, "SELECT n_name FROM nation WHERE n_nationkey = 3")
        self.assertEqual(len(expected), 1)
        self.assertEqual(fetch(conn, "SELECT n_name FROM nation WHERE n_nationkey = ?", (3,)),
                         expected)
        attack = "x' OR 1=1 --"
        self.assertEqual(fetch(conn, "SELECT ?, count(*) FROM nation WHERE n_name = ?",
                               (attack, attack)), [[attack, 0]])

    def test_set_session_comes_back_in_the_presto_session_header(self):
        conn = connect()
        fetch(conn, "SET SESSION query_max_run_time = '1h'")
        self.assertEqual(conn._client_session.properties, {"query_max_run_time": "1h"})
        rows = fetch(conn, "SHOW SESSION LIKE 'query_max_run_time'")
        self.assertEqual([(r[0], r[1]) for r in rows], [("query_max_run_time", "1h")])
        with self.assertRaises(prestodb.exceptions.PrestoUserError) as ctx:
            fetch(conn, "SET SESSION query_max_run_time = 'soon'")
        self.assertEqual(ctx.exception.error_name, "INVALID_SESSION_PROPERTY")

    def test_cancel_of_a_running_query(self):
        cur = connect().cursor()
        errors = []

        def run():
            try:
                cur.execute(ENDLESS)  # polls until the query ends
                cur.fetchall()
                errors.append(None)
            except Exception as e:  # what the client raises for the failed query
                errors.append(e)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        # Until the server runs the query and the client has its id (from the POST's answer);
        # each look is a query of the server's own table.
        admin = connect()
        deadline = time.monotonic() + 60
        running = []
        while time.monotonic() < deadline and (
                not running or cur._query is None or cur._query.query_id is None):
            running = fetch(admin, "SELECT query_id FROM system.runtime.queries WHERE "
                                   "state = 'RUNNING' AND query LIKE 'WITH RECURSIVE%'")
        self.assertTrue(running, "the endless query never showed as RUNNING")
        self.assertIsNotNone(cur._query.query_id, "the POST was never answered")
        cur.cancel()  # DELETE /v1/query/{id}: the client raises unless the answer is 204
        thread.join(timeout=60)
        self.assertFalse(thread.is_alive(), "the canceled query's polling never ended")
        self.assertEqual(len(errors), 1)
        self.assertIsInstance(errors[0], prestodb.exceptions.PrestoQueryError)
        self.assertEqual(errors[0].error_name, "USER_CANCELED")


if __name__ == "__main__":
    unittest.main(verbosity=2)
