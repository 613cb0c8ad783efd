// Retention on an S3 warehouse (issue 17: "compaction, retention and queries
// all work on it"): logs of an old day and of today land in `s3://…` on a real
// SeaweedFS; `siglake retention --once` drops the old day in one snapshot,
// expires the older snapshots and deletes, from the bucket, the data files
// only they referenced. icebird (every object fetched from the bucket) then
// returns today's rows only, and the bucket's data objects are exactly the
// ones the current snapshot references.

import { describe, expect, it } from 'vitest';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import { post } from '../helpers/http.js';
import { icebirdDataFiles, icebirdRows } from '../helpers/iceberg.js';
import { runCli, startIngester } from '../helpers/ingester.js';
import { jsonBytes } from '../helpers/otlp-bodies.js';
import { useSeaweedBucket } from '../helpers/seaweedfs.js';

const BUCKET = 'siglake-retention';
const DAY_NS = 86_400_000_000_000n;
const today = BigInt(Math.floor(Date.now() / 86_400_000)) * DAY_NS;

/** One OTLP/JSON logs request: a record per (body, days ago) at noon UTC of that day. */
function logsAt(records: [string, number][]): Uint8Array {
  return jsonBytes({
    resourceLogs: [
      {
        resource: { attributes: [{ key: 'service.name', value: { stringValue: 'ret-s3' } }] },
        scopeLogs: [{ logRecords: records.map(([body, ago]) => ({ timeUnixNano: String(today - BigInt(ago) * DAY_NS + DAY_NS / 2n), body: { stringValue: body } })) }],
      },
    ],
  });
}

describe('retention on an S3 warehouse (SeaweedFS)', () => {
  const lake = useSeaweedBucket(BUCKET, { dirPrefix: 'siglake-s3-retention-', s3Fetch: true });

  it('drops the days past the cut-off from the table and their objects from the bucket', async () => {
    const { sw, dataDir, walDir, catalogUrl, lakeFlags } = lake;
    const ing = await startIngester({ dataDir, args: ['--compactor=false', ...lakeFlags], env: sw.env });
    const old = Array.from({ length: 5 }, (_, i) => `old-${i}`);
    const fresh = Array.from({ length: 5 }, (_, i) => `new-${i}`);
    const r = await post(ing.url, '/v1/logs', logsAt([...old.map((b): [string, number] => [b, 30]), ...fresh.map((b): [string, number] => [b, 0])]), {
      contentType: 'application/json',
    });
    expect(r.status).toBe(200);
    expect(await ing.stop()).toBe(0);
    const compact = runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', walDir, ...lakeFlags], { env: sw.env });
    expect(compact.status, compact.stderr + compact.stdout.slice(-2000)).toBe(0);

    const catalog = SqlCatalog.open(catalogUrl, 'siglake');
    try {
      const before = (await catalog.metadataLocation('main', 'logs'))!;
      expect((await icebirdRows(before)).map((row) => row['body']).sort()).toEqual([...fresh, ...old].sort());
      const oldFiles = (await icebirdDataFiles(before)).map((f) => f.path).filter((p) => !p.includes(`time_day=${new Date(Number(today / 1_000_000n)).toISOString().slice(0, 10)}`));
      expect(oldFiles.length).toBeGreaterThan(0);

      const ret = runCli(['retention', '--once', ...lakeFlags, '--retention-logs-days', '7', '--retention-snapshot-max-age-hours', '0'], { env: sw.env });
      expect(ret.status, ret.stderr + ret.stdout.slice(-2000)).toBe(0);

      const after = (await catalog.metadataLocation('main', 'logs'))!;
      expect(after).not.toBe(before);
      expect((await icebirdRows(after)).map((row) => row['body']).sort()).toEqual([...fresh].sort());
      // The bucket holds exactly the data objects the current snapshot references: the old day's are deleted.
      const kept = (await icebirdDataFiles(after)).map((f) => f.path).sort();
      const keys = (await sw.keys(BUCKET, 'warehouse/main/logs/data/')).map((k) => `s3://${BUCKET}/${k}`).sort();
      expect(keys).toEqual(kept);
      for (const f of oldFiles) expect(keys).not.toContain(f);
    } finally {
      await catalog.close();
    }
  });
});
