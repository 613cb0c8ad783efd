// Avro object container files, as Iceberg stores manifests and manifest
// lists: the `Obj\x01` header with a metadata map (the writer schema and the
// Iceberg keys), a random sync marker, then blocks of records. Records are
// encoded and decoded by avsc; the container framing is done here so that the
// schema JSON written into the header is exactly the one given, field ids and
// all. Every Avro `long` is a bigint: Iceberg snapshot ids use all 64 bits.

import { randomBytes } from 'node:crypto';
import { inflateRawSync } from 'node:zlib';
import avro from 'avsc';
import { IcebergError } from './iceberg-error.js';

const MAGIC = Buffer.from([0x4f, 0x62, 0x6a, 0x01]);
const SYNC_SIZE = 16;
/** Records per block; manifests are small, so one block is the common case. */
const BLOCK_RECORDS = 4096;

export type AvroRecord = Record<string, unknown>;

export interface AvroFileContents {
  readonly metadata: ReadonlyMap<string, string>;
  readonly schema: unknown;
  readonly records: AvroRecord[];
}

export class AvroFile {
  /** The avsc type for a schema, with 64-bit longs as bigint. */
  static typeOf(schema: unknown): avro.Type {
    return avro.Type.forSchema(schema as avro.Schema, { registry: { long: bigLongType() } });
  }

  /**
   * Encodes records into a container file. Blocks are not compressed (codec
   * `null`): manifests are small, every Avro reader supports `null`, and some
   * (icebird 0.3) mis-read `deflate` blocks of some sizes.
   */
  static encode(schema: unknown, records: readonly AvroRecord[], metadata: Readonly<Record<string, string>>): Buffer {
    const type = AvroFile.typeOf(schema);
    const sync = randomBytes(SYNC_SIZE);
    const parts: Buffer[] = [MAGIC];
    const meta: [string, Buffer][] = [
      ['avro.schema', Buffer.from(JSON.stringify(schema), 'utf8')],
      ['avro.codec', Buffer.from('null', 'utf8')],
      // Never a second avro.schema or avro.codec: readers keep the last of a repeated key.
      ...Object.entries(metadata)
        .filter(([k]) => k !== 'avro.schema' && k !== 'avro.codec')
        .map(([k, v]) => [k, Buffer.from(v, 'utf8')] as [string, Buffer]),
    ];
    parts.push(zigzag(meta.length));
    for (const [k, v] of meta) {
      const kb = Buffer.from(k, 'utf8');
      parts.push(zigzag(kb.length), kb, zigzag(v.length), v);
    }
    parts.push(zigzag(0), sync);
    for (let i = 0; i < records.length; i += BLOCK_RECORDS) {
      const block = records.slice(i, i + BLOCK_RECORDS);
      let encoded: Buffer[];
      try {
        encoded = block.map((r) => type.toBuffer(r));
      } catch (e) {
        throw new IcebergError('SIGLAKE_ICEBERG_METADATA', `a record does not fit its Avro schema: ${(e as Error).message}`, { cause: e });
      }
      const data = Buffer.concat(encoded);
      parts.push(zigzag(block.length), zigzag(data.length), data, sync);
    }
    return Buffer.concat(parts);
  }

  /** Decodes a container file with its own writer schema (null or deflate codec). */
  static decode(bytes: Uint8Array, what = 'Avro file'): AvroFileContents {
    const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const bad = (why: string): never => {
      throw new IcebergError('SIGLAKE_ICEBERG_METADATA', `${what}: ${why}`);
    };
    if (buf.length < 4 || !buf.subarray(0, 4).equals(MAGIC)) bad('not an Avro container file');
    const tap = { pos: 4 };
    const metadata = new Map<string, string>();
    for (;;) {
      let n = readLong(buf, tap);
      if (n === 0) break;
      if (n < 0) {
        n = -n;
        readLong(buf, tap);
      }
      for (let i = 0; i < n; i++) {
        const k = readBytes(buf, tap).toString('utf8');
        metadata.set(k, readBytes(buf, tap).toString('utf8'));
      }
    }
    const sync = buf.subarray(tap.pos, tap.pos + SYNC_SIZE);
    tap.pos += SYNC_SIZE;
    const schemaText = metadata.get('avro.schema') ?? bad('no avro.schema in the header');
    const codec = metadata.get('avro.codec') ?? 'null';
    if (codec !== 'null' && codec !== 'deflate') bad(`unsupported codec ${codec}`);
    const schema = JSON.parse(schemaText) as unknown;
    const type = AvroFile.typeOf(schema);
    const records: AvroRecord[] = [];
    while (tap.pos < buf.length) {
      const count = readLong(buf, tap);
      const size = readLong(buf, tap);
      if (count < 0 || size < 0 || tap.pos + size + SYNC_SIZE > buf.length) bad('truncated block');
      let data = buf.subarray(tap.pos, tap.pos + size);
      tap.pos += size;
      if (!buf.subarray(tap.pos, tap.pos + SYNC_SIZE).equals(sync)) bad('sync marker mismatch');
      tap.pos += SYNC_SIZE;
      if (codec === 'deflate') data = inflateRawSync(data);
      let off = 0;
      for (let i = 0; i < count; i++) {
        const r = type.decode(data, off);
        if (r.offset < 0) bad('record runs past its block');
        records.push(r.value as AvroRecord);
        off = r.offset;
      }
    }
    return { metadata, schema, records };
  }
}

function bigLongType(): avro.Type {
  return avro.types.LongType.__with({
    fromBuffer: (b: Buffer) => b.readBigInt64LE(0),
    toBuffer: (n: bigint) => {
      const b = Buffer.alloc(8);
      b.writeBigInt64LE(BigInt.asIntN(64, n), 0);
      return b;
    },
    fromJSON: (v: unknown) => BigInt(v as string | number),
    toJSON: (n: bigint) => Number(n),
    isValid: (n: unknown) => typeof n === 'bigint',
    compare: (a: bigint, b: bigint) => (a < b ? -1 : a > b ? 1 : 0),
  }) as unknown as avro.Type;
}

function zigzag(n: number): Buffer {
  const out: number[] = [];
  let v = BigInt(n);
  v = v >= 0n ? v << 1n : (-v << 1n) - 1n;
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) byte |= 0x80;
    out.push(byte);
  } while (v > 0n);
  return Buffer.from(out);
}

function readLong(buf: Buffer, tap: { pos: number }): number {
  let shift = 0n;
  let v = 0n;
  for (;;) {
    if (tap.pos >= buf.length) throw new IcebergError('SIGLAKE_ICEBERG_METADATA', 'Avro varint runs past the end');
    const b = buf[tap.pos++]!;
    v |= BigInt(b & 0x7f) << shift;
    if ((b & 0x80) === 0) break;
    shift += 7n;
  }
  const n = v & 1n ? -((v + 1n) >> 1n) : v >> 1n;
  return Number(n);
}

function readBytes(buf: Buffer, tap: { pos: number }): Buffer {
  const n = readLong(buf, tap);
  if (n < 0 || tap.pos + n > buf.length) throw new IcebergError('SIGLAKE_ICEBERG_METADATA', 'Avro bytes run past the end');
  const out = buf.subarray(tap.pos, tap.pos + n);
  tap.pos += n;
  return out;
}
