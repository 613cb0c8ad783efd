// A tag's max-ref-age-ms as Spark sets it, through Siglake's retention: Spark
// (4.1 + Iceberg 1.12) tags the current snapshot with `CREATE TAG aged RETAIN
// 1 MINUTES` and rewrites the table's data file, so the old file is kept by
// the tag alone. Once the tag is older than that, `siglake retention --once`
// removes it (as Spark's own expire_snapshots would), expires its snapshot
// and deletes the old file; Spark then reads the table, and its refs, as
// before. Before, Siglake did not read max-ref-age-ms: the tag, its snapshot
// and the old file stayed for ever.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TableBuilder } from '../../src/compactor/table-builder.js';
import { FileStorage } from '../../src/iceberg/file-storage.js';
import { LosslessJson } from '../../src/iceberg/lossless-json.js';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import { TableAppender } from '../../src/iceberg/table-appender.js';
import { TableSchema } from '../../src/iceberg/table-schema.js';
import { ZstdCodec, type Compressor } from '../../src/iceberg/zstd-codec.js';
import { filesUnder } from '../helpers/iceberg.js';
import { tempDir } from '../helpers/ingester.js';
import { pythonPeer, siglake, sparkJars } from './helpers.js';

interface SparkView {
  tables: Record<string, { count: number; markers: string[]; refs: [string, string, string, number | null][] }>;
  maintained: [string, string, unknown[]][];
}

describe("a tag's max-ref-age-ms through Siglake's retention (Spark 4.1 + Iceberg 1.12)", () => {
  const root = tempDir('siglake-interop-refage-');
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

  const local = (p: string) => fileURLToPath(p.replace(/^file:\/(?!\/)/, 'file:///'));
  const metadataFile = async () => local((await catalog.metadataLocation('main', 'logs'))!);
  const dataFiles = () => {
    const base = path.join(warehouse, 'main', 'logs', 'data');
    return filesUnder(base)
      .filter((f) => f.endsWith('.parquet'))
      .map((f) => path.join(base, f))
      .sort();
  };
  const spark = (maintain: string[]) =>
    pythonPeer<SparkView>('spark_peer.py', [...where, '--jars', sparkJars(), '--time-from', '2026-01-01T00:00:00+00:00', '--attr', 'k=v', ...maintain, 'main.logs']);

  it('a tag Spark made with RETAIN 1 MINUTES ages out: the ref goes, its snapshot and the file only it kept are deleted; Spark reads the table after', async () => {
    const b = new TableBuilder({ namespace: 'main', table: 'logs', schema: TableSchema.LOGS, location: storage.locationOf('main', 'logs'), storage, zstd });
    const row: unknown[] = TableSchema.LOGS.columns.map((c) => (c.type === 'map' ? [] : c.type === 'string' ? null : c.type === 'int' ? 0 : c.required ? 0n : null));
    row[0] = BigInt(Date.now()) * 1000n;
    row[6] = 'r-1';
    const p = b.add(row, 10);
    if (p) await p;
    const r = await new TableAppender({ catalog, storage }).append({ namespace: 'main', table: 'logs', schema: TableSchema.LOGS, location: storage.locationOf('main', 'logs'), files: await b.finish(), summary: {} });
    expect(r.status).toBe('committed');
    const [original] = dataFiles();
    expect(original).toBeDefined();

    const made = await spark(['--maintain', 'tag_retain', '--maintain', 'rewrite_data_files']);
    const refs = made.tables['main.logs']!.refs;
    expect(refs.map(([name, type, , age]) => [name, type, age])).toEqual([
      ['aged', 'TAG', 60_000],
      ['main', 'BRANCH', null],
    ]);
    // The rewrite made a new file: the old one is kept by the tagged snapshot alone.
    expect(dataFiles()).toHaveLength(2);

    // Two days on (every commit time of Spark's metadata moved back, edited in place; LosslessJson
    // keeps the 64-bit ids): the tag is past its minute.
    const file = await metadataFile();
    const text = fs.readFileSync(file, 'utf8').replace(/("timestamp-ms"\s*:\s*)(\d+)/g, (_m, k: string, v: string) => k + String(Number(v) - 48 * 3_600_000));
    const doc = LosslessJson.parse(text) as Record<string, unknown>;
    doc['last-updated-ms'] = Number(doc['last-updated-ms']) - 48 * 3_600_000;
    fs.writeFileSync(file, LosslessJson.stringify(doc as never));

    const ret = await siglake(['retention', '--once', '--catalog-url', `sqlite:${db}`, '--warehouse', warehouse, '--retention-snapshot-max-age-hours', '24']);
    expect(ret.code, ret.stderr).toBe(0);
    expect(JSON.parse(ret.stdout.trim())).toMatchObject({ namespace: 'main', table: 'logs', refsRemoved: 1, snapshotsExpired: 1, filesDeleted: 1 });
    const after = JSON.parse(fs.readFileSync(await metadataFile(), 'utf8'));
    expect(Object.keys(after.refs)).toEqual(['main']);
    expect(fs.existsSync(original!)).toBe(false);
    expect(dataFiles()).toHaveLength(1);

    const read = (await spark([])).tables['main.logs']!;
    expect(read.count).toBe(1);
    expect(read.markers).toEqual(['r-1']);
    expect(read.refs.map(([name]) => name)).toEqual(['main']);
  });
});
