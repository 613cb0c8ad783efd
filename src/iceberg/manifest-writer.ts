// Data manifests (Iceberg spec "Manifests", format v2): one Avro file per
// commit listing the data files it adds, with their partition tuple and
// metrics. Entries are written with status ADDED and null sequence numbers,
// which readers inherit from the manifest's entry in the manifest list; a
// commit retried after a conflict (and so given a new sequence number) reuses
// the manifest unchanged and rewrites only the manifest list and metadata.

import { AvroFile } from './avro-file.js';
import type { DataFileInfo } from './parquet-data-writer.js';
import type { ObjectStorage } from './storage.js';
import type { TableSchema } from './table-schema.js';

/** What the manifest list needs to know about a written manifest. */
export interface WrittenManifest {
  readonly location: string;
  readonly length: number;
  readonly addedFiles: number;
  readonly addedRows: bigint;
  readonly minDay: number;
  readonly maxDay: number;
}

const STATUS_ADDED = 1;

export class ManifestWriter {
  /** The Avro schema of a manifest entry for tables of `schema` (v2, day partitioning). */
  static entrySchema(schema: TableSchema): Record<string, unknown> {
    const intLongMap = (fieldId: number, name: string, keyId: number, valueId: number, valueType: string) => ({
      name,
      type: [
        'null',
        {
          type: 'array',
          logicalType: 'map',
          items: {
            type: 'record',
            name: `k${keyId}_v${valueId}`,
            fields: [
              { name: 'key', type: 'int', 'field-id': keyId },
              { name: 'value', type: valueType, 'field-id': valueId },
            ],
          },
        },
      ],
      default: null,
      'field-id': fieldId,
    });
    return {
      type: 'record',
      name: 'manifest_entry',
      fields: [
        { name: 'status', type: 'int', 'field-id': 0 },
        { name: 'snapshot_id', type: ['null', 'long'], default: null, 'field-id': 1 },
        { name: 'sequence_number', type: ['null', 'long'], default: null, 'field-id': 3 },
        { name: 'file_sequence_number', type: ['null', 'long'], default: null, 'field-id': 4 },
        {
          name: 'data_file',
          'field-id': 2,
          type: {
            type: 'record',
            name: 'r2',
            fields: [
              { name: 'content', type: 'int', 'field-id': 134 },
              { name: 'file_path', type: 'string', 'field-id': 100 },
              { name: 'file_format', type: 'string', 'field-id': 101 },
              {
                name: 'partition',
                'field-id': 102,
                type: {
                  type: 'record',
                  name: 'r102',
                  fields: [
                    {
                      name: schema.partitionFieldName,
                      type: ['null', { type: 'int', logicalType: 'date' }],
                      default: null,
                      'field-id': schema.partitionFieldId,
                    },
                  ],
                },
              },
              { name: 'record_count', type: 'long', 'field-id': 103 },
              { name: 'file_size_in_bytes', type: 'long', 'field-id': 104 },
              intLongMap(108, 'column_sizes', 117, 118, 'long'),
              intLongMap(109, 'value_counts', 119, 120, 'long'),
              intLongMap(110, 'null_value_counts', 121, 122, 'long'),
              intLongMap(125, 'lower_bounds', 126, 127, 'bytes'),
              intLongMap(128, 'upper_bounds', 129, 130, 'bytes'),
              { name: 'key_metadata', type: ['null', 'bytes'], default: null, 'field-id': 131 },
              {
                name: 'split_offsets',
                type: ['null', { type: 'array', items: 'long', 'element-id': 133 }],
                default: null,
                'field-id': 132,
              },
              { name: 'sort_order_id', type: ['null', 'int'], default: null, 'field-id': 140 },
            ],
          },
        },
      ],
    };
  }

  /** The Iceberg keys of a data manifest's Avro header for tables of `schema`. */
  static header(schema: TableSchema): Record<string, string> {
    return {
      schema: JSON.stringify(schema.icebergSchema()),
      'schema-id': String(schema.schemaId),
      'partition-spec': JSON.stringify(schema.partitionFields()),
      'partition-spec-id': String(schema.specId),
      'format-version': '2',
      content: 'data',
    };
  }

  /** Writes a manifest that adds `files` in snapshot `snapshotId`. */
  static async write(
    storage: ObjectStorage,
    location: string,
    schema: TableSchema,
    snapshotId: bigint,
    files: readonly DataFileInfo[],
  ): Promise<WrittenManifest> {
    const kv = (m: Map<number, bigint | Uint8Array>) =>
      [...m.entries()].sort((a, b) => a[0] - b[0]).map(([key, value]) => ({ key, value: value instanceof Uint8Array ? Buffer.from(value) : value }));
    const records = files.map((f) => ({
      status: STATUS_ADDED,
      snapshot_id: snapshotId,
      sequence_number: null,
      file_sequence_number: null,
      data_file: {
        content: 0,
        file_path: f.location,
        file_format: 'PARQUET',
        partition: { [schema.partitionFieldName]: f.partitionDay },
        record_count: BigInt(f.recordCount),
        file_size_in_bytes: BigInt(f.fileSizeInBytes),
        column_sizes: kv(f.columnSizes),
        value_counts: kv(f.metrics.valueCounts),
        null_value_counts: kv(f.metrics.nullValueCounts),
        lower_bounds: kv(f.metrics.lowerBounds),
        upper_bounds: kv(f.metrics.upperBounds),
        key_metadata: null,
        split_offsets: f.splitOffsets.length > 0 ? f.splitOffsets : null,
        sort_order_id: 0,
      },
    }));
    const bytes = AvroFile.encode(ManifestWriter.entrySchema(schema), records, ManifestWriter.header(schema));
    await storage.putNew(location, bytes);
    let minDay = Infinity;
    let maxDay = -Infinity;
    let rows = 0n;
    for (const f of files) {
      minDay = Math.min(minDay, f.partitionDay);
      maxDay = Math.max(maxDay, f.partitionDay);
      rows += BigInt(f.recordCount);
    }
    return { location, length: bytes.length, addedFiles: files.length, addedRows: rows, minDay, maxDay };
  }
}
