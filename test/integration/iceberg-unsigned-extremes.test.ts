// OTLP's unsigned fields against the signed Iceberg columns they land in:
// fixed64 timestamps up to 2^64 − 1 and uint32 dropped counts up to 2^32 − 1
// are valid OTLP and acknowledged with 200, but a `long` holds 2^63 − 1 and
// an `int` 2^31 − 1. Such a value used to make the Parquet writer throw for
// the whole table, every round: nothing more of that table landed and the
// compactor turned /readyz to 503. A timestamp past 2^63 − 1 ns (year 2262)
// now lands as unknown (null, as 0 does), a count is capped at 2^31 − 1, and
// the rest of the table lands.

import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { icebirdRows } from '../helpers/iceberg.js';
import { post } from '../helpers/http.js';
import { runCli, startIngester } from '../helpers/ingester.js';
import { useLocalLake } from '../helpers/local-lake.js';
import { jsonBytes } from '../helpers/otlp-bodies.js';

const U64_MAX = '18446744073709551615';
const INT32_MAX = 2 ** 31 - 1;

describe('unsigned OTLP values past the signed columns', () => {
  const lake = useLocalLake('siglake-unsigned-');
  const { dir, flags } = lake;

  it('land: a timestamp past 2^63 − 1 as unknown, a count capped at 2^31 − 1, and every other record of the table too', async () => {
    const now = BigInt(Date.now()) * 1_000_000n;
    const ing = await startIngester({ dataDir: dir, args: ['--compactor=false', ...flags] });
    try {
      const logs = jsonBytes({
        resourceLogs: [
          {
            resource: { attributes: [{ key: 'service.name', value: { stringValue: 'u' } }], droppedAttributesCount: 4294967295 },
            scopeLogs: [
              {
                logRecords: [
                  { timeUnixNano: U64_MAX, observedTimeUnixNano: String(now), droppedAttributesCount: 2147483648, body: { stringValue: 'extreme' } },
                  { timeUnixNano: String(now), body: { stringValue: 'plain' } },
                ],
              },
            ],
          },
        ],
      });
      expect((await post(ing.url, '/v1/logs', logs, { contentType: 'application/json' })).status).toBe(200);
      const traces = jsonBytes({
        resourceSpans: [
          {
            scopeSpans: [
              {
                spans: [
                  {
                    traceId: '0102030405060708090a0b0c0d0e0f10',
                    spanId: '0102030405060708',
                    name: 'extreme',
                    startTimeUnixNano: String(now),
                    endTimeUnixNano: U64_MAX,
                    droppedAttributesCount: 4294967295,
                    droppedEventsCount: 2147483648,
                    droppedLinksCount: 3000000000,
                  },
                ],
              },
            ],
          },
        ],
      });
      expect((await post(ing.url, '/v1/traces', traces, { contentType: 'application/json' })).status).toBe(200);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
    const r = runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', path.join(dir, 'wal'), ...flags]);
    expect(r.status, r.stderr).toBe(0);

    const logRows = await icebirdRows((await lake.catalog.metadataLocation('main', 'logs'))!);
    const extreme = logRows.find((x) => x['body'] === 'extreme')!;
    expect(extreme['time_unix_nano']).toBeNull();
    expect(BigInt(extreme['observed_time_unix_nano'] as bigint)).toBe(now);
    expect(extreme['dropped_attributes_count']).toBe(INT32_MAX);
    expect(extreme['resource_dropped_attributes_count']).toBe(INT32_MAX);
    expect(logRows.map((x) => x['body']).sort()).toEqual(['extreme', 'plain']);

    const spans = await icebirdRows((await lake.catalog.metadataLocation('main', 'traces'))!);
    expect(spans).toHaveLength(1);
    expect(BigInt(spans[0]!['start_time_unix_nano'] as bigint)).toBe(now);
    expect(spans[0]!['end_time_unix_nano']).toBeNull();
    expect(spans[0]!['duration_nanos']).toBeNull();
    expect([spans[0]!['dropped_attributes_count'], spans[0]!['dropped_events_count'], spans[0]!['dropped_links_count']]).toEqual([INT32_MAX, INT32_MAX, INT32_MAX]);
  });
});
