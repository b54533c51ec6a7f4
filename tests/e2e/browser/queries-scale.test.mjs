// Headless-browser test of /queries at scale and of the per-query page (ctest label
// "browser"). history-fill (path in QR_HISTORY_FILL) writes 10,000 completed queries into a
// query history; coordinatord (QR_COORDINATORD) restores them at start. In Debian's Chromium
// (driven by playwright-core) the test filters by user and by statement text, pages through
// the completed list, checks that a refresh keeps a text selection, opens a query's page from
// its id, and cancels a running query from its page.
//
// Every wait polls a condition with a deadline; nothing sleeps for a fixed time.

import {after, before, test} from 'node:test';
import assert from 'node:assert/strict';
import {spawn, execFileSync} from 'node:child_process';
import {mkdtempSync, rmSync} from 'node:fs';
import {tmpdir} from 'node:os';
import path from 'node:path';
import readline from 'node:readline';

import {chromium} from 'playwright-core';

const CHROMIUM = process.env.QR_CHROMIUM || '/usr/bin/chromium';
const COUNT = 10000;
const ENDLESS =
    'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c';

let daemon;
let dataDir;
let base;
let browser;

function startDaemon(historyDir) {
  daemon = spawn(process.env.QR_COORDINATORD,
                 ['--http_port=0', `--data_dir=${dataDir}`, '--shutdown_grace_period_s=0',
                  '--minloglevel=1', `--query_history_dir=${historyDir}`,
                  `--query_log_size=${COUNT + 100}`],
                 {stdio: ['ignore', 'pipe', 'inherit'],
                  env: {...process.env, TZ: process.env.TZ || ':/etc/localtime'}});
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('coordinatord did not start in 120 s')),
                             120000);
    daemon.on('exit', (code) => reject(new Error(`coordinatord exited with ${code}`)));
    readline.createInterface({input: daemon.stdout}).on('line', (line) => {
      const m = line.match(/listening on (http:\/\/[0-9.]+:\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
  });
}

function withDeadline(promise, ms, what) {
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

async function pollToEnd(answer, user) {
  while (answer.nextUri) {
    const resp = await fetch(answer.nextUri, {headers: {'X-Trino-User': user}});
    answer = await resp.json();
  }
  return answer;
}

before(async () => {
  assert.ok(process.env.QR_COORDINATORD, 'set QR_COORDINATORD to the coordinatord binary');
  assert.ok(process.env.QR_HISTORY_FILL, 'set QR_HISTORY_FILL to the history-fill binary');
  dataDir = mkdtempSync(path.join(tmpdir(), 'qr-browser-scale-'));
  const historyDir = path.join(dataDir, 'history');
  execFileSync(process.env.QR_HISTORY_FILL, [historyDir, String(COUNT)], {stdio: 'inherit'});
  base = await startDaemon(historyDir);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

after(async () => {
  if (browser) await browser.close();
  if (daemon && daemon.exitCode === null) {
    const exited = new Promise((resolve) => daemon.on('exit', resolve));
    daemon.kill('SIGTERM');
    await withDeadline(exited, 30000, 'coordinatord shutdown').catch(() => daemon.kill('SIGKILL'));
  }
  if (dataDir) rmSync(dataDir, {recursive: true, force: true});
});

/// The query ids of the completed table, in order.
function completedIds(page) {
  return page.$$eval('#completed tbody tr', (rows) => rows.map((r) => r.dataset.queryId));
}

test('filter, page and keep a selection over 10,000 queries of the history', async () => {
  const json = await (await fetch(`${base}/queries?json&limit=1`)).json();
  assert.equal(json.completed_matched, COUNT);
  assert.equal(json.completed.length, 1);

  const page = await browser.newPage({viewport: {width: 1440, height: 900}});
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  // Only what is shown travels: count the bytes of every list answer.
  const listBytes = [];
  // From Content-Length, read as the answer arrives: the body of an answer the page has
  // navigated away from is gone, and reading it later fails after the test has ended.
  page.on('response', (r) => {
    if (r.url().includes('/queries?')) listBytes.push(Number(r.headers()['content-length']));
  });
  await page.goto(`${base}/queries`);
  await page.waitForFunction(
      () => document.getElementById('completed-count').textContent === '50 of 10,000',
      null, {timeout: 30000, polling: 100});
  assert.ok(Math.max(...listBytes) < 100000, `list answers of ${listBytes} bytes`);

  // The user filter: every row is user3's, 1,000 of them.
  await page.fill('#f-user', 'user3');
  await page.waitForFunction(() => {
    const users = [...document.querySelectorAll('#completed td.user')].map((t) => t.textContent);
    return document.getElementById('completed-count').textContent === '50 of 1,000' &&
        users.length === 50 && users.every((u) => u === 'user3');
  }, null, {timeout: 30000, polling: 100});

  // Text search within it: the failed queries on missing_ tables (i % 100 == 99, i % 10 == 3
  // never holds: none); then without the user filter, 100 of them.
  await page.fill('#f-q', 'MISSING_');
  await page.waitForFunction(
      () => document.getElementById('completed-empty').hidden === false, null,
      {timeout: 30000, polling: 100});
  await page.fill('#f-user', '');
  await page.waitForFunction(() => {
    const states = [...document.querySelectorAll('#completed .state')].map((s) => s.textContent);
    return document.getElementById('completed-count').textContent === '50 of 100' &&
        states.length === 50 && states.every((s) => s === 'FAILED');
  }, null, {timeout: 30000, polling: 100});

  // Pages: Next shows the other 50, and there is no third page; Previous goes back.
  const first = await completedIds(page);
  await page.click('#page-next');
  await page.waitForFunction(
      () => document.getElementById('completed-range').textContent === '51–100', null,
      {timeout: 30000, polling: 100});
  const second = await completedIds(page);
  assert.equal(second.length, 50);
  assert.equal(new Set([...first, ...second]).size, 100, 'no row on both pages');
  assert.ok(await page.locator('#page-next').isDisabled());
  await page.click('#page-prev');
  await page.waitForFunction(
      () => document.getElementById('completed-range').textContent === '1–50', null,
      {timeout: 30000, polling: 100});
  assert.deepEqual(await completedIds(page), first);

  // A selection inside a statement survives two refreshes (the cell is not rebuilt).
  const selected = await page.evaluate(() => {
    const code = document.querySelector('#completed code.stmt');
    const range = document.createRange();
    range.selectNodeContents(code);
    window.getSelection().removeAllRanges();
    window.getSelection().addRange(range);
    window.qrSelectedNode = code;
    return window.getSelection().toString();
  });
  assert.match(selected, /missing_/);
  for (let i = 0; i < 2; ++i) {
    const before = await page.textContent('#updated');
    await page.click('#refresh-now');
    await page.waitForFunction((b) => document.getElementById('updated').textContent !== b ||
                                   document.querySelector('#notice:not([hidden])') !== null,
                               before, {timeout: 30000, polling: 100});
  }
  // The clock shows seconds: the refreshes may keep the text; the node must be the same.
  await page.click('#refresh-now');
  assert.equal(await page.evaluate(() => window.getSelection().toString()), selected);
  assert.ok(await page.evaluate(
      () => document.querySelector('#completed code.stmt') === window.qrSelectedNode));

  // A query's id opens its page: the full statement, its error and the timeline.
  const id = first[0];
  await page.click(`#completed tr[data-query-id="${id}"] a.query-link`);
  await page.waitForURL(/\/query_detail\?query_id=/);
  await page.waitForFunction(() => document.getElementById('state').textContent === 'FAILED',
                             null, {timeout: 30000, polling: 100});
  assert.match(await page.textContent('#statement'), /^SELECT \* FROM missing_\d+$/);
  assert.equal(await page.textContent('#error-name'), 'TABLE_NOT_FOUND');
  assert.notEqual(await page.textContent('#t-finished'), '—');
  assert.ok(await page.locator('#cancel').isHidden());
  await page.waitForFunction(() => document.getElementById('plan').textContent !== 'Loading…',
                             null, {timeout: 30000, polling: 100});
  assert.deepEqual(problems, []);
  await page.close();
});

test('open a running query from /queries and cancel it from its page', async () => {
  const submitted = await (await fetch(`${base}/v1/statement`, {
    method: 'POST', body: ENDLESS, headers: {'X-Trino-User': 'alice'},
  })).json();
  const clientEnd = pollToEnd(submitted, 'alice');

  const page = await browser.newPage({viewport: {width: 1440, height: 900}});
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  await page.goto(`${base}/queries`);
  const link = page.locator(`#in-flight tr[data-query-id="${submitted.id}"] a.query-link`);
  await link.waitFor({timeout: 30000});
  await link.click();
  await page.waitForFunction(() => document.getElementById('state').textContent === 'RUNNING',
                             null, {timeout: 30000, polling: 100});
  assert.equal(await page.textContent('#statement'), ENDLESS);
  assert.equal(await page.textContent('#s-user'), 'alice');
  // The plan of the endless statement: explained, never run.
  await page.waitForFunction(() => /SCAN|SEARCH|CO-ROUTINE|RECURSIVE/.test(
                                 document.getElementById('plan').textContent),
                             null, {timeout: 30000, polling: 100});

  await page.fill('#user', 'alice');
  await page.click('#cancel');
  await page.waitForFunction(() => document.getElementById('state').textContent === 'CANCELED',
                             null, {timeout: 30000, polling: 100});
  assert.match(await page.textContent('#canceled-by'), /alice/);
  assert.match(await page.textContent('#notice'), /canceled/);
  const final = await withDeadline(clientEnd, 30000, 'alice\'s client');
  assert.equal(final.error?.errorName, 'USER_CANCELED');
  assert.deepEqual(problems, []);
  await page.close();
});
