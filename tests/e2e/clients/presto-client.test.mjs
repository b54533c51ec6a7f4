// End-to-end test of the npm package presto-client against a real coordinatord: SELECT 1, a
// multi-page TPC-H query checked against the server's own aggregates, a failing query, and a
// cancel of a long-running query.
//
// presto-client quirks this exercises (docs/protocol.md, "Client quirks"): X-Presto-* headers by
// default (X-Trino-* with engine 'trino'), a chunked POST body without Content-Type, a poll
// every 'checkInterval' ms, stats.state read on every answer, nextUri required on the POST
// answer, and a cancel sent as DELETE whose request target is the absolute nextUri.

import {after, before, test} from 'node:test';
import assert from 'node:assert/strict';
import {createRequire} from 'node:module';

import {ENDLESS, queryInfo, scalar, startDaemon} from './daemon.mjs';

const require = createRequire(import.meta.url);
const presto = require('presto-client');

let daemon;

before(async () => {
  daemon = await startDaemon();
});

after(async () => {
  if (daemon) {
    const {code} = await daemon.stop();
    assert.equal(code, 0, 'coordinatord exits 0 on SIGTERM');
  }
});

/// A client; a short checkInterval keeps the multi-page test fast (the default is 800 ms
/// between pages).
function client(extra = {}) {
  return new presto.Client({host: daemon.host, port: daemon.port, user: 'e2e-presto',
                            source: 'qr-e2e', checkInterval: 5, timeout: 240, ...extra});
}

/// Runs 'sql' with client.execute(); resolves with everything the callbacks reported.
/// 'extra' may add execute() options (e.g. cancel) and onState(state), called on each change.
function execute(c, sql, {onState, ...extra} = {}) {
  return new Promise((resolve) => {
    const seen = {rows: [], columns: null, states: [], queryId: null, error: null, stats: null};
    c.execute({
      query: sql,
      state: (error, queryId, stats) => {
        seen.queryId = queryId;
        seen.states.push(stats.state);
        if (onState) onState(stats.state);
      },
      columns: (error, columns) => {
        seen.columns = columns;
      },
      data: (error, data) => {
        seen.rows.push(...data);
      },
      success: (error, stats) => {
        seen.stats = stats;
        resolve(seen);
      },
      error: (error) => {
        seen.error = error;
        resolve(seen);
      },
      ...extra,
    });
  });
}

test('SELECT 1 with both header families', async () => {
  for (const engine of ['presto', 'trino']) {
    const r = await execute(client({engine}), 'SELECT 1');
    assert.equal(r.error, null, `${engine}: ${JSON.stringify(r.error)}`);
    assert.deepEqual(r.rows, [[1]]);
    assert.deepEqual(r.columns.map((c) => [c.name, c.type]), [['_col0', 'bigint']]);
    assert.equal(r.stats.state, 'FINISHED');
    assert.equal(r.states[0], 'QUEUED');
    const info = await queryInfo(daemon.base, r.queryId);
    assert.equal(info.session.user, 'e2e-presto');
    assert.equal(info.session.source, 'qr-e2e');
  }
});

test('multi-page TPC-H query: row count and checksum match the server', async () => {
  const expectedRows = await scalar(daemon.base, 'SELECT count(*) FROM lineitem');
  const expectedSum = await scalar(daemon.base, 'SELECT sum(l_quantity) FROM lineitem');
  const expectedKeys = await scalar(daemon.base, 'SELECT sum(l_orderkey) FROM lineitem');
  assert.ok(expectedRows > 50000, `lineitem has ${expectedRows} rows`);

  const r = await execute(client(), 'SELECT l_orderkey, l_quantity FROM lineitem');
  assert.equal(r.error, null, JSON.stringify(r.error));
  assert.equal(r.stats.state, 'FINISHED');
  assert.deepEqual(r.columns.map((c) => c.type), ['bigint', 'double']);
  assert.equal(r.rows.length, expectedRows);
  let sum = 0;
  let keys = 0;
  for (const [orderkey, quantity] of r.rows) {
    keys += orderkey;
    sum += quantity;
  }
  assert.equal(sum, expectedSum);  // integral quantities: the double sums are exact
  assert.equal(keys, expectedKeys);
});

test('a failing query surfaces its error', async () => {
  const r = await execute(client(), 'SELECT no_such_column FROM nation');
  assert.ok(r.error, 'the error callback ran');
  assert.equal(r.error.errorName, 'COLUMN_NOT_FOUND');
  assert.equal(r.error.errorCode, 47);
  assert.match(r.error.message, /no_such_column/);

  const denied = await execute(client(), 'DELETE FROM nation');
  assert.equal(denied.error.errorName, 'PERMISSION_DENIED');
});

test('cancel of a long-running query (DELETE of the absolute nextUri)', async () => {
  const sql = `${ENDLESS} -- presto-client cancel`;
  let running = false;
  const r = await execute(client({checkInterval: 50}), sql, {
    // Checked before every GET after the POST: cancel once an answer said RUNNING. The client
    // then sends DELETE <absolute nextUri> and reports success only on a 204.
    cancel: () => running,
    onState: (state) => {
      if (state === 'RUNNING') running = true;
    },
  });
  assert.ok(running, `states seen: ${r.states}`);
  assert.ok(r.error);
  assert.equal(r.error.message, 'query fetch canceled by operation',
               `the DELETE must be answered 204: ${JSON.stringify(r.error)}`);
  const info = await queryInfo(daemon.base, r.queryId);
  assert.equal(info.state, 'FAILED');
  assert.equal(info.errorCode.name, 'USER_CANCELED');
});
