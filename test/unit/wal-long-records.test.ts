// Records longer than the segment reader's 1 MiB buffer (src/wal/segment-reader.ts):
// their CRC is checked through that buffer before it grows to hold them, and
// a header declaring more than the writer ever stores (MAX_RECORD_PAYLOAD)
// is refused before anything of it is read. So: long records the writer made
// read back whole and in order, a flipped byte anywhere in one (either side
// of a 1 MiB boundary, its last byte) is a CRC mismatch at its offset, and a
// header past the bound is corruption even where the file could hold it.

import { mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  decodeRecordHeader,
  encodeRecordHeader,
  encodeSegmentHeader,
  MAX_RECORD_PAYLOAD,
  RecordType,
  RECORD_HEADER_SIZE,
  SEGMENT_HEADER_SIZE,
} from '../../src/wal/format.js';
import { SegmentReader } from '../../src/wal/segment-reader.js';

const dir = mkdtempSync(join(tmpdir(), 'siglake-long-records-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const MIB = 1 << 20;
/** Payload sizes in file order: short, then each longer than any before (the buffer grows twice), then shorter again. */
const SIZES = [100, 3 * MIB + 7, 2 * MIB, 5 * MIB + 1, 10];

function payload(i: number, n: number): Buffer {
  const b = Buffer.alloc(n);
  for (let k = 0; k < n; k++) b[k] = (k * 31 + i * 7 + 1) & 0xff;
  return b;
}

/** A segment of records with SIZES' payloads; returns its path and each record's offset. */
function segment(name: string): { path: string; bytes: Buffer; offsets: number[] } {
  const parts: Buffer[] = [Buffer.alloc(SEGMENT_HEADER_SIZE)];
  encodeSegmentHeader(parts[0]!, 0, 1, 1_700_000_000_000);
  const offsets: number[] = [];
  let at = SEGMENT_HEADER_SIZE;
  SIZES.forEach((n, i) => {
    const p = payload(i, n);
    const h = Buffer.alloc(RECORD_HEADER_SIZE);
    encodeRecordHeader(h, 0, RecordType.LOGS, i + 1, 1_700_000_000_000 + i, p);
    parts.push(h, p);
    offsets.push(at);
    at += RECORD_HEADER_SIZE + n;
  });
  const bytes = Buffer.concat(parts);
  const path = join(dir, name);
  writeFileSync(path, bytes);
  return { path, bytes, offsets };
}

describe('records longer than the reader buffer', () => {
  it('read back whole, each payload byte for byte, and the segment ends cleanly', () => {
    const { path } = segment('00000001.seg');
    const r = new SegmentReader(path);
    try {
      SIZES.forEach((n, i) => {
        const rec = r.next();
        expect(rec, `record ${i}`).not.toBeNull();
        expect(rec!.count).toBe(i + 1);
        expect(Buffer.compare(Buffer.from(rec!.payload), payload(i, n))).toBe(0);
      });
      expect(r.next()).toBeNull();
      expect(r.stop).toEqual({ kind: 'end', offset: SEGMENT_HEADER_SIZE + SIZES.reduce((s, n) => s + RECORD_HEADER_SIZE + n, 0) });
    } finally {
      r.close();
    }
  });

  it('a flipped byte anywhere in a long record is a CRC mismatch at its offset, the records before it read', () => {
    const { bytes, offsets } = segment('base.seg');
    const rec = 1; // 3 MiB + 7, the first longer than the buffer
    const start = offsets[rec]! + RECORD_HEADER_SIZE;
    for (const k of [0, MIB - RECORD_HEADER_SIZE - 1, MIB - RECORD_HEADER_SIZE, MIB, 2 * MIB + 3, SIZES[rec]! - 1]) {
      const b = Buffer.from(bytes);
      b[start + k]! ^= 0x40;
      const path = join(dir, '00000001.seg');
      writeFileSync(path, b);
      const scan = SegmentReader.scan(path);
      expect(scan.records, `byte ${k}`).toBe(rec);
      expect(scan.stop.kind).toBe('corrupt');
      expect(scan.stop.offset).toBe(offsets[rec]);
      if (scan.stop.kind === 'corrupt') expect(scan.stop.error.why).toBe('record CRC mismatch');
    }
  });

  it('a header declaring more than MAX_RECORD_PAYLOAD is refused by its fields, where the file holds it and where it does not', () => {
    const h = Buffer.alloc(RECORD_HEADER_SIZE);
    encodeRecordHeader(h, 0, RecordType.TRACES, 1, 1_700_000_000_000, Buffer.alloc(0));
    h.writeUInt32LE(MAX_RECORD_PAYLOAD, 4);
    expect(decodeRecordHeader(h, 0)).toMatchObject({ length: MAX_RECORD_PAYLOAD });
    h.writeUInt32LE(MAX_RECORD_PAYLOAD + 1, 4);
    const why = `record declares a payload of ${MAX_RECORD_PAYLOAD + 1} bytes, more than the writer ever stores (at most ${MAX_RECORD_PAYLOAD})`;
    expect(decodeRecordHeader(h, 0)).toBe(why);

    const seg = Buffer.alloc(SEGMENT_HEADER_SIZE);
    encodeSegmentHeader(seg, 0, 1, 1_700_000_000_000);
    const path = join(dir, '00000001.seg');
    for (const size of [SEGMENT_HEADER_SIZE + RECORD_HEADER_SIZE, SEGMENT_HEADER_SIZE + RECORD_HEADER_SIZE + MAX_RECORD_PAYLOAD + 2]) {
      writeFileSync(path, Buffer.concat([seg, h]));
      truncateSync(path, size); // sparse past the header
      const scan = SegmentReader.scan(path);
      expect(scan.records).toBe(0);
      expect(scan.stop).toMatchObject({ kind: 'corrupt', offset: SEGMENT_HEADER_SIZE });
      if (scan.stop.kind === 'corrupt') expect(scan.stop.error.why).toBe(why);
    }
  });
});
