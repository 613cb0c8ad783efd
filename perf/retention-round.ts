// The time of one retention round (src/retention) on a table of N data files
// (default 10,000): `commits` appends of N/commits files each, spread over
// `days` days; retention keeps half the days and expires every older
// snapshot (--retention-snapshot-max-age-hours 0), so the round rewrites the
// manifests, commits, and deletes about N/2 files plus the expired manifest
// lists. Data files are small placeholder objects (retention never opens a
// data file; it reads manifests and deletes files). A wall-clock figure on
// whatever machine runs it, not a CI assertion.
//
// Run: node perf/run-ts.mjs perf/retention-round.ts [files=10000] [commits=100] [days=20]

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import pino from 'pino';
import { FileStorage } from '../src/iceberg/file-storage.js';
import type { DataFileInfo } from '../src/iceberg/parquet-data-writer.js';
import { SqlCatalog } from '../src/iceberg/sql-catalog.js';
import { TableAppender } from '../src/iceberg/table-appender.js';
import { TableSchema } from '../src/iceberg/table-schema.js';
import { Retention } from '../src/retention/retention.js';

const files = Number(process.argv[2] ?? 10_000);
const commits = Number(process.argv[3] ?? 100);
const days = Number(process.argv[4] ?? 20);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'siglake-retention-bench-'));
const catalog = SqlCatalog.open(`sqlite:${path.join(dir, 'catalog.db')}`, 'siglake');
const storage = new FileStorage(path.join(dir, 'warehouse'));
const appender = new TableAppender({ catalog, storage });
const today = Math.floor(Date.now() / 86_400_000);
const location = storage.locationOf('main', 'logs');
const t0 = performance.now();
let n = 0;
for (let c = 0; c < commits; c++) {
  const batch: DataFileInfo[] = [];
  for (let i = 0; i < files / commits; i++, n++) {
    const day = today - (n % days);
    const loc = `${location}/data/time_day=${new Date(day * 86_400_000).toISOString().slice(0, 10)}/f${n}.parquet`;
    await storage.putNew(loc, Buffer.from('placeholder'));
    batch.push({ location: loc, recordCount: 100, fileSizeInBytes: 11, partitionDay: day, columnSizes: new Map(), metrics: { valueCounts: new Map(), nullValueCounts: new Map(), lowerBounds: new Map(), upperBounds: new Map() }, splitOffsets: [] });
  }
  await appender.append({ namespace: 'main', table: 'logs', schema: TableSchema.LOGS, location, files: batch, summary: {} });
}
const setupSecs = (performance.now() - t0) / 1000;
const retention = new Retention({ catalog, storage, log: pino({ level: 'silent' }), logsDays: Math.floor(days / 2), tracesDays: 0, snapshotMaxAgeHours: 0 });
const t1 = performance.now();
const r = await retention.runOnce();
const roundSecs = (performance.now() - t1) / 1000;
const t = r.tables[0]!;
process.stdout.write(
  `${JSON.stringify({ files, commits, days, setupSecs: +setupSecs.toFixed(1), roundSecs: +roundSecs.toFixed(2), filesDropped: t.filesDropped, snapshotsExpired: t.snapshotsExpired, filesDeleted: t.filesDeleted })}\n`,
);
await catalog.close();
fs.rmSync(dir, { recursive: true, force: true });
