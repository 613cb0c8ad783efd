// copyIntoShared (src/lanes/shared-copy.ts): the acceptor's copy of a body into
// the shared request ring lands every byte where a direct copy would, whatever
// the source's alignment and size (staged through its scratch buffer in
// pieces, or copied directly), and touches nothing around the destination.

import { describe, expect, it } from 'vitest';
import { STAGE_MIN_BYTES, copyIntoShared } from '../../src/lanes/shared-copy.js';

function pattern(n: number, seed: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = (seed + i * 31 + (i >> 8)) & 0xff;
  return b;
}

/** Byte equality without a per-element deep compare (these are up to 256 KiB). */
function same(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.length).equals(Buffer.from(b.buffer, b.byteOffset, b.length));
}

describe('copyIntoShared', () => {
  const sizes = [0, 1, STAGE_MIN_BYTES - 1, STAGE_MIN_BYTES, 1024, 64 * 1024 - 1, 64 * 1024, 64 * 1024 + 1, 200_003, 256 * 1024];
  for (const foreign of [true, false]) {
    it(`copies every byte and nothing else (sizes ${sizes.join(', ')}; source offsets 0, 1, 3, 4, 8, 9; destination aligned or not; alignment ${foreign ? 'unknown' : 'from byteOffset'})`, () => {
      const ring = new Uint8Array(new SharedArrayBuffer(600 * 1024), 128);
      for (const size of sizes) {
        const backing = pattern(size + 16, size);
        for (const srcOff of [0, 1, 3, 4, 8, 9]) {
          const src = new Uint8Array(backing.buffer, srcOff, size);
          for (const dstOff of [16, 21]) {
            ring.fill(0xee);
            copyIntoShared(ring, dstOff, src, foreign);
            expect(same(ring.subarray(dstOff, dstOff + size), src), `size ${size}, source +${srcOff}, destination ${dstOff}`).toBe(true);
            expect(ring[dstOff - 1]).toBe(0xee);
            expect(ring[dstOff + size]).toBe(0xee);
          }
        }
      }
    });
  }

  it('a body of several scratch-sized pieces keeps its order across them', () => {
    const ring = new Uint8Array(new SharedArrayBuffer(512 * 1024));
    const src = pattern(3 * 64 * 1024 + 5, 7).subarray(3);
    copyIntoShared(ring, 8, src, true);
    expect(same(ring.subarray(8, 8 + src.length), src)).toBe(true);
  });
});
