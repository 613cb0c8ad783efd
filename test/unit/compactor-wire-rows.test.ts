// The compactor's wire decoder (OtlpWireRows) against the reference, the
// protobufjs decoder it replaced (OtlpRowDecoder): the same rows for fixture
// requests of every shape, for hand-made requests at the edges of the mapping
// rules, and for bytes protobufjs is never given by the ingest path (repeated
// singular fields, unknown fields). Malformed bytes throw OtlpWireError and
// nothing else.

import { describe, expect, it } from 'vitest';
import { OtlpRowDecoder, type Row } from '../../src/compactor/otlp-row-decoder.js';
import { boundedJson, OtlpWireError, OtlpWireRows } from '../../src/compactor/otlp-wire-rows.js';
import { FixtureGenerator } from '../../src/otlp/fixtures.js';
import { ProtoRoot } from '../../src/otlp/proto-root.js';
import { Prng } from '../../src/prng.js';

const root = ProtoRoot.load();
const reference = new OtlpRowDecoder(root);
const wire = new OtlpWireRows();
const INGEST_MS = 1_764_800_000_123;

type Signal = 'logs' | 'traces';

function rowsOf(decoder: OtlpRowDecoder | OtlpWireRows, signal: Signal, payload: Uint8Array): Row[] {
  const rows: Row[] = [];
  const n = decoder[signal](payload, INGEST_MS, (r) => rows.push(r));
  expect(n).toBe(rows.length);
  return rows;
}

/** Both decoders' rows; they must be equal. */
function expectSame(signal: Signal, payload: Uint8Array): Row[] {
  const want = rowsOf(reference, signal, payload);
  const got = rowsOf(wire, signal, payload);
  expect(got).toEqual(want);
  return got;
}

// ---- a small protobuf writer for bytes encodeRequest cannot make -----------

const varint = (v: bigint): number[] => {
  const out: number[] = [];
  let x = BigInt.asUintN(64, v);
  do {
    const b = Number(x & 0x7fn);
    x >>= 7n;
    out.push(x === 0n ? b : b | 0x80);
  } while (x !== 0n);
  return out;
};
const tag = (no: number, wt: number): number[] => varint(BigInt((no << 3) | wt));
const len = (no: number, body: number[]): number[] => [...tag(no, 2), ...varint(BigInt(body.length)), ...body];
const str = (no: number, s: string): number[] => len(no, [...Buffer.from(s, 'utf8')]);
const vint = (no: number, v: bigint | number): number[] => [...tag(no, 0), ...varint(BigInt(v))];
const fixed64 = (no: number, v: bigint): number[] => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt.asUintN(64, v));
  return [...tag(no, 1), ...b];
};
const fixed32 = (no: number, v: number): number[] => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(v >>> 0);
  return [...tag(no, 5), ...b];
};
const double = (no: number, v: number): number[] => {
  const b = Buffer.alloc(8);
  b.writeDoubleLE(v);
  return [...tag(no, 1), ...b];
};
const bytes = (a: number[]) => Uint8Array.from(a);

/** A logs request of one resource, one scope, the given log records (each a field list). */
const logsRequest = (resource: number[], scope: number[], records: number[][]): Uint8Array =>
  bytes(len(1, [...len(1, resource), ...len(2, [...len(1, scope), ...records.flatMap((r) => len(2, r))])]));
const kv = (key: string, any: number[]): number[] => [...str(1, key), ...len(2, any)];

describe('OtlpWireRows against the protobufjs decoder', () => {
  it.each(['logs', 'traces'] as const)('gives the same %s rows for fixture requests of every shape', (signal) => {
    const prng = new Prng(20261204);
    const gen = new FixtureGenerator(99, root);
    let records = 0;
    for (let i = 0; i < 300; i++) {
      const f = gen.request(signal, {
        targetBytes: prng.pick([200, 1024, 4096, 16 * 1024]),
        resources: prng.pick([1, 1, 2, 3]),
        allValueKinds: prng.chance(0.5),
        logBodyBytes: prng.pick([0, 40, 160, 2000]),
      });
      records += expectSame(signal, f.protobuf).length;
    }
    expect(records).toBeGreaterThan(1000);
  });

  it.each(['logs', 'traces'] as const)('with a low --compact-max-value-chars, gives the same %s rows wherever no value passes it (a long list value is written in pieces)', (signal) => {
    const prng = new Prng(20261208);
    const gen = new FixtureGenerator(7, root);
    const bounded = new OtlpWireRows(1024);
    let same = 0;
    for (let i = 0; i < 200; i++) {
      const f = gen.request(signal, { targetBytes: prng.pick([1024, 4096]), resources: 1, allValueKinds: true, logBodyBytes: prng.pick([0, 40, 160]) });
      const before = bounded.truncated;
      const rows = rowsOf(bounded, signal, f.protobuf);
      if (bounded.truncated !== before) continue;
      expect(rows).toEqual(rowsOf(wire, signal, f.protobuf));
      same++;
    }
    expect(same).toBeGreaterThan(100);
  });

  it('cuts a value past the bound at it, and writes a long list value as JSON.stringify does', () => {
    const values: unknown[] = [{ b: '1', 0: 'zero', __proto__x: [1, 'two', null, true, { '': '\u0001\ud83d\ude00' }] }, ['😀'.repeat(3000)], 'x', 1.5];
    for (const v of values) expect(boundedJson(v, 1 << 20)).toEqual({ text: JSON.stringify(v), cut: false });
    // A cut never leaves the first half of a surrogate pair at its end.
    expect(boundedJson(['😀'.repeat(10)], 4)).toEqual({ text: '["😀', cut: true });
    expect(boundedJson({ k: '\u0001'.repeat(10) }, 12)).toEqual({ text: '{"k":"\\u0001', cut: true });
  });

  it('gives the same rows at the edges of the mapping rules (encodeRequest)', () => {
    const any = (v: Record<string, unknown>) => v;
    const logs = root.encodeRequest('logs', {
      resourceLogs: [
        { scopeLogs: [{ logRecords: [{}] }] }, // no resource, no scope, an empty record: ingest time, nulls
        {
          resource: {
            attributes: [
              { key: 'service.name', value: any({ stringValue: 'svc' }) },
              { key: 'service.namespace', value: any({ stringValue: '' }) },
              { key: 'deployment.environment.name', value: any({ intValue: '7' }) },
              { key: 'service.name', value: any({ stringValue: 'last wins' }) },
            ],
            droppedAttributesCount: 4294967295,
          },
          schemaUrl: 'https://opentelemetry.io/schemas/1.26.0',
          scopeLogs: [
            {
              scope: { name: '', version: 'v', attributes: [{ key: 'k' }] },
              logRecords: [
                { observedTimeUnixNano: '1700000000123456789', body: any({}), severityNumber: -1, flags: 4294967295, traceId: Buffer.alloc(0) },
                { timeUnixNano: '18446744073709551615', body: any({ boolValue: false }), eventName: 'e' },
                { body: any({ intValue: '-9223372036854775808' }), attributes: [{ key: 'i', value: any({ intValue: '9223372036854775807' }) }] },
                { body: any({ intValue: '9007199254740993' }), attributes: [{ key: 'j', value: any({ intValue: '-9007199254740991' }) }] },
                { body: any({ doubleValue: Number.NaN }), attributes: [{ key: 'd', value: any({ doubleValue: -0 }) }, { key: 'e', value: any({ doubleValue: 1e21 }) }] },
                { body: any({ doubleValue: Number.NEGATIVE_INFINITY }), attributes: [{ key: 'b', value: any({ bytesValue: Buffer.from([0, 255, 1]) }) }] },
                { body: any({ bytesValue: Buffer.from('hi') }), severityText: 'INFO', traceId: Buffer.alloc(16, 0xab), spanId: Buffer.alloc(8, 1) },
                {
                  body: any({
                    kvlistValue: {
                      values: [
                        { key: 'a', value: any({ arrayValue: { values: [any({ stringValue: 'x' }), any({}), any({ kvlistValue: { values: [] } }), any({ arrayValue: { values: [] } })] } }) },
                        { key: '__proto__', value: any({ stringValue: 'kept' }) },
                        { key: 'a', value: any({ boolValue: true }) },
                        { key: 'n' },
                      ],
                    },
                  }),
                  attributes: [{ key: 'kv', value: any({ kvlistValue: { values: [{ key: 'z', value: any({ doubleValue: Number.POSITIVE_INFINITY }) }] } }) }],
                },
                { body: any({ stringValue: 'Zürich 東京 🚀' }), attributes: [{ key: '', value: any({ stringValue: '' }) }] },
              ],
            },
          ],
        },
      ],
    });
    const rows = expectSame('logs', logs);
    expect(rows).toHaveLength(10);
    expect(rows[8]![6]).toBe('{"a":true,"__proto__":"kept","n":null}'); // a kvlist's __proto__ key is kept
    const traces = root.encodeRequest('traces', {
      resourceSpans: [
        {
          resource: { attributes: [{ key: 'service.name', value: any({ stringValue: 'api' }) }] },
          scopeSpans: [
            {
              spans: [
                {},
                {
                  traceId: Buffer.alloc(16, 7),
                  spanId: Buffer.alloc(8, 8),
                  parentSpanId: Buffer.alloc(8, 9),
                  traceState: 'a=b',
                  flags: 257,
                  name: 'GET /',
                  kind: 2,
                  startTimeUnixNano: '1700000000000000999',
                  endTimeUnixNano: '1700000000500000000',
                  status: { code: 2, message: 'boom' },
                  events: [{ timeUnixNano: '5', name: 'ev', attributes: [{ key: 'x', value: any({ intValue: '1' }) }, { key: 'x', value: any({ intValue: '2' }) }], droppedAttributesCount: 3 }, {}],
                  links: [{ traceId: Buffer.alloc(16, 1), spanId: Buffer.alloc(8, 2), traceState: '', flags: 1, attributes: [{ key: '__proto__', value: any({ stringValue: 'p' }) }] }, {}],
                  droppedEventsCount: 1,
                  droppedLinksCount: 2,
                  droppedAttributesCount: 3,
                },
                { endTimeUnixNano: '5', status: {} },
                { startTimeUnixNano: '7000', kind: -3 },
              ],
            },
          ],
        },
      ],
    });
    expect(expectSame('traces', traces)).toHaveLength(4);
  });

  it('writes key-value lists and event and link attributes in the order sent, keys that start with a digit included, as the native path writes every value', () => {
    const any = (v: Record<string, unknown>) => v;
    const kvl = (values: Record<string, unknown>[]) => any({ kvlistValue: { values } });
    // 20 keys: the repeated one is found through putEntry's key index.
    const many = Array.from({ length: 20 }, (_, i) => ({ key: String(19 - i), value: any({ intValue: String(i) }) }));
    many.push({ key: '7', value: any({ stringValue: 'last' }) });
    const logs = root.encodeRequest('logs', {
      resourceLogs: [
        {
          scopeLogs: [
            {
              logRecords: [
                {
                  body: kvl([
                    { key: 'b', value: any({ doubleValue: -0 }) },
                    { key: '1', value: any({ arrayValue: { values: [any({ doubleValue: Number.NaN }), any({ intValue: '9007199254740993' }), kvl([{ key: 'y', value: any({}) }, { key: '0' }])] } }) },
                    { key: '__proto__', value: any({ bytesValue: Buffer.from([1, 2]) }) },
                    { key: '1', value: any({ stringValue: 'q"\u0001' }) },
                  ]),
                  attributes: [
                    { key: 'plain', value: kvl([{ key: 'z', value: any({ intValue: '1' }) }, { key: 'a', value: any({ boolValue: false }) }]) },
                    { key: 'many', value: kvl(many) },
                  ],
                },
              ],
            },
          ],
        },
      ],
    });
    const [row] = expectSame('logs', logs);
    expect(row![6]).toBe('{"b":"-0","1":"q\\"\\u0001","__proto__":"AQI="}');
    const attrs = new Map(row![20] as [string, string][]);
    expect(attrs.get('plain')).toBe('{"z":1,"a":false}');
    expect(Object.keys(JSON.parse(attrs.get('many')!) as object)).toHaveLength(20);
    expect(attrs.get('many')!.startsWith('{"19":0,"18":1,')).toBe(true);
    expect(attrs.get('many')).toContain('"7":"last","6":13,');
    const logs2 = root.encodeRequest('logs', {
      resourceLogs: [{ scopeLogs: [{ logRecords: [{ body: any({ arrayValue: { values: [kvl([{ key: 'x', value: any({ doubleValue: Number.NEGATIVE_INFINITY }) }, { key: '2', value: any({ intValue: '-9007199254740993' }) }])] } }) }] }] }],
    });
    expect(expectSame('logs', logs2)[0]![6]).toBe('[{"x":"-Infinity","2":"-9007199254740993"}]');
    const traces = root.encodeRequest('traces', {
      resourceSpans: [
        {
          scopeSpans: [
            {
              spans: [
                {
                  name: 's',
                  events: [
                    { timeUnixNano: '5', name: 'plain', attributes: [{ key: 'a', value: any({ stringValue: 'x' }) }] },
                    { timeUnixNano: '6', name: 'digits', attributes: [{ key: 'b', value: any({ stringValue: 'x' }) }, { key: '1', value: any({ intValue: '2' }) }, { key: '0' }], droppedAttributesCount: 1 },
                  ],
                  links: [{ traceId: Buffer.alloc(16, 1), spanId: Buffer.alloc(8, 2), traceState: 'a=b', flags: 1, attributes: [{ key: 'k', value: any({ stringValue: 'v' }) }, { key: '0', value: any({ stringValue: 'z' }) }] }, {}],
                },
              ],
            },
          ],
        },
      ],
    });
    const [span] = expectSame('traces', traces);
    expect(span![24]).toBe(
      '[{"time_unix_nano":"5","name":"plain","attributes":{"a":"x"},"dropped_attributes_count":0},{"time_unix_nano":"6","name":"digits","attributes":{"b":"x","1":"2","0":null},"dropped_attributes_count":1}]',
    );
    expect(span![26]).toBe(
      '[{"trace_id":"01010101010101010101010101010101","span_id":"0202020202020202","trace_state":"a=b","flags":1,"attributes":{"k":"v","0":"z"},"dropped_attributes_count":0},{"trace_id":null,"span_id":null,"trace_state":null,"flags":0,"attributes":{},"dropped_attributes_count":0}]',
    );
  });

  it('takes the last of a repeated singular field, repeated fields in wire order, and skips unknown fields of every wire type', () => {
    const unknown = [...vint(99, 5n), ...fixed64(98, 1n), ...str(97, 'x'), ...fixed32(96, 2)];
    const record = [
      ...unknown,
      ...fixed64(1, 1_000_000n),
      ...str(3, 'first'),
      ...len(6, kv('a', str(1, '1'))),
      ...len(5, str(1, 'replaced body')),
      ...fixed64(1, 2_000_000n),
      ...len(6, kv('b', vint(3, 2n))),
      ...str(3, 'second'),
      ...len(5, vint(2, 1n)),
      ...len(6, kv('a', str(1, '3'))),
      ...vint(2, 9n),
    ];
    const payload = logsRequest(
      [...len(1, kv('service.name', str(1, 'one'))), ...unknown, ...vint(2, 1n)],
      [...str(1, 'scope'), ...unknown],
      [record],
    );
    const rows = expectSame('logs', payload);
    expect(rows[0]!.slice(0, 8)).toEqual([2000n, 2_000_000n, null, BigInt(INGEST_MS) * 1000n, 9, 'second', 'true', 'bool']);
    expect(rows[0]![20]).toEqual([
      ['a', '3'],
      ['b', '2'],
    ]);
    // A second resource and schema_url after the scopes: the last ones apply to every row of the ResourceLogs.
    const twice = bytes(
      len(1, [
        ...len(1, len(1, kv('service.name', str(1, 'early')))),
        ...len(2, len(2, str(3, 'r'))),
        ...str(3, 'url-1'),
        ...len(1, len(1, kv('service.name', str(1, 'late')))),
        ...str(3, 'url-2'),
      ]),
    );
    const r2 = expectSame('logs', twice);
    expect([r2[0]![12], r2[0]![15]]).toEqual(['late', 'url-2']);
  });

  it('merges a singular message field that occurs more than once (read as the concatenation), as protobufjs does', () => {
    const arr = (...items: number[][]) => len(5, items.flatMap((i) => len(1, i)));
    const kvl = (...pairs: number[][]) => len(6, pairs.flatMap((p) => len(1, p)));
    const merged = logsRequest(
      [...len(1, kv('service.name', str(1, 'a'))), ...vint(2, 3n)],
      [...str(1, 'scope-1'), ...len(3, kv('s', str(1, '1')))],
      [
        [
          // body: an array, then more of it in a second body field: one array of three
          ...len(5, arr(str(1, 'x'), vint(3, 1n))),
          ...len(5, arr(vint(2, 1n))),
          // a KeyValue whose value occurs twice, each a kvlist: one kvlist; and one whose value switches member and back
          ...len(6, [...str(1, 'k'), ...len(2, kvl(kv('a', str(1, '1')))), ...len(2, kvl(kv('b', str(1, '2')), kv('a', str(1, '3'))))]),
          ...len(6, [...str(1, 'm'), ...len(2, arr(str(1, 'gone'))), ...len(2, str(1, 'text')), ...len(2, arr(str(1, 'kept')))]),
          ...len(6, [...str(1, 'n'), ...len(2, [...arr(str(1, 'p')), ...arr(str(1, 'q'))])]),
        ],
      ],
    );
    const rows = expectSame('logs', merged);
    expect([rows[0]![6], rows[0]![20]]).toEqual([
      '["x",1,true]',
      [
        ['k', '{"a":"3","b":"2"}'],
        ['m', '["kept"]'],
        ['n', '["p","q"]'],
      ],
    ]);
    const twoOfEach = bytes(
      len(1, [
        ...len(1, len(1, kv('service.name', str(1, 'one')))),
        ...len(2, [...len(1, [...str(1, 'first'), ...str(2, 'v1')]), ...len(2, str(3, 'r')), ...len(1, [...str(1, 'second'), ...len(3, kv('x', str(1, 'y')))])]),
        ...len(1, [...len(1, kv('host.name', str(1, 'h'))), ...vint(2, 5n)]),
      ]),
    );
    const r2 = expectSame('logs', twoOfEach);
    expect([r2[0]![12], r2[0]![13], r2[0]![14], r2[0]![16], r2[0]![17], r2[0]![18]]).toEqual([
      'one',
      [
        ['service.name', 'one'],
        ['host.name', 'h'],
      ],
      5,
      'second',
      'v1',
      [['x', 'y']],
    ]);
    const span = bytes(len(1, len(2, len(2, [...len(15, [...str(2, 'msg'), ...vint(3, 1n)]), ...len(15, vint(3, 2n))]))));
    const r3 = expectSame('traces', span);
    expect([r3[0]![12], r3[0]![13]]).toEqual([2, 'msg']);
  });

  it('takes the last oneof member of an AnyValue on the wire', () => {
    const payload = logsRequest([], [], [[...len(5, [...str(1, 'text'), ...vint(3, 5n), ...str(1, 'again')]), ...len(6, kv('k', [...vint(3, 5n), ...vint(2, 1n)]))]]);
    const rows = expectSame('logs', payload); // protobufjs' oneof setter also keeps the last
    expect([rows[0]![6], rows[0]![7], rows[0]![20]]).toEqual(['again', 'string', [['k', 'true']]]);
  });

  it('throws OtlpWireError for malformed bytes, at every truncation of a request and for wrong wire types', () => {
    const gen = new FixtureGenerator(5, root);
    for (const signal of ['logs', 'traces'] as const) {
      const f = gen.request(signal, { targetBytes: 600, allValueKinds: true });
      let threw = 0;
      for (let cut = 1; cut < f.protobuf.length; cut++) {
        try {
          rowsOf(wire, signal, f.protobuf.subarray(0, cut));
        } catch (e) {
          expect(e).toBeInstanceOf(OtlpWireError);
          threw++;
        }
      }
      // A cut inside the one ResourceLogs/ResourceSpans field always leaves a length past the end.
      expect(threw).toBe(f.protobuf.length - 1);
    }
    const bad: [string, Uint8Array][] = [
      ['a LogRecord time as a varint', logsRequest([], [], [vint(1, 5n)])],
      ['a string attribute value as a varint', logsRequest([], [], [len(6, kv('k', vint(1, 5n)))])],
      ['a group', logsRequest([], [], [[...tag(50, 3)]])],
      ['wire type 7', logsRequest([], [], [[...tag(50, 7)]])],
      ['field number 0', logsRequest([], [], [[0, 0]])],
      ['an 11-byte varint', logsRequest([], [], [[...tag(2, 0), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]])],
      ['a resource as a fixed32', logsRequest(fixed32(1, 3), [], [[]])],
    ];
    for (const [what, payload] of bad) expect(() => rowsOf(wire, 'logs', payload), what).toThrow(OtlpWireError);
  });
});
