import { describe, expect, it } from 'vitest';
import { ColumnStats, compareCodePoints, encodeBound } from '../../src/iceberg/column-stats.js';
import { TableSchema } from '../../src/iceberg/table-schema.js';

describe('column bounds in Iceberg single-value form', () => {
  it('encodes int, long and timestamptz little-endian', () => {
    expect([...encodeBound('int', -2, 'lower')!]).toEqual([0xfe, 0xff, 0xff, 0xff]);
    expect([...encodeBound('long', 258n, 'lower')!]).toEqual([2, 1, 0, 0, 0, 0, 0, 0]);
    expect(Buffer.from(encodeBound('timestamptz', 1_767_225_600_000_000n, 'upper')!).readBigInt64LE()).toBe(1_767_225_600_000_000n);
  });

  it('truncates strings to 16 code points: a prefix below, an incremented prefix above', () => {
    const s = 'abcdefghijklmnopqrstuvwxyz';
    expect(Buffer.from(encodeBound('string', s, 'lower')!).toString()).toBe('abcdefghijklmnop');
    expect(Buffer.from(encodeBound('string', s, 'upper')!).toString()).toBe('abcdefghijklmnoq');
    expect(Buffer.from(encodeBound('string', 'short', 'upper')!).toString()).toBe('short');
    // Code points, not UTF-16 units: 17 emoji truncate to 16 whole ones.
    const emoji = '😀'.repeat(17);
    expect(Array.from(Buffer.from(encodeBound('string', emoji, 'lower')!).toString())).toHaveLength(16);
  });

  it('orders strings by code point like their UTF-8 bytes', () => {
    const pairs: [string, string][] = [
      ['a', 'b'],
      ['\uffff', '😀'],
      ['ab', 'abc'],
      ['Z', 'a'],
    ];
    for (const [a, b] of pairs) {
      expect(compareCodePoints(a, b)).toBeLessThan(0);
      expect(Buffer.compare(Buffer.from(a), Buffer.from(b))).toBe(-1);
    }
  });

  it('counts values and nulls per field id, map keys and values included', () => {
    const schema = TableSchema.LOGS;
    const stats = new ColumnStats(schema);
    const bodyIndex = schema.columns.findIndex((c) => c.name === 'body');
    const attrsIndex = schema.columns.findIndex((c) => c.name === 'attributes');
    stats.observe(bodyIndex, ['m', null, 'b']);
    stats.observe(attrsIndex, [[['k', 'v'], ['x', null]], [], [['k', 'w']]]);
    const m = stats.metrics();
    expect(m.valueCounts.get(7)).toBe(3n);
    expect(m.nullValueCounts.get(7)).toBe(1n);
    expect(Buffer.from(m.lowerBounds.get(7)!).toString()).toBe('b');
    expect(Buffer.from(m.upperBounds.get(7)!).toString()).toBe('m');
    expect(m.valueCounts.get(21)).toBe(3n);
    expect(m.valueCounts.get(105)).toBe(3n);
    expect(m.valueCounts.get(106)).toBe(3n);
    expect(m.nullValueCounts.get(106)).toBe(1n);
    expect(m.lowerBounds.has(105)).toBe(false);
  });
});
