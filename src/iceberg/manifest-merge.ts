// Manifest merging on append, as Iceberg Java's merge appends do (table
// properties commit.manifest-merge.enabled, commit.manifest.min-count-to-merge
// and commit.manifest.target-size-bytes, with the same defaults). Every commit
// adds one manifest; without merging, a table the compactor commits to every
// 30 s gains 2,880 manifests a day, and every commit rewrites a manifest list
// that long and every scan plans across all of them. Once the small data
// manifests reach the minimum count, they are packed, newest first, into bins
// of up to the target size, and each bin of two or more becomes one manifest
// of EXISTING entries that keep their snapshot ids and (now explicit) sequence
// numbers, so readers see the same files with the same sequence numbers.
// Entries DELETED by an earlier snapshot are left out. Manifests this writer
// cannot re-encode without loss (another partition spec, another engine's
// data_file fields, encrypted, delete manifests) are carried as they are.

import { randomUUID } from 'node:crypto';
import { AvroFile, type AvroRecord } from './avro-file.js';
import { ManifestWriter } from './manifest-writer.js';
import type { ObjectStorage } from './storage.js';
import type { TableMetadata } from './table-metadata.js';
import type { TableSchema } from './table-schema.js';

const STATUS_EXISTING = 0;
const STATUS_DELETED = 2;

/** How manifests are merged: Iceberg Java's table properties and defaults. */
export interface ManifestMergePolicy {
  readonly enabled: boolean;
  readonly minCountToMerge: number;
  readonly targetSizeBytes: number;
}

export const MERGE_DEFAULTS: ManifestMergePolicy = { enabled: true, minCountToMerge: 100, targetSizeBytes: 8 * 1024 * 1024 };

/** The table's merge policy: its properties where set and valid, else the defaults. */
export function mergePolicyOf(metadata: TableMetadata | null, defaults: ManifestMergePolicy = MERGE_DEFAULTS): ManifestMergePolicy {
  const int = (key: string, fallback: number, min: number) => {
    const v = metadata?.property(key);
    if (v === undefined || !/^\d+$/.test(v.trim())) return fallback;
    const n = Number(v.trim());
    return Number.isSafeInteger(n) && n >= min ? n : fallback;
  };
  // As Iceberg Java reads them: a boolean is true only for "true"; a count of 0 or 1 merges at every commit.
  const enabled = metadata?.property('commit.manifest-merge.enabled')?.trim().toLowerCase();
  return {
    enabled: enabled === undefined ? defaults.enabled : enabled === 'true',
    minCountToMerge: int('commit.manifest.min-count-to-merge', defaults.minCountToMerge, 0),
    targetSizeBytes: int('commit.manifest.target-size-bytes', defaults.targetSizeBytes, 1),
  };
}

export interface MergeOutcome {
  /** The parent's list entries to carry, merged ones in place of their sources. */
  readonly list: AvroRecord[];
  /** Manifests written by this merge (deleted by the caller when its commit loses). */
  readonly written: string[];
  /** Source manifests replaced by a merged one. */
  readonly replaced: number;
}

/**
 * Merges the small data manifests of `inherited` (the parent's list entries,
 * newest first) when, with the manifest this append adds, they reach the
 * policy's minimum count. Writes the merged manifests under `location`.
 */
export async function mergeManifests(
  storage: ObjectStorage,
  o: {
    readonly location: string;
    readonly schema: TableSchema;
    readonly snapshotId: bigint;
    readonly sequenceNumber: bigint;
    readonly inherited: readonly AvroRecord[];
    readonly policy: ManifestMergePolicy;
    /**
     * Manifests already found not to fit this writer's schema (another engine's): left out of
     * the count and never read again, so that a table holding many of them does not have every
     * commit read them all to merge nothing. The caller keeps it across commits.
     */
    readonly unfit?: Set<string>;
  },
): Promise<MergeOutcome> {
  const unchanged: MergeOutcome = { list: [...o.inherited], written: [], replaced: 0 };
  const { policy, schema } = o;
  if (!policy.enabled) return unchanged;
  const small = (m: AvroRecord) =>
    Number(m['content'] ?? 0) === 0 &&
    Number(m['partition_spec_id'] ?? 0) === schema.specId &&
    (m['key_metadata'] ?? null) === null &&
    Number(m['manifest_length']) < policy.targetSizeBytes;
  const unfit = o.unfit ?? new Set<string>();
  const candidates = o.inherited.filter((m) => small(m) && !unfit.has(String(m['manifest_path'])));
  if (candidates.length + 1 < policy.minCountToMerge) return unchanged;

  // Read the candidates; one this writer cannot carry over whole stays as it is, and so does one
  // that cannot be read now (the append does not depend on it: its list entry is carried).
  const entriesOf = new Map<AvroRecord, AvroRecord[]>();
  const known = dataFileFieldNames(schema);
  for (const m of candidates) {
    const path = String(m['manifest_path']);
    let file: ReturnType<typeof AvroFile.decode>;
    try {
      file = AvroFile.decode(await storage.get(path), path);
    } catch {
      continue;
    }
    if (!fitsWriterSchema(file.schema, known)) {
      if (unfit.size >= 100_000) unfit.clear();
      unfit.add(path);
      continue;
    }
    entriesOf.set(m, file.records);
  }

  // Pack, newest first, into bins of up to the target size.
  const bins: AvroRecord[][] = [];
  let bin: AvroRecord[] = [];
  let binBytes = 0;
  for (const m of candidates) {
    if (!entriesOf.has(m)) continue;
    const len = Number(m['manifest_length']);
    if (bin.length > 0 && binBytes + len > policy.targetSizeBytes) {
      bins.push(bin);
      bin = [];
      binBytes = 0;
    }
    bin.push(m);
    binBytes += len;
  }
  if (bin.length > 0) bins.push(bin);

  const replacement = new Map<AvroRecord, AvroRecord | null>();
  const written: string[] = [];
  let replaced = 0;
  try {
    for (const b of bins) {
      if (b.length < 2) continue;
      const entries: AvroRecord[] = [];
      for (const m of b) {
        const mSeq = m['sequence_number'] as bigint;
        for (const e of entriesOf.get(m)!) {
          if (e['status'] === STATUS_DELETED) continue;
          entries.push({
            ...e,
            status: STATUS_EXISTING,
            snapshot_id: e['snapshot_id'] ?? m['added_snapshot_id'],
            // Null sequence numbers inherit the manifest's (spec "Sequence Number Inheritance").
            sequence_number: e['sequence_number'] ?? mSeq,
            file_sequence_number: e['file_sequence_number'] ?? mSeq,
          });
        }
      }
      replaced += b.length;
      if (entries.length === 0) {
        for (const m of b) replacement.set(m, null);
        continue;
      }
      let bytes: Buffer;
      try {
        bytes = AvroFile.encode(ManifestWriter.entrySchema(schema), entries, ManifestWriter.header(schema));
      } catch {
        // An entry this writer's schema cannot hold (a field missing that has no default): carried as is.
        replaced -= b.length;
        continue;
      }
      const path = `${o.location}/metadata/${randomUUID()}-m${written.length + 1}.avro`;
      await storage.putNew(path, bytes);
      written.push(path);
      replacement.set(b[0]!, listEntry(schema, path, bytes.length, entries, o.snapshotId, o.sequenceNumber));
      for (const m of b.slice(1)) replacement.set(m, null);
    }
  } catch (e) {
    for (const p of written) await storage.delete(p).catch(() => undefined);
    throw e;
  }
  if (replaced === 0) return unchanged;
  const list: AvroRecord[] = [];
  for (const m of o.inherited) {
    if (!replacement.has(m)) list.push(m);
    else {
      const r = replacement.get(m);
      if (r !== null && r !== undefined) list.push(r);
    }
  }
  return { list, written, replaced };
}

/** The manifest-list entry of a merged manifest: every entry EXISTING, added by this snapshot. */
function listEntry(schema: TableSchema, path: string, length: number, entries: readonly AvroRecord[], snapshotId: bigint, sequenceNumber: bigint): AvroRecord {
  let minSeq = sequenceNumber;
  let rows = 0n;
  let lo: number | null = null;
  let hi: number | null = null;
  let containsNull = false;
  for (const e of entries) {
    const seq = e['sequence_number'] as bigint;
    if (seq < minSeq) minSeq = seq;
    const f = e['data_file'] as AvroRecord;
    rows += BigInt(f['record_count'] as bigint);
    const day = (f['partition'] as AvroRecord | undefined)?.[schema.partitionFieldName];
    if (day === null || day === undefined) {
      containsNull = true;
      continue;
    }
    const d = Number(day);
    lo = lo === null ? d : Math.min(lo, d);
    hi = hi === null ? d : Math.max(hi, d);
  }
  const int32 = (d: number | null) => {
    if (d === null) return null;
    const b = Buffer.alloc(4);
    b.writeInt32LE(d, 0);
    return b;
  };
  return {
    manifest_path: path,
    manifest_length: BigInt(length),
    partition_spec_id: schema.specId,
    content: 0,
    sequence_number: sequenceNumber,
    min_sequence_number: minSeq,
    added_snapshot_id: snapshotId,
    added_files_count: 0,
    existing_files_count: entries.length,
    deleted_files_count: 0,
    added_rows_count: 0n,
    existing_rows_count: rows,
    deleted_rows_count: 0n,
    partitions: [{ contains_null: containsNull, contains_nan: null, lower_bound: int32(lo), upper_bound: int32(hi) }],
    key_metadata: null,
  };
}

/** The field names of this writer's data_file record. */
function dataFileFieldNames(schema: TableSchema): ReadonlySet<string> {
  const entry = ManifestWriter.entrySchema(schema) as { fields: { name: string; type: unknown }[] };
  const df = entry.fields.find((f) => f.name === 'data_file')!.type as { fields: { name: string }[] };
  return new Set(df.fields.map((f) => f.name));
}

/**
 * Whether a manifest's writer schema has no entry or data_file field beyond
 * this writer's: re-encoding it then loses nothing (another engine's
 * nan_value_counts, equality_ids, … would be dropped, so such a manifest is
 * carried as it is).
 */
function fitsWriterSchema(writer: unknown, known: ReadonlySet<string>): boolean {
  const rec = writer as { fields?: { name: string; type: unknown }[] } | null;
  const fields = rec?.fields;
  if (!Array.isArray(fields)) return false;
  const entryFields = new Set(['status', 'snapshot_id', 'sequence_number', 'file_sequence_number', 'data_file']);
  for (const f of fields) if (!entryFields.has(f.name)) return false;
  const df = fields.find((f) => f.name === 'data_file')?.type as { fields?: { name: string }[] } | undefined;
  if (!Array.isArray(df?.fields)) return false;
  return df.fields.every((f) => known.has(f.name));
}
