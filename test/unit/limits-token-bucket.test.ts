import { describe, expect, it } from 'vitest';
import { LimitsError } from '../../src/limits/limits-error.js';
import { TokenBucketTable } from '../../src/limits/token-bucket-table.js';

const T0 = 1_000_000_000; // an arbitrary µs origin for the injected clock
const TWO_32 = 4294967296;

function takeN(table: TokenBucketTable, slot: number, n: number, now: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(table.take(slot, now));
  return out;
}

function expectBadParam(fn: () => unknown, param: string): void {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(LimitsError);
    expect((err as LimitsError).code).toBe('SIGLAKE_LIMITS_BAD_PARAM');
    expect((err as LimitsError).param).toBe(param);
    return;
  }
  throw new Error(`expected a LimitsError for ${param}`);
}

describe('TokenBucketTable semantics (contract §9)', () => {
  it('starts full at burst, spends one token per take, then refuses', () => {
    const t = new TokenBucketTable({ ratePerSec: 10, burst: 5, slots: 1, nowMicros: T0 });
    expect(t.tokens(0, T0)).toBe(5);
    expect(takeN(t, 0, 5, T0)).toEqual([0, 0, 0, 0, 0]);
    expect(t.tokens(0, T0)).toBe(0);
    // The next token is 100 ms away: Retry-After is 1 whole second.
    expect(t.take(0, T0)).toBe(1);
    // A refusal spends nothing: still exactly one period to wait.
    expect(t.take(0, T0 + 99_999)).toBe(1);
    expect(t.tokens(0, T0 + 50_000)).toBeCloseTo(0.5, 9);
  });

  it('refills continuously at ratePerSec, capped at burst', () => {
    const t = new TokenBucketTable({ ratePerSec: 10, burst: 5, slots: 1, nowMicros: T0 });
    takeN(t, 0, 5, T0);
    expect(t.take(0, T0 + 99_999)).toBe(1);
    expect(t.take(0, T0 + 100_000)).toBe(0); // exactly one period later: one token
    expect(t.take(0, T0 + 100_000)).toBe(1);
    // 250 ms later: 2.5 tokens accrued since the last take, so two takes.
    expect(takeN(t, 0, 3, T0 + 350_000)).toEqual([0, 0, 1]);
    // Ten seconds idle is a hundred tokens' worth, but the bucket holds only burst.
    const later = T0 + 10_350_000;
    expect(t.tokens(0, later)).toBe(5);
    expect(takeN(t, 0, 6, later)).toEqual([0, 0, 0, 0, 0, 1]);
  });

  it('answers Retry-After as the ceiling of the wait in whole seconds', () => {
    const t = new TokenBucketTable({ ratePerSec: 0.25, burst: 1, slots: 1, nowMicros: T0 }); // one token per 4 s
    expect(t.take(0, T0)).toBe(0);
    expect(t.take(0, T0)).toBe(4);
    expect(t.take(0, T0 + 1)).toBe(4); // 3.999999 s → 4
    expect(t.take(0, T0 + 1_500_000)).toBe(3); // 2.5 s → 3
    expect(t.take(0, T0 + 3_000_000)).toBe(1); // exactly 1 s → 1
    expect(t.take(0, T0 + 3_900_000)).toBe(1); // 0.1 s → 1, never 0 for a refusal
    expect(t.take(0, T0 + 4_000_000)).toBe(0);
  });

  it('keeps buckets independent', () => {
    const t = new TokenBucketTable({ ratePerSec: 1, burst: 2, slots: 3, nowMicros: T0 });
    expect(takeN(t, 1, 3, T0)).toEqual([0, 0, 1]);
    expect(takeN(t, 0, 2, T0)).toEqual([0, 0]);
    expect(takeN(t, 2, 2, T0)).toEqual([0, 0]);
  });

  it('matches an exact integer token-bucket model on a random schedule', () => {
    // rate 1000/s: one token per 1000 µs, a whole number of ticks, so decisions must agree exactly.
    const rate = 1000;
    const burst = 7;
    const periodUs = 1e6 / rate;
    const t = new TokenBucketTable({ ratePerSec: rate, burst, slots: 1, nowMicros: T0 });
    let level = burst * periodUs; // the model: tokens × periodUs, an integer
    let now = T0;
    let last = now;
    let seed = 12345;
    const rand = () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed / 0x7fffffff;
    };
    let admitted = 0;
    let refused = 0;
    for (let i = 0; i < 20_000; i++) {
      now += Math.floor(rand() * rand() * 3000); // bursts and gaps
      level = Math.min(burst * periodUs, level + (now - last));
      last = now;
      const modelAdmits = level >= periodUs;
      if (modelAdmits) level -= periodUs;
      const got = t.take(0, now);
      expect(got === 0).toBe(modelAdmits);
      if (got === 0) {
        admitted++;
      } else {
        refused++;
        expect(got).toBe(Math.ceil((periodUs - level) / 1e6));
      }
    }
    expect(admitted).toBeGreaterThan(1000);
    expect(refused).toBeGreaterThan(1000);
  });

  it('enforces the configured rate within 0.1 % for awkward rates', () => {
    for (const rate of [0.004, 0.3, 3, 7, 999, 33_333, 70_000, 123_457, 999_999, 1_000_000]) {
      const t = new TokenBucketTable({ ratePerSec: rate, burst: 4, slots: 1, nowMicros: T0 });
      expect(Math.abs(t.ratePerSec - rate) / rate).toBeLessThanOrEqual(0.001);
      // Sampled over 1000 periods at a step that is no divisor of the period: the
      // initial 4 tokens plus 1000 refills, less what is left in the bucket at the end.
      const span = (1000 / rate) * 1e6;
      const steps = 7919;
      let n = 0;
      for (let i = 0; i <= steps; i++) if (t.take(0, T0 + (span * i) / steps) === 0) n++;
      expect(Math.abs(n - 1004)).toBeLessThanOrEqual(2);
    }
  });

  it('refuses parameters it cannot represent, naming the parameter', () => {
    expectBadParam(() => new TokenBucketTable({ ratePerSec: 0, burst: 1, slots: 1 }), 'ratePerSec');
    expectBadParam(() => new TokenBucketTable({ ratePerSec: -1, burst: 1, slots: 1 }), 'ratePerSec');
    expectBadParam(() => new TokenBucketTable({ ratePerSec: Number.NaN, burst: 1, slots: 1 }), 'ratePerSec');
    expectBadParam(() => new TokenBucketTable({ ratePerSec: 1_000_001, burst: 1, slots: 1 }), 'ratePerSec');
    expectBadParam(() => new TokenBucketTable({ ratePerSec: 10, burst: 0, slots: 1 }), 'burst');
    expectBadParam(() => new TokenBucketTable({ ratePerSec: 10, burst: 2.5, slots: 1 }), 'burst');
    // The horizon burst / rate must fit 2^30 µs (≈ 1073 s).
    expect(new TokenBucketTable({ ratePerSec: 1, burst: 1073, slots: 1 }).burst).toBe(1073);
    expectBadParam(() => new TokenBucketTable({ ratePerSec: 1, burst: 1074, slots: 1 }), 'burst');
    // At 1,000,000/s a burst of 2^21 still fits at 0.1 % precision, 2^21 + 1 does not.
    expect(new TokenBucketTable({ ratePerSec: 1_000_000, burst: 2 ** 21, slots: 1 }).burst).toBe(2 ** 21);
    expectBadParam(() => new TokenBucketTable({ ratePerSec: 1_000_000, burst: 2 ** 21 + 1, slots: 1 }), 'burst');
    expectBadParam(() => new TokenBucketTable({ ratePerSec: 10, burst: 1, slots: 0 }), 'slots');
    expectBadParam(() => new TokenBucketTable({ ratePerSec: 10, burst: 1, slots: 2 ** 24 + 1 }), 'slots');
    const t = new TokenBucketTable({ ratePerSec: 10, burst: 1, slots: 2, nowMicros: T0 });
    expectBadParam(() => t.take(2, T0), 'slot');
    expectBadParam(() => t.take(-1, T0), 'slot');
    expectBadParam(() => t.take(0.5, T0), 'slot');
  });

  it('shares its buckets with a second view built from the SharedArrayBuffer', () => {
    const a = new TokenBucketTable({ ratePerSec: 10, burst: 3, slots: 4, nowMicros: T0 });
    const b = new TokenBucketTable(a.buffer);
    expect(b.slots).toBe(4);
    expect(b.burst).toBe(3);
    expect(b.ratePerSec).toBe(a.ratePerSec);
    expect(a.take(2, T0)).toBe(0);
    expect(b.take(2, T0)).toBe(0);
    expect(a.take(2, T0)).toBe(0);
    expect(b.take(2, T0)).toBe(1);
    expect(a.take(2, T0)).toBe(1);
  });

  it('refuses a buffer that is not a table', () => {
    for (const buf of [new SharedArrayBuffer(8), new SharedArrayBuffer(64)]) {
      try {
        new TokenBucketTable(buf);
        throw new Error('accepted a foreign buffer');
      } catch (err) {
        expect((err as LimitsError).code).toBe('SIGLAKE_LIMITS_BAD_BUFFER');
      }
    }
  });

  it('reads its own shared clock when no time is injected', async () => {
    const t = new TokenBucketTable({ ratePerSec: 20, burst: 2, slots: 1 });
    expect(t.take(0)).toBe(0);
    expect(t.take(0)).toBe(0);
    expect(t.take(0)).toBe(1);
    await new Promise((r) => setTimeout(r, 120)); // > 2 periods of 50 ms
    expect(t.take(0)).toBe(0);
  });
});

describe('TokenBucketTable: 32-bit time stays correct over long idle periods', () => {
  it('an idle bucket is full again after many wraps when sweep() runs on schedule', () => {
    const t = new TokenBucketTable({ ratePerSec: 1, burst: 3, slots: 2, nowMicros: T0 }); // 1 tick = 1 µs, one wrap ≈ 71.6 min
    takeN(t, 0, 3, T0);
    expect(t.take(0, T0)).toBe(1);
    const step = t.sweepIntervalMs * 1000;
    expect(step).toBe(60_000_000);
    let now = T0;
    for (; now < T0 + 3 * TWO_32; now += step) t.sweep(now);
    expect(t.tokens(0, now)).toBe(3);
    expect(takeN(t, 0, 4, now)).toEqual([0, 0, 0, 1]);
    expect(takeN(t, 1, 4, now)).toEqual([0, 0, 0, 1]); // never taken before either
  });

  it('without sweeps, a word older than 2^31 ticks still reads as full', () => {
    const t = new TokenBucketTable({ ratePerSec: 1, burst: 3, slots: 1, nowMicros: T0 });
    takeN(t, 0, 3, T0);
    const now = T0 + 2 ** 31 + 5_000_000; // the signed difference has wrapped positive
    expect(t.isFull(0, now)).toBe(true);
    expect(takeN(t, 0, 4, now)).toEqual([0, 0, 0, 1]);
  });

  it('without sweeps, the one misread left (a word ≈ 2^32 ticks old) errs towards refusing, never admitting more', () => {
    const t = new TokenBucketTable({ ratePerSec: 1, burst: 3, slots: 1, nowMicros: T0 });
    takeN(t, 0, 3, T0); // TAT = T0 + 3 s
    const now = T0 + TWO_32 + 1_000_000; // exactly one wrap later the word looks 2 s ahead
    expect(t.isFull(0, now)).toBe(false);
    expect(takeN(t, 0, 3, now)).toEqual([0, 1, 1]); // 1 token instead of 3: under-admission only
    // A sweep in time makes the same schedule read correctly.
    const u = new TokenBucketTable({ ratePerSec: 1, burst: 3, slots: 1, nowMicros: T0 });
    takeN(u, 0, 3, T0);
    expect(u.sweep(T0 + 2 ** 30)).toBe(1);
    expect(takeN(u, 0, 4, now)).toEqual([0, 0, 0, 1]);
  });

  it('sweep() leaves busy buckets alone', () => {
    const t = new TokenBucketTable({ ratePerSec: 1, burst: 3, slots: 2, nowMicros: T0 });
    takeN(t, 0, 3, T0);
    expect(t.sweep(T0 + 1_000_000)).toBe(0);
    expect(t.tokens(0, T0 + 1_000_000)).toBeCloseTo(1, 9);
  });
});
