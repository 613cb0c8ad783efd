// The zero scan of a segment's tail (src/wal/zeros.ts), which decides torn
// (zeros only: a crash's unwritten blocks) from corrupt (anything else). It
// compares large blocks at once rather than byte by byte, so: a single
// non-zero byte anywhere must still be found, at the start of the tail, in
// its middle, on either side of a block boundary (the reader's 1 MiB buffer,
// the scan's 4 MiB block) and at the file's last byte.

import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { encodeRecordHeader, encodeSegmentHeader, RecordType, RECORD_HEADER_SIZE, SEGMENT_HEADER_SIZE } from '../../src/wal/format.js';
import { canBeTorn } from '../../src/wal/repair.js';
import { SegmentReader } from '../../src/wal/segment-reader.js';
import { allZero, fileZeros, ZERO_BLOCK } from '../../src/wal/zeros.js';

const dir = mkdtempSync(join(tmpdir(), 'siglake-zeros-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const PAYLOAD = Buffer.from('hello');
/** Where the record ends and the tail starts. */
const TAIL = SEGMENT_HEADER_SIZE + RECORD_HEADER_SIZE + PAYLOAD.length;
/** Tail length: past two of the scan's blocks, and not a multiple of anything. */
const TAIL_BYTES = 2 * ZERO_BLOCK + 12_345;
const SIZE = TAIL + TAIL_BYTES;

/** Offsets in the file of the one non-zero byte: the tail's first, middle and last, and both sides of every block boundary. */
const OFFSETS = [
  TAIL,
  TAIL + 1,
  TAIL + Math.floor(TAIL_BYTES / 2),
  (1 << 20) - 1, // the reader's first 1 MiB buffer ends here
  1 << 20,
  TAIL + ZERO_BLOCK - 1,
  TAIL + ZERO_BLOCK,
  ZERO_BLOCK - 1,
  ZERO_BLOCK,
  (1 << 20) + ZERO_BLOCK - 1,
  (1 << 20) + ZERO_BLOCK,
  2 * ZERO_BLOCK - 1,
  2 * ZERO_BLOCK,
  SIZE - 2,
  SIZE - 1,
];

/** A segment holding one record, then TAIL_BYTES of zeros, with a 0x01 at `nonZeroAt` (none when undefined). */
function segment(name: string, nonZeroAt?: number): string {
  const b = Buffer.alloc(SIZE);
  encodeSegmentHeader(b, 0, 1, 1_700_000_000_000);
  encodeRecordHeader(b, SEGMENT_HEADER_SIZE, RecordType.LOGS, 1, 1_700_000_000_000, PAYLOAD);
  PAYLOAD.copy(b, SEGMENT_HEADER_SIZE + RECORD_HEADER_SIZE);
  if (nonZeroAt !== undefined) b[nonZeroAt] = 1;
  const path = join(dir, name);
  writeFileSync(path, b);
  return path;
}

describe('allZero', () => {
  it('finds a single non-zero byte at any offset of a buffer spanning several blocks', () => {
    const n = 2 * ZERO_BLOCK + 3;
    const b = Buffer.alloc(n);
    expect(allZero(b)).toBe(true);
    for (const at of [0, 1, ZERO_BLOCK >> 1, ZERO_BLOCK - 1, ZERO_BLOCK, ZERO_BLOCK + 1, 2 * ZERO_BLOCK - 1, 2 * ZERO_BLOCK, n - 1]) {
      b[at] = 0x80;
      expect(allZero(b), `byte ${at}`).toBe(false);
      // A range that leaves the byte out is still all zeros.
      expect(allZero(b, at + 1), `after byte ${at}`).toBe(true);
      expect(allZero(b, 0, at), `before byte ${at}`).toBe(true);
      b[at] = 0;
    }
  });
});

describe('a segment tail of zeros with one non-zero byte', () => {
  it('reads torn when every byte of the tail is zero, through the reader, fileZeros and the repair', () => {
    const path = segment('00000001.seg');
    const scan = SegmentReader.scan(path);
    expect(scan.records).toBe(1);
    expect(scan.stop).toMatchObject({ kind: 'torn', offset: TAIL });
    const fd = openSync(path, 'r');
    try {
      expect(fileZeros(fd, TAIL, SIZE)).toBe(true);
    } finally {
      closeSync(fd);
    }
    // A sealed last segment may be cut only when its tail is zeros.
    expect(canBeTorn({ number: 1, path }, 1, scan.stop)).toBe(true);
  });

  for (const at of OFFSETS) {
    it(`reads corrupt with the byte at ${at} (tail starts at ${TAIL}, file ends at ${SIZE})`, () => {
      const path = segment(`00000001.seg`, at);
      const scan = SegmentReader.scan(path);
      expect(scan.records).toBe(1);
      expect(scan.stop).toMatchObject({ kind: 'corrupt', offset: TAIL });
      const fd = openSync(path, 'r');
      try {
        expect(fileZeros(fd, TAIL, SIZE)).toBe(false);
        expect(fileZeros(fd, at + 1, SIZE)).toBe(true);
      } finally {
        closeSync(fd);
      }
      expect(canBeTorn({ number: 1, path }, 1, { kind: 'torn', offset: TAIL, why: 'test' })).toBe(false);
    });
  }
});
