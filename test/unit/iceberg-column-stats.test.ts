import { describe, expect, it } from 'vitest';
import { ColumnStats, compareCodePoints, encodeBound } from '../../src/iceberg/column-stats.js';
import { TableSchema } from '../../src/iceberg/table-schema.js';
import { RowMapper } from '../../src/indexes/mapping.js';

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

  it('bounds a string of 150 million characters from its first 16 code points (Array.from of it threw, and its table never landed)', () => {
    // Before: Array.from of the whole value passed V8's longest array, so a
    // 150 MB body failed `writing data files` every round (docs/iceberg.md).
    const long = 'b'.repeat(150_000_000);
    expect(Buffer.from(encodeBound('string', long, 'lower')!).toString()).toBe('b'.repeat(16));
    expect(Buffer.from(encodeBound('string', long, 'upper')!).toString()).toBe('b'.repeat(15) + 'c');
    const astral = '😀'.repeat(16) + 'x'.repeat(150_000_000);
    expect(Buffer.from(encodeBound('string', astral, 'lower')!).toString()).toBe('😀'.repeat(16));
    expect(Buffer.from(encodeBound('string', astral, 'upper')!).toString()).toBe('😀'.repeat(15) + '😁');
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

  it('orders −0.0 before +0.0 in double bounds, whichever comes first (Spark skipped files holding 0.0)', () => {
    const schema = TableSchema.LOGS.withColumns([{ id: 107, name: 'amount', type: 'double', required: false, doc: '' }], 1);
    const at = schema.columns.length - 1;
    for (const values of [[-0, 0], [0, -0], [-1, 0, -0], [0, -0, -1]]) {
      const stats = new ColumnStats(schema);
      stats.observe(at, values);
      const m = stats.metrics();
      const lo = Buffer.from(m.lowerBounds.get(107)!).readDoubleLE();
      const hi = Buffer.from(m.upperBounds.get(107)!).readDoubleLE();
      expect(Object.is(hi, 0), `upper of ${values.map((v) => (Object.is(v, -0) ? '-0' : v))}`).toBe(true);
      expect(Object.is(lo, values.includes(-1) ? -1 : -0), `lower of ${values.map((v) => (Object.is(v, -0) ? '-0' : v))}`).toBe(true);
    }
  });

  it('maps the text -0 of a double column to 0 (the Parquet dictionary would merge the two)', () => {
    const mapper = new RowMapper([{ id: 107, column: 'amount', from: 'body', type: 'double' }]);
    const row = new Array(TableSchema.LOGS.columns.length).fill(null) as unknown[];
    const bodyAt = TableSchema.LOGS.columns.findIndex((c) => c.name === 'body');
    row[bodyAt] = '-0.0';
    mapper.apply(row as never);
    expect(Object.is(row.at(-1), 0)).toBe(true);
  });
});

