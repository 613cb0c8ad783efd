// What a tenant sends is what a reader gets back: edge-case OTLP content,
// sent to the real ingester, landed by the real compactor (`siglake compact
// --once`) and read back by icebird and by the query server (DuckDB).
//
// - an attribute list of hundreds of thousands of keys (valid OTLP, a few MB)
//   lands in one round: the compactor deduplicated keys by scanning the list
//   for every key, O(n²), which kept a 7 MB request busy for tens of minutes
//   (a 16 MiB one for hours) while no tenant's data landed.

import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { icebirdRows } from '../helpers/iceberg.js';
import { post } from '../helpers/http.js';
import { runCli, startIngester } from '../helpers/ingester.js';
import { useLocalLake } from '../helpers/local-lake.js';
import { jsonBytes } from '../helpers/otlp-bodies.js';

const KEYS = 300_000;

describe('OTLP content, ingest → WAL → Iceberg → readers', () => {
  const lake = useLocalLake('siglake-content-');
  const { dir, flags } = lake;
  const compactOnce = () => runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', path.join(dir, 'wal'), ...flags], { timeoutMs: 120_000 });

  it('a log record of 300,000 attribute keys lands in one compaction round, a repeated key in its first place with its last value', async () => {
    const attributes: Record<string, unknown>[] = Array.from({ length: KEYS }, (_, i) => ({ key: `k${i}`, value: { intValue: i } }));
    attributes.push({ key: 'k7', value: { stringValue: 'last' } });
    const ing = await startIngester({ dataDir: dir, args: ['--compactor=false', ...flags] });
    try {
      const body = jsonBytes({ resourceLogs: [{ scopeLogs: [{ logRecords: [{ body: { stringValue: 'many-keys' }, attributes }] }] }] });
      const r = await post(ing.url, '/v1/logs', body, { contentType: 'application/json' });
      expect(r.status).toBe(200);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
    // Before the fix this round ran for tens of minutes (and was killed here after 120 s).
    const c = compactOnce();
    expect(c.status, c.stderr).toBe(0);
    const rows = await icebirdRows((await lake.catalog.metadataLocation('main', 'logs'))!);
    const row = rows.find((x) => x['body'] === 'many-keys')!;
    const attrs = row['attributes'] as Record<string, string>;
    expect(Object.keys(attrs)).toHaveLength(KEYS);
    expect(Object.keys(attrs).slice(0, 9)).toEqual(['k0', 'k1', 'k2', 'k3', 'k4', 'k5', 'k6', 'k7', 'k8']);
    expect([attrs['k7'], attrs['k8'], attrs[`k${KEYS - 1}`]]).toEqual(['last', '8', String(KEYS - 1)]);
  }, 240_000);
});
