// A small seeded PRNG (sfc32, seeded through splitmix32): the same seed gives
// the same sequence on every machine. The fixture generator (request bodies
// for tests, benchmarks and loadgen) and the reliability suites (crash
// moments, tenants, fuzz cases) both draw from it.

export class Prng {
  #a: number;
  #b: number;
  #c: number;
  #d: number;

  /** `warmup` rounds are drawn and dropped after seeding (sfc32's advice is 12 or more). */
  constructor(seed: number, warmup = 15) {
    let s = seed >>> 0;
    const mix = (): number => {
      s = (s + 0x9e3779b9) >>> 0;
      let z = s;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.#a = mix();
    this.#b = mix();
    this.#c = mix();
    this.#d = mix();
    for (let i = 0; i < warmup; i++) this.u32();
  }

  /** A uniform 32-bit unsigned integer. */
  u32(): number {
    const t = (((this.#a + this.#b) >>> 0) + this.#d) >>> 0;
    this.#d = (this.#d + 1) >>> 0;
    this.#a = this.#b ^ (this.#b >>> 9);
    this.#b = (this.#c + (this.#c << 3)) >>> 0;
    this.#c = ((this.#c << 21) | (this.#c >>> 11)) >>> 0;
    this.#c = (this.#c + t) >>> 0;
    return t;
  }

  /** Uniform in [0, 1). */
  float(): number {
    return this.u32() / 0x100000000;
  }

  /** Uniform integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.float() * n);
  }

  /** Uniform integer in [lo, hi]. */
  range(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }

  chance(p: number): boolean {
    return this.float() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from an empty list');
    return items[this.int(items.length)]!;
  }

  /** Picks by weight: `[[weight, value], ...]`. */
  weighted<T>(table: readonly (readonly [number, T])[]): T {
    const total = table.reduce((s, [w]) => s + w, 0);
    let r = this.float() * total;
    for (const [w, v] of table) {
      if (r < w) return v;
      r -= w;
    }
    return table[table.length - 1]![1];
  }

  bytes(n: number): Uint8Array {
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i += 4) {
      const x = this.u32();
      out[i] = x & 0xff;
      if (i + 1 < n) out[i + 1] = (x >>> 8) & 0xff;
      if (i + 2 < n) out[i + 2] = (x >>> 16) & 0xff;
      if (i + 3 < n) out[i + 3] = (x >>> 24) & 0xff;
    }
    return out;
  }

  /** A child generator whose stream does not depend on how much of this one is used later. */
  fork(): Prng {
    return new Prng(this.u32() ^ 0x5bd1e995);
  }
}
