// Schema migration (contract §8) against the real processes. Tables written
// by the previous release (schema version 1: no service_namespace or
// deployment_environment_name) keep landing data with their own schema and
// count siglake_compactor_schema_behind_total; `siglake migrate` adds the
// columns (ids 23 and 24) to `main` only, `--all-namespaces` to every
// tenant_* too, `--dry-run` changes nothing; reruns and concurrent runs are
// no-ops; kill -9 mid-run and a rerun finish the job. icebird reads the
// schema and rows; DuckDB reads old and new files together (old rows null).

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { icebergMetadata } from 'icebird';
import { beforeAll, describe, expect, it } from 'vitest';
import { FileStorage } from '../../src/iceberg/file-storage.js';
import { LosslessJson } from '../../src/iceberg/lossless-json.js';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import { TableMetadata } from '../../src/iceberg/table-metadata.js';
import { TableSchema } from '../../src/iceberg/table-schema.js';
import { duckQuery, icebirdDataFiles, icebirdRows } from '../helpers/iceberg.js';
import { post } from '../helpers/http.js';
import { CLI, REPO, runCli, startIngester } from '../helpers/ingester.js';
import { useLocalLake } from '../helpers/local-lake.js';
import { jsonBytes } from '../helpers/otlp-bodies.js';

/** Registers a table as the previous release made it: the 22 logs columns, no schema-version property. */
async function createV1Table(catalog: SqlCatalog, storage: FileStorage, ns: string, table: string): Promise<void> {
  const v1 = TableSchema.LOGS.restrictTo(new Set(Array.from({ length: 22 }, (_, i) => i + 1)), 0);
  const location = storage.locationOf(ns, table);
  const doc = LosslessJson.parse(TableMetadata.create(location, v1, Date.now()).toJson()) as Record<string, Record<string, unknown>>;
  delete doc['properties']!['siglake.schema-version'];
  const loc = `${location}/metadata/${TableMetadata.nextFileName(null)}`;
  await storage.putNew(loc, Buffer.from(LosslessJson.stringify(doc as never), 'utf8'));
  await catalog.ensureNamespace(ns);
  expect(await catalog.createTable(ns, table, loc)).toBe(true);
}

function logsWithResource(body: string, ns: string): Uint8Array {
  return jsonBytes({
    resourceLogs: [
      {
        resource: {
          attributes: [
            { key: 'service.name', value: { stringValue: 'shop' } },
            { key: 'service.namespace', value: { stringValue: ns } },
            { key: 'deployment.environment.name', value: { stringValue: 'prod' } },
          ],
        },
        scopeLogs: [{ logRecords: [{ timeUnixNano: String(BigInt(Date.now()) * 1_000_000n), body: { stringValue: body } }] }],
      },
    ],
  });
}

describe('siglake migrate', () => {
  const lake = useLocalLake('siglake-migrate-');
  const { dir, warehouse, flags } = lake;
  const walDir = path.join(dir, 'wal');
  let storage: FileStorage;

  const schemaOf = async (ns: string, table: string) => {
    const loc = (await lake.catalog.metadataLocation(ns, table))!;
    const cut = loc.lastIndexOf('/metadata/');
    const m = await icebergMetadata({ tableUrl: loc.slice(0, cut), metadataFileName: loc.slice(cut + 10) });
    const s = m.schemas.find((x) => x['schema-id'] === m['current-schema-id'])!;
    return { fields: s.fields.map((f) => [f.id, f.name]), version: m.properties?.['siglake.schema-version'], schemas: m.schemas.length };
  };
  const send = async (tenants: [string, string][]) => {
    const ing = await startIngester({ dataDir: dir, args: ['--trust-tenant-header', '--compactor=false', ...flags] });
    for (const [tenant, body] of tenants) {
      const r = await post(ing.url, '/v1/logs', logsWithResource(body, `ns-${body}`), { contentType: 'application/json', headers: { 'x-scope-orgid': tenant } });
      expect(r.status).toBe(200);
    }
    expect(await ing.stop()).toBe(0);
  };

  beforeAll(async () => {
    storage = new FileStorage(warehouse);
    await createV1Table(lake.catalog, storage, 'main', 'logs');
    await createV1Table(lake.catalog, storage, 'tenant_acme', 'logs');
  });

  it('an unmigrated table keeps landing data with its own schema, and the compactor counts it', async () => {
    await send([['default', 'old-main'], ['acme', 'old-acme']]);
    // The in-process compactor of the next life lands the earlier life's segments.
    const ing = await startIngester({ dataDir: dir, args: ['--trust-tenant-header', '--compact-interval-secs', '1', ...flags] });
    try {
      const deadline = Date.now() + 60_000;
      let m = await ing.metrics();
      // The per-table counters reach the main thread in a message after the round: wait for them too.
      const behind = (ns: string) => m.get(`siglake_compactor_schema_behind_total{namespace="${ns}",table="logs"}`) ?? 0;
      while ((m.get('siglake_compactor_commits_total') ?? 0) < 2 || behind('main') < 1 || behind('tenant_acme') < 1) {
        if (Date.now() > deadline) throw new Error('no commit and count in time');
        await new Promise((r) => setTimeout(r, 200));
        m = await ing.metrics();
      }
      expect(m.get('siglake_compactor_schema_behind_total{namespace="main",table="logs"}')).toBeGreaterThanOrEqual(1);
      expect(m.get('siglake_compactor_schema_behind_total{namespace="tenant_acme",table="logs"}')).toBeGreaterThanOrEqual(1);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
    const rows = await icebirdRows((await lake.catalog.metadataLocation('main', 'logs'))!);
    expect(rows.map((r) => r['body'])).toEqual(['old-main']);
    expect(rows[0]).not.toHaveProperty('service_namespace');
    expect((await schemaOf('main', 'logs')).fields.length).toBe(22);
  });

  it('--dry-run changes nothing; without --all-namespaces only main is migrated; a rerun is a no-op', async () => {
    const acmeBefore = await lake.catalog.metadataLocation('tenant_acme', 'logs');
    const mainBefore = await lake.catalog.metadataLocation('main', 'logs');
    const dry = runCli(['migrate', '--dry-run', ...flags]);
    expect(dry.status, dry.stderr).toBe(0);
    expect(dry.stdout.trim().split('\n').map((l) => JSON.parse(l))).toEqual([
      { namespace: 'main', table: 'logs', from: 1, to: 2, added: ['service_namespace', 'deployment_environment_name'], outcome: 'would-migrate' },
    ]);
    expect(await lake.catalog.metadataLocation('main', 'logs')).toBe(mainBefore);
    const r = runCli(['migrate', ...flags]);
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout.trim())).toMatchObject({ namespace: 'main', table: 'logs', outcome: 'migrated' });
    const s = await schemaOf('main', 'logs');
    expect(s.fields.slice(20)).toEqual([
      [21, 'attributes'],
      [22, 'dropped_attributes_count'],
      [23, 'service_namespace'],
      [24, 'deployment_environment_name'],
    ]);
    expect(s.version).toBe('2');
    expect(await lake.catalog.metadataLocation('tenant_acme', 'logs')).toBe(acmeBefore);
    expect((await schemaOf('tenant_acme', 'logs')).version).toBeUndefined();
    const again = runCli(['migrate', ...flags]);
    expect(again.status).toBe(0);
    expect(again.stdout).toBe('');
    expect((await schemaOf('main', 'logs')).schemas).toBe(2);
  });

  it('a migrated table lands the new columns; old rows read as null (icebird and DuckDB)', async () => {
    await send([['default', 'new-main']]);
    const c = runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', walDir, ...flags]);
    expect(c.status, c.stderr).toBe(0);
    const loc = (await lake.catalog.metadataLocation('main', 'logs'))!;
    const rows = (await icebirdRows(loc)).map((r) => [r['body'], r['service_namespace'] ?? null, r['deployment_environment_name'] ?? null]).sort();
    expect(rows).toEqual([
      ['new-main', 'ns-new-main', 'prod'],
      ['old-main', null, null],
    ]);
    const files = (await icebirdDataFiles(loc)).map((f) => `'${fileURLToPath(f.path)}'`);
    const duck = await duckQuery(`SELECT body, service_namespace FROM read_parquet([${files.join(', ')}], union_by_name = true) ORDER BY body`);
    expect(duck).toEqual([
      { body: 'new-main', service_namespace: 'ns-new-main' },
      { body: 'old-main', service_namespace: null },
    ]);
  });

  it('--all-namespaces migrates the tenants; concurrent runs and kill -9 mid-run leave each table migrated exactly once', async () => {
    for (let i = 0; i < 6; i++) await createV1Table(lake.catalog, storage, `tenant_t${i}`, 'logs');
    const killed = runCli(['migrate', '--all-namespaces', ...flags], { env: { SIGLAKE_TEST_HOOKS: '1', SIGLAKE_TEST_CRASH_MIGRATE: '2' } });
    expect(killed.status).toBeNull();
    expect(killed.stdout.trim().split('\n').length).toBe(2);
    const run = () =>
      new Promise<number | null>((resolve) => {
        const p = spawn(process.execPath, [CLI, 'migrate', '--all-namespaces', ...flags], { cwd: REPO, stdio: 'ignore' });
        p.on('exit', (code) => resolve(code));
      });
    expect(await Promise.all([run(), run(), run()])).toEqual([0, 0, 0]);
    for (const ns of ['tenant_acme', ...Array.from({ length: 6 }, (_, i) => `tenant_t${i}`)]) {
      const s = await schemaOf(ns, 'logs');
      expect(s.version, ns).toBe('2');
      expect(s.schemas, ns).toBe(2); // one schema added, not one per run
      expect(s.fields.map((f) => f[0]).slice(-2)).toEqual([23, 24]);
    }
    expect(runCli(['migrate', '--all-namespaces', '--dry-run', ...flags]).stdout).toBe('');
  });
});

describe('siglake migrate and what other engines set on a table', () => {
  const lake = useLocalLake('siglake-migrate-other-');
  const { warehouse, flags } = lake;

  /** A table whose metadata `edit` changed from the previous release's (an edit another engine made). */
  async function v1TableEdited(ns: string, edit: (doc: Record<string, unknown>) => void): Promise<void> {
    const storage = new FileStorage(warehouse);
    const v1 = TableSchema.LOGS.restrictTo(new Set(Array.from({ length: 22 }, (_, i) => i + 1)), 0);
    const location = storage.locationOf(ns, 'logs');
    const doc = LosslessJson.parse(TableMetadata.create(location, v1, Date.now()).toJson()) as Record<string, unknown>;
    delete (doc['properties'] as Record<string, unknown>)['siglake.schema-version'];
    edit(doc);
    const loc = `${location}/metadata/${TableMetadata.nextFileName(null)}`;
    await storage.putNew(loc, Buffer.from(LosslessJson.stringify(doc as never), 'utf8'));
    await lake.catalog.ensureNamespace(ns);
    expect(await lake.catalog.createTable(ns, 'logs', loc)).toBe(true);
  }
  const current = async (ns: string) => {
    const doc = JSON.parse((await import('node:fs')).readFileSync(fileURLToPath((await lake.catalog.metadataLocation(ns, 'logs'))!), 'utf8'));
    return { doc, schema: doc.schemas.find((s: { 'schema-id': number }) => s['schema-id'] === doc['current-schema-id']) };
  };

  it("keeps the current schema's identifier-field-ids", async () => {
    await v1TableEdited('tenant_ident', (doc) => {
      (doc['schemas'] as Record<string, unknown>[])[0]!['identifier-field-ids'] = [1];
    });
    const r = runCli(['migrate', '--all-namespaces', ...flags]);
    expect(r.status, r.stderr).toBe(0);
    const { schema } = await current('tenant_ident');
    expect(schema.fields.length).toBe(24);
    expect(schema['identifier-field-ids']).toEqual([1]);
  });

  it('refuses to add back a column another engine dropped (its id would bring the old values back)', async () => {
    await v1TableEdited('tenant_dropped', (doc) => {
      // Schema 0 had service_namespace (id 23); schema 1, current, has it dropped.
      const full = TableSchema.LOGS.icebergSchema() as Record<string, unknown>;
      const fields = (full['fields'] as { id: number }[]).filter((f) => f.id <= 23);
      doc['schemas'] = [
        { type: 'struct', 'schema-id': 0, fields },
        { type: 'struct', 'schema-id': 1, fields: fields.filter((f) => f.id !== 23) },
      ];
      doc['current-schema-id'] = 1;
      doc['last-column-id'] = 23;
    });
    const before = await lake.catalog.metadataLocation('tenant_dropped', 'logs');
    const r = runCli(['migrate', '--all-namespaces', ...flags]);
    const line = r.stdout.trim().split('\n').map((l) => JSON.parse(l)).find((l) => l.namespace === 'tenant_dropped');
    expect(line).toMatchObject({ outcome: 'refused' });
    expect(line.reason).toMatch(/service_namespace \(id 23\) was dropped/);
    expect(await lake.catalog.metadataLocation('tenant_dropped', 'logs')).toBe(before);
  });
  it('a table whose metadata cannot be read is reported and the run goes on to the tables after it', async () => {
    await v1TableEdited('tenant_aa_broken', () => undefined);
    await v1TableEdited('tenant_zz_after', () => undefined);
    // The broken table's metadata file goes bad (as a half-copied restore leaves it).
    fs.writeFileSync(fileURLToPath((await lake.catalog.metadataLocation('tenant_aa_broken', 'logs'))!), '{ not json');
    const r = runCli(['migrate', '--all-namespaces', ...flags]);
    expect(r.status, r.stderr).toBe(1);
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
    const broken = lines.find((l) => l.namespace === 'tenant_aa_broken');
    expect(broken).toMatchObject({ table: 'logs', outcome: 'failed' });
    expect(broken.reason).toMatch(/JSON/);
    expect(lines.find((l) => l.namespace === 'tenant_zz_after')).toMatchObject({ table: 'logs', outcome: 'migrated' });
  });
});

describe('siglake migrate during a compactor commit', () => {
  const lake = useLocalLake('siglake-migrate-race-');
  const { dir, warehouse, flags } = lake;

  it('rows the compactor wrote with the pre-migration schema do not land once migrate wins the swap: the next round lands them with the new columns', async () => {
    const storage = new FileStorage(warehouse);
    await createV1Table(lake.catalog, storage, 'main', 'logs');
    // Every commit is held 3 s between its metadata file and the swap: migrate swaps first.
    const ing = await startIngester({ dataDir: dir, env: { SIGLAKE_TEST_COMMIT_DELAY_MS: '3000' }, args: ['--compact-interval-secs', '1', '--wal-segment-max-age-secs', '1', ...flags] });
    try {
      expect((await post(ing.url, '/v1/logs', logsWithResource('racing', 'ns-racing'), { contentType: 'application/json' })).status).toBe(200);
      const mdir = path.join(warehouse, 'main', 'logs', 'metadata');
      const deadline = Date.now() + 60_000;
      // The compactor, with the table's 22-column schema, has written its metadata file and holds.
      while (!fs.readdirSync(mdir).some((f) => f.startsWith('00001-') && f.endsWith('.metadata.json'))) {
        if (Date.now() > deadline) throw new Error('no held commit');
        await new Promise((r) => setTimeout(r, 50));
      }
      const mig = runCli(['migrate', ...flags]);
      expect(mig.status, mig.stderr).toBe(0);
      let m = await ing.metrics();
      while ((m.get('siglake_compactor_commits_total') ?? 0) < 1) {
        if (Date.now() > deadline) throw new Error('no commit in time');
        await new Promise((r) => setTimeout(r, 200));
        m = await ing.metrics();
      }
    } finally {
      expect(await ing.stop()).toBe(0);
    }
    const rows = (await icebirdRows((await lake.catalog.metadataLocation('main', 'logs'))!)).map((r) => [r['body'], r['service_namespace'] ?? null, r['deployment_environment_name'] ?? null]);
    // Before, the retry after the lost swap committed the 22-column files: service_namespace null for good.
    expect(rows).toEqual([['racing', 'ns-racing', 'prod']]);
  });
});
