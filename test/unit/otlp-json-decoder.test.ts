import { describe, expect, it } from 'vitest';
import { BodyError } from '../../src/errors.js';
import { FixtureGenerator } from '../../src/otlp/fixtures.js';
import { otlpJsonToProtobuf } from '../../src/otlp/json-decoder.js';
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

describe('otlpJsonToProtobuf refuses invalid bodies with a 400 naming the place', () => {
  const deepArrays = (n: number): string => anyJson(`${'{"arrayValue":{"values":['.repeat(n)}{}${']}}'.repeat(n)}`);
  const deepKvlists = (n: number): string =>
    anyJson(`${'{"kvlistValue":{"values":[{"key":"k","value":'.repeat(n)}{}${'}]}}'.repeat(n)}`);
  const R = '$.resourceLogs[0].scopeLogs[0].logRecords[0]';
  const esc = (s: string): string => s.replace(/[$.[\]()]/g, (c) => `\\${c}`);

  const table: [string, Signal, string | Uint8Array, RegExp][] = [
    ['an empty body', 'logs', '', /invalid JSON at byte 0 .*unexpected end of body/],
    ['whitespace only', 'logs', ' \n', /unexpected end of body/],
    ['a top-level array', 'logs', '[]', /the top level must be an object/],
    ['a top-level null', 'logs', 'null', /the top level must be an object/],
    ['a top-level string', 'traces', '"x"', /the top level must be an object/],
    ['a top-level number', 'traces', '1', /the top level must be an object/],
    ['100,000 nested arrays', 'logs', '['.repeat(100_000), /the top level must be an object/],
    ['a byte-order mark', 'logs', '\ufeff{}', /the top level must be an object/],
    ['an unterminated object', 'logs', '{', /unexpected end of body/],
    ['an unterminated array', 'logs', '{"resourceLogs":[', /unexpected end of body/],
    ['a trailing comma in an object', 'logs', '{"resourceLogs":[],}', /expected a key/],
    ['a trailing comma in an array', 'logs', '{"resourceLogs":[{},]}', /expected an object, got|expected a value/],
    ['data after the object', 'logs', '{} {}', /unexpected data after the top-level object/],
    ['single quotes', 'logs', "{'resourceLogs':[]}", /expected a key/],
    ['a comment', 'logs', '{/* c */}', /expected a key/],
    ['a missing colon', 'logs', '{"resourceLogs" []}', /expected ':'/],
    ['a bare NaN', 'logs', anyJson('{"doubleValue":NaN}'), /got null|expected a value|invalid literal/],
    ['a leading zero', 'logs', logJson('{"flags":01}'), /expected ',' or '}'/],
    ['a leading plus', 'logs', logJson('{"flags":+1}'), /expected a value/],
    ['a bare minus', 'logs', logJson('{"flags":-}'), /invalid number/],
    ['a fraction without digits', 'logs', logJson('{"flags":1.}'), /invalid number/],
    ['an exponent without digits', 'logs', logJson('{"flags":1e}'), /invalid number/],
    ['a misspelled literal', 'logs', anyJson('{"boolValue":tru}'), /invalid literal/],
    ['invalid UTF-8', 'logs', Buffer.concat([Buffer.from(anyJson('{"stringValue":"a').slice(0, -3)), Buffer.from([0xff]), Buffer.from('"}}]}]}]}')]), /body is not valid UTF-8/],
    ['a raw control character in a string', 'logs', anyJson('{"stringValue":"a\nb"}'), /control character in a string/],
    ['an invalid escape', 'logs', anyJson('{"stringValue":"\\x41"}'), /invalid escape/],
    ['a short \\u escape', 'logs', anyJson('{"stringValue":"\\u12"}'), /invalid \\u escape/],
    ['a lone high surrogate', 'logs', anyJson('{"stringValue":"\\ud800"}'), /unpaired surrogate/],
    ['a lone low surrogate', 'logs', anyJson('{"stringValue":"\\udc00x"}'), /unpaired surrogate/],
    ['an unterminated string', 'logs', '{"resourceLogs', /unterminated string/],
    ['an unknown top-level key', 'logs', '{"resourceSpans":[]}', /invalid OTLP\/JSON at \$: unknown key at byte 1 in ExportLogsServiceRequest/],
    ['an unknown nested key', 'logs', logJson('{"severity":9}'), new RegExp(`at ${esc(R)}: unknown key at byte \\d+ in LogRecord`)],
    ['a key in the wrong case', 'logs', logJson('{"TraceId":""}'), /unknown key/],
    ['a duplicate key', 'logs', logJson('{"severityText":"a","severityText":"b"}'), new RegExp(`${esc(R)}.severityText: duplicate key`)],
    ['one field in both spellings', 'logs', logJson('{"severityText":"a","severity_text":"b"}'), /duplicate key \(severityText \/ severity_text\)/],
    ['resourceLogs as an object', 'logs', '{"resourceLogs":{}}', /at \$.resourceLogs: expected an array, got an object/],
    ['resourceLogs as a string', 'logs', '{"resourceLogs":"x"}', /expected an array, got a string/],
    ['a null record', 'logs', '{"resourceLogs":[{"scopeLogs":[{"logRecords":[{},null]}]}]}', /\$.resourceLogs\[0\].scopeLogs\[0\].logRecords\[1\]: expected an object, got null/],
    ['a record as an array', 'logs', '{"resourceLogs":[{"scopeLogs":[{"logRecords":[[]]}]}]}', /logRecords\[0\]: expected an object, got an array/],
    ['resource as an array', 'logs', '{"resourceLogs":[{"resource":[]}]}', /\$.resourceLogs\[0\].resource: expected an object, got an array/],
    ['body as a string', 'logs', logJson('{"body":"text"}'), new RegExp(`${esc(R)}.body: expected an object, got a string`)],
    ['severityText as a number', 'logs', logJson('{"severityText":9}'), /severityText: expected a string, got a number/],
    ['severityNumber as a boolean', 'logs', logJson('{"severityNumber":true}'), /severityNumber: expected an integer, got a boolean/],
    ['severityNumber as a numeric string', 'logs', logJson('{"severityNumber":"9"}'), /unknown SeverityNumber name/],
    ['an unknown enum name', 'traces', '{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":"SPAN_KIND_SERVERS"}]}]}]}', /spans\[0\].kind: unknown SpanKind name/],
    ['an enum above int32', 'logs', logJson('{"severityNumber":2147483648}'), /integer out of range for int32 enum/],
    ['an enum below int32', 'logs', logJson('{"severityNumber":-2147483649}'), /out of range for int32 enum/],
    ['a fractional integer', 'logs', logJson('{"severityNumber":1.5}'), /expected an integer, got a fraction/],
    ['a fractional integer in a string', 'logs', anyJson('{"intValue":"1.5"}'), /expected an integer, got a fraction/],
    ['a tiny exponent', 'logs', anyJson('{"intValue":1e-1}'), /got a fraction/],
    ['a negative uint32', 'logs', logJson('{"droppedAttributesCount":-1}'), /droppedAttributesCount: integer out of range for uint32/],
    ['a uint32 of 2^32', 'logs', logJson('{"droppedAttributesCount":4294967296}'), /out of range for uint32/],
    ['a fixed32 of 1e10', 'logs', logJson('{"flags":1e10}'), /flags: integer out of range for fixed32/],
    ['a huge exponent', 'logs', logJson('{"flags":1e999999999}'), /out of range for fixed32/],
    ['a non-numeric string for an integer', 'logs', logJson('{"droppedAttributesCount":"abc"}'), /expected an integer, got a non-numeric string/],
    ['an empty string for an integer', 'logs', logJson('{"timeUnixNano":""}'), /expected an integer, got a non-numeric string/],
    ['a padded numeric string', 'logs', logJson('{"timeUnixNano":" 1"}'), /non-numeric string/],
    ['a negative fixed64', 'logs', logJson('{"timeUnixNano":"-1"}'), /timeUnixNano: integer out of range for fixed64/],
    ['a fixed64 of 2^64', 'logs', logJson('{"timeUnixNano":"18446744073709551616"}'), /out of range for fixed64/],
    ['an int64 of 2^63', 'logs', anyJson('{"intValue":"9223372036854775808"}'), /body.intValue: integer out of range for int64/],
    ['an int64 below -2^63', 'logs', anyJson('{"intValue":-9223372036854775809}'), /out of range for int64/],
    ['an integer as an object', 'logs', anyJson('{"intValue":{}}'), /expected an integer, got an object/],
    ['a traceId of 30 hex digits', 'logs', logJson(`{"traceId":"${'ab'.repeat(15)}"}`), new RegExp(`${esc(R)}.traceId: must be 32 hex digits or empty, not 30 characters`)],
    ['a traceId in base64', 'logs', logJson('{"traceId":"W47/95gDgQPSabYzgT/GDA=="}'), /traceId: must be 32 hex digits or empty, not 24 characters/],
    ['a traceId with non-hex digits', 'logs', logJson(`{"traceId":"${'zz'.repeat(16)}"}`), /traceId: not a hex string/],
    ['a spanId of 32 hex digits', 'logs', logJson(`{"spanId":"${'ab'.repeat(16)}"}`), /spanId: must be 16 hex digits or empty/],
    ['a parentSpanId of 15 digits', 'traces', `{"resourceSpans":[{"scopeSpans":[{"spans":[{"parentSpanId":"${'a'.repeat(15)}"}]}]}]}`, /parentSpanId: must be 16 hex digits/],
    ['a link traceId as a number', 'traces', '{"resourceSpans":[{"scopeSpans":[{"spans":[{"links":[{"traceId":5}]}]}]}]}', /spans\[0\].links\[0\].traceId: expected a hex string, got a number/],
    ['invalid base64 characters', 'logs', anyJson('{"bytesValue":"!!!!"}'), /body.bytesValue: not valid base64/],
    ['a base64 length of 5', 'logs', anyJson('{"bytesValue":"abcde"}'), /not valid base64 \(bad length or padding\)/],
    ['misplaced base64 padding', 'logs', anyJson('{"bytesValue":"ab=c"}'), /not valid base64/],
    ['a string value as a number', 'logs', anyJson('{"stringValue":1}'), /body.stringValue: expected a string, got a number/],
    ['a boolean as a string', 'logs', anyJson('{"boolValue":"true"}'), /boolValue: expected true or false, got a string/],
    ['a double as non-numeric text', 'logs', anyJson('{"doubleValue":"abc"}'), /doubleValue: expected a number, got a non-numeric string/],
    ['a double as lower-case nan', 'logs', anyJson('{"doubleValue":"nan"}'), /non-numeric string/],
    ['a double beyond its range', 'logs', anyJson('{"doubleValue":1e400}'), /number out of range for a double/],
    ['two AnyValue members', 'logs', anyJson('{"stringValue":"a","intValue":"1"}'), /body.intValue: AnyValue sets more than one of its value keys/],
    ['a key as a number', 'logs', '{"resourceLogs":[{"resource":{"attributes":[{"key":1}]}}]}', /attributes\[0\].key: expected a string, got a number/],
    ['AnyValue nested 33 levels in arrays', 'logs', deepArrays(32), /AnyValue nested deeper than 32 levels/],
    ['AnyValue nested 10,000 levels in arrays', 'logs', deepArrays(10_000), /AnyValue nested deeper than 32 levels/],
    ['AnyValue nested 10,000 levels in kvlists', 'logs', deepKvlists(10_000), /AnyValue nested deeper than 32 levels/],
    ['an entity id key as a number', 'logs', '{"resourceLogs":[{"resource":{"entityRefs":[{"idKeys":["a",1]}]}}]}', /entityRefs\[0\].idKeys\[1\]: expected a string, got a number/],
  ];

  it.each(table)('%s', (_name, signal, body, message) => {
    const e = refusal(signal, body);
    expect(e.code).toBe('SIGLAKE_BAD_BODY');
    expect(e.httpStatus).toBe(400);
    expect(e.message).toMatch(/^invalid (JSON|OTLP\/JSON)( at |: )/);
    expect(e.message).toMatch(message);
    expect(e.message).not.toContain('\n');
  });

  it('refuses an unknown signal as a programming error, not a body error', () => {
    expect(() => conv('metrics' as Signal, '{}')).toThrow(expect.objectContaining({ name: 'TypeError', code: 'ERR_INVALID_ARG_VALUE' }));
  });

  it('never echoes body content in its messages', () => {
    for (const text of [logJson('{"SECRET_KEY":1}'), anyJson('{"stringValue":"SECRET\\q"}'), logJson('{"traceId":"SECRETSECRET"}')]) {
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
