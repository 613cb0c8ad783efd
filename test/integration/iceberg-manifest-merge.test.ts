// Manifest merging on append (Iceberg Java's merge append: the table
// properties commit.manifest-merge.enabled, commit.manifest.min-count-to-merge
// and commit.manifest.target-size-bytes). Without it every commit added a
// manifest for good: 2,880 a day per table at the compactor's 30 s rounds,
// each commit rewriting a manifest list that long. What must hold: the list
// stays bounded, every data file stays live exactly once with the snapshot id
// and sequence numbers of the append that added it, independent readers
// (icebird, Siglake's query server) return every row, a commit that loses
// its race leaves no merged manifest behind, and what cannot be re-encoded
// without loss (a manifest of another writer) is carried unchanged.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TableBuilder } from '../../src/compactor/table-builder.js';
import { AvroFile, type AvroRecord } from '../../src/iceberg/avro-file.js';
import { FileStorage } from '../../src/iceberg/file-storage.js';
import { LosslessJson, type JsonValue } from '../../src/iceberg/lossless-json.js';
import { ManifestList } from '../../src/iceberg/manifest-list.js';
import { ManifestWriter } from '../../src/iceberg/manifest-writer.js';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import { TableAppender } from '../../src/iceberg/table-appender.js';
import { TableMetadata } from '../../src/iceberg/table-metadata.js';
import { TableSchema } from '../../src/iceberg/table-schema.js';
import { ZstdCodec, type Compressor } from '../../src/iceberg/zstd-codec.js';
import { icebirdDataFiles, icebirdRows, installFileFetch } from '../helpers/iceberg.js';
import { postSql, startQuery } from '../helpers/query.js';

let restoreFetch: () => void;
let zstd: Compressor;
const dirs: string[] = [];

beforeAll(async () => {
  restoreFetch = installFileFetch();
  zstd = await ZstdCodec.load();
});

afterAll(() => {
  restoreFetch();
  for (const d of dirs) if (!process.env.KEEP) fs.rmSync(d, { recursive: true, force: true });
});

interface Lake {
  readonly dir: string;
  readonly catalogUrl: string;
  readonly catalog: SqlCatalog;
  readonly storage: FileStorage;
}

function lake(): Lake {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'siglake-merge-'));
  dirs.push(dir);
  const catalogUrl = `sqlite:${path.join(dir, 'catalog.db')}`;
  return { dir, catalogUrl, catalog: SqlCatalog.open(catalogUrl, 'siglake'), storage: new FileStorage(path.join(dir, 'warehouse')) };
}

const DAY_US = 86_400_000_000n;
const BASE_US = 1_767_225_600_000_000n; // 2026-01-01

/** One data file of `n` log rows whose bodies are `${tag}-${i}`, on day `day` after BASE. */
async function dataFile(l: Lake, n: number, tag: string, day = 0) {
  const b = new TableBuilder({ namespace: 'main', table: 'logs', schema: TableSchema.LOGS, location: l.storage.locationOf('main', 'logs'), storage: l.storage, zstd });
  for (let i = 0; i < n; i++) {
    const row: unknown[] = TableSchema.LOGS.columns.map((c) =>
      c.type === 'map' ? [] : c.type === 'string' ? null : c.type === 'int' ? 0 : c.required ? 0n : null,
    );
    row[0] = BASE_US + BigInt(day) * DAY_US + BigInt(i);
    row[6] = `${tag}-${i}`;
    const p = b.add(row, 10);
    if (p) await p;
  }
  return b.finish();
}

async function append(l: Lake, appender: TableAppender, tag: string, day = 0) {
  const files = await dataFile(l, 3, tag, day);
  const r = await appender.append({ namespace: 'main', table: 'logs', schema: TableSchema.LOGS, location: l.storage.locationOf('main', 'logs'), files, summary: {} });
  expect(r.status).toBe('committed');
  if (r.status !== 'committed') throw new Error('not committed');
  return { snapshotId: r.snapshotId, sequenceNumber: r.sequenceNumber, path: files[0]!.location };
}

async function currentList(l: Lake): Promise<{ meta: TableMetadata; list: AvroRecord[]; loc: string }> {
  const loc = (await l.catalog.metadataLocation('main', 'logs'))!;
  const meta = TableMetadata.parse(Buffer.from(await l.storage.get(loc)).toString('utf8'), loc);
  return { meta, loc, list: await ManifestList.read(l.storage, meta.currentSnapshot()!.manifestList) };
}

/** Every live entry of the current snapshot: path → its (resolved) snapshot id and sequence numbers. */
async function liveEntries(l: Lake): Promise<Map<string, { snapshotId: bigint; seq: bigint; fileSeq: bigint; status: number }>> {
  const { list } = await currentList(l);
  const out = new Map<string, { snapshotId: bigint; seq: bigint; fileSeq: bigint; status: number }>();
  for (const m of list) {
    const { records } = AvroFile.decode(await l.storage.get(String(m['manifest_path'])));
    for (const e of records) {
      if (e['status'] === 2) continue;
      const p = String((e['data_file'] as AvroRecord)['file_path']);
      expect(out.has(p), `${p} is live twice`).toBe(false);
      const mSeq = m['sequence_number'] as bigint;
      out.set(p, {
        snapshotId: (e['snapshot_id'] as bigint | null) ?? (m['added_snapshot_id'] as bigint),
        seq: (e['sequence_number'] as bigint | null) ?? mSeq,
        fileSeq: (e['file_sequence_number'] as bigint | null) ?? mSeq,
        status: e['status'] as number,
      });
    }
  }
  return out;
}

/** Commits new table properties the way another engine would (a new metadata file, then the swap). */
async function setProperties(l: Lake, props: Record<string, string>): Promise<void> {
  const { loc } = await currentList(l);
  const doc = LosslessJson.parse(Buffer.from(await l.storage.get(loc)).toString('utf8')) as { [k: string]: JsonValue };
  doc['properties'] = { ...(doc['properties'] as { [k: string]: JsonValue }), ...props };
  const next = `${loc.slice(0, loc.lastIndexOf('/') + 1)}${TableMetadata.nextFileName(loc)}`;
  await l.storage.putNew(next, Buffer.from(LosslessJson.stringify(doc), 'utf8'));
  expect(await l.catalog.swapMetadataLocation('main', 'logs', loc, next)).toBe(true);
}

function metadataFiles(l: Lake): string[] {
  return fs.readdirSync(path.join(l.dir, 'warehouse', 'main', 'logs', 'metadata')).sort();
}

describe('manifest merging on append', () => {
  it('keeps the list bounded and every file live once, with the snapshot and sequence numbers that added it', async () => {
    const l = lake();
    const appender = new TableAppender({ catalog: l.catalog, storage: l.storage, manifestMerge: { enabled: true, minCountToMerge: 4, targetSizeBytes: 8 << 20 } });
    const added: { snapshotId: bigint; sequenceNumber: bigint; path: string }[] = [];
    const lengths: number[] = [];
    for (let i = 0; i < 12; i++) {
      added.push(await append(l, appender, `a${i}`, i % 3));
      lengths.push((await currentList(l)).list.length);
    }
    // One manifest a commit until the fourth, then merged back down: never more than the minimum count.
    expect(lengths).toEqual([1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2]);
    const live = await liveEntries(l);
    expect(live.size).toBe(12);
    for (const a of added) {
      const e = live.get(a.path)!;
      expect(e, a.path).toBeDefined();
      expect(e.snapshotId).toBe(a.snapshotId);
      expect(e.seq).toBe(a.sequenceNumber);
      expect(e.fileSeq).toBe(a.sequenceNumber);
    }
    // The merged manifest's list entry: EXISTING files only, its min sequence number the oldest one's,
    // its day range the union.
    const { meta, list } = await currentList(l);
    const merged = list.find((m) => Number(m['existing_files_count']) > 0)!;
    expect(Number(merged['existing_files_count'])).toBe(11);
    expect(Number(merged['added_files_count'])).toBe(0);
    expect(merged['existing_rows_count']).toBe(33n);
    expect(merged['min_sequence_number']).toBe(1n);
    expect(merged['added_snapshot_id']).toBe(meta.currentSnapshotId);
    const part = (merged['partitions'] as AvroRecord[])[0]!;
    expect((part['lower_bound'] as Buffer).readInt32LE(0)).toBe(20454);
    expect((part['upper_bound'] as Buffer).readInt32LE(0)).toBe(20456);
    const summary = meta.currentSnapshot()!.summary;
    // The last merge packed the merged manifest of the commit before with the two made since.
    expect(summary['manifests-replaced']).toBe('3');
    expect(summary['manifests-created']).toBe('2');
    expect(summary['total-data-files']).toBe('12');
    // Independent readers get every row, once.
    const rows = await icebirdRows((await currentList(l)).loc);
    expect(rows.map((r) => String(r['body'])).sort()).toEqual(added.flatMap((_, i) => [0, 1, 2].map((k) => `a${i}-${k}`)).sort());
    expect((await icebirdDataFiles((await currentList(l)).loc)).length).toBe(12);
    await l.catalog.close();
    const q = await startQuery(l.dir, ['--catalog-url', l.catalogUrl, '--warehouse', path.join(l.dir, 'warehouse')]);
    try {
      const res = await postSql(q.url, 'SELECT count(*) AS n, count(DISTINCT body) AS d FROM logs');
      expect(res.status, res.text).toBe(200);
      expect(res.body['rows']).toEqual([['36', '36']]);
    } finally {
      await q.stop();
    }
  });

  it('follows the table properties: disabled, or a minimum count set by another engine', async () => {
    const l = lake();
    const appender = new TableAppender({ catalog: l.catalog, storage: l.storage });
    await append(l, appender, 'x0');
    await setProperties(l, { 'commit.manifest-merge.enabled': 'false', 'commit.manifest.min-count-to-merge': '2' });
    for (let i = 1; i < 5; i++) await append(l, appender, `x${i}`);
    expect((await currentList(l)).list.length).toBe(5);
    await setProperties(l, { 'commit.manifest-merge.enabled': 'true', 'commit.manifest.min-count-to-merge': '3' });
    await append(l, appender, 'x5');
    expect((await currentList(l)).list.length).toBe(2);
    // The default minimum (100, Iceberg Java's) does not merge a handful.
    await setProperties(l, { 'commit.manifest.min-count-to-merge': 'not a number' });
    for (let i = 6; i < 10; i++) await append(l, appender, `x${i}`);
    expect((await currentList(l)).list.length).toBe(6);
    // Manifests at or over the target size are left alone.
    await setProperties(l, { 'commit.manifest.min-count-to-merge': '2', 'commit.manifest.target-size-bytes': '1' });
    await append(l, appender, 'x10');
    expect((await currentList(l)).list.length).toBe(7);
    expect((await liveEntries(l)).size).toBe(11);
    await l.catalog.close();
  });

  it('drops entries an earlier snapshot deleted, and carries another writer\'s manifest unchanged', async () => {
    const l = lake();
    const appender = new TableAppender({ catalog: l.catalog, storage: l.storage, manifestMerge: { enabled: true, minCountToMerge: 3, targetSizeBytes: 8 << 20 } });
    const first = await append(l, appender, 'd0');
    // Rewrite the first manifest as another writer would: the same entry plus a DELETED one, and a
    // data_file field this writer does not have (so it cannot be re-encoded without loss).
    const { loc, list } = await currentList(l);
    const src = AvroFile.decode(await l.storage.get(String(list[0]!['manifest_path'])));
    const schema = ManifestWriter.entrySchema(TableSchema.LOGS) as { fields: { name: string; type: { fields?: unknown[] } }[] };
    const foreign = structuredClone(schema);
    foreign.fields.find((f) => f.name === 'data_file')!.type.fields!.push({ name: 'nan_value_counts', type: ['null', 'string'], default: null, 'field-id': 137 });
    const entry = src.records[0]!;
    const ghost = { ...entry, status: 2, data_file: { ...(entry['data_file'] as AvroRecord), file_path: `${path.dirname(first.path)}/ghost.parquet` } };
    const foreignPath = `${path.dirname(String(list[0]!['manifest_path']))}/foreign-m0.avro`;
    const withDeleted = `${path.dirname(String(list[0]!['manifest_path']))}/with-deleted-m0.avro`;
    await l.storage.putNew(withDeleted, AvroFile.encode(schema, [{ ...entry, status: 0, sequence_number: 1n, file_sequence_number: 1n }, ghost], ManifestWriter.header(TableSchema.LOGS)));
    const second = await append(l, appender, 'd1');
    await l.storage.putNew(foreignPath, AvroFile.encode(foreign, [{ ...(AvroFile.decode(await l.storage.get(String((await currentList(l)).list[0]!['manifest_path']))).records[0]!), status: 0, sequence_number: 2n, file_sequence_number: 2n }], ManifestWriter.header(TableSchema.LOGS)));
    // Point the two manifests of the current list at the rewritten files (same files, same counts).
    const cur = await currentList(l);
    const newList = cur.list.map((m) => {
      const p = String(m['manifest_path']);
      const to = p === String(list[0]!['manifest_path']) ? withDeleted : foreignPath;
      return { ...m, manifest_path: to, manifest_length: BigInt(fs.statSync(new URL(to)).size) };
    });
    const listLoc = `${path.dirname(loc)}/snap-rewritten.avro`;
    await l.storage.putNew(listLoc, AvroFile.encode(ManifestList.schema, newList, { 'format-version': '2' }));
    const doc = LosslessJson.parse(Buffer.from(await l.storage.get(cur.loc)).toString('utf8')) as { snapshots: { 'manifest-list': string; 'snapshot-id': JsonValue }[]; [k: string]: unknown };
    doc.snapshots.find((s) => String(s['snapshot-id']) === String(second.snapshotId))!['manifest-list'] = listLoc;
    const next = `${path.dirname(cur.loc)}/${TableMetadata.nextFileName(cur.loc)}`;
    await l.storage.putNew(next, Buffer.from(LosslessJson.stringify(doc as { [k: string]: JsonValue }), 'utf8'));
    expect(await l.catalog.swapMetadataLocation('main', 'logs', cur.loc, next)).toBe(true);

    const third = await append(l, appender, 'd2');
    const after = await currentList(l);
    const paths = after.list.map((m) => String(m['manifest_path']));
    // The foreign manifest is carried as it was; the one with the deleted entry was merged away (with
    // only one mergeable manifest besides, nothing to pack it with: it stays too).
    expect(paths).toContain(foreignPath);
    const live = await liveEntries(l);
    expect([...live.keys()].sort()).toEqual([first.path, second.path, third.path].sort());
    expect([...live.keys()].some((p) => p.endsWith('ghost.parquet'))).toBe(false);
    // A fourth append packs the mergeable ones (the new one of d2 and the one with the deleted entry):
    // the ghost entry is not carried into the merged manifest.
    const fourth = await append(l, appender, 'd3');
    const last = await currentList(l);
    expect(last.list.map((m) => String(m['manifest_path']))).toContain(foreignPath);
    expect(last.list.map((m) => String(m['manifest_path']))).not.toContain(withDeleted);
    const merged = last.list.find((m) => Number(m['existing_files_count']) > 0 && String(m['manifest_path']) !== foreignPath)!;
    const mergedEntries = AvroFile.decode(await l.storage.get(String(merged['manifest_path']))).records;
    expect(mergedEntries.map((e) => e['status'])).toEqual([0, 0]);
    expect(mergedEntries.some((e) => String((e['data_file'] as AvroRecord)['file_path']).endsWith('ghost.parquet'))).toBe(false);
    expect([...(await liveEntries(l)).keys()].sort()).toEqual([first.path, second.path, third.path, fourth.path].sort());
    await l.catalog.close();
  });

  it('leaves no merged manifest behind when its commit loses the race', async () => {
    const l = lake();
    const appender = new TableAppender({ catalog: l.catalog, storage: l.storage, manifestMerge: { enabled: true, minCountToMerge: 2, targetSizeBytes: 8 << 20 } });
    await append(l, appender, 'r0');
    await append(l, appender, 'r1');
    // Another writer commits between this append's read and its swap, once.
    let raced = false;
    const other = new TableAppender({ catalog: l.catalog, storage: l.storage, manifestMerge: { enabled: false, minCountToMerge: 100, targetSizeBytes: 1 } });
    const racing = new TableAppender({
      catalog: l.catalog,
      storage: l.storage,
      manifestMerge: { enabled: true, minCountToMerge: 2, targetSizeBytes: 8 << 20 },
      beforeSwap: async () => {
        if (raced) return;
        raced = true;
        await append(l, other, 'r-other');
      },
    });
    const before = new Set(metadataFiles(l));
    const r = await append(l, racing, 'r2');
    const attemptsFiles = metadataFiles(l).filter((f) => !before.has(f));
    // Left: the other writer's manifest, list and metadata; this append's manifest, its second
    // attempt's merged manifest, list and metadata. Nothing of the first attempt.
    const merged = (await currentList(l)).list.filter((m) => Number(m['existing_files_count']) > 0);
    expect(merged).toHaveLength(1);
    // Every manifest some snapshot of the table still lists.
    const referenced = new Set<string>();
    for (const s of (await currentList(l)).meta.snapshots) {
      for (const m of await ManifestList.read(l.storage, s.manifestList)) referenced.add(path.basename(String(m['manifest_path'])));
    }
    const orphans = attemptsFiles.filter((f) => f.endsWith('.avro') && !f.startsWith('snap-') && !referenced.has(f));
    expect(orphans).toEqual([]);
    expect(attemptsFiles.filter((f) => f.startsWith(`snap-${r.snapshotId}-`))).toHaveLength(1);
    expect((await liveEntries(l)).size).toBe(4);
    await l.catalog.close();
  });
});
