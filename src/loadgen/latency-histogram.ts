// A log-linear latency histogram in the manner of HdrHistogram: values are
// whole microseconds; below 2^SUB_BITS each value has its own bucket, above it
// every power of two is split into 2^SUB_BITS equal buckets, so any recorded
// value is known to within 1/2^SUB_BITS (0.4 %) of itself. Fixed size
// (6,400 buckets up to 2^32 µs, about 71 minutes), no allocation per record,
// mergeable across worker threads, and serialisable as sparse
// [index, count] pairs.

const SUB_BITS = 8;
const SUB_COUNT = 1 << SUB_BITS;
const MAX_EXPONENT = 31;
/** Values at or above this (µs) are counted in the last bucket. */
export const HISTOGRAM_MAX_MICROS = 2 ** 32 - 1;
const BUCKETS = SUB_COUNT + (MAX_EXPONENT - SUB_BITS + 1) * SUB_COUNT;

export interface HistogramSnapshot {
  unit: 'us';
  subBucketBits: number;
  /** Sparse [bucket index, count] pairs, ascending by index. */
  counts: [number, number][];
  min: number;
  max: number;
  sum: number;
}

export class LatencyHistogram {
  readonly #counts = new Float64Array(BUCKETS);
  #total = 0;
  #min = Infinity;
  #max = 0;
  #sum = 0;

  /** Bucket of a value in µs (clamped to [0, HISTOGRAM_MAX_MICROS]). */
  static indexOf(micros: number): number {
    let v = Math.floor(micros);
    if (!(v > 0)) return 0;
    if (v > HISTOGRAM_MAX_MICROS) v = HISTOGRAM_MAX_MICROS;
    if (v < SUB_COUNT) return v;
    const e = 31 - Math.clz32(v);
    const sub = (v >>> (e - SUB_BITS)) & (SUB_COUNT - 1);
    return SUB_COUNT + (e - SUB_BITS) * SUB_COUNT + sub;
  }

  /** Smallest value (µs) that falls in bucket `index`. */
  static lowOf(index: number): number {
    if (index < SUB_COUNT) return index;
    const k = index - SUB_COUNT;
    const e = SUB_BITS + Math.floor(k / SUB_COUNT);
    return (SUB_COUNT + (k % SUB_COUNT)) * 2 ** (e - SUB_BITS);
  }

  /** Largest value (µs) that falls in bucket `index`. */
  static highOf(index: number): number {
    if (index < SUB_COUNT) return index;
    const k = index - SUB_COUNT;
    const e = SUB_BITS + Math.floor(k / SUB_COUNT);
    return Math.min(HISTOGRAM_MAX_MICROS, (SUB_COUNT + (k % SUB_COUNT) + 1) * 2 ** (e - SUB_BITS) - 1);
  }

  get count(): number {
    return this.#total;
  }

  /** Exact smallest recorded value (µs); 0 when empty. */
  get min(): number {
    return this.#total === 0 ? 0 : this.#min;
  }

  /** Exact largest recorded value (µs). */
  get max(): number {
    return this.#max;
  }

  /** Exact mean (µs); 0 when empty. */
  get mean(): number {
    return this.#total === 0 ? 0 : this.#sum / this.#total;
  }

  record(micros: number): void {
    const v = micros > 0 ? micros : 0;
    this.#counts[LatencyHistogram.indexOf(v)]++;
    this.#total++;
    this.#sum += v;
    if (v < this.#min) this.#min = v;
    if (v > this.#max) this.#max = v;
  }

  /**
   * The value at percentile `p` (0-100): the highest value of the bucket that
   * holds the ceil(p % of count)-th smallest recording, capped at the exact max.
   * 0 when empty.
   */
  percentile(p: number): number {
    if (this.#total === 0) return 0;
    if (p <= 0) return this.min;
    const rank = Math.max(1, Math.ceil((Math.min(p, 100) / 100) * this.#total));
    let seen = 0;
    const counts = this.#counts;
    for (let i = 0; i < BUCKETS; i++) {
      seen += counts[i];
      if (seen >= rank) return Math.min(LatencyHistogram.highOf(i), this.#max);
    }
    return this.#max;
  }

  add(other: LatencyHistogram | HistogramSnapshot): void {
    const snap = other instanceof LatencyHistogram ? other.snapshot() : other;
    if (snap.subBucketBits !== SUB_BITS) throw new RangeError(`histogram precision ${snap.subBucketBits} bits, expected ${SUB_BITS}`);
    let n = 0;
    for (const [i, c] of snap.counts) {
      if (!Number.isInteger(i) || i < 0 || i >= BUCKETS) throw new RangeError(`histogram bucket ${i} out of range`);
      this.#counts[i] += c;
      n += c;
    }
    if (n === 0) return;
    this.#total += n;
    this.#sum += snap.sum;
    if (snap.min < this.#min) this.#min = snap.min;
    if (snap.max > this.#max) this.#max = snap.max;
  }

  reset(): void {
    this.#counts.fill(0);
    this.#total = 0;
    this.#min = Infinity;
    this.#max = 0;
    this.#sum = 0;
  }

  snapshot(): HistogramSnapshot {
    const counts: [number, number][] = [];
    const c = this.#counts;
    for (let i = 0; i < BUCKETS; i++) if (c[i] !== 0) counts.push([i, c[i]]);
    return { unit: 'us', subBucketBits: SUB_BITS, counts, min: this.min, max: this.#max, sum: this.#sum };
  }

  static from(snap: HistogramSnapshot): LatencyHistogram {
    const h = new LatencyHistogram();
    h.add(snap);
    return h;
  }
}
