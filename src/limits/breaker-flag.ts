// The memory breaker's published state: two 32-bit words on a SharedArrayBuffer,
// written by the one thread that samples RSS and read by any thread.
//   word 0: 1 while the breaker is open (shed every request), else 0
//   word 1: the last sampled RSS in KiB (0 before the first readable sample)

import { LimitsError } from './limits-error.js';

const OPEN = 0;
const RSS_KIB = 1;
const WORDS = 2;

export class BreakerFlag {
  readonly #words: Int32Array;

  /** A new flag (closed), or a view of the flag behind `buffer` for another thread. */
  constructor(buffer?: SharedArrayBuffer) {
    if (buffer === undefined) {
      this.#words = new Int32Array(new SharedArrayBuffer(WORDS * 4));
      return;
    }
    if (!(buffer instanceof SharedArrayBuffer) || buffer.byteLength !== WORDS * 4) {
      throw new LimitsError('SIGLAKE_LIMITS_BAD_BUFFER', `not a breaker flag: expected a SharedArrayBuffer of ${WORDS * 4} bytes`);
    }
    this.#words = new Int32Array(buffer);
  }

  get buffer(): SharedArrayBuffer {
    return this.#words.buffer as SharedArrayBuffer;
  }

  /** One atomic load. */
  isOpen(): boolean {
    return Atomics.load(this.#words, OPEN) !== 0;
  }

  /** The last published RSS sample in KiB (0 when none was readable). */
  rssKiB(): number {
    return Atomics.load(this.#words, RSS_KIB);
  }

  publish(open: boolean, rssKiB: number): void {
    Atomics.store(this.#words, RSS_KIB, rssKiB);
    Atomics.store(this.#words, OPEN, open ? 1 : 0);
  }
}
