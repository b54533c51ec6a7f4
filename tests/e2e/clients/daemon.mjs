// Shared helpers of the client end-to-end tests: start a real coordinatord on a free port with
// a private data directory, stop it, and ask it questions through the protocol directly (to
// compute the expected answers the client libraries are checked against).
//
// The daemon binary comes from QR_COORDINATORD (ctest passes $<TARGET_FILE:coordinatord>).
// Every wait has a deadline; nothing sleeps for a fixed time.

import {spawn} from 'node:child_process';
import {mkdtempSync, rmSync} from 'node:fs';
import {tmpdir} from 'node:os';
import path from 'node:path';
import readline from 'node:readline';

/// The query that runs until it is canceled.
export const ENDLESS =
    'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c';

/// Starts coordinatord with 'flags' added. Resolves with {base, host, port, stop()} once it
/// prints its listening line; stop() sends SIGTERM, waits for the exit and removes the data
/// directory.
export async function startDaemon(flags = []) {
  const binary = process.env.QR_COORDINATORD;
  if (!binary) throw new Error('QR_COORDINATORD must name the coordinatord binary');
  const dataDir = mkdtempSync(path.join(tmpdir(), 'qr-e2e-'));
  const child = spawn(binary,
                      ['--http_port=0', `--data_dir=${dataDir}`, '--shutdown_grace_period_s=0',
                       '--minloglevel=1', ...flags],
                      // TZ named: glog's timestamps otherwise make TSan builds report a false
                      // race inside glibc's tzset. Detached: in a session of its own, as
                      // systemd starts a service, so that with the kernel's autogroups the nice
                      // value of its demoted long queries counts against its own threads only.
                      {stdio: ['ignore', 'pipe', 'inherit'], detached: true,
                       env: {...process.env, TZ: process.env.TZ || ':/etc/localtime'}});
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({code, signal})));
  const base = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('coordinatord did not start in 120 s')),
                             120000);
    exited.then(({code, signal}) => {
      clearTimeout(timer);
      reject(new Error(`coordinatord exited early (code ${code}, signal ${signal})`));
    });
    readline.createInterface({input: child.stdout}).on('line', (line) => {
      const m = line.match(/listening on (https?:\/\/[0-9.]+:(\d+))/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
  });
  const url = new URL(base);
  return {
    base,
    host: url.hostname,
    port: Number(url.port),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const deadline = setTimeout(() => child.kill('SIGKILL'), 60000);
      const {code, signal} = await exited;
      clearTimeout(deadline);
      rmSync(dataDir, {recursive: true, force: true});
      return {code, signal};
    },
  };
}

/// Runs 'sql' through the protocol with fetch() and returns {columns, rows, state, error}.
export async function runStatement(base, sql, user = 'e2e-helper') {
  const headers = {'X-Trino-User': user};
  let res = await fetch(`${base}/v1/statement`, {method: 'POST', body: sql, headers});
  if (res.status !== 200) throw new Error(`POST answered ${res.status}: ${await res.text()}`);
  let answer = await res.json();
  const rows = [];
  let columns = null;
  for (;;) {
    if (answer.columns) columns = answer.columns;
    if (answer.data) rows.push(...answer.data);
    if (!answer.nextUri) break;
    res = await fetch(answer.nextUri, {headers});
    if (res.status !== 200) throw new Error(`GET answered ${res.status}: ${await res.text()}`);
    answer = await res.json();
  }
  return {columns, rows, state: answer.stats.state, error: answer.error};
}

/// The single value of a one-row, one-column query.
export async function scalar(base, sql) {
  const r = await runStatement(base, sql);
  if (r.state !== 'FINISHED' || r.rows.length !== 1) {
    throw new Error(`${sql}: ${r.state} ${JSON.stringify(r.error ?? r.rows)}`);
  }
  return r.rows[0][0];
}

/// The query info of 'queryId' (GET /v1/query/{id}), or null when not 200.
export async function queryInfo(base, queryId) {
  const res = await fetch(`${base}/v1/query/${queryId}`);
  return res.status === 200 ? res.json() : null;
}

/// Resolves once 'predicate' (async) holds; rejects after 'timeoutMs'. Each check is a round
/// trip to the server, which paces the loop.
export async function waitUntil(predicate, timeoutMs = 60000, what = 'condition') {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
  }
}

/// The in-flight query whose text is 'sql' (from GET /v1/query), waiting until it appears.
export async function findRunningQuery(base, sql, timeoutMs = 60000) {
  let found = null;
  await waitUntil(async () => {
    const list = await (await fetch(`${base}/v1/query`)).json();
    found = list.find((q) => q.query === sql && q.state !== 'FINISHED' && q.state !== 'FAILED');
    return found !== undefined;
  }, timeoutMs, `a running query '${sql}'`);
  return found;
}
