// Merged manifests read by the reference implementations. Six rounds of
// ingest and `siglake compact --once` land six snapshots of main.logs; after
// the first, the table's `commit.manifest.min-count-to-merge` is set to 3 (as
// an operator would with another engine), so the compactor's later commits
// merge the earlier manifests into one of EXISTING entries. pyiceberg and
// Spark must read every acknowledged record once, and report each data file
// live once, with the snapshot id and sequence numbers of the commit that
// added it.

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AvroFile, type AvroRecord } from '../../src/iceberg/avro-file.js';
import { FileStorage } from '../../src/iceberg/file-storage.js';
import { LosslessJson, type JsonValue } from '../../src/iceberg/lossless-json.js';
import { ManifestList } from '../../src/iceberg/manifest-list.js';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import { TableMetadata } from '../../src/iceberg/table-metadata.js';
import { startIngester, tempDir } from '../helpers/ingester.js';
import { DAY1_NS, PYTHON, pythonPeer, siglake, sparkJars } from './helpers.js';
import type { PyCatalog } from './readers.js';

const ROUNDS = 6;
const PER_ROUND = 4;

interface SparkView {
  tables: Record<string, { count: number; markers: string[]; entries: [string, number, string, number, number][] }>;
}

describe('merged manifests, read by pyiceberg 0.12 and Spark 4.1 + Iceberg', () => {
  const root = tempDir('siglake-interop-merge-');
  const warehouse = path.join(root, 'warehouse');
  const db = path.join(root, 'catalog.db');
  const flags = ['--catalog-url', `sqlite:${db}`, '--warehouse', warehouse];
  const acked: string[] = [];
  /** Each round's data file, with the snapshot and sequence number that added it. */
  const landed: { file: string; snapshotId: string; seq: number }[] = [];
  let manifestsAtEnd: AvroRecord[] = [];
  let py: PyCatalog;
  let spark: SparkView;

  const current = async () => {
    const cat = SqlCatalog.open(`sqlite:${db}`, 'siglake');
    try {
      const loc = (await cat.metadataLocation('main', 'logs'))!;
      const storage = new FileStorage(warehouse);
      const text = Buffer.from(await storage.get(loc)).toString('utf8');
      return { cat, loc, text, storage, meta: TableMetadata.parse(text, loc) };
    } finally {
      await cat.close();
    }
  };

  beforeAll(async () => {
    const dataDir = path.join(root, 'ingester');
    fs.mkdirSync(dataDir, { recursive: true });
    for (let round = 0; round < ROUNDS; round++) {
      const ing = await startIngester({ dataDir, args: ['--compactor=false', ...flags] });
      const markers = Array.from({ length: PER_ROUND }, (_, i) => `merge-r${round}-${i}`);
      try {
        const body = {
          resourceLogs: [
            {
              resource: { attributes: [{ key: 'service.name', value: { stringValue: 'merge' } }] },
              scopeLogs: [{ logRecords: markers.map((m, i) => ({ timeUnixNano: String(DAY1_NS + BigInt(round * 1000 + i)), body: { stringValue: m } })) }],
            },
          ],
        };
        const r = await fetch(`${ing.url}/v1/logs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
        expect(r.status).toBe(200);
        acked.push(...markers);
      } finally {
        expect(await ing.stop()).toBe(0);
      }
      const c = await siglake(['compact', '--once', '--wal-dir', path.join(dataDir, 'wal'), ...flags]);
      expect(c.code, c.stdout + c.stderr).toBe(0);
      const { meta, storage } = await current();
      const snap = meta.currentSnapshot()!;
      expect(meta.snapshots).toHaveLength(round + 1);
      const added = (await ManifestList.read(storage, snap.manifestList)).find((m) => m['added_snapshot_id'] === snap.snapshotId && Number(m['added_files_count']) > 0)!;
      const { records } = AvroFile.decode(await storage.get(String(added['manifest_path'])));
      expect(records).toHaveLength(1);
      landed.push({ file: String((records[0]!['data_file'] as AvroRecord)['file_path']), snapshotId: String(snap.snapshotId), seq: Number(snap.sequenceNumber) });
      if (round === 0) {
        // Another engine sets the property: a new metadata file, then the catalog swap.
        const { loc, text } = await current();
        const doc = LosslessJson.parse(text) as { [k: string]: JsonValue };
        doc['properties'] = { ...(doc['properties'] as { [k: string]: JsonValue }), 'commit.manifest.min-count-to-merge': '3' };
        const next = `${loc.slice(0, loc.lastIndexOf('/') + 1)}${TableMetadata.nextFileName(loc)}`;
        await storage.putNew(next, Buffer.from(LosslessJson.stringify(doc), 'utf8'));
        const cat = SqlCatalog.open(`sqlite:${db}`, 'siglake');
        expect(await cat.swapMetadataLocation('main', 'logs', loc, next)).toBe(true);
        await cat.close();
      }
    }
    const { meta, storage } = await current();
    manifestsAtEnd = await ManifestList.read(storage, meta.currentSnapshot()!.manifestList);
    const where = ['--warehouse', `file://${warehouse}`, '--name', 'siglake'];
    py = await pythonPeer<PyCatalog>('pyiceberg_peer.py', ['--uri', `sqlite:///${db}`, ...where]);
    const sparkArgs = ['--uri', `jdbc:sqlite:${db}`, ...where, '--jars', sparkJars(), '--time-from', '2026-01-15T00:00:00+00:00', '--attr', 'k=v', 'main.logs'];
    spark = await pythonPeer<SparkView>('spark_peer.py', sparkArgs, {
      PYSPARK_SUBMIT_ARGS: '--driver-memory 768m pyspark-shell',
      PYSPARK_PYTHON: PYTHON,
    });
  }, 900_000);
  afterAll(() => {
    if (!process.env['KEEP']) fs.rmSync(root, { recursive: true, force: true });
  });

  it('the compactor merged the earlier manifests once the table asked for it', () => {
    // Rounds 3 to 6 each merged what came before: the new manifest and one merged one.
    expect(manifestsAtEnd).toHaveLength(2);
    const merged = manifestsAtEnd.find((m) => Number(m['existing_files_count']) > 0)!;
    expect(Number(merged['existing_files_count'])).toBe(ROUNDS - 1);
    expect(Number(merged['min_sequence_number'])).toBe(landed[0]!.seq);
  });

  it('pyiceberg and Spark read every acknowledged record once', () => {
    const t = py.tables['main.logs']!;
    expect(t.rows).toBe(ROUNDS * PER_ROUND);
    expect(t.markers).toEqual([...acked].sort());
    expect(t.snapshots).toHaveLength(ROUNDS);
    expect(spark.tables['main.logs']!.count).toBe(ROUNDS * PER_ROUND);
    expect(spark.tables['main.logs']!.markers).toEqual([...acked].sort());
  });

  it('both report each file live once, with the snapshot id and sequence numbers of the commit that added it', () => {
    // Status 1 (ADDED) for the last round's file, 0 (EXISTING) for the merged ones.
    const want = landed
      .map((l, i) => [l.file, i === ROUNDS - 1 ? 1 : 0, l.snapshotId, l.seq, l.seq] as [string, number, string, number, number])
      .sort((a, b) => (a[0] < b[0] ? -1 : 1));
    expect(py.tables['main.logs']!.entries).toEqual(want);
    expect(spark.tables['main.logs']!.entries).toEqual(want);
  });
});
