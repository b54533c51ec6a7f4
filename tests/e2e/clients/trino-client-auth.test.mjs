// End-to-end test of trino-client's BasicAuth against coordinatord serving HTTPS with
// --auth_password_file: the right password runs a query, a wrong one is refused (401), and
// another user's header is refused (403). The certificate is made with the openssl CLI and
// the password file with coordinatord-passwd, both at test time in a private directory.

import {after, before, test} from 'node:test';
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs';
import {tmpdir} from 'node:os';
import path from 'node:path';

import {BasicAuth, Trino} from 'trino-client';

import {startDaemon} from './daemon.mjs';

let daemon;
let dir;
let ca;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'qr-e2e-auth-'));
  const cert = path.join(dir, 'server.crt');
  const key = path.join(dir, 'server.key');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
                           '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1',
                           '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', key,
                           '-out', cert],
               {stdio: 'ignore'});
  ca = readFileSync(cert);
  const passwd = process.env.QR_COORDINATORD_PASSWD;
  assert.ok(passwd, 'QR_COORDINATORD_PASSWD names coordinatord-passwd');
  const users = ['alice', 'bob'].map((user) =>
      execFileSync(passwd, ['--iterations=1000', user], {input: `${user}-pw\n`}).toString());
  const file = path.join(dir, 'users.passwd');
  writeFileSync(file, users.join(''));
  daemon = await startDaemon([`--tls_cert_file=${cert}`, `--tls_key_file=${key}`,
                              `--auth_password_file=${file}`]);
});

after(async () => {
  if (daemon) {
    const {code} = await daemon.stop();
    assert.equal(code, 0, 'coordinatord exits 0 on SIGTERM');
  }
  if (dir) rmSync(dir, {recursive: true, force: true});
});

function client(user, password) {
  return Trino.create({server: daemon.base, source: 'qr-e2e-auth', ssl: {ca},
                      auth: new BasicAuth(user, password)});
}

/// Every result of 'query' (SQL text or a trino-client query object).
async function collect(trino, query) {
  const results = [];
  for await (const result of await trino.query(query)) results.push(result);
  return results;
}

test('the right password runs a query over HTTPS', async () => {
  assert.match(daemon.base, /^https:\/\//);
  const trino = client('alice', 'alice-pw');
  const results = await collect(trino, 'SELECT 1');
  assert.deepEqual(results.flatMap((r) => r.data ?? []), [[1]]);
  const info = await trino.queryInfo(results.at(-1).id);
  assert.equal(info.state, 'FINISHED');
  assert.equal(info.session.user, 'alice');
  assert.match(info.self, /^https:\/\//);
  // bob does not see alice's query.
  const other = await client('bob', 'bob-pw').queryInfo(results.at(-1).id).catch((e) => e);
  assert.equal(other?.response?.status, 410);
});

test('a wrong password is refused with 401', async () => {
  const err = await collect(client('alice', 'not-it'), 'SELECT 1').catch((e) => e);
  assert.equal(err?.response?.status, 401);
  assert.equal(err.response.headers['www-authenticate'], 'Basic realm="coordinatord"');
});

test('naming another user is refused with 403', async () => {
  // A per-query user becomes the X-Trino-User header of that request.
  const err = await collect(client('bob', 'bob-pw'), {query: 'SELECT 1', user: 'alice'})
      .catch((e) => e);
  assert.equal(err?.response?.status, 403);
});
