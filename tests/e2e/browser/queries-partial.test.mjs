// Headless-browser test of a text search over the query history that stops at its budget
// (ctest label "browser"). history-fill (QR_HISTORY_FILL) writes 3,000 completed queries, 30
// of them FAILED on "missing_<i>" (i % 100 == 99); coordinatord (QR_COORDINATORD) keeps only
// the newest 10 in its log and reads at most 500 history records per request
// (--queries_max_limit=500). Searching "MISSING_" then answers completed_partial: the page
// shows a notice whose "Continue the search" button follows the cursor, page after page,
// until every one of the 30 is listed once and the notice goes away.
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
const COUNT = 3000;
const MATCHES = 30;
const BUDGET = 500;

let daemon;
let dataDir;
let base;
let browser;

function startDaemon(historyDir) {
  daemon = spawn(process.env.QR_COORDINATORD,
                 ['--http_port=0', `--data_dir=${dataDir}`, '--shutdown_grace_period_s=0',
                  '--minloglevel=1', `--query_history_dir=${historyDir}`,
                  '--query_log_size=10', `--queries_max_limit=${BUDGET}`],
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

before(async () => {
  assert.ok(process.env.QR_COORDINATORD, 'set QR_COORDINATORD to the coordinatord binary');
  assert.ok(process.env.QR_HISTORY_FILL, 'set QR_HISTORY_FILL to the history-fill binary');
  dataDir = mkdtempSync(path.join(tmpdir(), 'qr-browser-partial-'));
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

test('a search that stops at its budget says so and continues from its cursor', async () => {
  // The answer itself: partial, with a cursor, fewer rows than asked.
  const json = await (await fetch(`${base}/queries?json&q=MISSING_&limit=50`)).json();
  assert.equal(json.completed_partial, true);
  assert.ok(json.next_cursor);
  assert.ok(json.completed.length > 0 && json.completed.length < 50);

  const page = await browser.newPage({viewport: {width: 1440, height: 900}});
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  await page.goto(`${base}/queries`);
  await page.waitForFunction(
      () => document.getElementById('completed-count').textContent !== '', null,
      {timeout: 30000, polling: 100});
  // No search, no notice.
  assert.ok(await page.locator('#completed-partial').isHidden());

  await page.fill('#f-q', 'MISSING_');
  await page.waitForFunction(
      () => !document.getElementById('completed-partial').hidden, null,
      {timeout: 30000, polling: 100});
  assert.match(await page.textContent('#completed-partial-text'), /stopped early/);

  // Continue until the search reaches the end of the history: every page lists only the
  // failed queries, no query twice, and the range counts on from the pages before.
  const seen = new Set();
  let shown = 0;
  for (let step = 0; step < 20; ++step) {
    const ids = await page.$$eval('#completed tbody tr',
                                  (rows) => rows.map((r) => r.dataset.queryId));
    const states = await page.$$eval('#completed .state',
                                     (cells) => cells.map((c) => c.textContent));
    assert.ok(states.every((s) => s === 'FAILED'), `states ${states}`);
    for (const id of ids) {
      assert.ok(!seen.has(id), `${id} listed twice`);
      seen.add(id);
    }
    if (ids.length > 0) {
      assert.equal(await page.textContent('#completed-range'),
                   `${shown + 1}–${shown + ids.length}`);
    }
    shown += ids.length;
    if (await page.locator('#completed-partial').isHidden()) break;
    const before = await page.textContent('#completed-range');
    const beforeIds = ids.join(',');
    await page.click('#search-continue');
    await page.waitForFunction(([range, idList]) => {
      const now = [...document.querySelectorAll('#completed tbody tr')]
                      .map((r) => r.dataset.queryId).join(',');
      return document.getElementById('completed-range').textContent !== range || now !== idList;
    }, [before, beforeIds], {timeout: 30000, polling: 100});
  }
  assert.equal(seen.size, MATCHES);
  assert.ok(await page.locator('#completed-partial').isHidden());
  assert.ok(await page.locator('#page-next').isDisabled());

  // Previous goes back through the partial pages with their ranges.
  await page.click('#page-prev');
  await page.waitForFunction(
      () => !document.getElementById('completed-partial').hidden, null,
      {timeout: 30000, polling: 100});
  assert.deepEqual(problems, []);
  await page.close();
});
