// What the query server's per-request catalog statement costs (issue 15):
// SqlCatalog.tableLocations (every table of a namespace and its current
// metadata_location, in one statement) against the 1 + one-per-table
// statements it replaced, on the SQLite catalog and on a real local
// PostgreSQL (test/helpers/postgres.ts), for a tenant of three tables. The
// figure decides the freshness rule in docs/query.md: cheap enough to
// compare on every request, so nothing is cached for a while.
//
//   node perf/run-ts.mjs perf/query-catalog-lookup.ts [--calls 2000]

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SqlCatalog } from '../src/iceberg/sql-catalog.js';
import { startPostgres } from '../test/helpers/postgres.js';

const i = process.argv.indexOf('--calls');
const CALLS = i === -1 ? 2000 : Number(process.argv[i + 1]);
const NS = 'tenant_acme';

async function time(f: () => Promise<unknown>): Promise<number> {
  for (let k = 0; k < 200; k++) await f();
  const s = performance.now();
  for (let k = 0; k < CALLS; k++) await f();
  return (performance.now() - s) / CALLS;
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'siglake-catalog-lookup-'));
const pg = await startPostgres();
try {
  const lines = ['| catalog | tableLocations (1 statement) | tables + metadataLocation × 3 |', '| --- | --- | --- |'];
  for (const [name, url] of [['SQLite', `sqlite:${path.join(dir, 'catalog.db')}`], ['PostgreSQL', pg.url]] as const) {
    const cat = SqlCatalog.open(url, 'siglake');
    for (const t of ['logs', 'traces', 'payments']) await cat.createTable(NS, t, `file:///w/${NS}/${t}/metadata/00000.metadata.json`);
    const one = await time(() => cat.tableLocations(NS));
    const many = await time(async () => {
      for (const t of await cat.tables(NS)) await cat.metadataLocation(NS, t);
    });
    lines.push(`| ${name} | ${one.toFixed(3)} ms | ${many.toFixed(3)} ms |`);
    await cat.close();
  }
  process.stdout.write(`mean of ${CALLS} calls each, cores: ${os.availableParallelism()}\n\n${lines.join('\n')}\n`);
} finally {
  await pg.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}
