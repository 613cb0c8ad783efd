// Statistics another engine writes, through Siglake's snapshot expiry: Spark
// (4.1 + Iceberg 1.12) computes table statistics (a Puffin file) and
// partition statistics for the current snapshot; Siglake appends again and
// `siglake retention --once` expires that snapshot. Its `statistics` and
// `partition-statistics` entries must go with it (Iceberg Java's and
// pyiceberg's expiry remove them: the metadata names no snapshot that is not
// there) and their files be deleted; Spark then reads the table as before.
// Before, both entries stayed, naming a snapshot gone, and the files leaked.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TableBuilder } from '../../src/compactor/table-builder.js';
import { FileStorage } from '../../src/iceberg/file-storage.js';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import { TableAppender } from '../../src/iceberg/table-appender.js';
import { TableSchema } from '../../src/iceberg/table-schema.js';
import { ZstdCodec, type Compressor } from '../../src/iceberg/zstd-codec.js';
import { tempDir } from '../helpers/ingester.js';
import { pythonPeer, siglake, sparkJars } from './helpers.js';

interface SparkView {
  tables: Record<string, { count: number; markers: string[] }>;
  maintained: [string, string, unknown[]][];
}

describe('statistics files through snapshot expiry (Spark 4.1 + Iceberg 1.12)', () => {
  const root = tempDir('siglake-interop-stats-');
  const warehouse = path.join(root, 'warehouse');
  const db = path.join(root, 'catalog.db');
  const where = ['--uri', `jdbc:sqlite:${db}`, '--warehouse', `file://${warehouse}`, '--name', 'siglake'];
  let catalog: SqlCatalog;
  let zstd: Compressor;
  const storage = new FileStorage(warehouse);

  beforeAll(async () => {
    zstd = await ZstdCodec.load();
    catalog = SqlCatalog.open(`sqlite:${db}`, 'siglake');
  });
  afterAll(async () => {
    await catalog.close();
    if (!process.env['KEEP']) fs.rmSync(root, { recursive: true, force: true });
  });

  async function append(tag: string): Promise<void> {
    const b = new TableBuilder({ namespace: 'main', table: 'logs', schema: TableSchema.LOGS, location: storage.locationOf('main', 'logs'), storage, zstd });
    const row: unknown[] = TableSchema.LOGS.columns.map((c) => (c.type === 'map' ? [] : c.type === 'string' ? null : c.type === 'int' ? 0 : c.required ? 0n : null));
    row[0] = BigInt(Date.now()) * 1000n;
    row[6] = tag;
    const p = b.add(row, 10);
    if (p) await p;
    const r = await new TableAppender({ catalog, storage }).append({ namespace: 'main', table: 'logs', schema: TableSchema.LOGS, location: storage.locationOf('main', 'logs'), files: await b.finish(), summary: {} });
    expect(r.status).toBe('committed');
  }
  const metadata = async () => JSON.parse(fs.readFileSync(fileURLToPath((await catalog.metadataLocation('main', 'logs'))!.replace(/^file:\/(?!\/)/, 'file:///')), 'utf8'));
  const local = (p: string) => fileURLToPath(p.replace(/^file:\/(?!\/)/, 'file:///'));
  const spark = (maintain: string[]) =>
    pythonPeer<SparkView>('spark_peer.py', [...where, '--jars', sparkJars(), '--time-from', '2026-01-01T00:00:00+00:00', '--attr', 'k=v', ...maintain, 'main.logs']);

  it("expiry drops Spark's statistics entries of the expired snapshot and deletes their files; Spark reads the table after", async () => {
    await append('s-1');
    await append('s-2');
    const computed = await spark(['--maintain', 'compute_stats']);
    expect(computed.maintained.map((m) => m[1])).toEqual(['compute_stats']);
    const before = await metadata();
    const statsSnapshot = String(before['current-snapshot-id']);
    const named = (m: Record<string, { 'snapshot-id': number; 'statistics-path': string }[] | undefined>, k: string) =>
      (m[k] ?? []).map((e) => [String(e['snapshot-id']), e['statistics-path']] as const);
    const stats = [...named(before, 'statistics'), ...named(before, 'partition-statistics')];
    // One Puffin file and one partition-statistics file, both of the current snapshot.
    expect(stats.map(([id]) => id)).toEqual([statsSnapshot, statsSnapshot]);
    for (const [, p] of stats) expect(fs.existsSync(local(p))).toBe(true);

    await append('s-3');
    const r = await siglake(['retention', '--once', '--catalog-url', `sqlite:${db}`, '--warehouse', warehouse, '--retention-snapshot-max-age-hours', '0']);
    expect(r.code, r.stderr).toBe(0);
    const after = await metadata();
    expect(after.snapshots.map((s: { 'snapshot-id': number }) => String(s['snapshot-id']))).not.toContain(statsSnapshot);
    expect(named(after, 'statistics')).toEqual([]);
    expect(named(after, 'partition-statistics')).toEqual([]);
    for (const [, p] of stats) expect(fs.existsSync(local(p))).toBe(false);

    const read = await spark(['--maintain', 'expire']);
    expect(read.tables['main.logs']!.count).toBe(3);
    expect(read.tables['main.logs']!.markers).toEqual(['s-1', 's-2', 's-3']);
  });
});
