// Mapped columns at compaction, end to end: `siglake index create` defines
// two tenants' `payments` indexes with different mappings; OTLP/JSON logs go
// to the real `siglake ingest` with x-siglake-index; the compactor (as
// `siglake compact`, then inside `siglake ingest` for the metric) lands them.
// icebird reads each table from its metadata and DuckDB reads the Parquet
// files the manifests list: both must see the converted values, nulls where
// a value did not convert or was absent, and only the tenant's own rows.

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { duckParquet, duckQuery, icebirdDataFiles, icebirdRows } from '../helpers/iceberg.js';
import { post } from '../helpers/http.js';
import { runCli, startIngester, type RunningIngester } from '../helpers/ingester.js';
import { useLocalLake } from '../helpers/local-lake.js';
import { jsonBytes } from '../helpers/otlp-bodies.js';

type Attr = { key: string; value: Record<string, unknown> };
const s = (key: string, v: string): Attr => ({ key, value: { stringValue: v } });
const i = (key: string, v: number): Attr => ({ key, value: { intValue: String(v) } });
const b = (key: string, v: boolean): Attr => ({ key, value: { boolValue: v } });
const d = (key: string, v: number): Attr => ({ key, value: { doubleValue: v } });

/** One OTLP/JSON logs request: one record per entry, all under one resource and scope. */
function logs(resource: Attr[], scope: Attr[], records: { body: string; attrs: Attr[] }[]): Uint8Array {
  return jsonBytes({
    resourceLogs: [
      {
        resource: { attributes: [s('service.name', 'pay'), ...resource] },
        scopeLogs: [
          {
            scope: { name: 'pay-scope', attributes: scope },
            logRecords: records.map((r, n) => ({
              timeUnixNano: String(1_767_225_600_000_000_000n + BigInt(n) * 1_000_000_000n), // 2026-01-01
              body: { stringValue: r.body },
              attributes: r.attrs,
            })),
          },
        ],
      },
    ],
  });
}

describe('index mappings at compaction', () => {
  const lake = useLocalLake('siglake-index-map-');
  const { dir, flags } = lake;
  const walDir = path.join(dir, 'wal');
  let ing: RunningIngester | undefined;

  const define = (tenant: string, yaml: string) => {
    const f = path.join(dir, `${tenant}.yaml`);
    fs.writeFileSync(f, yaml);
    const r = runCli(['index', 'create', '--file', f, '--tenant', tenant, ...flags]);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  };
  const send = async (tenant: string, body: Uint8Array) => {
    const r = await post(ing!.url, '/v1/logs', body, { contentType: 'application/json', headers: { 'x-scope-orgid': tenant, 'x-siglake-index': 'payments' } });
    expect(r.status).toBe(200);
  };

  afterAll(async () => {
    if (ing !== undefined) await ing.stop();
  });

  it('mapped columns hold converted values; a value that does not convert is null; each tenant lands only its own rows', async () => {
    define(
      'acme',
      `name: payments
mapping:
  - { column: http_status, from: attributes.http.response.status_code, type: long }
  - { column: amount, from: attributes.amount, type: double }
  - { column: ok, from: attributes.ok, type: boolean }
  - { column: paid_at, from: attributes.paid_at, type: timestamp }
  - { column: region, from: resource.cloud.region, type: string }
  - { column: tier, from: scope.tier, type: string }
  - { column: body_num, from: body, type: long }
`,
    );
    define('globex', 'name: payments\nretentionDays: 3\nmapping:\n  - { column: customer, from: attributes.customer, type: string }\n');
    ing = await startIngester({ dataDir: dir, args: ['--trust-tenant-header', '--compactor=false', ...flags] });
    await send(
      'acme',
      logs([s('cloud.region', 'eu-west-1')], [s('tier', 'gold')], [
        { body: '42', attrs: [i('http.response.status_code', 200), d('amount', 12.5), b('ok', true), s('paid_at', '2026-01-01T10:00:00.123456Z')] },
        { body: 'not a number', attrs: [s('http.response.status_code', 'two hundred'), s('amount', 'lots'), s('ok', 'maybe'), s('paid_at', 'yesterday')] },
        { body: '-7', attrs: [s('http.response.status_code', '503'), i('amount', 3), s('paid_at', '1767261600000000000')] },
      ]),
    );
    await send('globex', logs([], [], [{ body: 'g1', attrs: [s('customer', 'c-1'), i('http.response.status_code', 404)] }]));
    expect(await ing.stop()).toBe(0);
    ing = undefined;
    const r = runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', walDir, ...flags]);
    expect(r.status, r.stderr).toBe(0);

    const acmeLoc = (await lake.catalog.metadataLocation('tenant_acme', 'payments'))!;
    const rows = (await icebirdRows(acmeLoc)).sort((x, y) => Number(x['time']) - Number(y['time']));
    const pick = (row: Record<string, unknown>) => ({
      http_status: row['http_status'] === null ? null : BigInt(row['http_status'] as bigint),
      amount: row['amount'],
      ok: row['ok'],
      paid_at: row['paid_at'] === null ? null : new Date(row['paid_at'] as Date).toISOString(),
      region: row['region'],
      tier: row['tier'],
      body_num: row['body_num'] === null ? null : BigInt(row['body_num'] as bigint),
    });
    expect(rows.map(pick)).toEqual([
      { http_status: 200n, amount: 12.5, ok: true, paid_at: '2026-01-01T10:00:00.123Z', region: 'eu-west-1', tier: 'gold', body_num: 42n },
      { http_status: null, amount: null, ok: null, paid_at: null, region: 'eu-west-1', tier: 'gold', body_num: null },
      { http_status: 503n, amount: 3, ok: null, paid_at: '2026-01-01T10:00:00.000Z', region: 'eu-west-1', tier: 'gold', body_num: -7n },
    ]);
    expect(rows.map((x) => x['body'])).toEqual(['42', 'not a number', '-7']);
    expect(rows[0]).not.toHaveProperty('customer');

    // DuckDB over the files the manifests list: the same values, and the exact µs of paid_at.
    const files = (await icebirdDataFiles(acmeLoc)).map((f) => f.path);
    const duck = await duckQuery(
      `SELECT http_status, amount, ok, epoch_us(paid_at) AS paid_us, region, body_num FROM ${duckParquet(files)} ORDER BY time`,
    );
    expect(duck).toEqual([
      { http_status: '200', amount: 12.5, ok: true, paid_us: '1767261600123456', region: 'eu-west-1', body_num: '42' },
      { http_status: null, amount: null, ok: null, paid_us: null, region: 'eu-west-1', body_num: null },
      { http_status: '503', amount: 3, ok: null, paid_us: '1767261600000000', region: 'eu-west-1', body_num: '-7' },
    ]);

    const globexRows = await icebirdRows((await lake.catalog.metadataLocation('tenant_globex', 'payments'))!);
    expect(globexRows.map((x) => [x['body'], x['customer']])).toEqual([['g1', 'c-1']]);
    expect(globexRows[0]).not.toHaveProperty('http_status');
  });

  it('the compactor inside siglake ingest counts values that did not convert, per table', async () => {
    ing = await startIngester({ dataDir: dir, args: ['--trust-tenant-header', '--compactor=false', ...flags] });
    await send('acme', logs([], [], [{ body: 'x', attrs: [s('http.response.status_code', 'abc'), s('amount', '1e999'), s('ok', 'TRUE')] }]));
    expect(await ing.stop()).toBe(0);
    // The next life's compactor lands the segment of the earlier one.
    ing = await startIngester({ dataDir: dir, args: ['--trust-tenant-header', '--compact-interval-secs', '1', ...flags] });
    const deadline = Date.now() + 60_000;
    let m = await ing.metrics();
    // The commit counter is shared memory; the per-table counters reach the main thread in a message
    // after the round, so wait for both.
    while ((m.get('siglake_compactor_commits_total') ?? 0) < 1 || m.get('siglake_compactor_mapping_errors_total{table="payments"}') === undefined) {
      if (Date.now() > deadline) throw new Error('compactor did not commit and report in time');
      await new Promise((r) => setTimeout(r, 200));
      m = await ing.metrics();
    }
    // status 'abc', amount 1e999 (not finite) and body 'x' (body_num long) do not convert; 'TRUE' is a boolean.
    expect(m.get('siglake_compactor_mapping_errors_total{table="payments"}')).toBe(3);
    const rows = await icebirdRows((await lake.catalog.metadataLocation('tenant_acme', 'payments'))!);
    expect(rows.filter((x) => x['body'] === 'x').map((x) => [x['http_status'], x['amount'], x['ok']])).toEqual([[null, null, true]]);
    expect(await ing.stop()).toBe(0);
    ing = undefined;
  });
});
