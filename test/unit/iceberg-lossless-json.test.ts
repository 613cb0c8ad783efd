import { describe, expect, it } from 'vitest';
import { LosslessJson } from '../../src/iceberg/lossless-json.js';

describe('LosslessJson', () => {
  it('keeps 64-bit snapshot ids whole through a parse and a stringify', () => {
    const text = '{"snapshot-id":8970536893215742345,"parent":-9223372036854775808,"small":42,"f":1.5e3,"s":"a\\"b\\u00e9","a":[true,false,null,[]],"o":{}}';
    const v = LosslessJson.parse(text) as Record<string, unknown>;
    expect(v['snapshot-id']).toBe(8970536893215742345n);
    expect(v['parent']).toBe(-9223372036854775808n);
    expect(v['small']).toBe(42);
    expect(v['f']).toBe(1500);
    expect(v['s']).toBe('a"bé');
    expect(LosslessJson.stringify(v as never)).toBe(
      '{"snapshot-id":8970536893215742345,"parent":-9223372036854775808,"small":42,"f":1500,"s":"a\\"bé","a":[true,false,null,[]],"o":{}}',
    );
  });

  it('reads what JSON.stringify wrote, whitespace and all', () => {
    const obj = { a: [1, { b: 'x y', c: null }], d: -0.25 };
    expect(LosslessJson.parse(JSON.stringify(obj, null, 2))).toEqual(obj);
  });

  it('refuses malformed JSON with a stable code', () => {
    for (const bad of ['{"a":1,}', '[1 2]', '{"a" 1}', '"open', '{} x', 'nul']) {
      expect(() => LosslessJson.parse(bad)).toThrow(expect.objectContaining({ code: 'SIGLAKE_ICEBERG_METADATA' }));
    }
  });
});
