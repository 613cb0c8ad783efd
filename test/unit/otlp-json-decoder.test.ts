import { describe, expect, it } from 'vitest';
import { BodyError } from '../../src/errors.js';
import { FixtureGenerator } from '../../src/otlp/fixtures.js';
import { MAX_MESSAGE_BYTES, MAX_UNKNOWN_VALUE_DEPTH, otlpJsonToProtobuf } from '../../src/otlp/json-decoder.js';
import { ProtoRoot } from '../../src/otlp/proto-root.js';
import type { Signal } from '../../src/otlp/schema.js';
import { validateExportRequest } from '../../src/otlp/wire-validator.js';

const root = ProtoRoot.load();
type Obj = Record<string, unknown>;

const conv = (signal: Signal, text: string | Uint8Array): { payload: Uint8Array; records: number } =>
  otlpJsonToProtobuf(signal, typeof text === 'string' ? Buffer.from(text, 'utf8') : text);

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

/** Decode with protobufjs: 64-bit integers as strings, bytes as base64, the oneof member named in `value`. */
const decode = (signal: Signal, payload: Uint8Array): Obj =>
  root.decodeRequest(signal, payload, { longs: String, enums: Number, bytes: String, oneofs: true });

function refusal(signal: Signal, body: string | Uint8Array): BodyError {
  try {
    conv(signal, body);
  } catch (err) {
    expect(err).toBeInstanceOf(BodyError);
    return err as BodyError;
  }
  return expect.unreachable('the body was accepted');
}

/** One log record's JSON inside a minimal logs request. */
const logJson = (record: string): string => `{"resourceLogs":[{"scopeLogs":[{"logRecords":[${record}]}]}]}`;
const anyJson = (value: string): string => logJson(`{"body":${value}}`);
/** The decoded body AnyValue of the first log record. */
function bodyOf(payload: Uint8Array): Obj {
  const d = decode('logs', payload) as { resourceLogs: { scopeLogs: { logRecords: Obj[] }[] }[] };
  return d.resourceLogs[0].scopeLogs[0].logRecords[0].body as Obj;
}
function recordOf(payload: Uint8Array): Obj {
  const d = decode('logs', payload) as { resourceLogs: { scopeLogs: { logRecords: Obj[] }[] }[] };
  return d.resourceLogs[0].scopeLogs[0].logRecords[0];
}

/** Map every key of a JSON value (not string values) through `f`; optionally reverse key order. */
function mapKeys(v: unknown, f: (k: string) => string, reverse = false): unknown {
  if (Array.isArray(v)) return v.map((e) => mapKeys(e, f, reverse));
  if (v !== null && typeof v === 'object') {
    const entries = Object.entries(v).map(([k, e]) => [f(k), mapKeys(e, f, reverse)] as const);
    return Object.fromEntries(reverse ? entries.reverse() : entries);
  }
  return v;
}
const snake = (k: string): string => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

// The examples of the OTLP specification repository (examples/logs.json, examples/trace.json).
const SPEC_LOGS = `{
  "resourceLogs": [{
    "resource": { "attributes": [{ "key": "service.name", "value": { "stringValue": "my.service" } }] },
    "scopeLogs": [{
      "scope": { "name": "my.library", "version": "1.0.0",
        "attributes": [{ "key": "my.scope.attribute", "value": { "stringValue": "some scope attribute" } }] },
      "logRecords": [{
        "timeUnixNano": "1544712660300000000",
        "observedTimeUnixNano": "1544712660300000000",
        "severityNumber": 10,
        "severityText": "Information",
        "traceId": "5B8EFFF798038103D269B633813FC60C",
        "spanId": "EEE19B7EC3C1B174",
        "body": { "stringValue": "Example log record" },
        "attributes": [
          { "key": "string.attribute", "value": { "stringValue": "some string" } },
          { "key": "boolean.attribute", "value": { "boolValue": true } },
          { "key": "int.attribute", "value": { "intValue": "10" } },
          { "key": "double.attribute", "value": { "doubleValue": 637.704 } },
          { "key": "array.attribute", "value": { "arrayValue": { "values": [{ "stringValue": "many" }, { "stringValue": "values" }] } } },
          { "key": "map.attribute", "value": { "kvlistValue": { "values": [{ "key": "some.map.key", "value": { "stringValue": "some value" } }] } } }
        ]
      }]
    }]
  }]
}`;

const SPEC_TRACE = `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"my.service"}}]},
  "scopeSpans":[{"scope":{"name":"my.library","version":"1.0.0","attributes":[{"key":"my.scope.attribute","value":{"stringValue":"some scope attribute"}}]},
  "spans":[{"traceId":"5B8EFFF798038103D269B633813FC60C","spanId":"EEE19B7EC3C1B174","parentSpanId":"EEE19B7EC3C1B173",
  "name":"I'm a server span","startTimeUnixNano":"1544712660000000000","endTimeUnixNano":"1544712661000000000","kind":2,
  "attributes":[{"key":"my.span.attr","value":{"stringValue":"some value"}}]}]}]}]}`;

describe('otlpJsonToProtobuf converts OTLP/JSON to canonical protobuf', () => {
  it('converts the specification examples to the bytes protobufjs encodes', () => {
    const logs = conv('logs', SPEC_LOGS);
    expect(logs.records).toBe(1);
    const spec = JSON.parse(SPEC_LOGS) as Obj;
    const record = (spec.resourceLogs as { scopeLogs: { logRecords: Obj[] }[] }[])[0].scopeLogs[0].logRecords[0];
    record.traceId = Buffer.from(record.traceId as string, 'hex');
    record.spanId = Buffer.from(record.spanId as string, 'hex');
    expect(hex(logs.payload)).toBe(hex(root.encodeLogsRequest(spec)));
    expect(recordOf(logs.payload)).toMatchObject({
      timeUnixNano: '1544712660300000000',
      severityNumber: 10,
      traceId: Buffer.from('5B8EFFF798038103D269B633813FC60C', 'hex').toString('base64'),
      body: { stringValue: 'Example log record' },
    });

    const traces = conv('traces', SPEC_TRACE);
    expect(traces.records).toBe(1);
    const tspec = JSON.parse(SPEC_TRACE) as Obj;
    const span = (tspec.resourceSpans as { scopeSpans: { spans: Obj[] }[] }[])[0].scopeSpans[0].spans[0];
    for (const k of ['traceId', 'spanId', 'parentSpanId']) span[k] = Buffer.from(span[k] as string, 'hex');
    expect(hex(traces.payload)).toBe(hex(root.encodeTraceRequest(tspec)));
  });

  it.each([
    ['logs', 1, 1024, false, 1],
    ['logs', 2, 1024, true, 2],
    ['logs', 3, 64 * 1024, true, 3],
    ['traces', 4, 1024, false, 1],
    ['traces', 5, 1024, true, 2],
    ['traces', 6, 64 * 1024, true, 3],
  ] as const)('reproduces %s fixture %i (%i bytes, all kinds %s, %i resources) byte for byte', (signal, seed, targetBytes, allValueKinds, resources) => {
    const gen = new FixtureGenerator(seed, root);
    for (let i = 0; i < 3; i++) {
      const f = gen.request(signal, { targetBytes, allValueKinds, resources });
      const out = conv(signal, f.json);
      expect(out.records).toBe(f.records);
      expect(hex(out.payload)).toBe(hex(f.protobuf));
      expect(validateExportRequest(signal, out.payload)).toBe(f.records);
    }
  });

  it('accepts the proto snake_case names, any key order and any whitespace, with the same result', () => {
    for (const signal of ['logs', 'traces'] as const) {
      const f = new FixtureGenerator(9, root).request(signal, { targetBytes: 48 * 1024, allValueKinds: true, resources: 2 });
      const variants = [
        JSON.stringify(mapKeys(f.otlpJson, snake)),
        JSON.stringify(mapKeys(f.otlpJson, (k) => k, true)),
        JSON.stringify(mapKeys(f.otlpJson, snake, true), null, '\t').replace(/\n/g, '\r\n'),
        ` \n${JSON.stringify(f.otlpJson, null, 2)}\n `,
      ];
      for (const text of variants) {
        const out = conv(signal, text);
        expect(out.records).toBe(f.records);
        expect(hex(out.payload)).toBe(hex(f.protobuf));
      }
    }
  });

  it('reads ids as hex in either case and writes them as 16 or 8 bytes', () => {
    const lower = conv('traces', SPEC_TRACE.replace(/"[0-9A-F]{16,32}"/g, (id) => id.toLowerCase()));
    const mixed = conv('traces', SPEC_TRACE.replace(/"[0-9A-F]{16,32}"/g, (id) => id.replace(/[A-F](.)/g, (m) => m.toLowerCase())));
    const upper = conv('traces', SPEC_TRACE);
    expect(lower.payload.length).toBeGreaterThan(0);
    expect(hex(mixed.payload)).toBe(hex(upper.payload));
    expect(hex(lower.payload)).toBe(hex(upper.payload));
    const span = (decode('traces', upper.payload) as { resourceSpans: { scopeSpans: { spans: Obj[] }[] }[] }).resourceSpans[0].scopeSpans[0].spans[0];
    expect(Buffer.from(span.traceId as string, 'base64').toString('hex')).toBe('5b8efff798038103d269b633813fc60c');
    expect(Buffer.from(span.parentSpanId as string, 'base64').toString('hex')).toBe('eee19b7ec3c1b173');
    // An empty id is the proto3 default: absent.
    expect(recordOf(conv('logs', logJson('{"traceId":"","spanId":"","severityNumber":1}')).payload)).toEqual({ severityNumber: 1 });
  });

  it('reads enums as integers (any int32) or as value names', () => {
    const rec = (v: string): Obj => recordOf(conv('logs', logJson(`{"severityNumber":${v}}`)).payload);
    expect(rec('"SEVERITY_NUMBER_WARN"').severityNumber).toBe(13);
    expect(rec('13').severityNumber).toBe(13);
    expect(rec('13.0').severityNumber).toBe(13);
    expect(rec('1.3e1').severityNumber).toBe(13);
    expect(rec('99').severityNumber).toBe(99);
    expect(rec('-1').severityNumber).toBe(-1);
    expect(rec('-2147483648').severityNumber).toBe(-2147483648);
    expect(rec('2147483647').severityNumber).toBe(2147483647);
    const t = conv('traces', '{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":"SPAN_KIND_CLIENT","status":{"code":"STATUS_CODE_ERROR","message":"m"}}]}]}]}');
    const span = (decode('traces', t.payload) as { resourceSpans: { scopeSpans: { spans: Obj[] }[] }[] }).resourceSpans[0].scopeSpans[0].spans[0];
    expect(span).toEqual({ kind: 3, status: { code: 2, message: 'm' } });
  });

  it('reads 64-bit integers exactly from strings and from numbers, in any exact notation', () => {
    const time = (v: string): unknown => recordOf(conv('logs', logJson(`{"timeUnixNano":${v}}`)).payload).timeUnixNano;
    expect(time('"1700000000000000001"')).toBe('1700000000000000001');
    expect(time('1700000000000000001')).toBe('1700000000000000001');
    expect(time('1.700000000000000001e18')).toBe('1700000000000000001');
    expect(time('"17e17"')).toBe('1700000000000000000');
    expect(time('18446744073709551615')).toBe('18446744073709551615');
    expect(time('1844674407370955161.5e1')).toBe('18446744073709551615');
    expect(time('0.0000000000000000000000000001e28')).toBe('1');
    expect(time('"-0"')).toBeUndefined(); // zero: the proto3 default, not written
    const int = (v: string): unknown => bodyOf(conv('logs', anyJson(`{"intValue":${v}}`)).payload).intValue;
    expect(int('"-1"')).toBe('-1');
    expect(int('-1')).toBe('-1');
    expect(int('"-9223372036854775808"')).toBe('-9223372036854775808');
    expect(int('9223372036854775807')).toBe('9223372036854775807');
    expect(int('0')).toBe('0'); // inside AnyValue's oneof a zero is written
    expect(int('1e0')).toBe('1');
    const dropped = (v: string): unknown => recordOf(conv('logs', logJson(`{"droppedAttributesCount":${v},"flags":${v}}`)).payload);
    expect(dropped('4294967295')).toEqual({ droppedAttributesCount: 4294967295, flags: 4294967295 });
    expect(dropped('"5"')).toEqual({ droppedAttributesCount: 5, flags: 5 });
    expect(dropped('0')).toEqual({});
  });

  it('reads doubles as numbers, numeric strings, NaN and the infinities', () => {
    const dbl = (v: string): unknown => bodyOf(conv('logs', anyJson(`{"doubleValue":${v}}`)).payload).doubleValue;
    expect(dbl('637.704')).toBe(637.704);
    expect(dbl('"637.704"')).toBe(637.704);
    expect(dbl('5')).toBe(5);
    expect(dbl('-5')).toBe(-5);
    expect(Object.is(dbl('-0'), -0)).toBe(true);
    expect(dbl('0')).toBe(0);
    expect(dbl('1e-300')).toBe(1e-300);
    expect(dbl('123456789012345678901234567890')).toBe(123456789012345678901234567890);
    expect(dbl('0.1')).toBe(0.1);
    expect(dbl('"Infinity"')).toBe(Infinity);
    expect(dbl('"-Infinity"')).toBe(-Infinity);
    expect(Number.isNaN(dbl('"NaN"'))).toBe(true);
  });

  it('reads bytesValue as base64 in both alphabets, padded or not', () => {
    const bytes = (v: string): unknown => bodyOf(conv('logs', anyJson(`{"bytesValue":${v}}`)).payload).bytesValue;
    expect(bytes('"AAEC/w=="')).toBe('AAEC/w==');
    expect(bytes('"AAEC_w"')).toBe('AAEC/w==');
    expect(bytes('"AAEC/w"')).toBe('AAEC/w==');
    expect(bytes('"+/+/"')).toBe('+/+/');
    expect(bytes('"-_-_"')).toBe('+/+/');
    expect(bytes('""')).toBe('');
    const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    expect(bytes(`"${all.toString('base64')}"`)).toBe(all.toString('base64'));
    expect(bytes(`"${all.toString('base64url')}"`)).toBe(all.toString('base64'));
  });

  it('decodes every string escape and keeps raw UTF-8', () => {
    const text = 'a"b\\c/d\b\f\n\r\t\u0000é€🚀 東京';
    const escaped = '"a\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u0000\\u00e9\\u20AC\\ud83d\\ude80 東京"';
    expect(bodyOf(conv('logs', anyJson(`{"stringValue":${escaped}}`)).payload).stringValue).toBe(text);
    expect(bodyOf(conv('logs', anyJson(`{"stringValue":${JSON.stringify(text)}}`)).payload).stringValue).toBe(text);
    // Escapes in keys and in hex ids are decoded before they are matched.
    const rec = recordOf(conv('logs', logJson('{"\\u0073everityText":"x","span\\u005fid":"\\u0030001020304050607"}')).payload);
    expect(rec).toEqual({ severityText: 'x', spanId: Buffer.from('0001020304050607', 'hex').toString('base64') });
  });

  it('treats null as absent for messages, scalars and repeated fields', () => {
    const plain = conv('logs', logJson('{"severityText":"x"}'));
    const nulls = conv(
      'logs',
      '{"resourceLogs":[{"resource":null,"schemaUrl":null,"scopeLogs":[{"scope":null,"logRecords":[{"severityText":"x","body":null,"attributes":null,"timeUnixNano":null,"traceId":null,"severityNumber":null,"flags":null}]}]}]}',
    );
    expect(hex(nulls.payload)).toBe(hex(plain.payload));
    expect(conv('logs', '{"resourceLogs":null}').payload.length).toBe(0);
    // A null member of AnyValue's oneof leaves room for the other.
    expect(bodyOf(conv('logs', anyJson('{"stringValue":null,"intValue":"3"}')).payload)).toEqual({ intValue: '3', value: 'intValue' });
  });

  it('takes {} and empty lists as an empty request', () => {
    for (const text of ['{}', ' {\n} ', '{"resourceLogs":[]}', '{"resource_logs":[ ]}']) {
      const out = conv('logs', text);
      expect(out.records).toBe(0);
      expect(out.payload.length).toBe(0);
    }
    expect(conv('traces', '{}').records).toBe(0);
  });

  it('omits proto3 defaults but writes present messages and zero oneof members', () => {
    const withDefaults = conv('logs', logJson('{"timeUnixNano":"0","severityNumber":0,"severityText":"","droppedAttributesCount":0,"flags":0,"eventName":"","attributes":[]}'));
    expect(hex(withDefaults.payload)).toBe(hex(conv('logs', logJson('{}')).payload));
    expect(withDefaults.records).toBe(1);
    // LogRecord{body: AnyValue{...}} exactly: tag 5, length, then the member.
    const body = (v: string): string => {
      const out = conv('logs', anyJson(v)).payload;
      return hex(out).slice(-8);
    };
    expect(body('{"intValue":"0"}')).toBe('2a021800');
    expect(body('{"boolValue":false}')).toBe('2a021000');
    expect(body('{"stringValue":""}')).toBe('2a020a00');
    expect(body('{"arrayValue":{}}')).toBe('2a022a00');
    expect(hex(conv('logs', anyJson('{}')).payload).slice(-4)).toBe('2a00');
  });

  it('counts records across resources and scopes', () => {
    const text = JSON.stringify({
      resourceLogs: [
        { scopeLogs: [{ logRecords: [{}, {}] }, { logRecords: [{}] }] },
        { scopeLogs: [{ logRecords: [{}, {}, {}] }, {}] },
        {},
      ],
    });
    expect(conv('logs', text).records).toBe(6);
    expect(validateExportRequest('logs', conv('logs', text).payload)).toBe(6);
  });

  it('allows AnyValue nested 32 levels deep', () => {
    let v = '{"stringValue":"leaf"}';
    for (let i = 1; i < 32; i++) v = i % 2 ? `{"arrayValue":{"values":[${v}]}}` : `{"kvlistValue":{"values":[{"key":"k","value":${v}}]}}`;
    const out = conv('logs', anyJson(v));
    expect(validateExportRequest('logs', out.payload)).toBe(1);
  });
});

describe('otlpJsonToProtobuf ignores unknown keys, as the specification requires', () => {
  // Every message of both requests, each field present at least once.
  const anyValues = (): Obj[] => [
    { stringValue: 's' },
    { boolValue: true },
    { intValue: '-7' },
    { doubleValue: 1.5 },
    { bytesValue: 'AAEC/w==' },
    { arrayValue: { values: [{ stringValue: 'a' }, { kvlistValue: { values: [{ key: 'k', value: { intValue: '1' } }] } }] } },
    { kvlistValue: { values: [{ key: 'k2', value: { arrayValue: { values: [{ boolValue: false }] } } }] } },
  ];
  const attrs = (): Obj[] => anyValues().map((value, i) => ({ key: `a${i}`, value }));
  const resource = (): Obj => ({
    attributes: attrs(),
    droppedAttributesCount: 1,
    entityRefs: [{ schemaUrl: 'u', type: 'service', idKeys: ['a0', 'a1'], descriptionKeys: ['a2'] }],
  });
  const scope = (): Obj => ({ name: 'lib', version: '1', attributes: attrs(), droppedAttributesCount: 2 });
  const FULL_LOGS: Obj = {
    resourceLogs: [
      {
        resource: resource(),
        schemaUrl: 'r',
        scopeLogs: [
          {
            scope: scope(),
            schemaUrl: 's',
            logRecords: [
              {
                timeUnixNano: '1700000000000000001',
                observedTimeUnixNano: '1700000000000000002',
                severityNumber: 9,
                severityText: 'INFO',
                body: { kvlistValue: { values: attrs() } },
                attributes: attrs(),
                droppedAttributesCount: 3,
                flags: 1,
                traceId: '5b8efff798038103d269b633813fc60c',
                spanId: 'eee19b7ec3c1b174',
                eventName: 'e',
              },
              {},
            ],
          },
        ],
      },
    ],
  };
  const FULL_TRACES: Obj = {
    resourceSpans: [
      {
        resource: resource(),
        schemaUrl: 'r',
        scopeSpans: [
          {
            scope: scope(),
            schemaUrl: 's',
            spans: [
              {
                traceId: '5b8efff798038103d269b633813fc60c',
                spanId: 'eee19b7ec3c1b174',
                traceState: 'k=v',
                parentSpanId: 'eee19b7ec3c1b173',
                flags: 257,
                name: 'span',
                kind: 2,
                startTimeUnixNano: '1700000000000000001',
                endTimeUnixNano: '1700000000000000002',
                attributes: attrs(),
                droppedAttributesCount: 1,
                events: [{ timeUnixNano: '1700000000000000003', name: 'ev', attributes: attrs(), droppedAttributesCount: 2 }],
                droppedEventsCount: 3,
                links: [{ traceId: '5b8efff798038103d269b633813fc60d', spanId: 'eee19b7ec3c1b175', traceState: 't', attributes: attrs(), droppedAttributesCount: 4, flags: 1 }],
                droppedLinksCount: 5,
                status: { message: 'm', code: 2 },
              },
            ],
          },
        ],
      },
    ],
  };

  // Values of every JSON kind, nested, as a newer OTLP version might send.
  const UNKNOWN_VALUES: unknown[] = [
    null,
    true,
    false,
    0,
    -1.5e-3,
    12345678901234567890,
    '',
    'text with "escapes" \\ \n \u0000 é 🚀',
    [],
    {},
    [1, 'two', [3, [4, [5]]], { six: { seven: [8, null] } }],
    { nested: { deeper: { deepest: [{ stringValue: 'looks like AnyValue' }, { resourceLogs: [] }] } }, list: [[], {}, [[]]] },
  ];
  let which = 0;
  /** Insert unknown keys before and after the known ones in every object of an OTLP/JSON tree. */
  function withUnknownKeys(v: unknown): unknown {
    if (Array.isArray(v)) return v.map(withUnknownKeys);
    if (v === null || typeof v !== 'object') return v;
    const known = Object.entries(v).map(([k, e]) => [k, withUnknownKeys(e)] as const);
    const before = UNKNOWN_VALUES[which++ % UNKNOWN_VALUES.length];
    const after = UNKNOWN_VALUES[which++ % UNKNOWN_VALUES.length];
    return Object.fromEntries([['futureField', before], ...known, ['future_field_2', after]]);
  }

  it('ignores unknown keys in every message, with values of every JSON kind, and writes the same bytes', () => {
    for (const [signal, request] of [
      ['logs', FULL_LOGS],
      ['traces', FULL_TRACES],
    ] as const) {
      const plain = conv(signal, JSON.stringify(request));
      expect(plain.records).toBeGreaterThan(0);
      for (const text of [JSON.stringify(withUnknownKeys(request)), JSON.stringify(withUnknownKeys(request), null, 2)]) {
        expect(text).toContain('futureField');
        const out = conv(signal, text);
        expect(out.records).toBe(plain.records);
        expect(hex(out.payload)).toBe(hex(plain.payload));
      }
    }
  });

  it('ignores unknown keys throughout generated fixtures, byte for byte', () => {
    for (const signal of ['logs', 'traces'] as const) {
      const f = new FixtureGenerator(21, root).request(signal, { targetBytes: 32 * 1024, allValueKinds: true, resources: 2 });
      const out = conv(signal, JSON.stringify(withUnknownKeys(f.otlpJson)));
      expect(out.records).toBe(f.records);
      expect(hex(out.payload)).toBe(hex(f.protobuf));
    }
  });

  it('ignores unknown keys at the top level, in any position', () => {
    const plain = hex(conv('logs', SPEC_LOGS).payload);
    const spec = JSON.parse(SPEC_LOGS) as Obj;
    expect(hex(conv('logs', JSON.stringify({ resourceSpans: [{}], ...spec })).payload)).toBe(plain);
    expect(hex(conv('logs', JSON.stringify({ ...spec, partialSuccess: { rejected: 1 } })).payload)).toBe(plain);
    expect(conv('logs', '{"unknown":{"a":[1,{"b":null}]}}').payload.length).toBe(0);
    expect(conv('traces', '{ "x" : [ ] , "y" : { } }').records).toBe(0);
  });

  it('does not let an unknown key count as a known one', () => {
    const rec = (r: string): Obj => recordOf(conv('logs', logJson(r)).payload);
    // A key of another message, a key in the wrong case, and a near miss are all unknown here.
    expect(rec('{"resourceLogs":[{"x":1}],"severityText":"x"}')).toEqual({ severityText: 'x' });
    expect(rec('{"TraceId":"zz","SeverityText":1,"severityText":"x"}')).toEqual({ severityText: 'x' });
    expect(rec('{"severity":9,"severityNumber":9}')).toEqual({ severityNumber: 9 });
    // The same unknown key twice is not a duplicate; a known key beside it still counts once.
    expect(rec('{"x":1,"x":[2],"severityText":"a","x":{}}')).toEqual({ severityText: 'a' });
    // Unknown keys in AnyValue are not members of its oneof.
    expect(bodyOf(conv('logs', anyJson('{"futureValue":{"a":1},"stringValue":"s","otherValue":2}')).payload)).toEqual({ stringValue: 's', value: 'stringValue' });
    expect(hex(conv('logs', anyJson('{"futureValue":"x"}')).payload)).toBe(hex(conv('logs', anyJson('{}')).payload));
    // Escapes in an unknown key are decoded before matching, and a key that decodes to a known name is known.
    expect(rec('{"sev\\u0065rityText":"x","\\u00e9":1}')).toEqual({ severityText: 'x' });
  });

  it(`skips unknown values nested up to ${MAX_UNKNOWN_VALUE_DEPTH} levels, and long flat ones`, () => {
    const plain = hex(conv('logs', logJson('{"severityText":"x"}')).payload);
    const nest = (n: number, open: string, close: string, leaf: string): string => `${open.repeat(n - 1)}${leaf}${close.repeat(n - 1)}`;
    for (const v of [
      nest(MAX_UNKNOWN_VALUE_DEPTH, '[', ']', '[]'),
      nest(MAX_UNKNOWN_VALUE_DEPTH, '[', ']', '[1]'),
      nest(MAX_UNKNOWN_VALUE_DEPTH, '{"a":', '}', '{}'),
      nest(MAX_UNKNOWN_VALUE_DEPTH / 2, '{"a":[', ']}', '{"b":[]}'),
    ]) {
      expect(hex(conv('logs', logJson(`{"u":${v},"severityText":"x"}`)).payload)).toBe(plain);
    }
    const flat = `[${Array.from({ length: 100_000 }, (_, i) => (i % 3 === 0 ? '{"k":[1,2]}' : i % 3 === 1 ? '"s"' : '[null]')).join(',')}]`;
    expect(hex(conv('logs', logJson(`{"u":${flat},"severityText":"x"}`)).payload)).toBe(plain);
    // The depth allowance is per unknown value, not cumulative across siblings.
    const deep = nest(MAX_UNKNOWN_VALUE_DEPTH, '[', ']', '[]');
    expect(hex(conv('logs', logJson(`{"u":[${deep.slice(1, -1)}],"v":${deep},"severityText":"x"}`)).payload)).toBe(plain);
  });
});

describe('otlpJsonToProtobuf refuses invalid bodies with a 400 naming the cause, then the place', () => {
  const deepArrays = (n: number): string => anyJson(`${'{"arrayValue":{"values":['.repeat(n)}{}${']}}'.repeat(n)}`);
  const deepKvlists = (n: number): string =>
    anyJson(`${'{"kvlistValue":{"values":[{"key":"k","value":'.repeat(n)}{}${'}]}}'.repeat(n)}`);
  const R = '$.resourceLogs[0].scopeLogs[0].logRecords[0]';
  /** R, elided as a longer path's head. */
  const H = '$.resourceLogs[0].scopeLogs[0]…';
  const esc = (s: string): string => s.replace(/[$.[\]()]/g, (c) => `\\${c}`);
  const unknownNested = (n: number, open: string, close: string): string => logJson(`{"u":${open.repeat(n)}${close.repeat(n)}}`);
  const D = MAX_UNKNOWN_VALUE_DEPTH;
  const tooDeep = new RegExp(`^invalid OTLP/JSON: unknown key's value nested deeper than ${D} levels at ${esc(R)}$`);
  const spans = (span: string): string => `{"resourceSpans":[{"scopeSpans":[{"spans":[${span}]}]}]}`;

  /** Bodies that are not JSON: "invalid JSON: <cause> at byte <n> in <path>". */
  const malformed: [string, Signal, string | Uint8Array, RegExp][] = [
    ['an empty body', 'logs', '', /^invalid JSON: unexpected end of body \(.*\) at byte 0 in \$$/],
    ['whitespace only', 'logs', ' \n', /unexpected end of body/],
    ['a top-level array', 'logs', '[]', /the top level must be an object/],
    ['a top-level null', 'logs', 'null', /the top level must be an object/],
    ['a top-level string', 'traces', '"x"', /the top level must be an object/],
    ['a top-level number', 'traces', '1', /the top level must be an object/],
    ['100,000 nested arrays', 'logs', '['.repeat(100_000), /the top level must be an object/],
    ['a byte-order mark', 'logs', '\ufeff{}', /the top level must be an object/],
    ['an unterminated object', 'logs', '{', /unexpected end of body/],
    ['an unterminated array', 'logs', '{"resourceLogs":[', /unexpected end of body .* at byte 17 in \$\.resourceLogs\[0\]$/],
    ['a trailing comma in an object', 'logs', '{"resourceLogs":[],}', /expected a key/],
    ['a trailing comma in an array', 'logs', '{"resourceLogs":[{},]}', /expected a value/],
    ['data after the object', 'logs', '{} {}', /^invalid JSON: unexpected data after the top-level object at byte 3 in \$$/],
    ['single quotes', 'logs', "{'resourceLogs':[]}", /expected a key/],
    ['a comment', 'logs', '{/* c */}', /expected a key/],
    ['a missing colon', 'logs', '{"resourceLogs" []}', /expected ':'/],
    ['a bare NaN', 'logs', anyJson('{"doubleValue":NaN}'), /expected a value/],
    ['a leading zero', 'logs', logJson('{"flags":01}'), new RegExp(`^invalid JSON: expected ',' or '}' at byte \\d+ in ${esc(R)}\\.flags$`)],
    ['a leading plus', 'logs', logJson('{"flags":+1}'), /expected a value/],
    ['a bare minus', 'logs', logJson('{"flags":-}'), /invalid number/],
    ['a fraction without digits', 'logs', logJson('{"flags":1.}'), /invalid number/],
    ['an exponent without digits', 'logs', logJson('{"flags":1e}'), /invalid number/],
    ['a misspelled literal', 'logs', anyJson('{"boolValue":tru}'), new RegExp(`^invalid JSON: invalid literal at byte \\d+ in ${esc(H)}body\\.boolValue$`)],
    ['invalid UTF-8', 'logs', Buffer.concat([Buffer.from(anyJson('{"stringValue":"a').slice(0, -3)), Buffer.from([0xff]), Buffer.from('"}}]}]}]}')]), /body is not valid UTF-8/],
    ['a raw control character in a string', 'logs', anyJson('{"stringValue":"a\nb"}'), /control character in a string/],
    ['an invalid escape', 'logs', anyJson('{"stringValue":"\\x41"}'), /invalid escape/],
    ['a short \\u escape', 'logs', anyJson('{"stringValue":"\\u12"}'), /invalid \\u escape/],
    ['a lone high surrogate', 'logs', anyJson('{"stringValue":"\\ud800"}'), /unpaired surrogate/],
    ['a lone low surrogate', 'logs', anyJson('{"stringValue":"\\udc00x"}'), /unpaired surrogate/],
    ['an unterminated string', 'logs', '{"resourceLogs', /unterminated string/],
    // The value of an unknown key is skipped, but it must still be JSON.
    ['an unknown key without a value', 'logs', logJson('{"u":}'), new RegExp(`expected a value at byte \\d+ in ${esc(R)}$`)],
    ['an unknown key without a colon', 'logs', logJson('{"u" 1}'), /expected ':'/],
    ['an unknown value with a trailing comma in an array', 'logs', logJson('{"u":[1,]}'), /expected a value/],
    ['an unknown value with a trailing comma in an object', 'logs', logJson('{"u":{"a":1,}}'), /expected a key/],
    ['an unknown value with a key but no value', 'logs', logJson('{"u":{"a"}}'), /expected ':'/],
    ['an unknown value with a number as a key', 'logs', '{"u":{1:2}}', /expected a key/],
    ['an unknown value missing a comma', 'logs', '{"u":[1 2]}', /expected ',' or '\]'/],
    ['an unknown value missing a comma in an object', 'logs', '{"u":{"a":1 "b":2}}', /expected ',' or '\}'/],
    ['an unknown value with mismatched brackets', 'logs', '{"u":[}]}', /expected a value/],
    ['an unknown value with mismatched closers', 'logs', '{"u":{"a":[1}}', /expected ',' or '\]'/],
    ['an unknown value unterminated', 'logs', '{"u":[[{"a":[', /unexpected end of body/],
    ['an unknown value with a leading zero', 'logs', '{"u":01}', /expected ',' or '\}'/],
    ['an unknown value as a bare word', 'logs', '{"u":nul}', /invalid literal/],
    ['an unknown value as NaN', 'logs', '{"u":NaN}', /expected a value/],
    ['an unknown value in single quotes', 'logs', "{\"u\":'x'}", /expected a value/],
    ['an unknown value with a bad number', 'logs', '{"u":[-]}', /invalid number/],
    ['an unknown value with a bad exponent', 'logs', '{"u":{"a":1e+}}', /invalid number/],
    ['an unknown value with an invalid escape', 'logs', '{"u":["\\q"]}', /invalid escape/],
    ['an unknown value with a lone surrogate', 'logs', '{"u":{"\\ud800":1}}', /unpaired surrogate/],
    ['an unknown value with a control character', 'logs', '{"u":"a\tb"}', /control character in a string/],
    ['an unknown value with a comment', 'logs', '{"u":[/**/]}', /expected a value/],
    ['an unknown key unterminated', 'logs', '{"resourceLogs":[],"u', /unterminated string/],
  ];

  /** JSON that is not a valid OTLP request: "invalid OTLP/JSON: <cause> at <path>". */
  const invalid: [string, Signal, string | Uint8Array, RegExp][] = [
    ['a duplicate key', 'logs', logJson('{"severityText":"a","severityText":"b"}'), new RegExp(`duplicate key \\(severityText / severity_text\\) at ${esc(R)}\\.severityText$`)],
    ['one field in both spellings', 'logs', logJson('{"severityText":"a","severity_text":"b"}'), /duplicate key \(severityText \/ severity_text\)/],
    ['a duplicate key beside unknown ones', 'logs', logJson('{"u":1,"flags":1,"v":[],"flags":2}'), /duplicate key \(flags \/ flags\)/],
    ['resourceLogs as an object', 'logs', '{"resourceLogs":{}}', /^invalid OTLP\/JSON: expected an array, got an object at \$\.resourceLogs$/],
    ['resourceLogs as a string', 'logs', '{"resourceLogs":"x"}', /expected an array, got a string/],
    ['a null record', 'logs', '{"resourceLogs":[{"scopeLogs":[{"logRecords":[{},null]}]}]}', /expected an object, got null at \$\.resourceLogs\[0\]\.scopeLogs\[0\]\.logRecords\[1\]$/],
    ['a record as an array', 'logs', '{"resourceLogs":[{"scopeLogs":[{"logRecords":[[]]}]}]}', /expected an object, got an array at .*logRecords\[0\]$/],
    ['resource as an array', 'logs', '{"resourceLogs":[{"resource":[]}]}', /expected an object, got an array at \$\.resourceLogs\[0\]\.resource$/],
    ['body as a string', 'logs', logJson('{"body":"text"}'), new RegExp(`expected an object, got a string at ${esc(R)}\\.body$`)],
    ['severityText as a number', 'logs', logJson('{"severityText":9}'), /expected a string, got a number at .*\.severityText$/],
    ['severityNumber as a boolean', 'logs', logJson('{"severityNumber":true}'), /expected an integer, got a boolean at .*\.severityNumber$/],
    ['severityNumber as a numeric string', 'logs', logJson('{"severityNumber":"9"}'), /unknown SeverityNumber name/],
    ['an unknown enum name', 'traces', spans('{"kind":"SPAN_KIND_SERVERS"}'), /unknown SpanKind name at .*spans\[0\]\.kind$/],
    ['an enum above int32', 'logs', logJson('{"severityNumber":2147483648}'), /integer out of range for int32 enum/],
    ['an enum below int32', 'logs', logJson('{"severityNumber":-2147483649}'), /out of range for int32 enum/],
    ['a fractional integer', 'logs', logJson('{"severityNumber":1.5}'), /expected an integer, got a fraction/],
    ['a fractional integer in a string', 'logs', anyJson('{"intValue":"1.5"}'), /expected an integer, got a fraction/],
    ['a tiny exponent', 'logs', anyJson('{"intValue":1e-1}'), /got a fraction/],
    ['a negative uint32', 'logs', logJson('{"droppedAttributesCount":-1}'), /integer out of range for uint32 at .*\.droppedAttributesCount$/],
    ['a uint32 of 2^32', 'logs', logJson('{"droppedAttributesCount":4294967296}'), /out of range for uint32/],
    ['a fixed32 of 1e10', 'logs', logJson('{"flags":1e10}'), /integer out of range for fixed32 at .*\.flags$/],
    ['a huge exponent', 'logs', logJson('{"flags":1e999999999}'), /out of range for fixed32/],
    ['a non-numeric string for an integer', 'logs', logJson('{"droppedAttributesCount":"abc"}'), /expected an integer, got a non-numeric string/],
    ['an empty string for an integer', 'logs', logJson('{"timeUnixNano":""}'), /expected an integer, got a non-numeric string/],
    ['a padded numeric string', 'logs', logJson('{"timeUnixNano":" 1"}'), /non-numeric string/],
    ['a negative fixed64', 'logs', logJson('{"timeUnixNano":"-1"}'), /integer out of range for fixed64 at .*\.timeUnixNano$/],
    ['a fixed64 of 2^64', 'logs', logJson('{"timeUnixNano":"18446744073709551616"}'), /out of range for fixed64/],
    ['an int64 of 2^63', 'logs', anyJson('{"intValue":"9223372036854775808"}'), new RegExp(`integer out of range for int64 at ${esc(H)}body\\.intValue$`)],
    ['an int64 below -2^63', 'logs', anyJson('{"intValue":-9223372036854775809}'), /out of range for int64/],
    ['an integer as an object', 'logs', anyJson('{"intValue":{}}'), /expected an integer, got an object/],
    ['a traceId of 30 hex digits', 'logs', logJson(`{"traceId":"${'ab'.repeat(15)}"}`), new RegExp(`must be 32 hex digits or empty, not 30 characters at ${esc(R)}\\.traceId$`)],
    ['a traceId in base64', 'logs', logJson('{"traceId":"W47/95gDgQPSabYzgT/GDA=="}'), /must be 32 hex digits or empty, not 24 characters at .*\.traceId$/],
    ['a traceId with non-hex digits', 'logs', logJson(`{"traceId":"${'zz'.repeat(16)}"}`), /not a hex string at .*\.traceId$/],
    ['a spanId of 32 hex digits', 'logs', logJson(`{"spanId":"${'ab'.repeat(16)}"}`), /must be 16 hex digits or empty, not 32 characters at .*\.spanId$/],
    ['a parentSpanId of 15 digits', 'traces', spans(`{"parentSpanId":"${'a'.repeat(15)}"}`), /must be 16 hex digits or empty, not 15 characters at .*\.parentSpanId$/],
    ['a link traceId as a number', 'traces', spans('{"links":[{"traceId":5}]}'), /^invalid OTLP\/JSON: expected a hex string, got a number at \$\.resourceSpans\[0\]\.scopeSpans\[0\]…links\[0\]\.traceId$/],
    ['invalid base64 characters', 'logs', anyJson('{"bytesValue":"!!!!"}'), /not valid base64 at .*body\.bytesValue$/],
    ['a base64 length of 5', 'logs', anyJson('{"bytesValue":"abcde"}'), /not valid base64 \(bad length or padding\)/],
    ['misplaced base64 padding', 'logs', anyJson('{"bytesValue":"ab=c"}'), /not valid base64/],
    ['a string value as a number', 'logs', anyJson('{"stringValue":1}'), /expected a string, got a number at .*body\.stringValue$/],
    ['a boolean as a string', 'logs', anyJson('{"boolValue":"true"}'), /expected true or false, got a string at .*\.boolValue$/],
    ['a double as non-numeric text', 'logs', anyJson('{"doubleValue":"abc"}'), /expected a number, got a non-numeric string at .*\.doubleValue$/],
    ['a double as lower-case nan', 'logs', anyJson('{"doubleValue":"nan"}'), /non-numeric string/],
    ['a double beyond its range', 'logs', anyJson('{"doubleValue":1e400}'), /number out of range for a double/],
    ['two AnyValue members', 'logs', anyJson('{"stringValue":"a","intValue":"1"}'), /AnyValue sets more than one of its value keys at .*body\.intValue$/],
    ['two AnyValue members around an unknown key', 'logs', anyJson('{"stringValue":"a","futureValue":1,"intValue":"1"}'), /AnyValue sets more than one of its value keys/],
    ['a key as a number', 'logs', '{"resourceLogs":[{"resource":{"attributes":[{"key":1}]}}]}', /expected a string, got a number at \$\.resourceLogs\[0\]\.resource\.attributes\[0\]\.key$/],
    ['AnyValue nested 33 levels in arrays', 'logs', deepArrays(32), new RegExp(`^invalid OTLP/JSON: AnyValue nested deeper than 32 levels at ${esc(H)}arrayValue\\.values\\[0\\]$`)],
    ['AnyValue nested 10,000 levels in arrays', 'logs', deepArrays(10_000), /^invalid OTLP\/JSON: AnyValue nested deeper than 32 levels at \$\.resourceLogs\[0\]\.scopeLogs\[0\]…/],
    ['AnyValue nested 10,000 levels in kvlists', 'logs', deepKvlists(10_000), /^invalid OTLP\/JSON: AnyValue nested deeper than 32 levels at \$\.resourceLogs\[0\]\.scopeLogs\[0\]…values\[0\]\.value$/],
    ['an entity id key as a number', 'logs', '{"resourceLogs":[{"resource":{"entityRefs":[{"idKeys":["a",1]}]}}]}', /expected a string, got a number at \$\.resourceLogs\[0\]\.resource\.entityRefs\[0\]\.idKeys\[1\]$/],
    // The value of an unknown key may nest at most MAX_UNKNOWN_VALUE_DEPTH arrays and objects.
    [`an unknown value nested ${D + 1} arrays deep`, 'logs', unknownNested(D + 1, '[', ']'), tooDeep],
    [`an unknown value nested ${D + 1} objects deep`, 'logs', logJson(`{"u":${'{"a":'.repeat(D)}{}${'}'.repeat(D)}}`), tooDeep],
    [`an unknown value nested ${D + 1} levels, mixed`, 'logs', logJson(`{"u":${'[{"a":'.repeat((D + 2) / 2)}1${'}]'.repeat((D + 2) / 2)}}`), tooDeep],
    ['an unknown value nested 100,000 arrays deep', 'logs', unknownNested(100_000, '[', ']'), tooDeep],
    ['an unknown value opening 1,000,000 arrays', 'logs', logJson(`{"u":${'['.repeat(1_000_000)}`), tooDeep],
    ['an unknown value opening 100,000 objects', 'logs', logJson(`{"u":${'{"a":'.repeat(100_000)}`), tooDeep],
    ['an unknown top-level value nested too deep', 'traces', `{"u":${'['.repeat(D + 1)}${']'.repeat(D + 1)}}`, new RegExp(`unknown key's value nested deeper than ${D} levels at \\$$`)],
  ];

  /** Bodies whose paths are as long as the schema and a large body allow. */
  const many = (n: number, item: string): string => Array.from({ length: n }, () => item).join(',');
  const N = 20_000;
  const long: [string, Signal, string | Uint8Array][] = [
    [
      'a duplicate droppedAttributesCount deep in a big body',
      'traces',
      `{"resourceSpans":[${many(N, '{}')},{"scopeSpans":[${many(N, '{}')},{"spans":[${many(N, '{}')},{"events":[${many(N, '{}')},{"droppedAttributesCount":1,"dropped_attributes_count":2}]}]}]}]}`,
    ],
    [
      'a bad value deep in attributes with big indexes',
      'logs',
      `{"resourceLogs":[${many(N, '{}')},{"scopeLogs":[${many(N, '{}')},{"logRecords":[${many(N, '{}')},{"attributes":[${many(N, '{"key":"k"}')},{"key":"k","value":{"kvlistValue":{"values":[${many(N, '{"key":"k"}')},{"key":"k","value":{"intValue":"1","doubleValue":2}}]}}}]}]}]}]}`,
    ],
    [
      'a syntax error deep in a big body',
      'logs',
      `{"resourceLogs":[${many(N, '{}')},{"scopeLogs":[${many(N, '{}')},{"logRecords":[${many(N, '{}')},{"attributes":[${many(N, '{"key":"k"}')},{"key":"k","value":{"kvlistValue":{"values":[${many(N, '{"key":"k"}')},{"key":"k","value":{"doubleValue":1e}}]}}}]}]}]}]}`,
    ],
    ['an over-deep unknown value deep in a big body', 'logs', anyJson(`{"kvlistValue":{"values":[${many(N, '{"key":"k"}')},{"key":"k","value":{"u":${'['.repeat(D + 1)}}}]}}`)],
  ];

  function expectRefused(signal: Signal, body: string | Uint8Array, message: RegExp, prefix: string): void {
    const e = refusal(signal, body);
    expect(e.code).toBe('SIGLAKE_BAD_BODY');
    expect(e.httpStatus).toBe(400);
    expect(e.message.startsWith(prefix)).toBe(true);
    expect(e.message).toMatch(message);
    expect(e.message).not.toContain('\n');
    expect(Buffer.byteLength(e.message)).toBeLessThan(200);
  }

  it.each(malformed)('malformed: %s', (_name, signal, body, message) => expectRefused(signal, body, message, 'invalid JSON: '));
  it.each(invalid)('invalid: %s', (_name, signal, body, message) => expectRefused(signal, body, message, 'invalid OTLP/JSON: '));

  it('keeps every message under 200 bytes with its cause first, so a 240-byte slot never cuts the cause', () => {
    const rows: [Signal, string | Uint8Array, string][] = [
      ...malformed.map(([, signal, body]) => [signal, body, 'invalid JSON: '] as [Signal, string | Uint8Array, string]),
      ...invalid.map(([, signal, body]) => [signal, body, 'invalid OTLP/JSON: '] as [Signal, string | Uint8Array, string]),
      ...long.map(([name, signal, body]) => [signal, body, name.startsWith('a syntax') ? 'invalid JSON: ' : 'invalid OTLP/JSON: '] as [Signal, string | Uint8Array, string]),
    ];
    for (const [signal, body, prefix] of rows) {
      const m = refusal(signal, body).message;
      expect(m.startsWith(prefix), m).toBe(true);
      expect(Buffer.byteLength(m), m).toBeLessThan(200);
      // The cause comes before any path: nothing between the prefix and the cause names a place.
      const cause = m.slice(prefix.length);
      expect(cause, m).not.toMatch(/^(at |\$)/);
    }
    const deepest = refusal('logs', deepArrays(10_000)).message;
    expect(deepest).toBe('invalid OTLP/JSON: AnyValue nested deeper than 32 levels at $.resourceLogs[0].scopeLogs[0]…arrayValue.values[0]');
  });

  it('keeps the messages of big bodies, with long indexes, within MAX_MESSAGE_BYTES', () => {
    const [, signal, body] = long[0];
    const m = refusal(signal, body).message;
    expect(m).toMatch(/^invalid OTLP\/JSON: duplicate key \(droppedAttributesCount \/ dropped_attributes_count\) at \$.*….*droppedAttributesCount$/);
    expect(Buffer.byteLength(m)).toBeLessThanOrEqual(MAX_MESSAGE_BYTES);
    for (const [, sig, b] of long) {
      const msg = refusal(sig, b).message;
      expect(Buffer.byteLength(msg), msg).toBeLessThanOrEqual(MAX_MESSAGE_BYTES);
      expect(msg, msg).toContain('…');
    }
    expect(refusal(long[1][1], long[1][2]).message).toMatch(/^invalid OTLP\/JSON: AnyValue sets more than one of its value keys at \$\.resourceLogs\[20000\].*….*doubleValue$/);
    expect(refusal(long[2][1], long[2][2]).message).toMatch(/^invalid JSON: invalid number at byte \d+ in \$\.resourceLogs\[20000\].*….*doubleValue$/);
    expect(refusal(long[3][1], long[3][2]).message).toMatch(/^invalid OTLP\/JSON: unknown key's value nested deeper than 64 levels at \$.*…values\[20000\]\.value$/);
  });

  it('refuses an unknown signal as a programming error, not a body error', () => {
    expect(() => conv('metrics' as Signal, '{}')).toThrow(expect.objectContaining({ name: 'TypeError', code: 'ERR_INVALID_ARG_VALUE' }));
  });

  it('never echoes body content in its messages', () => {
    for (const text of [
      logJson('{"SECRET_KEY":SECRET}'),
      logJson(`{"SECRET_KEY":${'['.repeat(100)}"SECRET"}`),
      logJson('{"SECRET_KEY":["SECRET\\q"]}'),
      anyJson('{"stringValue":"SECRET\\q"}'),
      logJson('{"traceId":"SECRETSECRET"}'),
    ]) {
      expect(refusal('logs', text).message).not.toContain('SECRET');
    }
  });

  it('refuses every proper prefix of a valid body', () => {
    const f = new FixtureGenerator(12, root).logs({ targetBytes: 1024, allValueKinds: true });
    for (let n = 0; n < f.json.length; n++) {
      expect(refusal('logs', f.json.subarray(0, n)).code).toBe('SIGLAKE_BAD_BODY');
    }
  });

  it('answers mutated bodies with valid protobuf or a 400, and accepts nothing JSON.parse refuses', () => {
    const gen = new FixtureGenerator(13, root);
    const bases = [gen.logs({ targetBytes: 1024, allValueKinds: true }), gen.traces({ targetBytes: 1024, allValueKinds: true })];
    const alphabet = Buffer.from('{}[]:,"\\ 0123456789-+.eEtrufalsn/abcdefABCDEFxyz\u00e9');
    let seed = 0x9e3779b9;
    const rnd = (n: number): number => {
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      return (seed >>> 0) % n;
    };
    let accepted = 0;
    let refused = 0;
    const strict = new TextDecoder('utf-8', { fatal: true });
    for (let i = 0; i < 3000; i++) {
      const base = bases[i & 1];
      const body = Buffer.from(base.json);
      for (let k = 1 + rnd(2); k > 0; k--) body[rnd(body.length)] = rnd(4) === 0 ? rnd(256) : alphabet[rnd(alphabet.length)];
      let out: { payload: Uint8Array; records: number } | undefined;
      try {
        out = conv(base.signal, body);
      } catch (err) {
        expect(err).toBeInstanceOf(BodyError);
        expect((err as BodyError).code).toBe('SIGLAKE_BAD_BODY');
        refused++;
        continue;
      }
      accepted++;
      expect(() => JSON.parse(strict.decode(body))).not.toThrow();
      expect(validateExportRequest(base.signal, out.payload)).toBe(out.records);
    }
    expect(accepted).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
  });
});
