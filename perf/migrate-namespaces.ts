// The time of `siglake migrate --all-namespaces` (src/migrate) over N tenant
// namespaces (default 1,000), each with a `logs` and a `traces` table of the
// previous schema version (created directly, without snapshots: migration
// only rewrites metadata). Catalog: SQLite, or PostgreSQL with `postgres`
// (a throwaway server from test/helpers/postgres.ts). A wall-clock figure,
// not a CI assertion.
//
// Run: node perf/run-ts.mjs perf/migrate-namespaces.ts [namespaces=1000] [sqlite|postgres]

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { FileStorage } from '../src/iceberg/file-storage.js';
import { LosslessJson } from '../src/iceberg/lossless-json.js';
import { SqlCatalog } from '../src/iceberg/sql-catalog.js';
import { TableMetadata } from '../src/iceberg/table-metadata.js';
import { TableSchema } from '../src/iceberg/table-schema.js';
import { Migrator } from '../src/migrate/migrate.js';
import { startPostgres } from '../test/helpers/postgres.js';

const n = Number(process.argv[2] ?? 1000);
const kind = process.argv[3] ?? 'sqlite';
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'siglake-migrate-bench-'));
const pg = kind === 'postgres' ? await startPostgres() : null;
const catalog = SqlCatalog.open(pg?.url ?? `sqlite:${path.join(dir, 'catalog.db')}`, 'siglake');
const storage = new FileStorage(path.join(dir, 'warehouse'));
const v1 = (s: TableSchema, width: number) => s.restrictTo(new Set(Array.from({ length: width }, (_, i) => i + 1)), 0);
const t0 = performance.now();
for (let i = 0; i < n; i++) {
  const ns = `tenant_t${i}`;
  await catalog.ensureNamespace(ns);
  for (const [table, schema] of [['logs', v1(TableSchema.LOGS, 22)], ['traces', v1(TableSchema.TRACES, 28)]] as const) {
    const location = storage.locationOf(ns, table);
    const doc = LosslessJson.parse(TableMetadata.create(location, schema, Date.now()).toJson()) as Record<string, Record<string, unknown>>;
    delete doc['properties']!['siglake.schema-version'];
    const loc = `${location}/metadata/${TableMetadata.nextFileName(null)}`;
    await storage.putNew(loc, Buffer.from(LosslessJson.stringify(doc as never), 'utf8'));
    await catalog.createTable(ns, table, loc);
  }
}
const setupSecs = (performance.now() - t0) / 1000;
const m = new Migrator({ catalog, storage });
const t1 = performance.now();
const r = await m.run({ allNamespaces: true, dryRun: false });
const secs = (performance.now() - t1) / 1000;
const t2 = performance.now();
const again = await m.run({ allNamespaces: true, dryRun: false });
const rerunSecs = (performance.now() - t2) / 1000;
process.stdout.write(
  `${JSON.stringify({ catalog: kind, namespaces: n, tables: r.length, migrated: r.filter((x) => x.outcome === 'migrated').length, setupSecs: +setupSecs.toFixed(1), migrateSecs: +secs.toFixed(2), rerunNoopSecs: +rerunSecs.toFixed(2), rerunMigrated: again.filter((x) => x.outcome === 'migrated').length })}\n`,
);
await catalog.close();
await pg?.stop();
fs.rmSync(dir, { recursive: true, force: true });
