import { describe, expect, it } from 'vitest';
import { BodyError } from '../../src/errors.js';
import { FixtureGenerator } from '../../src/otlp/fixtures.js';
import { ProtoRoot } from '../../src/otlp/proto-root.js';
import {
  Kind,
  MAX_ANY_VALUE_DEPTH,
  MESSAGES,
  Msg,
  ROOT_MSG,
  type MsgId,
  type Signal,
} from '../../src/otlp/schema.js';
import {
  fastWalk,
  validateExportRequestExact,
  validateExportRequest as validateEntry,
} from '../../src/otlp/wire-validator.js';

const root = ProtoRoot.load();

/**
 * Every check of this file runs both walks (wire-validator.ts): the entry point
 * (the fast walk, and the exact walk where the fast one gives up) and the exact
 * walk alone. They must give the same count, or throw the same error with the
 * same message; and the fast walk alone, where it accepts, the same count.
 */
function validateExportRequest(signal: Signal, body: Uint8Array): number {
  const outcome = (f: (s: Signal, b: Uint8Array) => number): number | Error => {
    try {
      return f(signal, body);
    } catch (err) {
      return err as Error;
    }
  };
  const entry = outcome(validateEntry);
  const exact = outcome(validateExportRequestExact);
  if (exact instanceof Error || entry instanceof Error) {
    expect(entry).toBeInstanceOf(Error);
    expect(exact).toBeInstanceOf(Error);
    const [a, b] = [entry as Error & { code?: string }, exact as Error & { code?: string }];
    expect(a.constructor).toBe(b.constructor);
    expect(a.code).toBe(b.code);
    expect(a.message).toBe(b.message);
    if (ROOT_MSG[signal] !== undefined) expect(fastWalk(ROOT_MSG[signal], body)).toBe(-1);
    throw a;
  }
  expect(entry).toBe(exact);
  const fast = fastWalk(ROOT_MSG[signal], body);
  if (fast !== -1) expect(fast).toBe(exact);
  return entry;
}

const SIGNALS: readonly Signal[] = ['logs', 'traces'];

// ---- a tiny protobuf encoder for hand-built bodies -----------------------------

type Bytes = readonly number[];

function varint(v: number | bigint): number[] {
  let x = BigInt.asUintN(64, BigInt(v));
  const out: number[] = [];
  while (x > 0x7fn) {
    out.push(Number(x & 0x7fn) | 0x80);
    x >>= 7n;
  }
  out.push(Number(x));
  return out;
}
const tag = (no: number, wt: number): number[] => varint(no * 8 + wt);
const ld = (no: number, content: Bytes): number[] => [...tag(no, 2), ...varint(content.length), ...content];
const utf8 = (s: string): number[] => [...Buffer.from(s, 'utf8')];
const u8 = (...parts: Bytes[]): Uint8Array => Uint8Array.from(parts.flat());

/** Field path from the signal's request down to message `target`: [parent, field number] pairs. */
function chainTo(signal: Signal, target: MsgId): [MsgId, number][] {
  const start = ROOT_MSG[signal];
  const prev = new Map<MsgId, [MsgId, number]>();
  const queue: MsgId[] = [start];
  const seen = new Set<MsgId>([start]);
  while (queue.length > 0) {
    const m = queue.shift() as MsgId;
    for (const f of MESSAGES[m].fields) {
      if (f.message === -1 || seen.has(f.message)) continue;
      seen.add(f.message);
      prev.set(f.message, [m, f.number]);
      queue.push(f.message);
    }
  }
  const chain: [MsgId, number][] = [];
  for (let m = target; m !== start; ) {
    const p = prev.get(m);
    if (!p) throw new Error(`${MESSAGES[target].name} not reachable from ${signal}`);
    chain.unshift(p);
    m = p[0];
  }
  return chain;
}

/** The messages that can occur in a request of `signal`. */
function reachable(signal: Signal): MsgId[] {
  const found = new Set<MsgId>([ROOT_MSG[signal]]);
  for (const m of found) for (const f of MESSAGES[m].fields) if (f.message !== -1) found.add(f.message);
  return [...found];
}

/** A request of `signal` whose only `target` message has `content`; and the records it holds. */
function inRequest(signal: Signal, target: MsgId, content: Bytes): { body: Uint8Array; records: number } {
  let bytes: number[] = [...content];
  let records = 0;
  for (const [parent, no] of chainTo(signal, target).reverse()) {
    bytes = ld(no, bytes);
    if (MESSAGES[parent].fields.find((f) => f.number === no)?.countsRecords) records++;
  }
  return { body: Uint8Array.from(bytes), records };
}

/** Records protobufjs finds in a body, or null when it cannot decode it. */
function protobufjsCount(signal: Signal, body: Uint8Array): number | null {
  let decoded: Record<string, unknown>;
  try {
    decoded = root.decodeRequest(signal, body);
  } catch {
    return null;
  }
  const groups = (decoded[signal === 'logs' ? 'resourceLogs' : 'resourceSpans'] ?? []) as Record<string, unknown>[];
  let n = 0;
  for (const g of groups) {
    for (const s of (g[signal === 'logs' ? 'scopeLogs' : 'scopeSpans'] ?? []) as Record<string, unknown>[]) {
      n += ((s[signal === 'logs' ? 'logRecords' : 'spans'] ?? []) as unknown[]).length;
    }
  }
  return n;
}

/** The validator's verdict: a count, or the BodyError it threw (any other throw fails the test). */
function verdict(signal: Signal, body: Uint8Array): number | BodyError {
  try {
    return validateExportRequest(signal, body);
  } catch (err) {
    if (err instanceof BodyError && err.code === 'SIGLAKE_BAD_BODY' && err.httpStatus === 400) return err;
    throw err;
  }
}

function expectBad(signal: Signal, body: Uint8Array, message: RegExp): void {
  let thrown: unknown;
  try {
    validateExportRequest(signal, body);
  } catch (err) {
    thrown = err;
  }
  expect(thrown).toBeInstanceOf(BodyError);
  const e = thrown as BodyError;
  expect(e.code).toBe('SIGLAKE_BAD_BODY');
  expect(e.httpStatus).toBe(400);
  expect(e.message).toMatch(/^invalid protobuf: /);
  expect(e.message).toMatch(message);
  expect(e.message).not.toContain('\n');
}

class Rng {
  #s: number;
  constructor(seed: number) {
    this.#s = seed >>> 0;
  }
  next(): number {
    // xorshift32
    let x = this.#s;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.#s = x >>> 0;
    return this.#s;
  }
  int(n: number): number {
    return this.next() % n;
  }
}

// ---- accepting -------------------------------------------------------------------

describe('validateExportRequest accepts valid requests', () => {
  it('accepts an empty body as an empty request of either signal', () => {
    expect(validateExportRequest('logs', new Uint8Array(0))).toBe(0);
    expect(validateExportRequest('traces', new Uint8Array(0))).toBe(0);
  });

  it.each([
    ['logs', 1024, false],
    ['logs', 1024, true],
    ['logs', 256 * 1024, false],
    ['traces', 1024, false],
    ['traces', 1024, true],
    ['traces', 256 * 1024, true],
  ] as const)('counts the records of %s fixtures of %i bytes (all kinds: %s)', (signal, targetBytes, allValueKinds) => {
    const gen = new FixtureGenerator(11, root);
    for (let i = 0; i < 5; i++) {
      const f = gen.request(signal, { targetBytes, allValueKinds, resources: 1 + (i % 3) });
      expect(validateExportRequest(signal, f.protobuf)).toBe(f.records);
      // The fast walk accepts these by itself: the exact walk is not needed for them.
      expect(fastWalk(ROOT_MSG[signal], f.protobuf)).toBe(f.records);
      expect(protobufjsCount(signal, f.protobuf)).toBe(f.records);
    }
  });

  it('accepts every AnyValue kind as a log body and as an attribute, encoded by protobufjs', () => {
    const values = [
      { stringValue: 'plain' },
      { stringValue: '' },
      { stringValue: 'héllo wörld ✓ 🚀'.repeat(10) },
      { boolValue: true },
      { boolValue: false },
      { intValue: '-9223372036854775808' },
      { intValue: '9223372036854775807' },
      { doubleValue: -0.5 },
      { doubleValue: NaN },
      { bytesValue: Buffer.from([0, 1, 2, 255]) },
      { arrayValue: { values: [{ stringValue: 'a' }, { intValue: '1' }, {}] } },
      { arrayValue: {} },
      { kvlistValue: { values: [{ key: 'k', value: { kvlistValue: { values: [{ key: 'x' }] } } }] } },
      { kvlistValue: {} },
      {},
    ];
    const logRecords = values.map((v) => ({ body: v, attributes: [{ key: 'v', value: v }] }));
    const logs = root.encodeLogsRequest({ resourceLogs: [{ scopeLogs: [{ logRecords }] }] });
    expect(validateExportRequest('logs', logs)).toBe(values.length);
    const spans = values.map((v, i) => ({ name: `s${i}`, attributes: [{ key: 'v', value: v }], events: [{ attributes: [{ key: 'v', value: v }] }] }));
    const traces = root.encodeTraceRequest({ resourceSpans: [{ scopeSpans: [{ spans }] }] });
    expect(validateExportRequest('traces', traces)).toBe(values.length);
  });

  it('skips unknown fields of every valid wire type in every message', () => {
    const unknowns: Bytes[] = [
      [...tag(99, 0), ...varint(2n ** 64n - 1n)],
      [...tag(100, 1), 1, 2, 3, 4, 5, 6, 7, 8],
      ld(101, [0xff, 0xfe, 0x00]), // unknown bytes are opaque: no UTF-8 check
      [...tag(102, 5), 1, 2, 3, 4],
      [...tag(536870911, 0), 1], // the largest field number
      ld(1000, []), // the reserved field of ResourceLogs
    ];
    for (const signal of SIGNALS) {
      for (const m of reachable(signal)) {
        const { body, records } = inRequest(signal, m, unknowns.flat());
        expect(validateExportRequest(signal, body), MESSAGES[m].name).toBe(records);
        expect(protobufjsCount(signal, body)).toBe(records);
      }
    }
  });

  it('accepts repeated and out-of-order fields, ids of the right length, and non-minimal varints', () => {
    const record = [
      ...ld(9, new Array(16).fill(7)),
      ...ld(10, new Array(8).fill(8)),
      ...tag(2, 0), 0x89, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, // 9 in 10 bytes
      ...tag(1, 1), 1, 2, 3, 4, 5, 6, 7, 8,
      ...ld(3, utf8('INFO')),
      ...ld(3, utf8('WARN')),
      ...tag(2, 0), ...varint(-1), // an int32 enum may be negative (10 bytes)
      ...ld(9, []),
    ];
    const { body } = inRequest('logs', Msg.LogRecord, record);
    expect(validateExportRequest('logs', body)).toBe(1);
    expect(protobufjsCount('logs', body)).toBe(1);
  });

  it(`accepts AnyValue nested exactly ${MAX_ANY_VALUE_DEPTH} levels deep`, () => {
    for (const via of ['array', 'kvlist'] as const) {
      const { body } = inRequest('logs', Msg.LogRecord, ld(5, nestedAnyValue(MAX_ANY_VALUE_DEPTH, via)));
      expect(validateExportRequest('logs', body)).toBe(1);
    }
  });

  it('reads bodies at an offset in a larger buffer and in shared memory', () => {
    const f = new FixtureGenerator(5, root).logs({ targetBytes: 4096, allValueKinds: true });
    const big = new Uint8Array(f.protobuf.length + 20).fill(0xff);
    big.set(f.protobuf, 7);
    expect(validateExportRequest('logs', big.subarray(7, 7 + f.protobuf.length))).toBe(f.records);
    const shared = new Uint8Array(new SharedArrayBuffer(f.protobuf.length + 3), 3);
    shared.set(f.protobuf);
    expect(validateExportRequest('logs', shared)).toBe(f.records);
  });
});

/**
 * An AnyValue holding `depth` levels of AnyValue in total (nested through
 * arrays or key-value lists), built from the inside out in linear time.
 */
function nestedAnyValue(depth: number, via: 'array' | 'kvlist'): number[] {
  const leaf = ld(1, utf8('leaf'));
  const prefixes: number[][] = [];
  let innerLen = leaf.length;
  for (let level = 1; level < depth; level++) {
    let prefix: number[];
    if (via === 'array') {
      const arrayLen = 1 + varint(innerLen).length + innerLen;
      prefix = [...tag(5, 2), ...varint(arrayLen), ...tag(1, 2), ...varint(innerLen)];
    } else {
      const kvLen = 3 + 1 + varint(innerLen).length + innerLen;
      const listLen = 1 + varint(kvLen).length + kvLen;
      prefix = [...tag(6, 2), ...varint(listLen), ...tag(1, 2), ...varint(kvLen), ...ld(1, utf8('k')), ...tag(2, 2), ...varint(innerLen)];
    }
    prefixes.push(prefix);
    innerLen += prefix.length;
  }
  const out: number[] = [];
  for (let i = prefixes.length - 1; i >= 0; i--) for (const b of prefixes[i]) out.push(b);
  for (const b of leaf) out.push(b);
  return out;
}

// ---- refusing --------------------------------------------------------------------

describe('validateExportRequest refuses bad bodies with a 400 that names the cause', () => {
  const logRecord = (content: Bytes): Uint8Array => inRequest('logs', Msg.LogRecord, content).body;
  const span = (content: Bytes): Uint8Array => inRequest('traces', Msg.Span, content).body;

  const table: [string, Signal, Uint8Array, RegExp][] = [
    ['field number 0', 'logs', u8([0x00, 0x00]), /field number 0 at offset 0 in ExportLogsServiceRequest/],
    ['field number 0 nested', 'logs', logRecord([0x02, 0x01, 0x00]), /field number 0 at offset \d+ in LogRecord/],
    ['start-group wire type, unknown field', 'logs', u8(tag(7, 3), tag(7, 4)), /field 7 of ExportLogsServiceRequest has group wire type 3/],
    ['end-group wire type', 'traces', u8(tag(50, 4)), /group wire type 4/],
    ['group wire type on a known field', 'logs', u8(tag(1, 3)), /ExportLogsServiceRequest.resource_logs \(field 1\) has wire type 3 \(start-group\).*expected 2/],
    ['wire type 6', 'logs', logRecord(tag(40, 6)), /field 40 of LogRecord has invalid wire type 6/],
    ['wire type 7', 'traces', span(tag(3, 7)), /Span.trace_state \(field 3\) has wire type 7/],
    ['message field as varint', 'logs', u8(tag(1, 0), [1]), /resource_logs \(field 1\) has wire type 0 \(varint\).*expected 2 \(length-delimited\)/],
    ['fixed64 field as varint', 'logs', logRecord([...tag(1, 0), 5]), /LogRecord.time_unix_nano \(field 1\) has wire type 0.*expected 1 \(fixed64\)/],
    ['enum field as length-delimited', 'logs', logRecord(ld(2, [9])), /LogRecord.severity_number \(field 2\) has wire type 2/],
    ['fixed32 field as fixed64', 'traces', span([...tag(16, 1), 0, 0, 0, 0, 0, 0, 0, 0]), /Span.flags \(field 16\) has wire type 1.*expected 5 \(fixed32\)/],
    ['string field as fixed32', 'traces', span([...tag(5, 5), 0, 0, 0, 0]), /Span.name \(field 5\) has wire type 5/],
    ['bool as fixed64', 'logs', inRequest('logs', Msg.AnyValue, [...tag(2, 1), 1, 0, 0, 0, 0, 0, 0, 0]).body, /AnyValue.bool_value \(field 2\) has wire type 1/],
    ['declared length 2^31', 'logs', u8(tag(1, 2), varint(2 ** 31), [0, 0]), /resource_logs \(field 1\) at offset 0 declares 2147483648 bytes, past the end of the enclosing ExportLogsServiceRequest \(2 bytes left\)/],
    ['declared length 2^32 - 1', 'traces', u8(tag(1, 2), varint(2 ** 32 - 1)), /declares 4294967295 bytes/],
    ['declared length 2^63 in 10 bytes', 'logs', u8(tag(1, 2), varint(2n ** 63n)), /declares \d+ bytes, past the end/],
    ['length past the enclosing message, not the body', 'logs', u8(ld(1, [...tag(3, 2), 5, 0x61]), ld(9, [1, 2, 3, 4, 5])), /ResourceLogs.schema_url \(field 3\) at offset 2 declares 5 bytes, past the end of the enclosing ResourceLogs \(1 bytes left\)/],
    ['length varint of 11 bytes', 'logs', u8(tag(1, 2), new Array(10).fill(0x80), [0]), /length varint longer than 10 bytes/],
    ['length varint overflowing 64 bits', 'logs', u8(tag(1, 2), new Array(9).fill(0x80), [0x02]), /length varint overflows 64 bits/],
    ['varint of 11 bytes', 'logs', logRecord([...tag(7, 0), ...new Array(10).fill(0xff), 0x01]), /varint longer than 10 bytes in LogRecord.dropped_attributes_count/],
    ['varint of 10 bytes overflowing 64 bits', 'logs', logRecord([...tag(7, 0), ...new Array(9).fill(0xff), 0x02]), /varint overflows 64 bits/],
    ['unknown varint of 11 bytes', 'traces', u8(tag(33, 0), new Array(10).fill(0x80), [0]), /varint longer than 10 bytes in field 33 of ExportTraceServiceRequest/],
    ['truncated varint at the end of the body', 'logs', u8(tag(15, 0), [0x80, 0x80]), /truncated varint/],
    ['truncated varint at the end of a nested message', 'logs', logRecord([...tag(7, 0), 0x80]), /truncated varint in LogRecord.dropped_attributes_count/],
    ['truncated tag', 'logs', u8([0x80]), /truncated tag at offset 0/],
    ['tag varint of 6 bytes', 'logs', u8([0x80, 0x80, 0x80, 0x80, 0x80, 0x00]), /tag varint too long/],
    ['tag above 2^32', 'logs', u8([0x80, 0x80, 0x80, 0x80, 0x10]), /tag varint too long/],
    ['truncated length', 'logs', u8(tag(1, 2)), /truncated length/],
    ['truncated fixed64', 'logs', logRecord([...tag(1, 1), 1, 2, 3]), /truncated fixed64 in LogRecord.time_unix_nano/],
    ['truncated fixed32', 'traces', span([...tag(16, 5), 1]), /truncated fixed32 in Span.flags/],
    ['log trace_id of 5 bytes', 'logs', logRecord(ld(9, [1, 2, 3, 4, 5])), /LogRecord.trace_id \(field 9\) at offset \d+ is 5 bytes, must be 0 or 16/],
    ['log trace_id of 17 bytes', 'logs', logRecord(ld(9, new Array(17).fill(1))), /is 17 bytes, must be 0 or 16/],
    ['log span_id of 16 bytes', 'logs', logRecord(ld(10, new Array(16).fill(1))), /LogRecord.span_id \(field 10\).* is 16 bytes, must be 0 or 8/],
    ['span trace_id of 8 bytes', 'traces', span(ld(1, new Array(8).fill(1))), /Span.trace_id \(field 1\).* is 8 bytes, must be 0 or 16/],
    ['span span_id of 7 bytes', 'traces', span(ld(2, new Array(7).fill(1))), /Span.span_id \(field 2\).* is 7 bytes, must be 0 or 8/],
    ['parent_span_id of 9 bytes', 'traces', span(ld(4, new Array(9).fill(1))), /Span.parent_span_id \(field 4\).* is 9 bytes, must be 0 or 8/],
    ['link trace_id of 1 byte', 'traces', inRequest('traces', Msg.SpanLink, ld(1, [1])).body, /Span.Link.trace_id \(field 1\).* is 1 bytes, must be 0 or 16/],
    ['link span_id of 32 bytes', 'traces', inRequest('traces', Msg.SpanLink, ld(2, new Array(32).fill(1))).body, /Span.Link.span_id \(field 2\).* is 32 bytes, must be 0 or 8/],
    ['AnyValue nested 33 levels in arrays', 'logs', logRecord(ld(5, nestedAnyValue(MAX_ANY_VALUE_DEPTH + 1, 'array'))), /AnyValue nested deeper than 32 levels/],
    ['AnyValue nested 33 levels in kvlists', 'traces', span(ld(9, [...ld(1, utf8('k')), ...ld(2, nestedAnyValue(MAX_ANY_VALUE_DEPTH + 1, 'kvlist'))])), /AnyValue nested deeper than 32 levels/],
    ['AnyValue nested 10,000 levels', 'logs', logRecord(ld(5, nestedAnyValue(10_000, 'array'))), /AnyValue nested deeper than 32 levels/],
    ['AnyValue nested 10,000 levels via kvlists', 'logs', logRecord(ld(6, [...ld(1, utf8('k')), ...ld(2, nestedAnyValue(10_000, 'kvlist'))])), /AnyValue nested deeper than 32 levels/],
  ];

  it.each(table)('%s', (_name, signal, body, message) => {
    expectBad(signal, body, message);
  });

  it('refuses invalid UTF-8 in every string field of every message, and accepts valid UTF-8 there', () => {
    const invalid: Bytes[] = [
      [0xff],
      [0xc0, 0x80], // overlong NUL
      [0xed, 0xa0, 0x80], // a UTF-16 surrogate
      [0xe2, 0x82], // truncated sequence
      [0xf4, 0x90, 0x80, 0x80], // above U+10FFFF
      [...utf8('a'.repeat(200)), 0x80], // past the ASCII fast path
      [...utf8('SECRET-'), 0xfe],
    ];
    let checked = 0;
    for (const signal of SIGNALS) {
      for (const m of reachable(signal)) {
        for (const f of MESSAGES[m].fields) {
          if (f.kind !== Kind.STRING) continue;
          const good = inRequest(signal, m, ld(f.number, utf8('ok ✓ 東京 🚀')));
          expect(validateExportRequest(signal, good.body)).toBe(good.records);
          for (const bad of invalid) {
            const { body } = inRequest(signal, m, ld(f.number, bad));
            expectBad(signal, body, new RegExp(`invalid UTF-8 in ${MESSAGES[m].name.replace('.', '\\.')}\\.${f.name} \\(field ${f.number}\\)`));
            checked++;
          }
        }
      }
    }
    // 12 string fields reachable from logs, 15 from traces: all of them were exercised.
    expect(checked).toBe((12 + 15) * invalid.length);
  });

  it('refuses an unknown signal as a programming error, not a body error', () => {
    expect(() => validateExportRequest('metrics' as Signal, new Uint8Array(0))).toThrow(
      expect.objectContaining({ name: 'TypeError', code: 'ERR_INVALID_ARG_VALUE' }),
    );
  });

  it('never echoes body content in its messages', () => {
    const { body } = inRequest('logs', Msg.KeyValue, ld(1, [...utf8('SECRET-TOKEN-abc'), 0xff]));
    try {
      validateExportRequest('logs', body);
      expect.unreachable('should have thrown');
    } catch (err) {
      expect((err as Error).message).not.toContain('SECRET');
    }
  });
});

// ---- robustness --------------------------------------------------------------------

describe('validateExportRequest on arbitrary input', () => {
  it('agrees with protobufjs on every prefix of valid bodies', () => {
    const gen = new FixtureGenerator(3, root);
    const bodies: [Signal, Uint8Array][] = [
      ['logs', gen.logs({ targetBytes: 1500, allValueKinds: true, resources: 3 }).protobuf],
      ['traces', gen.traces({ targetBytes: 1500, allValueKinds: true, resources: 2 }).protobuf],
    ];
    for (const [signal, full] of bodies) {
      let accepted = 0;
      for (let n = 0; n <= full.length; n++) {
        const prefix = full.subarray(0, n);
        const v = verdict(signal, prefix);
        const pj = protobufjsCount(signal, prefix);
        if (typeof v === 'number') {
          accepted++;
          expect(pj, `prefix ${n}`).toBe(v);
        } else {
          expect(pj, `prefix ${n}: ${v.message}`).toBeNull();
        }
      }
      // The empty prefix, the whole body and the cuts between top-level entries.
      expect(accepted).toBeGreaterThanOrEqual(3);
    }
  });

  it('answers random bytes with a count or a 400, never anything else', () => {
    const rng = new Rng(0x5eed);
    let accepted = 0;
    for (let i = 0; i < 5000; i++) {
      const body = new Uint8Array(rng.int(300));
      for (let k = 0; k < body.length; k++) body[k] = rng.int(256);
      const signal = SIGNALS[i & 1];
      const v = verdict(signal, body);
      if (typeof v === 'number') {
        accepted++;
        expect(protobufjsCount(signal, body)).toBe(v);
      }
    }
    expect(accepted).toBeLessThan(5000);
  });

  it('answers mutated valid bodies with a count or a 400, and counts agree with protobufjs when accepted', () => {
    const rng = new Rng(42);
    const gen = new FixtureGenerator(8, root);
    const bases: [Signal, Uint8Array][] = [
      ['logs', gen.logs({ targetBytes: 2048, allValueKinds: true }).protobuf],
      ['traces', gen.traces({ targetBytes: 2048, allValueKinds: true }).protobuf],
    ];
    let accepted = 0;
    let refused = 0;
    for (let i = 0; i < 4000; i++) {
      const [signal, base] = bases[i & 1];
      const body = Uint8Array.from(base);
      const flips = 1 + rng.int(3);
      for (let k = 0; k < flips; k++) body[rng.int(body.length)] = rng.int(256);
      const v = verdict(signal, body);
      if (typeof v === 'number') {
        accepted++;
        expect(protobufjsCount(signal, body)).toBe(v);
      } else {
        refused++;
      }
    }
    // Both outcomes occur, so both branches above were exercised.
    expect(accepted).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
  });
});
