// What a tenant sends is what a reader gets back: edge-case OTLP content,
// sent to the real ingester, landed by the real compactor (`siglake compact
// --once`) and read back by icebird and by the query server (DuckDB).
//
// - an attribute list of hundreds of thousands of keys (valid OTLP, a few MB)
//   lands in one round: the compactor deduplicated keys by scanning the list
//   for every key, O(n²), which kept a 7 MB request busy for tens of minutes
//   (a 16 MiB one for hours) while no tenant's data landed;
// - an int body keeps its exact decimal (it was a quoted JSON string past
//   ±2^53, so CAST(body AS BIGINT) failed for those rows only), and a double
//   of -0 keeps its sign in attribute text, bodies and JSON (it read "0");
// - a span of 4 million empty events (8 MB of protobuf, 300 MB of events
//   JSON) lands with the events that fit 16 Mi characters and the rest
//   counted as dropped: the Parquet writer failed on it, so the tenant's
//   traces table failed every round and nothing more of it landed;
// - a request of 3 million empty log records (6 MB) lands through the
//   compactor inside the ingester: its rows were buffered whole, past the
//   compactor's 512 MiB heap, so it died every round and no tenant landed;
// - a key-value list's JSON (a body, an attribute value, nested in an array)
//   and a span event's or link's attributes keep the keys in the order sent:
//   keys that look like array indexes ("0", "10") came first, in ascending
//   order, as a JavaScript object lists them.

import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { icebirdDataFiles, icebirdRows } from '../helpers/iceberg.js';
import { post } from '../helpers/http.js';
import { runCli, startIngester } from '../helpers/ingester.js';
import { useLocalLake } from '../helpers/local-lake.js';
import { jsonBytes, logsJson, pbField } from '../helpers/otlp-bodies.js';
import { postSql, startQuery } from '../helpers/query.js';
import { errorInfoOf, httpStatusOf } from '../helpers/rpc-status.js';
import { untilValue } from '../helpers/wait.js';

const KEYS = 300_000;
const EVENTS = 4_000_000;
const RECORDS = 3_000_000;


/** ExportTraceServiceRequest of one span (trace and span id, name) per entry, each with `events` empty events (Span.events, field 11). */
function spansWithEvents(spans: { name: string; events: number }[]): Buffer {
  const encoded = spans.map(({ name, events }) => {
    const empty = Buffer.alloc(events * 2);
    for (let i = 0; i < empty.length; i += 2) empty[i] = (11 << 3) | 2;
    const fields = [pbField(0x0a, Buffer.alloc(16, 1)), pbField(0x12, Buffer.alloc(8, 2)), pbField(0x2a, Buffer.from(name)), empty];
    return pbField(0x12, Buffer.concat(fields)); // ScopeSpans.spans
  });
  return pbField(0x0a, pbField(0x12, Buffer.concat(encoded))); // request.resource_spans → ResourceSpans.scope_spans
}

describe('OTLP content, ingest → WAL → Iceberg → readers', () => {
  const lake = useLocalLake('siglake-content-');
  const { dir, flags } = lake;
  const compactOnce = () => runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', path.join(dir, 'wal'), ...flags], { timeoutMs: 120_000 });

  /** One request stored by a fresh ingester (200), which then stops; then its WAL landed by one `compact --once`. */
  async function storeAndLand(route: '/v1/logs' | '/v1/traces', body: Uint8Array, contentType?: string): Promise<void> {
    const ing = await startIngester({ dataDir: dir, args: ['--compactor=false', ...flags] });
    try {
      const r = await post(ing.url, route, body, contentType === undefined ? {} : { contentType });
      expect(r.status).toBe(200);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
    const c = compactOnce();
    expect(c.status, c.stderr).toBe(0);
  }

  it('a log record of 300,000 attribute keys lands in one compaction round, a repeated key in its first place with its last value', async () => {
    const attributes: Record<string, unknown>[] = Array.from({ length: KEYS }, (_, i) => ({ key: `k${i}`, value: { intValue: i } }));
    attributes.push({ key: 'k7', value: { stringValue: 'last' } });
    // Before the fix the compaction round ran for tens of minutes (and was killed here after 120 s).
    await storeAndLand('/v1/logs', jsonBytes({ resourceLogs: [{ scopeLogs: [{ logRecords: [{ body: { stringValue: 'many-keys' }, attributes }] }] }] }), 'application/json');
    const rows = await icebirdRows((await lake.catalog.metadataLocation('main', 'logs'))!);
    const row = rows.find((x) => x['body'] === 'many-keys')!;
    const attrs = row['attributes'] as Record<string, string>;
    expect(Object.keys(attrs)).toHaveLength(KEYS);
    expect(Object.keys(attrs).slice(0, 9)).toEqual(['k0', 'k1', 'k2', 'k3', 'k4', 'k5', 'k6', 'k7', 'k8']);
    expect([attrs['k7'], attrs['k8'], attrs[`k${KEYS - 1}`]]).toEqual(['last', '8', String(KEYS - 1)]);
  }, 240_000);

  it('int bodies keep their exact decimal and doubles the sign of -0, as icebird and the query server read them', async () => {
    // The JSON -0s are strings ("-0", valid OTLP/JSON): JSON.stringify writes the number -0 as 0.
    const records = [
      { eventName: 'int-max', body: { intValue: '9223372036854775807' } },
      { eventName: 'int-min', body: { intValue: '-9223372036854775808' } },
      { eventName: 'int-2^53+1', body: { intValue: '9007199254740993' } },
      { eventName: 'int-small', body: { intValue: '-42' } },
      { eventName: 'neg-zero', body: { doubleValue: '-0' }, attributes: [{ key: 'd', value: { doubleValue: '-0' } }] },
      { eventName: 'zero', body: { doubleValue: 0 }, attributes: [{ key: 'd', value: { doubleValue: 0 } }] },
      { eventName: 'nan', body: { doubleValue: 'NaN' }, attributes: [{ key: 'd', value: { doubleValue: 'NaN' } }] },
      {
        eventName: 'nested',
        body: { arrayValue: { values: [{ doubleValue: '-0' }, { doubleValue: 1.5 }, { intValue: '9007199254740993' }, { doubleValue: '-Infinity' }] } },
        attributes: [{ key: 'kv', value: { kvlistValue: { values: [{ key: 'z', value: { doubleValue: '-0' } }] } } }],
      },
    ];
    await storeAndLand('/v1/logs', jsonBytes({ resourceLogs: [{ scopeLogs: [{ logRecords: records }] }] }), 'application/json');

    const rows = await icebirdRows((await lake.catalog.metadataLocation('main', 'logs'))!);
    const byName = new Map(rows.filter((x) => x['event_name'] !== null).map((x) => [x['event_name'] as string, x]));
    const seen = (name: string) => [byName.get(name)!['body'], byName.get(name)!['body_type'], (byName.get(name)!['attributes'] as Record<string, string>)['d'] ?? null];
    expect(seen('int-max')).toEqual(['9223372036854775807', 'int', null]);
    expect(seen('int-min')).toEqual(['-9223372036854775808', 'int', null]);
    expect(seen('int-2^53+1')).toEqual(['9007199254740993', 'int', null]);
    expect(seen('int-small')).toEqual(['-42', 'int', null]);
    expect(seen('neg-zero')).toEqual(['-0', 'double', '-0']);
    expect(seen('zero')).toEqual(['0', 'double', '0']);
    expect(seen('nan')).toEqual(['"NaN"', 'double', 'NaN']);
    expect(byName.get('nested')!['body']).toBe('["-0",1.5,"9007199254740993","-Infinity"]');
    expect((byName.get('nested')!['attributes'] as Record<string, string>)['kv']).toBe('{"z":"-0"}');

    await lake.catalog.close();
    const q = await startQuery(dir, flags);
    try {
      const res = await postSql(q.url, "SELECT event_name, CAST(body AS BIGINT) AS n FROM logs WHERE body_type = 'int' ORDER BY event_name");
      expect(res.status, res.text).toBe(200);
      expect(res.body['rows']).toEqual([
        ['int-2^53+1', '9007199254740993'],
        ['int-max', '9223372036854775807'],
        ['int-min', '-9223372036854775808'],
        ['int-small', '-42'],
      ]);
      const signs = await postSql(q.url, "SELECT event_name, signbit(CAST(body AS DOUBLE)) AS s, attributes['d'] AS d FROM logs WHERE event_name IN ('neg-zero', 'zero') ORDER BY event_name");
      expect(signs.status, signs.text).toBe(200);
      expect(signs.body['rows']).toEqual([
        ['neg-zero', true, '-0'],
        ['zero', false, '0'],
      ]);
    } finally {
      await q.stop();
    }
  }, 120_000);

  it('a span of 4 million empty events lands with the events that fit and the rest counted as dropped, beside the other spans', async () => {
    await storeAndLand('/v1/traces', spansWithEvents([{ name: 'flood', events: EVENTS }, { name: 'beside', events: 2 }]));
    const spans = await icebirdRows((await lake.catalog.metadataLocation('main', 'traces'))!);
    expect(spans.map((x) => x['name']).sort()).toEqual(['beside', 'flood']);
    const flood = spans.find((x) => x['name'] === 'flood')!;
    const json = flood['events'] as string;
    expect(json.length).toBeLessThanOrEqual(16 * 1024 * 1024);
    const kept = JSON.parse(json) as unknown[];
    expect(kept[0]).toEqual({ time_unix_nano: '0', name: '', attributes: {}, dropped_attributes_count: 0 });
    expect(kept.length).toBeGreaterThan(100_000);
    expect(kept.length + (flood['dropped_events_count'] as number)).toBe(EVENTS);
    const beside = spans.find((x) => x['name'] === 'beside')!;
    expect([(JSON.parse(beside['events'] as string) as unknown[]).length, beside['dropped_events_count']]).toEqual([2, 0]);
  }, 240_000);

  it('a request of 3 million empty log records lands through the compactor inside the ingester, and so does every other tenant', async () => {
    const records = Buffer.alloc(RECORDS * 2);
    for (let i = 0; i < records.length; i += 2) records[i] = (2 << 3) | 2; // ScopeLogs.log_records, empty
    const ing = await startIngester({
      dataDir: dir,
      args: ['--trust-tenant-header', '--compact-interval-secs', '1', '--wal-segment-max-age-secs', '1', ...flags],
    });
    try {
      const flood = await post(ing.url, '/v1/logs', pbField(0x0a, pbField(0x12, records)), { headers: { 'x-scope-orgid': 'flood' } });
      expect(flood.status).toBe(200);
      const other = await post(ing.url, '/v1/logs', jsonBytes(logsJson(['beside-the-flood'])), { contentType: 'application/json', headers: { 'x-scope-orgid': 'other' } });
      expect(other.status).toBe(200);
      // The flood lands over several rounds (each lands at most DEFAULT_MAX_ROUND_ROWS): until all of it has.
      const landed = await untilValue(
        'both tenants landed',
        async () => {
          const f = await lake.catalog.metadataLocation('tenant_flood', 'logs');
          const o = await lake.catalog.metadataLocation('tenant_other', 'logs');
          if (f === null || o === null) return undefined;
          const rows = (await icebirdDataFiles(f)).reduce((n, x) => n + x.records, 0);
          return rows >= RECORDS ? { f, o, rows } : undefined;
        },
        300_000,
        500,
      );
      expect(landed.rows).toBe(RECORDS);
      expect((await icebirdRows(landed.o)).map((x) => x['body'])).toEqual(['beside-the-flood']);
      expect(ing.logs.filter((l) => l.msg.startsWith('the compactor died'))).toEqual([]);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
  }, 360_000);

  it('key-value lists and span event and link attributes keep the order sent in their JSON, keys that look like array indexes included, for icebird and the query server', async () => {
    const str = (stringValue: string) => ({ stringValue });
    const kvlist = (values: Record<string, unknown>[]) => ({ kvlistValue: { values } });
    const body = kvlist([
      { key: 'b', value: { intValue: '1' } },
      { key: '1', value: str('one') },
      {
        key: 'a',
        value: kvlist([
          { key: '10', value: { boolValue: true } },
          { key: '2' },
          { key: 'x', value: { arrayValue: { values: [kvlist([{ key: '9', value: { doubleValue: 1.5 } }, { key: 'y', value: str('q') }])] } } },
        ]),
      },
      { key: '0', value: { bytesValue: 'AQI=' } },
      { key: 'b', value: str('last') }, // a repeated key: its first place, its last value
      { key: '__proto__', value: { intValue: '3' } },
    ]);
    const attributes = [{ key: 'kv', value: kvlist([{ key: 'z', value: str('s') }, { key: '3', value: { intValue: '7' } }]) }];
    await storeAndLand('/v1/logs', jsonBytes({ resourceLogs: [{ scopeLogs: [{ logRecords: [{ eventName: 'kv-order', body, attributes }] }] }] }), 'application/json');
    const spans = {
      resourceSpans: [
        {
          scopeSpans: [
            {
              spans: [
                {
                  traceId: '0102030405060708090a0b0c0d0e0f10',
                  spanId: '0102030405060708',
                  name: 'kv-order',
                  events: [{ name: 'e', attributes: [{ key: 'b', value: str('x') }, { key: '1', value: str('y') }] }],
                  links: [{ traceId: '1112131415161718191a1b1c1d1e1f20', spanId: '1112131415161718', attributes: [{ key: 'k', value: str('v') }, { key: '0', value: str('z') }] }],
                },
              ],
            },
          ],
        },
      ],
    };
    await storeAndLand('/v1/traces', jsonBytes(spans), 'application/json');

    const wantBody = '{"b":"last","1":"one","a":{"10":true,"2":null,"x":[{"9":1.5,"y":"q"}]},"0":"AQI=","__proto__":3}';
    const wantKv = '{"z":"s","3":7}';
    const wantEvents = '[{"time_unix_nano":"0","name":"e","attributes":{"b":"x","1":"y"},"dropped_attributes_count":0}]';
    const wantLinks =
      '[{"trace_id":"1112131415161718191a1b1c1d1e1f20","span_id":"1112131415161718","trace_state":null,"flags":0,"attributes":{"k":"v","0":"z"},"dropped_attributes_count":0}]';
    const log = (await icebirdRows((await lake.catalog.metadataLocation('main', 'logs'))!)).find((x) => x['event_name'] === 'kv-order')!;
    expect([log['body'], log['body_type'], (log['attributes'] as Record<string, string>)['kv']]).toEqual([wantBody, 'kvlist', wantKv]);
    const span = (await icebirdRows((await lake.catalog.metadataLocation('main', 'traces'))!)).find((x) => x['name'] === 'kv-order')!;
    expect([span['events'], span['links']]).toEqual([wantEvents, wantLinks]);

    await lake.catalog.close();
    const q = await startQuery(dir, flags);
    try {
      const l = await postSql(q.url, "SELECT body, attributes['kv'] FROM logs WHERE event_name = 'kv-order'");
      expect(l.status, l.text).toBe(200);
      expect(l.body['rows']).toEqual([[wantBody, wantKv]]);
      const t = await postSql(q.url, "SELECT events, links FROM traces WHERE name = 'kv-order'");
      expect(t.status, t.text).toBe(200);
      expect(t.body['rows']).toEqual([[wantEvents, wantLinks]]);
    } finally {
      await q.stop();
    }
  }, 120_000);

  it('edge content is stored as sent, and a lone surrogate escape or a base64 id is refused with SIGLAKE_BAD_BODY, nothing stored', async () => {
    const now = BigInt(Date.now()) * 1_000_000n;
    const ing = await startIngester({ dataDir: dir, args: ['--trust-tenant-header', '--compactor=false', ...flags] });
    try {
      const logs = {
        resourceLogs: [
          {},
          { scopeLogs: [{}, { logRecords: [] }] },
          {
            scopeLogs: [
              {
                logRecords: [
                  {
                    observedTimeUnixNano: String(now),
                    severityNumber: 9999,
                    traceId: '00000000000000000000000000000000',
                    spanId: '0000000000000000',
                    body: { stringValue: 'nul\u0000inside' },
                    attributes: [
                      { key: '', value: { stringValue: 'empty key' } },
                      { key: 'nul\u0000key', value: { stringValue: 'v' } },
                      { key: 'no value' },
                      { key: 'empty value', value: {} },
                    ],
                  },
                ],
              },
            ],
          },
        ],
      };
      expect((await post(ing.url, '/v1/logs', jsonBytes(logs), { contentType: 'application/json', headers: { 'x-scope-orgid': 'edges' } })).status).toBe(200);
      const spans = { resourceSpans: [{ scopeSpans: [{ spans: [{ name: 'backwards', kind: 99, startTimeUnixNano: String(now), endTimeUnixNano: String(now - 1000n) }] }] }] };
      expect((await post(ing.url, '/v1/traces', jsonBytes(spans), { contentType: 'application/json', headers: { 'x-scope-orgid': 'edges' } })).status).toBe(200);
      for (const bad of [
        '{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"\\ud800"}}]}]}]}',
        '{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"AQIDBAUGBwgJCgsMDQ4PEA=="}]}]}]}',
      ]) {
        const r = await post(ing.url, '/v1/logs', new TextEncoder().encode(bad), { contentType: 'application/json', headers: { 'x-scope-orgid': 'refused' } });
        expect(r.status).toBe(400);
        expect(errorInfoOf(httpStatusOf('application/json', r.body)).reason).toBe('SIGLAKE_BAD_BODY');
      }
    } finally {
      expect(await ing.stop()).toBe(0);
    }
    expect(fs.existsSync(path.join(dir, 'wal', 'refused'))).toBe(false);
    const c = compactOnce();
    expect(c.status, c.stderr).toBe(0);
    expect(await lake.catalog.metadataLocation('tenant_refused', 'logs')).toBeNull();
    const [row] = await icebirdRows((await lake.catalog.metadataLocation('tenant_edges', 'logs'))!);
    expect([row!['body'], row!['severity_number'], row!['trace_id'], row!['span_id'], row!['observed_time_unix_nano']]).toEqual([
      'nul\u0000inside',
      9999,
      '00000000000000000000000000000000',
      '0000000000000000',
      now,
    ]);
    expect(row!['attributes']).toEqual({ '': 'empty key', 'nul\u0000key': 'v', 'no value': null, 'empty value': null });
    const [span] = await icebirdRows((await lake.catalog.metadataLocation('tenant_edges', 'traces'))!);
    expect([span!['name'], span!['kind'], span!['duration_nanos']]).toEqual(['backwards', 99, -1000n]);
  }, 120_000);
});
