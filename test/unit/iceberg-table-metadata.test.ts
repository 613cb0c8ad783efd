// What an append does to the table metadata another engine may have set:
// the main branch moves to the new snapshot, and its retention settings
// (min-snapshots-to-keep, max-snapshot-age-ms, max-ref-age-ms, which Spark's
// and Trino's expiry honour) stay. They were dropped by every append.

import { describe, expect, it } from 'vitest';
import { LosslessJson } from '../../src/iceberg/lossless-json.js';
import { TableMetadata } from '../../src/iceberg/table-metadata.js';
import { TableSchema } from '../../src/iceberg/table-schema.js';

describe('TableMetadata.withAppend', () => {
  it("moves main and keeps its retention settings and the other refs", () => {
    const base = LosslessJson.parse(TableMetadata.create('file:///w/t', TableSchema.LOGS, 1_000).toJson()) as Record<string, unknown>;
    base['refs'] = {
      main: { 'snapshot-id': 7, type: 'branch', 'min-snapshots-to-keep': 5, 'max-snapshot-age-ms': 86_400_000, 'max-ref-age-ms': 604_800_000 },
      audit: { 'snapshot-id': 7, type: 'tag', 'max-ref-age-ms': 1 },
    };
    const meta = TableMetadata.parse(LosslessJson.stringify(base as never));
    const next = meta.withAppend(
      { snapshotId: 42n, parentSnapshotId: null, sequenceNumber: 1n, timestampMs: 2_000, manifestList: 'file:///w/t/metadata/snap-42.avro', summary: { operation: 'append' } },
      'file:///w/t/metadata/00000-x.metadata.json',
      2_000,
    );
    const refs = (JSON.parse(next.toJson()) as { refs: Record<string, Record<string, unknown>> }).refs;
    expect(refs['main']).toEqual({ 'snapshot-id': 42, type: 'branch', 'min-snapshots-to-keep': 5, 'max-snapshot-age-ms': 86_400_000, 'max-ref-age-ms': 604_800_000 });
    expect(refs['audit']).toEqual({ 'snapshot-id': 7, type: 'tag', 'max-ref-age-ms': 1 });
  });
});

describe('TableMetadata.withAppend under clock skew', () => {
  it('a writer whose clock is behind the last commit stamps its snapshot no earlier: both logs stay sorted, as Iceberg Java requires to load the table', () => {
    const snap = (id: bigint, t: number, parent: bigint | null) => ({
      snapshotId: id,
      parentSnapshotId: parent,
      sequenceNumber: id,
      timestampMs: t,
      manifestList: `file:///w/t/metadata/snap-${id}.avro`,
      summary: { operation: 'append' },
    });
    const t0 = 1_800_000_000_000;
    let meta = TableMetadata.create('file:///w/t', TableSchema.LOGS, t0);
    meta = meta.withAppend(snap(1n, t0, null), 'file:///w/t/metadata/00000-a.metadata.json', t0);
    // The next writer's clock is ten minutes behind (Iceberg Java tolerates one).
    const behind = t0 - 600_000;
    meta = meta.withAppend(snap(2n, behind, 1n), 'file:///w/t/metadata/00001-b.metadata.json', behind);
    meta = meta.withAppend(snap(3n, behind + 1_000, 2n), 'file:///w/t/metadata/00002-c.metadata.json', behind + 1_000);
    const doc = JSON.parse(meta.toJson()) as {
      'last-updated-ms': number;
      snapshots: { 'snapshot-id': number; 'timestamp-ms': number }[];
      'snapshot-log': { 'timestamp-ms': number }[];
      'metadata-log': { 'timestamp-ms': number }[];
    };
    const sorted = (xs: number[]) => xs.every((x, i) => i === 0 || x >= xs[i - 1]!);
    // Before, the log read t0, t0 − 10 min, t0 − 10 min + 1 s: Iceberg Java 1.12's parser threw
    // "[BUG] Expected sorted snapshot log entries", and Spark could not open the table.
    expect(doc['snapshot-log'].map((e) => e['timestamp-ms'])).toEqual([t0, t0, t0]);
    expect(sorted(doc['metadata-log'].map((e) => e['timestamp-ms']))).toBe(true);
    expect(doc['last-updated-ms']).toBe(t0);
    expect(doc.snapshots.map((s) => s['timestamp-ms'])).toEqual([t0, t0, t0]);
    // A clock ahead again moves on from there.
    meta = meta.withAppend(snap(4n, t0 + 5_000, 3n), 'file:///w/t/metadata/00003-d.metadata.json', t0 + 5_000);
    expect(meta.lastUpdatedMs).toBe(t0 + 5_000);
    expect(meta.snapshot(4n)!.timestampMs).toBe(t0 + 5_000);
  });
});
