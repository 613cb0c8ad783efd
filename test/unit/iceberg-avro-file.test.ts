import { deflateRawSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { avroMetadata, avroRead } from 'icebird';
import { AvroFile } from '../../src/iceberg/avro-file.js';
import { ManifestList } from '../../src/iceberg/manifest-list.js';
import { ManifestWriter } from '../../src/iceberg/manifest-writer.js';
import { TableSchema } from '../../src/iceberg/table-schema.js';

async function readWithIcebird(bytes: Buffer): Promise<{ metadata: Record<string, unknown>; records: Record<string, unknown>[] }> {
  const ab = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  const reader = { view: new DataView(ab), offset: 0 };
  const { metadata, syncMarker } = await avroMetadata(reader);
  const records = (await avroRead({ reader, metadata, syncMarker })) as Record<string, unknown>[];
  return { metadata: metadata as Record<string, unknown>, records };
}

describe('Avro container files for manifests', () => {
  it('round-trips 64-bit longs, unions, int-keyed maps and bytes', () => {
    const schema = ManifestWriter.entrySchema(TableSchema.LOGS);
    const rec = {
      status: 1,
      snapshot_id: 9_223_372_036_854_775_807n,
      sequence_number: null,
      file_sequence_number: null,
      data_file: {
        content: 0,
        file_path: 'file:///w/main/logs/data/x.parquet',
        file_format: 'PARQUET',
        partition: { time_day: 20_454 },
        record_count: 3n,
        file_size_in_bytes: 1234n,
        column_sizes: [{ key: 1, value: 10n }],
        value_counts: [{ key: 1, value: 3n }],
        null_value_counts: [{ key: 1, value: 0n }],
        lower_bounds: [{ key: 7, value: Buffer.from('a') }],
        upper_bounds: [{ key: 7, value: Buffer.from('z') }],
        key_metadata: null,
        split_offsets: [4n],
        sort_order_id: 0,
      },
    };
    const bytes = AvroFile.encode(schema, [rec, rec], { 'format-version': '2', content: 'data' });
    const back = AvroFile.decode(bytes);
    expect(back.metadata.get('format-version')).toBe('2');
    expect(back.metadata.get('avro.codec')).toBe('null');
    expect(back.records).toHaveLength(2);
    expect(back.records[0]).toEqual(rec);
  });

  it('writes manifest lists an independent Avro reader (icebird) decodes', async () => {
    const list = {
      manifest_path: 'file:///w/m0.avro',
      manifest_length: 4096n,
      partition_spec_id: 0,
      content: 0,
      sequence_number: 7n,
      min_sequence_number: 7n,
      added_snapshot_id: 123456789012345n,
      added_files_count: 2,
      existing_files_count: 0,
      deleted_files_count: 0,
      added_rows_count: 10n,
      existing_rows_count: 0n,
      deleted_rows_count: 0n,
      partitions: [{ contains_null: false, contains_nan: null, lower_bound: Buffer.from([1, 0, 0, 0]), upper_bound: Buffer.from([2, 0, 0, 0]) }],
      key_metadata: null,
    };
    const bytes = AvroFile.encode(ManifestList.schema, [list], { 'snapshot-id': '123456789012345' });
    const { metadata, records } = await readWithIcebird(bytes);
    expect(metadata['snapshot-id']).toBe('123456789012345');
    expect(records).toHaveLength(1);
    expect(records[0]!['manifest_path']).toBe('file:///w/m0.avro');
    expect(records[0]!['sequence_number']).toBe(7n);
    expect(records[0]!['added_snapshot_id']).toBe(123456789012345n);
    expect(records[0]!['added_rows_count']).toBe(10n);
  });

  it('reads deflate-compressed blocks, as Iceberg Java writes them', () => {
    const schema = { type: 'record', name: 'r', fields: [{ name: 'n', type: 'long' }] };
    const plain = AvroFile.encode(schema, [{ n: 5n }, { n: -1n }], {});
    // Re-frame the one block with the deflate codec: same header shape, compressed data.
    const type = AvroFile.typeOf(schema);
    const data = deflateRawSync(Buffer.concat([type.toBuffer({ n: 5n }), type.toBuffer({ n: -1n })]));
    const sync = plain.subarray(plain.length - 16);
    const header = Buffer.concat([
      Buffer.from('Obj\x01', 'latin1'),
      Buffer.from([4]),
      avroString('avro.schema'),
      avroString(JSON.stringify(schema)),
      avroString('avro.codec'),
      avroString('deflate'),
      Buffer.from([0]),
      sync,
    ]);
    const file = Buffer.concat([header, Buffer.from([4]), zig(data.length), data, sync]);
    expect(AvroFile.decode(file).records).toEqual([{ n: 5n }, { n: -1n }]);
  });

  it('refuses a file that is not an Avro container', () => {
    expect(() => AvroFile.decode(Buffer.from('PAR1 not avro'))).toThrow(expect.objectContaining({ code: 'SIGLAKE_ICEBERG_METADATA' }));
  });
});

function zig(n: number): Buffer {
  const out: number[] = [];
  let v = n * 2;
  do {
    let b = v & 0x7f;
    v = Math.floor(v / 128);
    if (v > 0) b |= 0x80;
    out.push(b);
  } while (v > 0);
  return Buffer.from(out);
}

function avroString(s: string): Buffer {
  const b = Buffer.from(s, 'utf8');
  return Buffer.concat([zig(b.length), b]);
}
