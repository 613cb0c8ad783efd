import { describe, expect, it } from 'vitest';
import { BodyError } from '../../src/errors.js';
import { FixtureGenerator } from '../../src/otlp/fixtures.js';
import { ProtoRoot } from '../../src/otlp/proto-root.js';
import { describeRequest } from '../../src/otlp/summary.js';

const root = ProtoRoot.load();
type Obj = Record<string, unknown>;

describe('describeRequest', () => {
  it('gives each log body: strings as they are, other values as compact JSON', () => {
    const bodies: [Obj | undefined, string][] = [
      [{ stringValue: 'GET /api 200 — 12 ms ✓' }, 'GET /api 200 — 12 ms ✓'],
      [{ stringValue: 'line "quoted"\nnext' }, 'line "quoted"\nnext'],
      [{ stringValue: '' }, ''],
      [undefined, ''],
      [{}, ''],
      [{ boolValue: false }, 'false'],
      [{ intValue: '-9223372036854775808' }, '-9223372036854775808'],
      [{ intValue: '18' }, '18'],
      [{ doubleValue: 0.25 }, '0.25'],
      [{ doubleValue: NaN }, '"NaN"'],
      [{ doubleValue: -Infinity }, '"-Infinity"'],
      [{ bytesValue: Buffer.from([0, 1, 254, 255]) }, '"AAH+/w=="'],
      [{ arrayValue: { values: [{ stringValue: 'a' }, { intValue: '2' }, {}, { boolValue: true }] } }, '["a",2,null,true]'],
      [{ arrayValue: {} }, '[]'],
      [
        { kvlistValue: { values: [{ key: 'msg', value: { stringValue: 'hi "x"' } }, { key: 'n', value: { kvlistValue: { values: [{ key: 'deep', value: { arrayValue: { values: [{ doubleValue: 1.5 }] } } }] } } }, { key: 'none' }] } },
        '{"msg":"hi \\"x\\"","n":{"deep":[1.5]},"none":null}',
      ],
    ];
    const payload = root.encodeLogsRequest({
      resourceLogs: [
        { scopeLogs: [{ logRecords: bodies.slice(0, 7).map(([body]) => (body ? { body } : {})) }] },
        { scopeLogs: [{}, { logRecords: bodies.slice(7).map(([body]) => (body ? { body } : {})) }] },
      ],
    });
    expect(describeRequest('logs', payload)).toEqual(bodies.map(([, text]) => text));
  });

  it('gives each span name in order', () => {
    const payload = root.encodeTraceRequest({
      resourceSpans: [
        { scopeSpans: [{ spans: [{ name: 'GET /a' }, { name: '' }] }, { spans: [{ name: 'SELECT orders' }] }] },
        { scopeSpans: [{ spans: [{ name: 'ünïcode 🚀', kind: 2 }] }] },
      ],
    });
    expect(describeRequest('traces', payload)).toEqual(['GET /a', '', 'SELECT orders', 'ünïcode 🚀']);
  });

  it('matches the fixtures: one line per record, string bodies verbatim, structured ones as JSON', () => {
    const gen = new FixtureGenerator(21, root);
    const logs = gen.logs({ targetBytes: 8192, allValueKinds: true, resources: 2 });
    const records = (logs.otlpJson.resourceLogs as { scopeLogs: { logRecords: { body: Obj }[] }[] }[]).flatMap((r) =>
      r.scopeLogs.flatMap((s) => s.logRecords),
    );
    const lines = describeRequest('logs', logs.protobuf);
    expect(lines).toHaveLength(logs.records);
    records.forEach((rec, i) => {
      if (typeof rec.body.stringValue === 'string') expect(lines[i]).toBe(rec.body.stringValue);
      else expect(JSON.parse(lines[i])).toBeTypeOf('object');
    });
    const traces = gen.traces({ targetBytes: 4096 });
    const names = (traces.otlpJson.resourceSpans as { scopeSpans: { spans: { name: string }[] }[] }[]).flatMap((r) =>
      r.scopeSpans.flatMap((s) => s.spans.map((sp) => sp.name)),
    );
    expect(describeRequest('traces', traces.protobuf)).toEqual(names);
  });

  it('refuses a malformed payload with the validator\'s BodyError', () => {
    expect(() => describeRequest('logs', Uint8Array.from([0x0a, 0x05, 0x01]))).toThrow(BodyError);
    expect(describeRequest('logs', new Uint8Array(0))).toEqual([]);
  });
});
