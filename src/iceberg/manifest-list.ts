// Manifest lists (Iceberg spec "Manifest Lists", format v2): the Avro file a
// snapshot points at, naming every manifest of the table at that snapshot. An
// append carries the parent's entries over unchanged and adds its own.

import { AvroFile, type AvroRecord } from './avro-file.js';
import type { WrittenManifest } from './manifest-writer.js';
import type { ObjectStorage } from './storage.js';

const SCHEMA = {
  type: 'record',
  name: 'manifest_file',
  fields: [
    { name: 'manifest_path', type: 'string', 'field-id': 500 },
    { name: 'manifest_length', type: 'long', 'field-id': 501 },
    { name: 'partition_spec_id', type: 'int', 'field-id': 502 },
    { name: 'content', type: 'int', 'field-id': 517 },
    { name: 'sequence_number', type: 'long', 'field-id': 515 },
    { name: 'min_sequence_number', type: 'long', 'field-id': 516 },
    { name: 'added_snapshot_id', type: 'long', 'field-id': 503 },
    { name: 'added_files_count', type: 'int', 'field-id': 504 },
    { name: 'existing_files_count', type: 'int', 'field-id': 505 },
    { name: 'deleted_files_count', type: 'int', 'field-id': 506 },
    { name: 'added_rows_count', type: 'long', 'field-id': 512 },
    { name: 'existing_rows_count', type: 'long', 'field-id': 513 },
    { name: 'deleted_rows_count', type: 'long', 'field-id': 514 },
    {
      name: 'partitions',
      type: [
        'null',
        {
          type: 'array',
          'element-id': 508,
          items: {
            type: 'record',
            name: 'r508',
            fields: [
              { name: 'contains_null', type: 'boolean', 'field-id': 509 },
              { name: 'contains_nan', type: ['null', 'boolean'], default: null, 'field-id': 518 },
              { name: 'lower_bound', type: ['null', 'bytes'], default: null, 'field-id': 510 },
              { name: 'upper_bound', type: ['null', 'bytes'], default: null, 'field-id': 511 },
            ],
          },
        },
      ],
      default: null,
      'field-id': 507,
    },
    { name: 'key_metadata', type: ['null', 'bytes'], default: null, 'field-id': 519 },
  ],
};

export class ManifestList {
  static readonly schema: Readonly<Record<string, unknown>> = SCHEMA;

  /** The entries of a manifest list, in the field names of the spec. */
  static async read(storage: ObjectStorage, location: string): Promise<AvroRecord[]> {
    const { records } = AvroFile.decode(await storage.get(location), location);
    return records;
  }

  static async write(
    storage: ObjectStorage,
    location: string,
    opts: { snapshotId: bigint; parentSnapshotId: bigint | null; sequenceNumber: bigint; inherited: readonly AvroRecord[]; added: WrittenManifest },
  ): Promise<void> {
    const { added, sequenceNumber, snapshotId } = opts;
    const dayBytes = (d: number) => {
      const b = Buffer.alloc(4);
      b.writeInt32LE(d, 0);
      return b;
    };
    const records: AvroRecord[] = [
      {
        manifest_path: added.location,
        manifest_length: BigInt(added.length),
        partition_spec_id: 0,
        content: 0,
        sequence_number: sequenceNumber,
        min_sequence_number: sequenceNumber,
        added_snapshot_id: snapshotId,
        added_files_count: added.addedFiles,
        existing_files_count: 0,
        deleted_files_count: 0,
        added_rows_count: added.addedRows,
        existing_rows_count: 0n,
        deleted_rows_count: 0n,
        partitions: [{ contains_null: false, contains_nan: null, lower_bound: dayBytes(added.minDay), upper_bound: dayBytes(added.maxDay) }],
        key_metadata: null,
      },
      ...opts.inherited.map(normalize),
    ];
    const meta: Record<string, string> = {
      'snapshot-id': String(snapshotId),
      'parent-snapshot-id': opts.parentSnapshotId === null ? 'null' : String(opts.parentSnapshotId),
      'sequence-number': String(sequenceNumber),
      'format-version': '2',
    };
    await storage.putNew(location, AvroFile.encode(SCHEMA, records, meta));
  }
}

/** An entry read from a parent list (possibly another writer's), in this writer's schema. */
export function normalize(r: AvroRecord): AvroRecord {
  const big = (v: unknown): bigint => (typeof v === 'bigint' ? v : BigInt((v as number | undefined) ?? 0));
  const parts = r['partitions'] as AvroRecord[] | null | undefined;
  return {
    manifest_path: r['manifest_path'],
    manifest_length: big(r['manifest_length']),
    partition_spec_id: (r['partition_spec_id'] as number | undefined) ?? 0,
    content: (r['content'] as number | undefined) ?? 0,
    sequence_number: big(r['sequence_number']),
    min_sequence_number: big(r['min_sequence_number']),
    added_snapshot_id: big(r['added_snapshot_id']),
    added_files_count: (r['added_files_count'] as number | undefined) ?? 0,
    existing_files_count: (r['existing_files_count'] as number | undefined) ?? 0,
    deleted_files_count: (r['deleted_files_count'] as number | undefined) ?? 0,
    added_rows_count: big(r['added_rows_count']),
    existing_rows_count: big(r['existing_rows_count']),
    deleted_rows_count: big(r['deleted_rows_count']),
    partitions:
      parts === null || parts === undefined
        ? null
        : parts.map((p) => ({
            contains_null: p['contains_null'] === true,
            contains_nan: (p['contains_nan'] as boolean | null | undefined) ?? null,
            lower_bound: (p['lower_bound'] as Buffer | null | undefined) ?? null,
            upper_bound: (p['upper_bound'] as Buffer | null | undefined) ?? null,
          })),
    key_metadata: (r['key_metadata'] as Buffer | null | undefined) ?? null,
  };
}
