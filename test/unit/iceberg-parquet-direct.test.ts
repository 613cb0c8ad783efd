// ParquetDataWriter encodes a row group's columns itself (map levels from one
// pass over the [key, value] pairs) and hands each leaf to hyparquet-writer's
// writeColumn. The oracle is hyparquet-writer's own generic path: its Dremel
// encoder for the levels, and ParquetWriter.write for whole files, which must
// come out byte for byte the same.

import { decompress } from '@bokuweb/zstd-wasm';
import { parquetMetadata, parquetReadObjects } from 'hyparquet';
import { getSchemaPath } from 'hyparquet/src/schema.js';
import { ByteWriter, ParquetWriter } from 'hyparquet-writer';
import { encodeNestedValues } from 'hyparquet-writer/src/dremel.js';
import { beforeAll, describe, expect, it } from 'vitest';
import { flatPage, mapPages, ParquetDataWriter } from '../../src/iceberg/parquet-data-writer.js';
import type { ObjectSink } from '../../src/iceberg/storage.js';
import { TableSchema } from '../../src/iceberg/table-schema.js';
import { ZstdCodec, type Compressor } from '../../src/iceberg/zstd-codec.js';
import { Prng } from '../../src/prng.js';

let zstd: Compressor;
beforeAll(async () => {
  zstd = await ZstdCodec.load();
});

class MemorySink implements ObjectSink {
  readonly chunks: Uint8Array[] = [];
  async write(bytes: Uint8Array): Promise<void> {
    this.chunks.push(bytes.slice());
  }
  async close(): Promise<number> {
    return this.bytes().length;
  }
  async abort(): Promise<void> {}
  bytes(): Uint8Array {
    return Buffer.concat(this.chunks);
  }
}

const TEXTS = ['', 'a', 'service.name', 'checkout', 'zürich', '東京', '😀 emoji', 'x'.repeat(300)];

function text(prng: Prng): string {
  return prng.chance(0.2) ? `v${prng.int(1_000_000)}` : TEXTS[prng.int(TEXTS.length)]!;
}

/** A map's rows: empty, or up to 6 pairs, some values null (and, when the map may be, some maps null). */
function mapValue(prng: Prng, required: boolean): [string, string | null][] | null {
  if (!required && prng.chance(0.15)) return null;
  const n = prng.chance(0.25) ? 0 : prng.range(1, 6);
  return Array.from({ length: n }, (_, i) => [`k${i}.${text(prng)}`, prng.chance(0.2) ? null : text(prng)]);
}

/** `n` rows of `schema` as columns, every optional column sometimes null. */
function columnsOf(schema: TableSchema, n: number, prng: Prng): unknown[][] {
  return schema.columns.map((c) =>
    Array.from({ length: n }, () => {
      if (c.type === 'map') return mapValue(prng, c.required);
      if (!c.required && prng.chance(0.3)) return null;
      switch (c.type) {
        case 'timestamptz':
        case 'long':
          return 1_767_225_600_000_000n + BigInt(prng.int(1_000_000));
        case 'int':
          return prng.int(100);
        case 'double':
          return prng.float() * 1000;
        case 'boolean':
          return prng.chance(0.5);
        default:
          return text(prng);
      }
    }),
  );
}

/** The same file through ParquetWriter.write: one write per row group. */
function reference(schema: TableSchema, groups: unknown[][][]): Uint8Array {
  const writer = new ByteWriter();
  const pw = new ParquetWriter({
    writer,
    schema: schema.parquetSchema() as never,
    codec: 'ZSTD',
    compressors: { ZSTD: zstd },
    statistics: true,
    kvMetadata: [{ key: 'iceberg.schema', value: JSON.stringify(schema.icebergSchema()) }],
    createdBy: 'siglake test',
  });
  for (const columns of groups) {
    pw.write({ columnData: schema.columns.map((c, i) => ({ name: c.name, data: columns[i] as never })), rowGroupSize: columns[0]!.length });
  }
  pw.finish();
  return writer.getBytes().slice();
}

async function direct(schema: TableSchema, groups: unknown[][][]): Promise<Uint8Array> {
  const sink = new MemorySink();
  const w = new ParquetDataWriter({ schema, sink, location: 'mem', partitionDay: 0, zstd, createdBy: 'siglake test' });
  for (const columns of groups) await w.writeRowGroup(columns, columns[0]!.length);
  const info = await w.finish();
  expect(info.recordCount).toBe(groups.reduce((s, g) => s + g[0]!.length, 0));
  return sink.bytes();
}

/** Page data with its levels as plain arrays (ours are typed arrays). */
const plain = (p: { definitionLevels: ArrayLike<number>; repetitionLevels: ArrayLike<number> }) => ({
  ...p,
  definitionLevels: Array.from(p.definitionLevels),
  repetitionLevels: Array.from(p.repetitionLevels),
});

describe('ParquetDataWriter, direct column path', () => {
  it.each([
    ['logs', TableSchema.LOGS],
    ['traces', TableSchema.TRACES],
  ])('writes the same bytes as ParquetWriter.write for %s tables: row groups of 1, 777 and 9,000 rows', async (_name, schema) => {
    const prng = new Prng(18);
    const groups = [1, 777, 9_000].map((n) => columnsOf(schema, n, prng));
    const ours = await direct(schema, groups);
    const theirs = reference(schema, groups);
    expect(ours.length).toBe(theirs.length);
    expect(Buffer.compare(Buffer.from(ours), Buffer.from(theirs))).toBe(0);
    // Read back: the maps keep their pairs, empties and null values.
    const buf = ours.buffer.slice(ours.byteOffset, ours.byteOffset + ours.byteLength) as ArrayBuffer;
    expect(parquetMetadata(buf).row_groups.map((g) => Number(g.num_rows))).toEqual([1, 777, 9_000]);
    const attrs = schema.columns.findIndex((c) => c.name === 'attributes');
    const rows = await parquetReadObjects({ file: buf, columns: ['attributes'], rowStart: 1, rowEnd: 778, compressors: { ZSTD: (input: Uint8Array) => decompress(input) } });
    const want = (groups[1]![attrs] as [string, string | null][][]).map((pairs) => Object.fromEntries(pairs));
    expect(rows.map((r) => r['attributes'])).toEqual(want);
  });

  it('gives the levels of the Dremel encoder for optional and required maps and flat columns', () => {
    const prng = new Prng(7);
    for (const required of [true, false]) {
      const schema = [
        { name: 'schema', num_children: 1 },
        { name: 'm', repetition_type: required ? 'REQUIRED' : 'OPTIONAL', converted_type: 'MAP', num_children: 1 },
        { name: 'key_value', repetition_type: 'REPEATED', num_children: 2 },
        { name: 'key', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'REQUIRED' },
        { name: 'value', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
      ];
      const tree = (leaf: string) => getSchemaPath(schema as never, ['m', 'key_value', leaf]);
      const rows = Array.from({ length: 500 }, () => mapValue(prng, required));
      // The generic encoder takes {key, value} entries; ours takes the [key, value] pairs the decoder makes.
      const entries = rows.map((r) => (r === null ? null : r.map(([k, v]) => ({ key: k, value: v }))));
      const ours = mapPages(rows, required);
      // hyparquet-writer has its own copy of hyparquet: its schema type is that copy's.
      expect(plain(ours.key)).toEqual(encodeNestedValues(tree('key') as never, entries));
      expect(plain(ours.value)).toEqual(encodeNestedValues(tree('value') as never, entries));
      if (required) expect(() => mapPages([[['a', 'b']], null], true)).toThrow(/required/);
    }
    const flat = Array.from({ length: 100 }, () => (prng.chance(0.3) ? null : text(prng)));
    const leaf = (repetition_type: string) => getSchemaPath([{ name: 'schema', num_children: 1 }, { name: 'f', type: 'BYTE_ARRAY', repetition_type }] as never, ['f']);
    expect(plain(flatPage(flat, false))).toEqual(encodeNestedValues(leaf('OPTIONAL') as never, flat));
    const full = flat.map((v) => v ?? 'x');
    expect(plain(flatPage(full, true))).toEqual(encodeNestedValues(leaf('REQUIRED') as never, full));
    expect(() => flatPage(flat, true)).toThrow(/required/);
  });

  it('refuses a column whose length is not the row count', async () => {
    const w = new ParquetDataWriter({ schema: TableSchema.LOGS, sink: new MemorySink(), location: 'mem', partitionDay: 0, zstd, createdBy: 'siglake test' });
    const columns = columnsOf(TableSchema.LOGS, 10, new Prng(1));
    columns[3] = columns[3]!.slice(0, 9);
    await expect(w.writeRowGroup(columns, 10)).rejects.toThrow(/ingest_time has 9 values for 10 rows/);
  });
});
