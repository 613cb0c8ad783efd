// The two protobuf walks of src/otlp/wire-validator.ts against the fuzz
// suite's independent oracle (test/reliability/lib/otlp-oracle.ts, protobufjs'
// schema plus the contract's rules), in process: the same mutated bodies the
// fuzz suite sends to the real ingester (test/reliability/fuzz-bodies.test.ts)
// go through the fast walk alone, the exact walk alone and the entry point.
// Zero mismatches: every body the oracle finds valid is accepted with its
// record count, every other one refused; the fast walk never accepts a body
// the oracle refuses; the entry point's refusal is the exact walk's, word for
// word. Then the cases the fast walk's UTF-8 runs and its give-ups exist for.

import { isUtf8 } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { FixtureGenerator } from '../../src/otlp/fixtures.js';
import { ROOT_MSG, type Signal } from '../../src/otlp/schema.js';
import { fastWalk, validateExportRequest, validateExportRequestExact } from '../../src/otlp/wire-validator.js';
import { proto } from '../helpers/otlp-bodies.js';
import { mutatedCases, ProtoMutator, walkOutcome as outcome } from '../reliability/lib/otlp-mutator.js';
import { OtlpOracle } from '../reliability/lib/otlp-oracle.js';
import { Prng } from '../reliability/lib/prng.js';

const oracle = new OtlpOracle(proto);
const mutator = new ProtoMutator(oracle);

describe('the fast and the exact wire walk against the fuzz oracle', () => {
  it('agree with the oracle on thousands of mutated bodies, with zero mismatches', () => {
    const prng = new Prng(0x0a11ce);
    const gen = new FixtureGenerator(prng.u32(), proto);
    const mismatches: string[] = [];
    let valid = 0;
    let fastAccepted = 0;
    const CASES = 2000;
    for (const { i, signal, body, kinds } of mutatedCases(mutator, gen, prng, CASES)) {
      const o = oracle.check(signal, body);
      const exact = outcome(validateExportRequestExact, signal, body);
      const entry = outcome(validateExportRequest, signal, body);
      const fast = fastWalk(ROOT_MSG[signal], body);
      const want = o.valid ? o.records : 'refused';
      const got = (v: number | string) => (typeof v === 'number' ? v : 'refused');
      const where = `case ${i} ${signal} [${kinds.join(',')}] oracle ${want}${o.why ? ` (${o.why})` : ''}`;
      if (got(exact) !== want) mismatches.push(`${where}: exact walk ${exact}`);
      if (entry !== exact) mismatches.push(`${where}: entry point ${entry}, exact walk ${exact}`);
      if (fast !== -1 && fast !== want) mismatches.push(`${where}: fast walk ${fast}`);
      if (o.valid) valid++;
      if (fast !== -1) fastAccepted++;
    }
    expect(mismatches).toEqual([]);
    // Both outcomes occurred, and the fast walk itself accepted most of the valid bodies.
    expect(valid).toBeGreaterThan(CASES / 10);
    expect(valid).toBeLessThan(CASES);
    expect(fastAccepted).toBeGreaterThan(valid / 2);
  });
});

// ---- hand-built bodies ---------------------------------------------------------------

function varint(v: number): number[] {
  const out: number[] = [];
  while (v > 0x7f) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
  return out;
}
const ld = (no: number, content: readonly number[]): number[] => [...varint(no * 8 + 2), ...varint(content.length), ...content];
const str = (s: string): number[] => [...Buffer.from(s, 'utf8')];
/** A logs request holding one LogRecord whose content is `record`. */
const logs = (record: readonly number[]): Uint8Array => Uint8Array.from(ld(1, ld(2, ld(2, record))));
/** KeyValue{key, value: AnyValue{string_value}} as LogRecord.attributes (field 6), from raw bytes. */
const attr = (key: readonly number[], value: readonly number[]): number[] => ld(6, [...ld(1, key), ...ld(2, ld(1, value))]);

function expectSame(body: Uint8Array, want: number | RegExp, fastAccepts: boolean): void {
  const exact = outcome(validateExportRequestExact, 'logs', body);
  const entry = outcome(validateExportRequest, 'logs', body);
  expect(entry).toBe(exact);
  if (typeof want === 'number') expect(entry).toBe(want);
  else expect(entry).toMatch(want);
  expect(fastWalk(ROOT_MSG.logs, body)).toBe(fastAccepts ? want : -1);
}

describe('the fast walk checks UTF-8 per run of strings, exactly', () => {
  it('refuses a character split between two strings of one run (each string alone is invalid)', () => {
    // key ends with the lead byte of "é", the value starts with its continuation byte.
    expectSame(logs(attr([0x61, 0xc3], [0xa9, 0x62])), /invalid UTF-8 in KeyValue\.key \(field 1\)/, false);
  });

  it('accepts multi-byte characters at the ends of the strings of a run', () => {
    expectSame(logs([...attr(str('é'), str('東京')), ...attr(str('🚀'), str('ü'))]), 1, true);
  });

  it('refuses invalid UTF-8 after a gap that is not ASCII (a two-byte length), and names the right string', () => {
    const long = str('x'.repeat(200));
    expectSame(logs([...attr(str('k'), long), ...attr(str('k2'), [0x61, 0xff])]), /invalid UTF-8 in AnyValue\.string_value \(field 1\) at offset \d+/, false);
    expectSame(logs([...attr(str('k'), long), ...attr(str('k2'), str('ok'))]), 1, true);
  });

  it('names the first fault in walk order: bad UTF-8 before a structural fault', () => {
    const body = logs([...attr(str('k'), [0xc0, 0x80]), ...ld(9, [1, 2, 3])]);
    expectSame(body, /invalid UTF-8 in AnyValue\.string_value/, false);
  });

  it('checks long runs and long single strings (isUtf8 rather than the ASCII scan)', () => {
    const many: number[] = [];
    for (let i = 0; i < 50; i++) many.push(...attr(str(`key-${i}`), str(`valeur numéro ${i}`)));
    expectSame(logs(many), 1, true);
    const bad = many.slice();
    bad[bad.length - 3] = 0xfe;
    expectSame(logs(bad), /invalid UTF-8 in AnyValue\.string_value/, false);
  });
  it('gives the same answer at every alignment of the body in its buffer (the ASCII scan reads aligned words)', () => {
    for (let at = 0; at < 12; at++) {
      for (const bad of [[0xc3, 0xa9], [0xc3], [0xff], [0xe6, 0x9d, 0xb1], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80]]) {
        const value = [...str('x'.repeat(at)), ...bad, ...str('y'.repeat(40))];
        const body = logs([...attr(str('key'), str('v'.repeat(30))), ...attr(str('k'), value), ...attr(str('z'), str('w'.repeat(70)))]);
        const valid = isUtf8(Uint8Array.from(bad));
        for (let shift = 0; shift < 4; shift++) {
          const holder = new Uint8Array(new ArrayBuffer(body.length + 8), shift, body.length);
          holder.set(body);
          const exact = outcome(validateExportRequestExact, 'logs', holder);
          expect(exact).toBe(valid ? 1 : exact);
          if (!valid) expect(exact).toMatch(/invalid UTF-8 in AnyValue\.string_value/);
          expect(outcome(validateExportRequest, 'logs', holder)).toBe(exact);
          expect(fastWalk(ROOT_MSG.logs, holder)).toBe(valid ? 1 : -1);
        }
      }
    }
  });
});

describe('the fast walk leaves rare encodings to the exact walk', () => {
  it('tags of three bytes (field numbers from 2048) and lengths of five bytes', () => {
    // Unknown field 5000 in LogRecord, and a string whose length is padded to five bytes.
    expectSame(logs([...varint(5000 * 8), 7, ...str('')]), 1, false);
    expectSame(logs([0x1a, 0x82, 0x80, 0x80, 0x80, 0x00, ...str('ab')]), 1, false);
    expectSame(logs([0x1a, 0x82, 0x80, 0x80, 0x00, ...str('ab')]), 1, true);
  });

  it('a two-byte tag for a field number below 16 (padded) and field 16 of Span', () => {
    expectSame(logs([0x9a, 0x00, 0x02, ...str('ab')]), 1, true);
    const span = [0x85, 0x01, 1, 0, 0, 0]; // Span.flags (field 16, fixed32)
    const traces = Uint8Array.from(ld(1, ld(2, ld(2, span))));
    expect(fastWalk(ROOT_MSG.traces, traces)).toBe(1);
    expect(validateExportRequest('traces', traces)).toBe(1);
  });
});
