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
