// The runs of records a lane's deferred flushes left out of its segments
// (docs/wal-format.md "Deferred lane writes"), in order: where each belongs in
// which segment, and where the commit journal holds it. A busy worker keeps
// hundreds of thousands of them between two checkpoints, so they are packed:
// four 32-bit numbers a run in one growing array, beside the run's segment
// handle and, for a run that starts a segment, its header.

import type { FdHandle } from './fd-cache.js';

const AT = 0;
const LENGTH = 1;
const FILE = 2;
const OFFSET = 3;
const SLOTS = 4;

export class DeferredRuns {
  #nums = new Uint32Array(16 * SLOTS);
  #handles: FdHandle[] = [];
  /** The segment header of each run that starts its segment (at 0), by place. */
  #headers = new Map<number, Buffer>();
  /** Runs held (written ones before #done included). */
  #count = 0;
  /** Runs before this place are written to their segments. */
  #done = 0;
  /** Runs let go of from the front: a run's absolute index is #base + its place. */
  #base = 0;
  /** The lowest place a dropFrom() cut at since writeBegun() (Infinity: none). */
  #cutSince = Infinity;

  /** Absolute index of the next run pushed (where a flush's runs begin). */
  get end(): number {
    return this.#base + this.#count;
  }

  /** Absolute index of the first run not written yet. */
  get next(): number {
    return this.#base + this.#done;
  }

  /** Whether a run waits to be written. */
  get waiting(): boolean {
    return this.#done < this.#count;
  }

  /** Whether a run not written yet belongs to `handle`'s segment. */
  holds(handle: FdHandle): boolean {
    for (let k = this.#count - 1; k >= this.#done; k--) if (this.#handles[k] === handle) return true;
    return false;
  }

  /** Bytes of the runs not written yet. */
  get waitingBytes(): number {
    let n = 0;
    for (let k = this.#done; k < this.#count; k++) n += this.#nums[k * SLOTS + LENGTH]!;
    return n;
  }

  /** Adds a run of `length` bytes that belongs at `at` in `handle`'s segment; its journal place comes later (place). Returns its absolute index. */
  push(handle: FdHandle, at: number, length: number, header: Buffer | null): number {
    const k = this.#count;
    if ((k + 1) * SLOTS > this.#nums.length) {
      const grown = new Uint32Array(this.#nums.length * 2);
      grown.set(this.#nums.subarray(0, k * SLOTS));
      this.#nums = grown;
    }
    const o = k * SLOTS;
    this.#nums[o + AT] = at;
    this.#nums[o + LENGTH] = length;
    this.#nums[o + FILE] = 0;
    this.#nums[o + OFFSET] = 0;
    this.#handles[k] = handle;
    if (header !== null) this.#headers.set(k, header);
    this.#count = k + 1;
    return this.#base + k;
  }

  /** The journal holds run `index` in file `file` at `offset`. */
  place(index: number, file: number, offset: number): void {
    const k = index - this.#base;
    if (k < 0 || k >= this.#count) return; // dropped meanwhile (a refused flush)
    this.#nums[k * SLOTS + FILE] = file;
    this.#nums[k * SLOTS + OFFSET] = offset;
  }

  // Accessors by absolute index (between next and end).
  handle(index: number): FdHandle {
    return this.#handles[index - this.#base]!;
  }
  at(index: number): number {
    return this.#nums[(index - this.#base) * SLOTS + AT]!;
  }
  length(index: number): number {
    return this.#nums[(index - this.#base) * SLOTS + LENGTH]!;
  }
  /** The journal file holding the run; 0 while it has none (not written yet, or the journal write failed). */
  file(index: number): number {
    return this.#nums[(index - this.#base) * SLOTS + FILE]!;
  }
  offset(index: number): number {
    return this.#nums[(index - this.#base) * SLOTS + OFFSET]!;
  }
  header(index: number): Buffer | null {
    return this.#headers.get(index - this.#base) ?? null;
  }

  /** Runs before absolute index `index` are written. */
  written(index: number): void {
    const k = index - this.#base;
    if (k > this.#done) this.#done = Math.min(k, this.#count);
    this.#trim();
  }

  /** A write of runs that ends after other code ran (the checkpoint's, on the thread pool) begins now. One at a time. */
  writeBegun(): void {
    this.#cutSince = Infinity;
  }

  /**
   * That write has put the runs before `index` in their segments: up to
   * `index`, or to the lowest place a drop since writeBegun() cut at (the
   * runs there now are newer ones, which that write did not have).
   */
  writeEnded(index: number): void {
    this.written(Math.min(index, this.#cutSince));
  }

  /** Drops the runs from absolute index `from` on; returns the headers of segments they started that were not written. */
  dropFrom(from: number): { handle: FdHandle; header: Buffer }[] {
    if (from < this.#cutSince) this.#cutSince = from;
    const keep = Math.max(0, from - this.#base);
    const headers: { handle: FdHandle; header: Buffer }[] = [];
    for (let k = keep; k < this.#count; k++) {
      const h = this.#headers.get(k);
      if (h !== undefined && k >= this.#done) headers.push({ handle: this.#handles[k]!, header: h });
      this.#headers.delete(k);
    }
    if (keep < this.#count) {
      this.#handles.length = keep;
      this.#count = keep;
    }
    if (this.#done > keep) this.#done = keep;
    this.#trim();
    return headers;
  }

  /** Lets go of written runs: all at once when none waits, else once enough gathered. */
  #trim(): void {
    const done = this.#done;
    if (done === 0 || (done < this.#count && done < 256)) return;
    const left = this.#count - done;
    this.#nums.copyWithin(0, done * SLOTS, this.#count * SLOTS);
    this.#handles.splice(0, done);
    if (this.#headers.size > 0) {
      const moved = new Map<number, Buffer>();
      for (const [k, h] of this.#headers) if (k >= done) moved.set(k - done, h);
      this.#headers = moved;
    }
    // A checkpoint's worth of runs once held: give the memory back when few are left.
    if (left * SLOTS * 4 < this.#nums.length && this.#nums.length > 1024 * SLOTS) this.#nums = this.#nums.slice(0, Math.max(16, left * 2) * SLOTS);
    this.#base += done;
    this.#count = left;
    this.#done = 0;
  }
}
