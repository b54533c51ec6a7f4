// Headless-browser test of the /queries debug page (ctest label "browser").
//
// Starts coordinatord (path in QR_COORDINATORD) on a free port with a private data directory,
// runs a long query as 'alice' through the Trino protocol while a second client keeps
// polling it, loads /queries in Debian's Chromium (driven by playwright-core), finds the
// query, clicks its Cancel button as 'alice', and waits until the page lists it as CANCELED
// among the completed queries. Statements and user names carrying HTML must render as text.
// With QR_UPDATE_SCREENSHOT=1 it saves docs/images/queries-page.png.
//
// Every wait polls a condition with a deadline; nothing sleeps for a fixed time.

import {after, before, test} from 'node:test';
import assert from 'node:assert/strict';
import {spawn} from 'node:child_process';
import {mkdtempSync, mkdirSync, rmSync} from 'node:fs';
import {tmpdir} from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import {fileURLToPath} from 'node:url';

import {chromium} from 'playwright-core';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SCREENSHOT = path.resolve(HERE, '../../../docs/images/queries-page.png');
const CHROMIUM = process.env.QR_CHROMIUM || '/usr/bin/chromium';
const ENDLESS =
    'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c';
const HOSTILE_USER = '"><img src=x onerror=alert(1)>';
const HOSTILE_SQL = "SELECT '<script>alert(1)</script>' AS a, " +
    "'\"><img src=x onerror=alert(2)>' AS b, 'Grüße, Ελληνικά, Кириллица' AS c";

let daemon;
let dataDir;
let base;
let browser;

/// Starts coordinatord and resolves with its base URL once it prints its listening line.
function startDaemon() {
  dataDir = mkdtempSync(path.join(tmpdir(), 'qr-browser-test-'));
  daemon = spawn(process.env.QR_COORDINATORD,
                 ['--http_port=0', `--data_dir=${dataDir}`, '--shutdown_grace_period_s=0',
                  '--minloglevel=1'],
                 // TZ named explicitly: glog's timestamps otherwise make TSan builds report
                 // a false race inside glibc's tzset (see tests/service/debug-pages-test.cc).
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

/// POSTs 'sql' as 'user'; resolves with the first protocol answer.
async function submit(sql, user, source = 'browser-test') {
  const resp = await fetch(`${base}/v1/statement`, {
    method: 'POST',
    body: sql,
    headers: {'X-Trino-User': user, 'X-Trino-Source': source},
  });
  assert.equal(resp.status, 200, await resp.clone().text());
  return resp.json();
}

/// Follows nextUri until the final answer, as a Trino client does; resolves with it.
async function pollToEnd(answer, user) {
  while (answer.nextUri) {
    const resp = await fetch(answer.nextUri, {headers: {'X-Trino-User': user}});
    answer = await resp.json();
  }
  return answer;
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
  base = await startDaemon();
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

test('cancel a running query from /queries; hostile text renders as text', async () => {
  // Finished and failed queries for the completed list, one with hostile text everywhere.
  const hostile = await pollToEnd(await submit(HOSTILE_SQL, HOSTILE_USER, HOSTILE_USER),
                                  HOSTILE_USER);
  assert.equal(hostile.stats.state, 'FINISHED');
  await pollToEnd(await submit('SELECT * FROM no_such_table', 'carol', 'trino-cli'), 'carol');
  // Two endless queries, each with a client polling it: alice's is canceled from the page,
  // bob's (with a long statement) keeps running for the screenshot.
  const first = await submit(ENDLESS, 'alice');
  const aliceEnd = pollToEnd(first, 'alice');
  const longSql = `${ENDLESS} /* nightly rollup: ${'revenue by nation and region, '.repeat(10)}*/`;
  const bobEnd = pollToEnd(await submit(longSql, 'bob', 'airflow'), 'bob');

  const page = await browser.newPage({viewport: {width: 1440, height: 900}});
  const dialogs = [];
  const problems = [];
  page.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss(); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  await page.goto(`${base}/queries`);
  await page.fill('#user', 'alice');

  const row = page.locator(`#in-flight tr[data-query-id="${first.id}"]`);
  await row.waitFor({timeout: 30000});
  assert.equal(await row.locator('td.user').textContent(), 'alice');

  // Hostile text is shown literally and creates no elements.
  const hostileRow = page.locator(`#completed tr[data-query-id="${hostile.id}"]`);
  await hostileRow.waitFor({timeout: 30000});
  assert.equal(await hostileRow.locator('td.user').textContent(), HOSTILE_USER);
  assert.equal(await hostileRow.locator('code.stmt').textContent(), HOSTILE_SQL);
  assert.equal(await page.locator('main img').count(), 0);
  assert.equal(await page.locator('main script').count(), 0);

  await row.getByRole('button', {name: 'Cancel'}).click();
  await page.waitForFunction((id) => {
    const done = document.querySelector(`#completed tr[data-query-id="${id}"] .state`);
    return done && done.textContent === 'CANCELED' &&
        !document.querySelector(`#in-flight tr[data-query-id="${id}"]`);
  }, first.id, {timeout: 30000, polling: 100});
  assert.match(await page.locator('#notice').textContent(), /canceled/);

  // The query's own client sees the cancel.
  const final = await withDeadline(aliceEnd, 30000, 'alice\'s client');
  assert.equal(final.error?.errorName, 'USER_CANCELED');

  if (process.env.QR_UPDATE_SCREENSHOT === '1') {
    mkdirSync(path.dirname(SCREENSHOT), {recursive: true});
    await page.mouse.move(0, 0);
    await page.screenshot({path: SCREENSHOT, fullPage: true});
  }
  assert.deepEqual(dialogs, [], 'no script from query text may run');
  assert.deepEqual(problems, []);

  // Stop bob's query so that its client's loop ends too.
  const bobId = (await page.locator('#in-flight tbody tr').first().getAttribute('data-query-id'));
  const cancel = await fetch(`${base}/cancel_query?query_id=${encodeURIComponent(bobId)}`,
                             {method: 'POST', headers: {'X-Trino-User': 'bob'}});
  assert.equal(cancel.status, 200);
  await withDeadline(bobEnd, 30000, 'bob\'s client');
  await page.close();
});
