// End to end on an S3 warehouse: the real OpenTelemetry exporters send logs
// and traces for two tenants to `siglake ingest`; `siglake compact` lands them
// in `s3://…` on a real SeaweedFS server, credentials from the AWS
// environment variables only. icebird (following metadata → manifest list →
// manifests → Parquet, every object fetched from the bucket through the SDK)
// must return exactly the acknowledged records, DuckDB reading the same
// Parquet objects must agree, and the bucket must hold no data file the
// metadata does not reference.

import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import { duckQuery, icebirdDataFiles, icebirdRows } from '../helpers/iceberg.js';
import { runCli, startIngester } from '../helpers/ingester.js';
import { exportLogs, exportSpans, makeLogRecords, makeSpans } from '../helpers/otel.js';
import { downloadObject, splitS3, useSeaweedBucket } from '../helpers/seaweedfs.js';

const BUCKET = 'siglake-lake';

describe('Iceberg tables on an S3 warehouse (SeaweedFS)', () => {
  const lake = useSeaweedBucket(BUCKET, { dirPrefix: 'siglake-s3-e2e-', s3Fetch: true });

  it('lands acknowledged records as s3:// tables that independent readers read back exactly', async () => {
    const { sw, dataDir, walDir, catalogUrl, lakeFlags } = lake;
    const ing = await startIngester({ dataDir, args: ['--trust-tenant-header', '--compactor=false', ...lakeFlags], env: sw.env });
    const acked = new Map<string, { logs: string[]; traces: string[] }>();
    for (const tenant of ['acme', 'globex']) {
      const target = { url: ing.url, grpcAddress: ing.grpcAddress, headers: { 'x-scope-orgid': tenant } };
      const logs = Array.from({ length: 40 }, (_, i) => `s3-${tenant}-log-${i}`);
      expect((await exportLogs(target, 'http', await makeLogRecords(logs, `svc-${tenant}`))).ok).toBe(true);
      const traces = Array.from({ length: 10 }, (_, i) => `s3-${tenant}-span-${i}`);
      expect((await exportSpans(target, 'grpc', await makeSpans(traces, `svc-${tenant}`))).ok).toBe(true);
      acked.set(tenant, { logs, traces });
    }
    expect(await ing.stop()).toBe(0);

    const r = runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', walDir, ...lakeFlags], { env: sw.env });
    expect(r.status, r.stderr + r.stdout.slice(-2000)).toBe(0);

    const catalog = SqlCatalog.open(catalogUrl, 'siglake');
    try {
      for (const [tenant, want] of acked) {
        for (const table of ['logs', 'traces'] as const) {
          const loc = await catalog.metadataLocation(`tenant_${tenant}`, table);
          expect(loc).toMatch(new RegExp(`^s3://${BUCKET}/warehouse/tenant_${tenant}/${table}/metadata/00000-[0-9a-f-]+\\.metadata\\.json$`));
          // Every path in the metadata is an s3:// URI under the table's location.
          const metadata = JSON.parse(Buffer.from(await (await fetch(`https://${BUCKET}.s3.amazonaws.com/${splitS3(loc!)[1]}`)).arrayBuffer()).toString());
          expect(metadata.location).toBe(`s3://${BUCKET}/warehouse/tenant_${tenant}/${table}`);
          for (const snap of metadata.snapshots) expect(snap['manifest-list']).toMatch(new RegExp(`^s3://${BUCKET}/warehouse/tenant_${tenant}/${table}/metadata/`));

          const column = table === 'traces' ? 'name' : 'body';
          const rows = await icebirdRows(loc!);
          expect(rows.map((row) => row[column] as string).sort()).toEqual([...want[table]].sort());
          expect(rows.every((row) => row['service_name'] === `svc-${tenant}`)).toBe(true);

          // DuckDB over the same Parquet objects, downloaded from the bucket.
          const files = await icebirdDataFiles(loc!);
          expect(files.length).toBeGreaterThan(0);
          const local: string[] = [];
          for (const [i, f] of files.entries()) {
            expect(f.path).toMatch(new RegExp(`^s3://${BUCKET}/warehouse/tenant_${tenant}/${table}/data/time_day=`));
            const file = path.join(dataDir, `${tenant}-${table}-${i}.parquet`);
            await downloadObject(sw, ...splitS3(f.path), file);
            local.push(file);
          }
          const duck = await duckQuery(`SELECT ${column} AS v FROM read_parquet([${local.map((p) => `'${p}'`).join(', ')}]) ORDER BY 1`);
          expect(duck.map((d) => d['v'])).toEqual([...want[table]].sort());

          // No stray data object: the bucket's data files are exactly the manifests' ones.
          const keys = await sw.keys(BUCKET, `warehouse/tenant_${tenant}/${table}/data/`);
          expect(keys.map((k) => `s3://${BUCKET}/${k}`).sort()).toEqual(files.map((f) => f.path).sort());
        }
      }
    } finally {
      await catalog.close();
    }
    // The WAL gave everything up, and the probe objects of the open() checks are gone.
    expect(runCli(['wal', 'dump', walDir]).stdout.trim()).toBe('');
    expect(await sw.keys(BUCKET, 'warehouse/.siglake/')).toEqual([]);
  });
});
