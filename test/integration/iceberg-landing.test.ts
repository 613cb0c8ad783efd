// End to end: the real OpenTelemetry exporters send logs and traces for
// several tenants to the real `siglake ingest`; the compactor (as
// `siglake compact`, then inside `siglake ingest`) lands them; icebird loads
// each tenant's tables from their metadata files and must return exactly the
// records acknowledged for that tenant and none of another's; DuckDB, reading
// the Parquet files the manifests list, must agree.

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { duckParquet, duckPath, duckQuery, filesUnder, icebirdDataFiles, icebirdManifestFiles, icebirdRows } from '../helpers/iceberg.js';
import { runCli, startIngester, type RunningIngester } from '../helpers/ingester.js';
import { useLocalLake } from '../helpers/local-lake.js';
import { exportLogs, exportSpans, makeLogRecords, makeSpans, type Transport } from '../helpers/otel.js';

const TENANTS = ['default', 'acme', 'globex'] as const;
const NAMESPACE: Record<string, string> = { default: 'main', acme: 'tenant_acme', globex: 'tenant_globex' };

describe('OTel exporters → WAL → Iceberg, per tenant', () => {
  const lake = useLocalLake('siglake-iceberg-e2e-');
  const { dir: dataDir, flags: icebergFlags } = lake;
  const walDir = path.join(dataDir, 'wal');
  /** tenant → table → bodies / span names acknowledged. */
  const acked = new Map<string, Map<string, string[]>>();
  let ing: RunningIngester | undefined;

  const ack = (tenant: string, table: string, items: string[]) => {
    const t = acked.get(tenant) ?? new Map<string, string[]>();
    t.set(table, [...(t.get(table) ?? []), ...items]);
    acked.set(tenant, t);
  };

  async function send(target: RunningIngester, round: string): Promise<void> {
    for (const tenant of TENANTS) {
      for (const transport of ['http', 'grpc'] as Transport[]) {
        const headers: Record<string, string> = tenant === 'default' ? {} : { 'x-scope-orgid': tenant };
        const t = { url: target.url, grpcAddress: target.grpcAddress, headers };
        const bodies = Array.from({ length: 7 }, (_, i) => `${round}-${tenant}-${transport}-log-${i}`);
        const logs = await exportLogs(t, transport, await makeLogRecords(bodies, `svc-${tenant}`));
        expect(logs.ok, logs.error?.message).toBe(true);
        ack(tenant, 'logs', bodies);
        const names = Array.from({ length: 4 }, (_, i) => `${round}-${tenant}-${transport}-span-${i}`);
        const spans = await exportSpans(t, transport, await makeSpans(names, `svc-${tenant}`));
        expect(spans.ok).toBe(true);
        ack(tenant, 'traces', names);
      }
    }
    // A managed index of acme's: its own table in acme's namespace.
    const audit = [`${round}-acme-audit-0`, `${round}-acme-audit-1`];
    const out = await exportLogs(
      { url: target.url, grpcAddress: target.grpcAddress, headers: { 'x-scope-orgid': 'acme', 'x-siglake-index': 'audit' } },
      'http',
      await makeLogRecords(audit, 'svc-acme'),
    );
    expect(out.ok).toBe(true);
    ack('acme', 'audit', audit);
    // A refused request leaves nothing: no lane, no namespace, no row.
    const refused = await exportLogs(
      { url: target.url, grpcAddress: target.grpcAddress, headers: { 'x-scope-orgid': 'bad tenant!' } },
      'http',
      await makeLogRecords([`${round}-refused`]),
    );
    expect(refused.ok).toBe(false);
  }

  /** Each tenant's tables hold exactly what was acknowledged for it, by icebird and by DuckDB. */
  async function expectLanded(): Promise<void> {
    for (const tenant of TENANTS) {
      for (const [table, items] of acked.get(tenant)!) {
        const loc = await lake.catalog.metadataLocation(NAMESPACE[tenant]!, table);
        expect(loc, `${tenant}.${table}`).not.toBeNull();
        const column = table === 'traces' ? 'name' : 'body';
        const rows = await icebirdRows(loc!);
        const got = rows.map((r) => r[column] as string);
        expect(got.sort()).toEqual([...items].sort());
        expect(rows.every((r) => r['service_name'] === `svc-${tenant}`)).toBe(true);
        const files = await icebirdDataFiles(loc!);
        const duck = await duckQuery(
          `SELECT count(*)::INTEGER AS n, list(${column} ORDER BY ${column}) AS items, count(DISTINCT resource_attributes['service.name'])::INTEGER AS services FROM ${duckParquet(files.map((f) => f.path))}`,
        );
        expect(duck).toEqual([{ n: items.length, items: [...items].sort(), services: 1 }]);
        await expectPrunable(loc!, column);
      }
    }
    // No namespace for the refused tenant, and nothing else.
    expect(await lake.catalog.namespaces()).toEqual(['main', 'tenant_acme', 'tenant_globex']);
    expect(await lake.catalog.tables('tenant_acme')).toEqual(['audit', 'logs', 'traces']);
  }

  /**
   * What an engine needs to read and prune the files, checked by readers that
   * share no code with the writer: every Parquet column carries its Iceberg
   * field id and zstd pages (DuckDB's parquet_schema / parquet_metadata), and
   * every manifest entry carries value and null counts for every field id and
   * bounds that hold the file's values (icebird's manifest reading, DuckDB's min/max).
   */
  async function expectPrunable(metadataLocation: string, textColumn: string): Promise<void> {
    const { fields, files } = await icebirdManifestFiles(metadataLocation);
    const ids: number[] = [];
    for (const f of fields) {
      ids.push(f.id);
      if (typeof f.type === 'object' && f.type.type === 'map') ids.push(f.type['key-id']!, f.type['value-id']!);
    }
    const idOf = (name: string) => fields.find((f) => f.name === name)!.id;
    const primitive = fields.filter((f) => typeof f.type === 'string').map((f) => f.id);
    expect(files.length).toBeGreaterThan(0);
    for (const file of files) {
      const src = duckParquet([file.path]);
      const where = duckPath(file.path);
      const columns = await duckQuery(`SELECT name, field_id FROM parquet_schema(${where})`);
      const withId = columns.filter((c) => c['field_id'] !== null).map((c) => Number(c['field_id']));
      expect(withId.sort((a, b) => a - b), `field ids in ${file.path}`).toEqual([...ids].sort((a, b) => a - b));
      // The only columns without an id are the root and the maps' repeated key_value groups.
      expect(columns.filter((c) => c['field_id'] === null).length).toBe(1 + (ids.length - fields.length) / 2);
      expect(await duckQuery(`SELECT DISTINCT compression FROM parquet_metadata(${where})`)).toEqual([{ compression: 'ZSTD' }]);

      expect([...file.valueCounts.keys()].sort((a, b) => a - b)).toEqual([...ids].sort((a, b) => a - b));
      expect([...file.nullValueCounts.keys()].sort((a, b) => a - b)).toEqual([...ids].sort((a, b) => a - b));
      for (const id of primitive) expect(file.valueCounts.get(id), `value count of field ${id}`).toBe(file.recordCount);
      expect(file.nullValueCounts.get(idOf('time'))).toBe(0);
      expect(file.nullValueCounts.get(idOf(textColumn))).toBe(0);

      const [actual] = await duckQuery(
        `SELECT min(${textColumn}) AS lo, max(${textColumn}) AS hi, epoch_us(min(time))::VARCHAR AS tlo, epoch_us(max(time))::VARCHAR AS thi, count(*)::INTEGER AS n FROM ${src}`,
      );
      expect(actual!['n']).toBe(file.recordCount);
      const le64 = (b: Uint8Array | undefined) => Buffer.from(b!).readBigInt64LE(0).toString();
      expect(le64(file.lowerBounds.get(idOf('time')))).toBe(actual!['tlo']);
      expect(le64(file.upperBounds.get(idOf('time')))).toBe(actual!['thi']);
      // String bounds may be truncated (Iceberg's truncate(16)): the lower one a prefix of the minimum, the upper one at or above the maximum.
      const lo = Buffer.from(file.lowerBounds.get(idOf(textColumn))!).toString('utf8');
      const hi = Buffer.from(file.upperBounds.get(idOf(textColumn))!).toString('utf8');
      expect((actual!['lo'] as string).startsWith(lo)).toBe(true);
      expect(lo.length).toBeGreaterThan(0);
      expect(Buffer.compare(Buffer.from(hi), Buffer.from(actual!['hi'] as string))).toBeGreaterThanOrEqual(0);
    }
  }

  afterAll(async () => {
    if (ing !== undefined) await ing.stop();
  });

  it('siglake compact --once lands exactly what each tenant was acknowledged', async () => {
    // acme's managed index exists before data is sent to it (contract §6).
    ing = await startIngester({ dataDir, args: ['--trust-tenant-header', '--compactor=false', ...icebergFlags], indexes: { acme: ['audit'] } });
    await send(ing, 'r1');
    // Killed, not stopped: a graceful stop seals every live segment (and says
    // so in each lane's .sealed marker), which would let the next run land them.
    await ing.kill9();
    ing = undefined;
    // Beside a live ingester (no --ingester-stopped) each lane's unsealed highest segment waits: nothing lands yet.
    const waiting = runCli(['compact', '--once', '--wal-dir', walDir, ...icebergFlags]);
    expect(waiting.status, waiting.stderr).toBe(0);
    // Only the namespace the index creation made: no table has a snapshot yet.
    expect(await lake.catalog.namespaces()).toEqual(['tenant_acme']);
    expect(await lake.catalog.tables('tenant_acme')).toEqual(['audit']);
    const r = runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', walDir, ...icebergFlags]);
    expect(r.status, r.stderr).toBe(0);
    await expectLanded();
    // Every lane's segments are retired (the last one of each kept empty for its number).
    const segs = filesUnder(walDir).filter((f) => f.endsWith('.seg'));
    expect(segs.length).toBe(3 * 2 + 1);
    expect(segs.map((f) => fs.statSync(path.join(walDir, f)).size)).toEqual(segs.map(() => 0));
    const dump = runCli(['wal', 'dump', walDir]);
    expect(dump.status).toBe(0);
    expect(dump.stdout.trim()).toBe('');
  });

  it('the compactor inside siglake ingest lands the segments of an earlier life, off the acceptor thread', async () => {
    ing = await startIngester({ dataDir, args: ['--trust-tenant-header', '--compactor=false', ...icebergFlags] });
    await send(ing, 'r2');
    expect(await ing.stop()).toBe(0);
    const born = Date.now();
    ing = await startIngester({ dataDir, args: ['--trust-tenant-header', '--compact-interval-secs', '1', ...icebergFlags] });
    const deadline = Date.now() + 30_000;
    for (;;) {
      const m = await ing.metrics();
      if ((m.get('siglake_compactor_rounds_total') ?? 0) > 0 && (m.get('siglake_compactor_commits_total') ?? 0) >= 7) break;
      if (Date.now() > deadline) throw new Error(`compactor did not land r2 in time: ${JSON.stringify(Object.fromEntries(m))}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    await expectLanded();
    const m = await ing.metrics();
    expect(m.get('siglake_compactor_commits_total')).toBe(7);
    expect(m.get('siglake_compactor_files_written_total')).toBeGreaterThanOrEqual(7);
    expect(m.get('siglake_compactor_rows_written_total')).toBe(3 * 2 * (7 + 4) + 2);
    expect(m.get('siglake_compactor_lag_seconds')).toBe(0);
    expect(m.get('siglake_compactor_commit_seconds_count')).toBe(7);
    expect(m.get('siglake_compactor_round_errors_total')).toBe(0);
    // Its rounds' time is counted, and no more than the life has lasted.
    expect(m.get('siglake_compactor_busy_seconds_total')).toBeGreaterThan(0);
    expect(m.get('siglake_compactor_busy_seconds_total')).toBeLessThan((Date.now() - born) / 1000);
    // The ingester still answers while it compacts, and stops cleanly with its compactor.
    expect((await fetch(`${ing.url}/readyz`)).status).toBe(200);
    expect(await ing.stop()).toBe(0);
    ing = undefined;
  });
});
