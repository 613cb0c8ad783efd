// The load generator's log-linear latency histogram: bucket bounds, percentile
// accuracy, merging across threads and the sparse snapshot.

import { describe, expect, it } from 'vitest';
import { HISTOGRAM_MAX_MICROS, LatencyHistogram } from '../../src/loadgen/latency-histogram.js';

describe('LatencyHistogram', () => {
  it('keeps every value below 256 µs in a bucket of its own', () => {
    for (let v = 0; v < 256; v++) {
      const i = LatencyHistogram.indexOf(v);
      expect(i).toBe(v);
      expect(LatencyHistogram.lowOf(i)).toBe(v);
      expect(LatencyHistogram.highOf(i)).toBe(v);
    }
  });

  it('puts each value in a bucket that contains it and is at most 1/256 of it wide', () => {
    let prev = -1;
    for (let v = 1; v < 2 ** 32; v = Math.ceil(v * 1.013) + 1) {
      const i = LatencyHistogram.indexOf(v);
      const lo = LatencyHistogram.lowOf(i);
      const hi = LatencyHistogram.highOf(i);
      expect(lo).toBeLessThanOrEqual(v);
      expect(hi).toBeGreaterThanOrEqual(v);
      expect(hi - lo + 1).toBeLessThanOrEqual(Math.max(1, v / 256 + 1));
      expect(i).toBeGreaterThanOrEqual(prev);
      prev = i;
    }
  });

  it('buckets tile the range without gaps', () => {
    const last = LatencyHistogram.indexOf(HISTOGRAM_MAX_MICROS);
    for (let i = 1; i <= last; i++) expect(LatencyHistogram.lowOf(i)).toBe(LatencyHistogram.highOf(i - 1) + 1);
    expect(LatencyHistogram.highOf(last)).toBe(HISTOGRAM_MAX_MICROS);
  });

  it('reports percentiles within 0.4 % and exact min, max and mean', () => {
    const h = new LatencyHistogram();
    for (let v = 1; v <= 100_000; v++) h.record(v);
    expect(h.count).toBe(100_000);
    expect(h.min).toBe(1);
    expect(h.max).toBe(100_000);
    expect(h.mean).toBeCloseTo(50_000.5, 6);
    for (const [p, want] of [
      [50, 50_000],
      [90, 90_000],
      [99, 99_000],
      [99.9, 99_900],
    ] as const) {
      const got = h.percentile(p);
      expect(got).toBeGreaterThanOrEqual(want);
      expect(got).toBeLessThanOrEqual(want * (1 + 1 / 256));
    }
    expect(h.percentile(100)).toBe(100_000);
    expect(h.percentile(0)).toBe(1);
  });

  it('caps a percentile at the exact maximum', () => {
    const h = new LatencyHistogram();
    h.record(1000);
    h.record(1001);
    expect(h.percentile(99)).toBe(1001);
  });

  it('is empty and all zero before a recording', () => {
    const h = new LatencyHistogram();
    expect([h.count, h.min, h.max, h.mean, h.percentile(50)]).toEqual([0, 0, 0, 0, 0]);
    expect(h.snapshot().counts).toEqual([]);
  });

  it('clamps negative and huge values', () => {
    const h = new LatencyHistogram();
    h.record(-5);
    h.record(2 ** 40);
    const s = h.snapshot();
    expect(s.counts.map(([i]) => i)).toEqual([0, LatencyHistogram.indexOf(HISTOGRAM_MAX_MICROS)]);
    expect(h.min).toBe(0);
  });

  it('merges per-thread histograms into the histogram of all values', () => {
    const a = new LatencyHistogram();
    const b = new LatencyHistogram();
    const all = new LatencyHistogram();
    for (let i = 0; i < 5000; i++) {
      const v = ((i * 7919) % 20_000) + 3;
      (i % 3 === 0 ? a : b).record(v);
      all.record(v);
    }
    const merged = new LatencyHistogram();
    merged.add(a);
    merged.add(b.snapshot());
    expect(merged.snapshot()).toEqual(all.snapshot());
    for (const p of [50, 90, 99, 99.9]) expect(merged.percentile(p)).toBe(all.percentile(p));
  });

  it('round-trips through a structured-cloneable snapshot', () => {
    const h = new LatencyHistogram();
    for (const v of [5, 5, 300, 12_345, 999_999]) h.record(v);
    const copy = LatencyHistogram.from(structuredClone(h.snapshot()));
    expect(copy.snapshot()).toEqual(h.snapshot());
    expect(copy.count).toBe(5);
  });

  it('refuses a snapshot of another precision or with a bucket out of range', () => {
    const h = new LatencyHistogram();
    expect(() => h.add({ unit: 'us', subBucketBits: 7, counts: [[1, 1]], min: 1, max: 1, sum: 1 })).toThrow(RangeError);
    expect(() => h.add({ unit: 'us', subBucketBits: 8, counts: [[1e9, 1]], min: 1, max: 1, sum: 1 })).toThrow(RangeError);
  });
});
