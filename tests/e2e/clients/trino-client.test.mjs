// End-to-end test of the npm package trino-client (the Trino project's JavaScript client)
// against a real coordinatord: SELECT 1, a multi-page TPC-H query checked against the
// server's own aggregates, a failing query, and a cancel of a long-running query.
//
// trino-client quirks this exercises (docs/protocol.md, "Client quirks"): it sends X-Trino-*
// headers plus Basic credentials, discards rows on the POST answer, GETs nextUri before
// yielding anything and skips answers without rows, reports a failure as a yielded result
// with 'error' (it does not throw), and cancels with DELETE /v1/query/{id}.

import {after, before, test} from 'node:test';
import assert from 'node:assert/strict';

import {BasicAuth, Trino} from 'trino-client';

import {ENDLESS, findRunningQuery, queryInfo, scalar, startDaemon} from './daemon.mjs';

let daemon;
let trino;

before(async () => {
  daemon = await startDaemon();
  trino = Trino.create({server: daemon.base, source: 'qr-e2e', auth: new BasicAuth('e2e-trino')});
});

after(async () => {
  if (daemon) {
    const {code} = await daemon.stop();
    assert.equal(code, 0, 'coordinatord exits 0 on SIGTERM');
  }
});

/// Every result trino-client yields for 'sql', in order.
async function collect(sql) {
  const results = [];
  for await (const result of await trino.query(sql)) results.push(result);
  return results;
}

test('SELECT 1', async () => {
  const results = await collect('SELECT 1');
  const rows = results.flatMap((r) => r.data ?? []);
  assert.deepEqual(rows, [[1]]);
  const last = results.at(-1);
  assert.equal(last.error, undefined);
  assert.deepEqual(last.columns.map((c) => [c.name, c.type]), [['_col0', 'bigint']]);
  const info = await trino.queryInfo(last.id);
  assert.equal(info.state, 'FINISHED');
  assert.equal(info.session.user, 'e2e-trino');
  assert.equal(info.session.source, 'qr-e2e');
});

test('multi-page TPC-H query: row count and checksum match the server', async () => {
  const expectedRows = await scalar(daemon.base, 'SELECT count(*) FROM lineitem');
  const expectedSum = await scalar(daemon.base, 'SELECT sum(l_quantity) FROM lineitem');
  const expectedKeys = await scalar(daemon.base, 'SELECT sum(l_orderkey) FROM lineitem');
  assert.ok(expectedRows > 50000, `lineitem has ${expectedRows} rows`);

  let rows = 0;
  let pages = 0;
  let sum = 0;
  let keys = 0;
  let columns = null;
  let lastState = null;
  for await (const result of await trino.query('SELECT l_orderkey, l_quantity FROM lineitem')) {
    assert.equal(result.error, undefined, JSON.stringify(result.error));
    if (result.columns) columns = result.columns;
    if (result.data) {
      pages += 1;
      for (const [orderkey, quantity] of result.data) {
        rows += 1;
        keys += orderkey;
        sum += quantity;
      }
    }
    lastState = result.stats.state;
  }
  assert.deepEqual(columns.map((c) => c.type), ['bigint', 'double']);
  assert.equal(rows, expectedRows);
  assert.ok(pages > 10, `${pages} pages`);
  assert.equal(sum, expectedSum);  // integral quantities: the double sums are exact
  assert.equal(keys, expectedKeys);
  assert.equal(lastState, 'FINISHED');
});

test('a failing query surfaces its error', async () => {
  const results = await collect('SELECT * FROM no_such_table');
  const last = results.at(-1);
  assert.equal(last.stats.state, 'FAILED');
  assert.equal(last.error.errorName, 'TABLE_NOT_FOUND');
  assert.equal(last.error.errorCode, 46);
  assert.equal(last.error.errorType, 'USER_ERROR');
  assert.match(last.error.message, /no_such_table/);

  const syntax = (await collect('SELEC 1')).at(-1);
  assert.equal(syntax.error.errorName, 'SYNTAX_ERROR');
  assert.deepEqual(syntax.error.errorLocation, {lineNumber: 1, columnNumber: 1});
});

test('cancel of a long-running query', async () => {
  const sql = `${ENDLESS} -- trino-client cancel`;
  const iterator = await trino.query(sql);
  // The iterator keeps re-GETting answers without rows, so this stays pending until the
  // query ends.
  const next = iterator.next();
  const running = await findRunningQuery(daemon.base, sql);
  const canceled = await trino.cancel(running.queryId);  // DELETE /v1/query/{id}
  assert.deepEqual(canceled, {id: running.queryId});
  const {value, done} = await next;
  assert.equal(done, false);
  assert.equal(value.stats.state, 'FAILED');
  assert.equal(value.error.errorName, 'USER_CANCELED');
  assert.equal(value.error.message, 'Query was canceled');
  assert.equal((await iterator.next()).done, true);
  const info = await queryInfo(daemon.base, running.queryId);
  assert.equal(info.state, 'FAILED');
  assert.equal(info.errorCode.name, 'USER_CANCELED');
});
