// Whether a run of bytes is all zeros: the test of a segment's torn tail
// (docs/wal-format.md "Reading: how a segment ends"). Checked a block at a
// time against a shared block of zeros (Buffer.compare, a memcmp), never byte
// by byte in JavaScript: a segment's sparse tail of 2 GiB took 7-13 s of
// start-up that way. A file is read in large blocks, and never past
// MAX_SEGMENT_FILE_BYTES: no segment the writer makes is longer, so bytes
// past it are damage whatever they hold, and a segment made 1 TiB long by
// `truncate -s` is not read to its end (it held the start for hours).

import { readSync } from 'node:fs';

/** Bytes compared (and read from a file) at once. */
export const ZERO_BLOCK = 4 * 1024 * 1024;
const ZEROS = Buffer.alloc(ZERO_BLOCK);
let scratch: Buffer | null = null;

/** Whether every byte of `b` in [from, to) is zero. */
export function allZero(b: Uint8Array, from = 0, to = b.length): boolean {
  for (let at = from; at < to; at += ZERO_BLOCK) {
    const n = Math.min(ZERO_BLOCK, to - at);
    if (Buffer.compare(b.subarray(at, at + n), ZEROS.subarray(0, n)) !== 0) return false;
  }
  return true;
}

/**
 * Whether every byte of the open file `fd` in [from, to) is zero, read
 * ZERO_BLOCK bytes at a time. A file that ends before `to` (cut meanwhile)
 * is read to its end.
 */
export function fileZeros(fd: number, from: number, to: number): boolean {
  const buf = (scratch ??= Buffer.allocUnsafe(ZERO_BLOCK));
  for (let pos = from; pos < to; ) {
    const n = readSync(fd, buf, 0, Math.min(ZERO_BLOCK, to - pos), pos);
    if (n === 0) return true;
    if (!allZero(buf, 0, n)) return false;
    pos += n;
  }
  return true;
}
