// A table of token buckets in a SharedArrayBuffer, one 32-bit word per bucket,
// updated lock-free with Atomics.compareExchange. See docs/limits.md for the
// proof that the GCRA word below is exactly the token bucket of contract §9.
//
// Each bucket stores its "theoretical arrival time" (TAT) in ticks, modulo 2^32.
// A tick is 2^-shift µs; the shift is chosen per table so that the emission
// period T = 1/rate is at least 1024 ticks (rate error ≤ 0.05 %) while the
// horizon burst·T still fits in 2^30 ticks. With d = TAT − now (signed, wrap-safe):
//
//   tokens(now) = (burst·T − max(d, 0)) / T
//   admit  ⇔ tokens ≥ 1 ⇔ d ≤ (burst − 1)·T ;  then TAT ← max(TAT, now) + T
//   refuse ⇒ a token is back after d − (burst − 1)·T ticks (Retry-After = ceil)

import { LimitsError } from './limits-error.js';

const MAGIC = 0x534c5442; // 'SLTB'
const LAYOUT_VERSION = 1;
/** Header words before the buckets: magic, version, slots, shift, period, burst, 2 spare (one 32-byte block). */
const HEADER_WORDS = 8;
const H_MAGIC = 0;
const H_VERSION = 1;
const H_SLOTS = 2;
const H_SHIFT = 3;
const H_PERIOD = 4;
const H_BURST = 5;

const TWO_32 = 4294967296;
/** Largest horizon burst·T in ticks. Half of the positive signed range stays free to recognise stale words. */
export const MAX_HORIZON_TICKS = 1 << 30;
/** A word this far beyond the horizon is read as stale (wrapped), not as the future: covers clock disagreement between threads. */
const SKEW_SLACK_TICKS = 1 << 28;
/** sweep() rewrites a bucket whose TAT lies more than this far in the past. */
const RESET_AGE_TICKS = 1 << 28;
/** How often sweep() must run, in ticks; capped at MAX_SWEEP_MS. */
const SWEEP_PERIOD_TICKS = 1 << 30;
const MAX_SWEEP_MS = 60_000;
/** The shift aims for a period of at least this many ticks (rounding error ≤ 1/2048). */
const TARGET_PERIOD_TICKS = 1024;
/** Below this the rounding error of the period would exceed 0.1 %: refused. */
const MIN_PERIOD_TICKS = 512;
const MAX_SHIFT = 10;
export const MAX_RATE_PER_SEC = 1_000_000;
export const MAX_SLOTS = 1 << 24;

export interface TokenBucketTableOptions {
  /** Refill rate in tokens (requests) per second: > 0 and ≤ 1,000,000; fractional rates are allowed. */
  ratePerSec: number;
  /** Bucket size: an integer ≥ 1 with burst / ratePerSec ≤ MAX_HORIZON_TICKS ticks (≈ 1073 s at low rates). */
  burst: number;
  /** Number of buckets: an integer in [1, 2^24]. */
  slots: number;
  /** The time (µs) at which every bucket starts full, for a caller that injects its clock into take(); default: the table's clock. */
  nowMicros?: number;
}

function badParam(param: string, message: string): LimitsError {
  return new LimitsError('SIGLAKE_LIMITS_BAD_PARAM', message, param);
}

/** Choose the tick (2^-shift µs) and the integer period for a rate and burst, or refuse them. */
function planTicks(ratePerSec: number, burst: number): { shift: number; period: number } {
  if (typeof ratePerSec !== 'number' || !Number.isFinite(ratePerSec) || ratePerSec <= 0 || ratePerSec > MAX_RATE_PER_SEC) {
    throw badParam('ratePerSec', `ratePerSec must be a number in (0, ${MAX_RATE_PER_SEC}], got ${String(ratePerSec)}`);
  }
  if (!Number.isInteger(burst) || burst < 1) {
    throw badParam('burst', `burst must be an integer ≥ 1, got ${String(burst)}`);
  }
  const periodUs = 1e6 / ratePerSec;
  let shift = 0;
  while (shift < MAX_SHIFT && periodUs * 2 ** shift < TARGET_PERIOD_TICKS) shift++;
  while (shift > 0 && burst * Math.round(periodUs * 2 ** shift) > MAX_HORIZON_TICKS) shift--;
  const period = Math.round(periodUs * 2 ** shift);
  if (burst * period > MAX_HORIZON_TICKS) {
    const maxSecs = Math.floor(MAX_HORIZON_TICKS / 1e6);
    throw badParam(
      'burst',
      `burst / ratePerSec must be at most ${maxSecs} s (the bucket's horizon must fit a 32-bit word), got ${burst} / ${ratePerSec}`,
    );
  }
  if (period < MIN_PERIOD_TICKS) {
    throw badParam(
      'burst',
      `burst ${burst} is too large for ratePerSec ${ratePerSec}: the refill period cannot be represented within 0.1 % (lower burst or rate)`,
    );
  }
  return { shift, period };
}

/**
 * Why a bucket of this rate and burst cannot be built (the message of the
 * refusal the constructor would throw), or undefined when it can: for a
 * caller validating a file before it builds anything (src/tenants/tenants-file.ts).
 */
export function bucketProblem(ratePerSec: number, burst: number): string | undefined {
  try {
    planTicks(ratePerSec, burst);
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}

export class TokenBucketTable {
  readonly #words: Int32Array;
  readonly #slots: number = 0;
  readonly #burst: number = 0;
  readonly #shift: number = 0;
  /** T: ticks per token. */
  readonly #period: number = 0;
  /** (burst − 1)·T: the largest TAT − now that still admits. */
  readonly #tolerance: number = 0;
  /** burst·T + slack: a larger TAT − now can only be a stale word that wrapped. */
  readonly #staleAbove: number = 0;
  readonly #ticksPerSec: number = 0;
  readonly #ticksPerMs: number = 0;
  /** Ticks per µs (2^shift). */
  readonly #scale: number = 0;

  /**
   * A new table (every bucket full), or, given the SharedArrayBuffer of an existing
   * table, a view of it for another thread (same buckets, same parameters).
   */
  constructor(options: TokenBucketTableOptions | SharedArrayBuffer) {
    let words: Int32Array;
    if (options instanceof SharedArrayBuffer) {
      words = TokenBucketTable.#validate(options);
    } else {
      const { ratePerSec, burst, slots } = options;
      if (!Number.isInteger(slots) || slots < 1 || slots > MAX_SLOTS) {
        throw badParam('slots', `slots must be an integer in [1, ${MAX_SLOTS}], got ${String(slots)}`);
      }
      const { shift, period } = planTicks(ratePerSec, burst);
      words = new Int32Array(new SharedArrayBuffer((HEADER_WORDS + slots) * 4));
      words[H_MAGIC] = MAGIC;
      words[H_VERSION] = LAYOUT_VERSION;
      words[H_SLOTS] = slots;
      words[H_SHIFT] = shift;
      words[H_PERIOD] = period;
      words[H_BURST] = burst;
    }
    this.#words = words;
    this.#slots = words[H_SLOTS];
    this.#shift = words[H_SHIFT];
    this.#period = words[H_PERIOD];
    this.#burst = words[H_BURST];
    // Numeric fields start at 0 and only ever hold small integers, so V8 keeps them
    // in its small-integer representation; with fields that start out `undefined`
    // the clock's [seconds, nanoseconds] array in #nowTicks() is no longer optimised
    // away and every take allocates 32 bytes (perf/limits-bucket.bench.ts shows it).
    this.#tolerance = ((this.#burst - 1) * this.#period) | 0;
    this.#staleAbove = (this.#burst * this.#period + SKEW_SLACK_TICKS) | 0;
    this.#scale = 1 << this.#shift;
    this.#ticksPerSec = (1_000_000 * this.#scale) | 0;
    this.#ticksPerMs = (1000 * this.#scale) | 0;
    if (!(options instanceof SharedArrayBuffer)) {
      const start = options.nowMicros === undefined ? this.#nowTicks() : this.#ticksOf(options.nowMicros);
      words.fill(start, HEADER_WORDS);
    }
  }

  static #validate(buffer: SharedArrayBuffer): Int32Array {
    const bad = (why: string) => new LimitsError('SIGLAKE_LIMITS_BAD_BUFFER', `not a token bucket table: ${why}`);
    if (buffer.byteLength < HEADER_WORDS * 4 || buffer.byteLength % 4 !== 0) throw bad(`byte length ${buffer.byteLength}`);
    const words = new Int32Array(buffer);
    if (words[H_MAGIC] !== MAGIC) throw bad('wrong magic');
    if (words[H_VERSION] !== LAYOUT_VERSION) throw bad(`layout version ${words[H_VERSION]}, expected ${LAYOUT_VERSION}`);
    const slots = words[H_SLOTS];
    if (slots < 1 || HEADER_WORDS + slots !== words.length) throw bad(`${slots} slots in ${buffer.byteLength} bytes`);
    const shift = words[H_SHIFT];
    const period = words[H_PERIOD];
    const burst = words[H_BURST];
    if (shift < 0 || shift > MAX_SHIFT || period < MIN_PERIOD_TICKS || burst < 1 || burst * period > MAX_HORIZON_TICKS) {
      throw bad(`parameters shift=${shift} period=${period} burst=${burst}`);
    }
    return words;
  }

  /** The SharedArrayBuffer to hand to another thread (`new TokenBucketTable(buffer)` there). */
  get buffer(): SharedArrayBuffer {
    return this.#words.buffer as SharedArrayBuffer;
  }

  get slots(): number {
    return this.#slots;
  }

  get burst(): number {
    return this.#burst;
  }

  /** The rate actually enforced: the configured one rounded to a whole number of ticks per token (≤ 0.1 % off). */
  get ratePerSec(): number {
    return this.#ticksPerSec / this.#period;
  }

  /** How often sweep() must run so that no idle bucket's word wraps (at most 60 s). */
  get sweepIntervalMs(): number {
    return Math.min(MAX_SWEEP_MS, Math.floor(SWEEP_PERIOD_TICKS / this.#ticksPerMs));
  }

  /**
   * Spend one token of bucket `slot`. Returns 0 when admitted, otherwise the whole
   * seconds (≥ 1) until a token is available: the Retry-After value.
   * Without `nowMicros` the table reads CLOCK_MONOTONIC (process.hrtime(), the same
   * clock in every thread); `nowMicros` injects a clock instead (µs; only differences
   * matter, so every caller of one table must use the same clock, as tests do).
   * Lock-free: a failed compare-exchange means another thread's take succeeded.
   * Allocation-free (perf/limits-bucket.bench.ts).
   */
  take(slot: number, nowMicros?: number): number {
    if (slot >>> 0 >= this.#slots || slot !== (slot | 0)) this.#badSlot(slot);
    const now = nowMicros === undefined ? this.#nowTicks() : this.#ticksOf(nowMicros);
    const words = this.#words;
    const i = HEADER_WORDS + slot;
    const period = this.#period;
    const tolerance = this.#tolerance;
    for (;;) {
      const tat = Atomics.load(words, i);
      const d = (tat - now) | 0;
      let next: number;
      if (d <= 0 || d > this.#staleAbove) {
        next = (now + period) | 0; // full: the bucket restarts from now
      } else if (d <= tolerance) {
        next = (tat + period) | 0;
      } else {
        return Math.ceil((d - tolerance) / this.#ticksPerSec); // refusal writes nothing
      }
      if (Atomics.compareExchange(words, i, tat, next) === tat) return 0;
    }
  }

  /** Tokens in bucket `slot` now (fractional, in [0, burst]); the token-bucket reading of the word. */
  tokens(slot: number, nowMicros?: number): number {
    const d = this.#delta(slot, nowMicros);
    if (d <= 0 || d > this.#staleAbove) return this.#burst;
    return Math.max(0, (this.#burst * this.#period - d) / this.#period);
  }

  /** Whether bucket `slot` is full, i.e. indistinguishable from a fresh one (safe to evict and reuse). */
  isFull(slot: number, nowMicros?: number): boolean {
    const d = this.#delta(slot, nowMicros);
    return d <= 0 || d > this.#staleAbove;
  }

  /** Make bucket `slot` full (a fresh bucket for a newly assigned key). */
  reset(slot: number, nowMicros?: number): void {
    if (slot >>> 0 >= this.#slots || slot !== (slot | 0)) this.#badSlot(slot);
    const now = nowMicros === undefined ? this.#nowTicks() : this.#ticksOf(nowMicros);
    Atomics.store(this.#words, HEADER_WORDS + slot, now);
  }

  /**
   * Set bucket `slot` to hold `tokens` now (clamped to [0, burst]): what a
   * bucket of another table held, carried into this one (a reload that keeps
   * the tenant, src/tenants/declared-tenants.ts).
   */
  setTokens(slot: number, tokens: number, nowMicros?: number): void {
    if (slot >>> 0 >= this.#slots || slot !== (slot | 0)) this.#badSlot(slot);
    const now = nowMicros === undefined ? this.#nowTicks() : this.#ticksOf(nowMicros);
    const held = Number.isFinite(tokens) ? Math.min(this.#burst, Math.max(0, tokens)) : this.#burst;
    // tokens = (burst·T − d) / T  ⇔  d = (burst − tokens)·T, within the horizon burst·T ≤ 2^30.
    const d = Math.round((this.#burst - held) * this.#period);
    Atomics.store(this.#words, HEADER_WORDS + slot, (now + d) | 0);
  }

  /**
   * Rewrite the word of every bucket idle for long enough to `now` (still full), so
   * that no word ages past the 32-bit range. Run it every `sweepIntervalMs`; any
   * thread may, concurrently with takes (a lost compare-exchange means a take just
   * made the word fresh). Returns how many words it rewrote.
   */
  sweep(nowMicros?: number): number {
    const now = nowMicros === undefined ? this.#nowTicks() : this.#ticksOf(nowMicros);
    const words = this.#words;
    const end = HEADER_WORDS + this.#slots;
    const staleAbove = this.#staleAbove;
    let rewritten = 0;
    for (let i = HEADER_WORDS; i < end; i++) {
      const tat = Atomics.load(words, i);
      const d = (tat - now) | 0;
      if ((d < -RESET_AGE_TICKS || d > staleAbove) && Atomics.compareExchange(words, i, tat, now) === tat) rewritten++;
    }
    return rewritten;
  }

  #delta(slot: number, nowMicros: number | undefined): number {
    if (slot >>> 0 >= this.#slots || slot !== (slot | 0)) this.#badSlot(slot);
    const now = nowMicros === undefined ? this.#nowTicks() : this.#ticksOf(nowMicros);
    return (Atomics.load(this.#words, HEADER_WORDS + slot) - now) | 0;
  }

  #badSlot(slot: number): never {
    throw badParam('slot', `slot must be an integer in [0, ${this.#slots}), got ${String(slot)}`);
  }

  /** µs → ticks mod 2^32 as a signed word. Exact for any µs reading below 2^53. */
  #ticksOf(micros: number): number {
    return ((micros % TWO_32) * this.#scale) | 0;
  }

  /**
   * The shared clock in ticks mod 2^32: CLOCK_MONOTONIC through process.hrtime(),
   * the same in every thread of the process, in exact integer arithmetic on its
   * [seconds, nanoseconds] pair. Allocation-free once optimised: V8 removes the
   * pair's array (escape analysis), provided the fields are read before the call
   * (a field load after it can deoptimise and forces the array onto the heap)
   * and hold small integers (see the constructor). performance.now() would box
   * its double result on Node 20 instead (16 bytes a call).
   */
  #nowTicks(): number {
    const ticksPerSec = this.#ticksPerSec;
    const scale = this.#scale;
    const t = process.hrtime();
    return (Math.imul(t[0], ticksPerSec) + (t[1] * scale) / 1000) | 0;
  }
}
