// The npm trino-client through nginx in front of a cluster (run by cluster-nginx-test.py):
//   node nginx-clients.mjs NGINX-BASE-URL E2E-DIR
// Runs each statement of QUERIES on its own connection, four at a time, and prints one JSON
// object: {"results": [{"sql", "rows", "sum", "state", "error", "uris"}...]}. 'sum' adds every
// numeric cell; 'uris' are the nextUri the client followed (they must name nginx).
import {createRequire} from 'node:module';
import path from 'node:path';

const [base, e2eDir] = process.argv.slice(2);
const require = createRequire(path.join(e2eDir, 'package.json'));
const {BasicAuth, Trino} = require('trino-client');

const QUERIES = [
  'SELECT count(*) FROM lineitem',
  'SELECT l_orderkey, l_quantity FROM lineitem',
  'SELECT o_orderkey, o_totalprice FROM orders ORDER BY o_orderkey',
  'SELECT n_nationkey, n_regionkey FROM nation',
];
const ROUNDS = 3;

async function run(sql) {
  const trino = Trino.create({server: base, source: 'qr-nginx-test',
                              auth: new BasicAuth('nginx-npm')});
  let rows = 0;
  let sum = 0;
  let state = null;
  let error = null;
  const uris = [];
  for await (const result of await trino.query(sql)) {
    if (result.error) error = result.error.errorName ?? JSON.stringify(result.error);
    if (result.nextUri) uris.push(result.nextUri);
    for (const row of result.data ?? []) {
      rows += 1;
      for (const cell of row) if (typeof cell === 'number') sum += cell;
    }
    state = result.stats?.state ?? state;
  }
  return {sql, rows, sum, state, error, uris};
}

const jobs = [];
for (let round = 0; round < ROUNDS; round++) for (const sql of QUERIES) jobs.push(sql);
const results = [];
while (jobs.length) {
  results.push(...await Promise.all(jobs.splice(0, 4).map(run)));
}
process.stdout.write(JSON.stringify({results}) + '\n');
