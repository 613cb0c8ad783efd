// One table of hand-built segment fragments (good, torn, corrupt), run
// against the reader, repair and verify. The fragments are built here byte by
// byte with Buffer writes and the native CRC over concatenated ranges, not
// with src/wal's encoders, so the format is checked from outside.

import { crc32c } from '@node-rs/crc32';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CorruptionError } from '../../src/errors.js';
import { WalNewerFormatError } from '../../src/wal/newer-format.js';
import { repairLane } from '../../src/wal/repair.js';
import { writeSealedMarker } from '../../src/wal/sealed-marker.js';
import { SegmentReader } from '../../src/wal/segment-reader.js';
import { walVerify } from '../../src/wal/commands.js';

const SEG_HDR = 32;
const REC_HDR = 24;

function segHeader(n: number, opts: { magic?: string; version?: number; size?: number; reserved?: number; crcFlip?: boolean } = {}): Buffer {
  const b = Buffer.alloc(SEG_HDR);
  b.write(opts.magic ?? 'SLWL', 0, 'latin1');
  b.writeUInt16LE(opts.version ?? 1, 4);
  b.writeUInt16LE(opts.size ?? 32, 6);
  b.writeBigUInt64LE(BigInt(n), 8);
  b.writeBigUInt64LE(1_767_225_600_000n, 16);
  b.writeUInt32LE(opts.reserved ?? 0, 24);
  b.writeUInt32LE((crc32c(b.subarray(0, 28)) ^ (opts.crcFlip ? 1 : 0)) >>> 0, 28);
  return b;
}

interface RecOpts {
  type?: number;
  flags?: number;
  reserved?: number;
  count?: number;
  time?: bigint;
  /** Declared length instead of the payload's. */
  length?: number;
}

function rec(payload: Buffer | string, o: RecOpts = {}): Buffer {
  const p = typeof payload === 'string' ? Buffer.from(payload) : payload;
  const h = Buffer.alloc(REC_HDR);
  h.writeUInt8(o.type ?? 1, 0);
  h.writeUInt8(o.flags ?? 0, 1);
  h.writeUInt16LE(o.reserved ?? 0, 2);
  h.writeUInt32LE(o.length ?? p.length, 4);
  h.writeUInt32LE(o.count ?? 1, 12);
  h.writeBigUInt64LE(o.time ?? 1_767_225_601_000n, 16);
  h.writeUInt32LE(crc32c(Buffer.concat([h.subarray(0, 8), h.subarray(12, 24), p])), 8);
  return Buffer.concat([h, p]);
}

/** Flips one bit of byte `at`. */
function flip(b: Buffer, at: number): Buffer {
  const c = Buffer.from(b);
  c[at] ^= 0x10;
  return c;
}

const R1 = rec('first log record', { count: 3 });
const R2 = rec('second', { type: 2, count: 7 });
const R3 = rec('third record, a bit longer than the others');
const EMPTY_PAYLOAD = rec('', { count: 0 });
const good = (n: number, ...recs: Buffer[]) => Buffer.concat([segHeader(n), ...recs]);

interface Row {
  name: string;
  /** Contents of segments 1..k of one lane. */
  segments: Buffer[];
  /** Index of the segment the reader expectations are about (default: the last). */
  subject?: number;
  stop: 'end' | 'torn' | 'corrupt';
  /** Offset where the subject stops. */
  at: number;
  /** Whole records the subject yields before its stop. */
  records: number;
  /** Bytes repair cuts from the last segment. */
  cut: number;
  verifyBefore: 0 | 1;
  verifyAfter: 0 | 1;
}

const o1 = SEG_HDR; // offset of the first record
const o2 = o1 + R1.length;
const o3 = o2 + R2.length;
const end3 = o3 + R3.length;

const ROWS: Row[] = [
  { name: 'three good records', segments: [good(1, R1, R2, R3)], stop: 'end', at: end3, records: 3, cut: 0, verifyBefore: 0, verifyAfter: 0 },
  { name: 'header only', segments: [good(1)], stop: 'end', at: SEG_HDR, records: 0, cut: 0, verifyBefore: 0, verifyAfter: 0 },
  { name: 'empty file', segments: [Buffer.alloc(0)], stop: 'end', at: 0, records: 0, cut: 0, verifyBefore: 0, verifyAfter: 0 },
  { name: 'empty payload record', segments: [good(1, EMPTY_PAYLOAD, R1)], stop: 'end', at: SEG_HDR + EMPTY_PAYLOAD.length + R1.length, records: 2, cut: 0, verifyBefore: 0, verifyAfter: 0 },
  { name: 'truncated header', segments: [segHeader(1).subarray(0, 20)], stop: 'torn', at: 0, records: 0, cut: 20, verifyBefore: 0, verifyAfter: 0 },
  { name: 'truncated record header', segments: [Buffer.concat([good(1, R1), R2.subarray(0, 10)])], stop: 'torn', at: o2, records: 1, cut: 10, verifyBefore: 0, verifyAfter: 0 },
  { name: 'truncated payload', segments: [Buffer.concat([good(1, R1, R2), R3.subarray(0, R3.length - 5)])], stop: 'torn', at: o3, records: 2, cut: R3.length - 5, verifyBefore: 0, verifyAfter: 0 },
  { name: 'CRC flip in payload of the last record', segments: [flip(good(1, R1, R2, R3), end3 - 3)], stop: 'corrupt', at: o3, records: 2, cut: R3.length, verifyBefore: 1, verifyAfter: 0 },
  { name: 'CRC flip in payload, whole records after it', segments: [flip(good(1, R1, R2, R3), o2 + REC_HDR + 1)], stop: 'corrupt', at: o2, records: 1, cut: R2.length + R3.length, verifyBefore: 1, verifyAfter: 0 },
  { name: 'CRC flip in record header (count)', segments: [flip(good(1, R1, R2), o2 + 12)], stop: 'corrupt', at: o2, records: 1, cut: R2.length, verifyBefore: 1, verifyAfter: 0 },
  { name: 'CRC flip in the CRC field', segments: [flip(good(1, R1, R2), o1 + 9)], stop: 'corrupt', at: o1, records: 0, cut: R1.length + R2.length, verifyBefore: 1, verifyAfter: 0 },
  { name: 'CRC flip in record header (time)', segments: [flip(good(1, R1, R2), o1 + 17)], stop: 'corrupt', at: o1, records: 0, cut: R1.length + R2.length, verifyBefore: 1, verifyAfter: 0 },
  { name: 'unknown type (CRC valid)', segments: [good(1, R1, rec('x', { type: 5 }))], stop: 'corrupt', at: o2, records: 1, cut: REC_HDR + 1, verifyBefore: 1, verifyAfter: 0 },
  { name: 'type 0 with data after it', segments: [good(1, R1, rec('x', { type: 0 }))], stop: 'corrupt', at: o2, records: 1, cut: REC_HDR + 1, verifyBefore: 1, verifyAfter: 0 },
  { name: 'unknown type, length past EOF', segments: [good(1, R1, rec('x', { type: 9, length: 1000 }))], stop: 'corrupt', at: o2, records: 1, cut: REC_HDR + 1, verifyBefore: 1, verifyAfter: 0 },
  { name: 'non-zero record flags', segments: [good(1, rec('a', { flags: 1 }))], stop: 'corrupt', at: o1, records: 0, cut: REC_HDR + 1, verifyBefore: 1, verifyAfter: 0 },
  { name: 'non-zero record reserved', segments: [good(1, R1, rec('a', { reserved: 0x100 }))], stop: 'corrupt', at: o2, records: 1, cut: REC_HDR + 1, verifyBefore: 1, verifyAfter: 0 },
  { name: 'record time beyond 2^53', segments: [good(1, rec('a', { time: 1n << 60n }))], stop: 'corrupt', at: o1, records: 0, cut: REC_HDR + 1, verifyBefore: 1, verifyAfter: 0 },
  { name: 'non-zero segment header reserved', segments: [Buffer.concat([segHeader(1, { reserved: 7 }), R1])], stop: 'corrupt', at: 0, records: 0, cut: SEG_HDR + R1.length, verifyBefore: 1, verifyAfter: 0 },
  { name: 'bad magic', segments: [Buffer.concat([segHeader(1, { magic: 'SLWX' }), R1])], stop: 'corrupt', at: 0, records: 0, cut: SEG_HDR + R1.length, verifyBefore: 1, verifyAfter: 0 },
  // Version 0 is no release's: damage. (A version above this release's is a newer release's, refused: below.)
  { name: 'bad version', segments: [Buffer.concat([segHeader(1, { version: 0 }), R1])], stop: 'corrupt', at: 0, records: 0, cut: SEG_HDR + R1.length, verifyBefore: 1, verifyAfter: 0 },
  { name: 'bad header size', segments: [segHeader(1, { size: 40 })], stop: 'corrupt', at: 0, records: 0, cut: SEG_HDR, verifyBefore: 1, verifyAfter: 0 },
  { name: 'segment header CRC flip', segments: [Buffer.concat([segHeader(1, { crcFlip: true }), R1])], stop: 'corrupt', at: 0, records: 0, cut: SEG_HDR + R1.length, verifyBefore: 1, verifyAfter: 0 },
  { name: 'header number differs from file name', segments: [good(1, R1), good(3, R1)], stop: 'corrupt', at: 0, records: 0, cut: SEG_HDR + R1.length, verifyBefore: 1, verifyAfter: 0 },
  { name: 'zero-filled tail', segments: [Buffer.concat([good(1, R1, R2), Buffer.alloc(4096)])], stop: 'torn', at: o3, records: 2, cut: 4096, verifyBefore: 0, verifyAfter: 0 },
  { name: 'zero-filled file', segments: [Buffer.alloc(64)], stop: 'torn', at: 0, records: 0, cut: 64, verifyBefore: 0, verifyAfter: 0 },
  { name: 'zero-filled 3 bytes after a record', segments: [Buffer.concat([good(1, R1), Buffer.alloc(3)])], stop: 'torn', at: o2, records: 1, cut: 3, verifyBefore: 0, verifyAfter: 0 },
  {
    name: 'corruption in a middle segment',
    segments: [good(1, R1), flip(good(2, R1, R2), o2 + REC_HDR), good(3, R3)],
    subject: 1,
    stop: 'corrupt',
    at: o2,
    records: 1,
    cut: 0,
    verifyBefore: 1,
    verifyAfter: 1,
  },
  {
    name: 'torn tail in a middle segment',
    segments: [Buffer.concat([good(1, R1), R3.subarray(0, 30)]), good(2, R2)],
    subject: 0,
    stop: 'torn',
    at: o2,
    records: 1,
    cut: 0,
    verifyBefore: 1,
    verifyAfter: 1,
  },
  {
    name: 'torn last segment after good ones',
    segments: [good(1, R1), Buffer.concat([good(2, R2), R3.subarray(0, 40)])],
    stop: 'torn',
    at: SEG_HDR + R2.length,
    records: 1,
    cut: 40,
    verifyBefore: 0,
    verifyAfter: 0,
  },
];

let root: string;
let seq = 0;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'siglake-wal-fragments-'));
});
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

/** Writes a row's segments into a fresh lane directory (`<root>/<k>/logs`). */
function layDown(row: Row): { lane: string; paths: string[] } {
  const lane = join(root, String(++seq), 'logs');
  mkdirSync(lane, { recursive: true });
  const paths = row.segments.map((content, i) => {
    const p = join(lane, `${String(i + 1).padStart(8, '0')}.seg`);
    writeFileSync(p, content);
    return p;
  });
  return { lane, paths };
}

const quiet = () => {
  const lines: string[] = [];
  return { lines, out: (l: string) => lines.push(l) };
};

describe.each(ROWS)('fragment: $name', (row) => {
  const subjectIndex = row.subject ?? row.segments.length - 1;
  const lastIndex = row.segments.length - 1;

  it('reader stops where and how the table says', () => {
    const { paths } = layDown(row);
    const reader = new SegmentReader(paths[subjectIndex]);
    const records = [...reader];
    reader.close();
    expect(records.length).toBe(row.records);
    const stop = reader.stop;
    expect(stop?.kind).toBe(row.stop);
    expect(stop?.offset).toBe(row.at);
    if (stop?.kind === 'corrupt') {
      expect(stop.error).toBeInstanceOf(CorruptionError);
      expect(stop.error.code).toBe('SIGLAKE_WAL_CORRUPT');
      expect(stop.error.segment).toBe(paths[subjectIndex]);
      expect(stop.error.offset).toBe(row.at);
    }
    // Records come back in file order with their own offsets.
    let expected = SEG_HDR;
    for (const r of records) {
      expect(r.offset).toBe(expected);
      expected += REC_HDR + r.payload.length;
    }
  });

  it('repair cuts exactly at the stop of the last segment and keeps whole records', () => {
    const { lane, paths } = layDown(row);
    const before = paths.map((p) => readFileSync(p));
    const result = repairLane(lane, { scanAll: true });
    expect(result.truncatedBytes).toBe(row.cut);
    expect(result.nextSegment).toBe(row.segments.length + 1);
    expect(result.segments).toBe(row.segments.length);
    const lastBefore = before[lastIndex];
    expect(statSync(paths[lastIndex]).size).toBe(lastBefore.length - row.cut);
    // What is left is a prefix of what was there.
    expect(readFileSync(paths[lastIndex]).equals(lastBefore.subarray(0, lastBefore.length - row.cut))).toBe(true);
    if (row.cut > 0) {
      expect(result.cut?.kind).toBe(row.stop);
      expect(result.cut?.offset).toBe(lastBefore.length - row.cut);
    } else {
      expect(result.cut).toBeNull();
    }
    // Earlier segments are never touched, only reported.
    for (let i = 0; i < lastIndex; i++) expect(readFileSync(paths[i]).equals(before[i])).toBe(true);
    const damagedEarlier = subjectIndex !== lastIndex && row.stop !== 'end' ? 1 : 0;
    expect(result.damaged.length).toBe(damagedEarlier);
    if (damagedEarlier) expect(result.damaged[0].offset).toBe(row.at);
    // The repaired last segment reads to a clean end.
    const after = SegmentReader.scan(paths[lastIndex]);
    expect(after.stop.kind).toBe('end');
    if (subjectIndex === lastIndex) expect(after.records).toBe(row.records);
  });

  it(`verify exits ${row.verifyBefore} before repair and ${row.verifyAfter} after`, async () => {
    const { lane } = layDown(row);
    const a = quiet();
    expect(await walVerify(lane, a.out)).toBe(row.verifyBefore);
    expect(a.lines.at(-1)).toMatch(row.verifyBefore === 0 ? /: OK$/ : /: FAILED$/);
    if (row.stop === 'torn' && row.verifyBefore === 0) expect(a.lines.some((l) => l.includes('torn tail in'))).toBe(true);
    repairLane(lane);
    const b = quiet();
    expect(await walVerify(lane, b.out)).toBe(row.verifyAfter);
    // Repair is idempotent: a second pass finds nothing to cut.
    expect(repairLane(lane).truncatedBytes).toBe(0);
  });
});

// Found by review (stop 47): repair read a segment of a newer release as damage and cut it to
// nothing, and cut a sealed segment at its first bad byte, losing the whole records after it,
// though no crash tears a sealed segment (a clean stop or a checkpoint synced it first).
describe('repair of what no crash leaves', () => {
  it('refuses a last segment of a newer format version and leaves it as it was', () => {
    const { lane, paths } = layDown({ name: 'newer', segments: [Buffer.concat([segHeader(1, { version: 2 }), R1])], stop: 'corrupt', at: 0, records: 0, cut: 0, verifyBefore: 1, verifyAfter: 1 });
    const before = readFileSync(paths[0]!);
    expect(() => repairLane(lane)).toThrow(WalNewerFormatError);
    expect(() => repairLane(lane)).toThrow(/format version 2, written by a newer release of Siglake \(this release reads up to 1\)/);
    expect(readFileSync(paths[0]!).equals(before)).toBe(true);
  });

  const sealedCases: { name: string; seg: Buffer; cut: number; damaged: number }[] = [
    { name: 'a record CRC mismatch', seg: flip(good(1, R1, R2, R3), SEG_HDR + R1.length + REC_HDR), cut: 0, damaged: 1 },
    { name: 'a damaged length that runs past the end', seg: Buffer.concat([good(1, R1), rec('second', { length: 9_000 }), R3]), cut: 0, damaged: 1 },
    { name: 'a tail of zeros', seg: Buffer.concat([good(1, R1, R2), Buffer.alloc(512)]), cut: 512, damaged: 0 },
  ];
  for (const c of sealedCases) {
    it(`a sealed last segment with ${c.name}: ${c.cut > 0 ? 'the zeros are cut' : 'kept whole and reported'}`, async () => {
      const { lane, paths } = layDown({ name: c.name, segments: [c.seg], stop: 'corrupt', at: 0, records: 0, cut: 0, verifyBefore: 1, verifyAfter: 1 });
      writeSealedMarker(lane, 1);
      // verify calls it what repair will: damage, or a tail of zeros it cuts.
      expect(await walVerify(lane, quiet().out)).toBe(c.damaged > 0 ? 1 : 0);
      const r = repairLane(lane);
      expect(r.truncatedBytes).toBe(c.cut);
      expect(r.damaged).toHaveLength(c.damaged);
      expect(statSync(paths[0]!).size).toBe(c.seg.length - c.cut);
      expect(readFileSync(paths[0]!).equals(c.seg.subarray(0, c.seg.length - c.cut))).toBe(true);
      // Unsealed, the same bytes are a torn or corrupt tail of a crash: cut as before.
      const unsealed = layDown({ name: c.name, segments: [c.seg], stop: 'corrupt', at: 0, records: 0, cut: 0, verifyBefore: 1, verifyAfter: 1 });
      expect(repairLane(unsealed.lane).truncatedBytes).toBeGreaterThan(0);
    });
  }
});
