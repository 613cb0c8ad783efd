// Copying a request body into a SharedArrayBuffer ring, fast whatever the
// source's alignment.
//
// V8 copies into shared memory with relaxed atomic stores (other threads may
// read it), word by word only when source and destination are both 8-byte
// aligned, byte by byte otherwise: about 1 GB/s instead of 6-8 GB/s
// (`node perf/run-ts.mjs perf/shared-copy.bench.ts`). The ring's payloads are
// 8-byte aligned; a uWS body chunk is not, in general: it starts wherever the
// request's headers ended in uWS's receive buffer, so its alignment is the
// header length's, and JavaScript cannot see the address. Such a source is
// staged through an aligned, unshared scratch buffer (an ordinary memmove),
// in pieces of SCRATCH_BYTES, and copied on from there word by word.

/** Sources shorter than this are copied directly (the staging costs more than it saves). */
export const STAGE_MIN_BYTES = 256;
const SCRATCH_BYTES = 64 * 1024;
let scratch: Uint8Array | undefined;

/**
 * Copies `src` into `dst` at `dstOffset` (`dst` a view of a SharedArrayBuffer).
 * `alignmentUnknown`: `src` views memory V8 did not allocate (a uWS chunk),
 * whose address may be misaligned though its byteOffset is 0; a source V8
 * allocated is misaligned exactly when its byteOffset is.
 */
export function copyIntoShared(dst: Uint8Array, dstOffset: number, src: Uint8Array, alignmentUnknown: boolean): void {
  const n = src.length;
  if (n < STAGE_MIN_BYTES || ((dst.byteOffset + dstOffset) & 7) !== 0 || (!alignmentUnknown && (src.byteOffset & 7) === 0)) {
    dst.set(src, dstOffset);
    return;
  }
  const s = (scratch ??= new Uint8Array(SCRATCH_BYTES));
  if (n <= SCRATCH_BYTES) {
    s.set(src, 0);
    dst.set(n === SCRATCH_BYTES ? s : s.subarray(0, n), dstOffset);
    return;
  }
  for (let i = 0; i < n; i += SCRATCH_BYTES) {
    const m = Math.min(SCRATCH_BYTES, n - i);
    s.set(src.subarray(i, i + m), 0);
    dst.set(m === SCRATCH_BYTES ? s : s.subarray(0, m), dstOffset + i);
  }
}
