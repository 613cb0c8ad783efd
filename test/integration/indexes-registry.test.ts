// The index registry (contract §6): `siglake index` as a real process against
// a SQLite catalog, the index API handlers against a real PostgreSQL catalog.
// What is created is read back by icebird from the metadata files the catalog
// points at (an independent reader), not through src/indexes.

import fs from 'node:fs';
import path from 'node:path';
import { icebergMetadata } from 'icebird';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileStorage } from '../../src/iceberg/file-storage.js';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import { handleIndexRequest } from '../../src/indexes/http-handlers.js';
import { IndexRegistry } from '../../src/indexes/registry.js';
import { installFileFetch } from '../helpers/iceberg.js';
import { runCli, tempDir } from '../helpers/ingester.js';
import { useLocalLake } from '../helpers/local-lake.js';
import { startPostgres, type PostgresServer } from '../helpers/postgres.js';

interface Field {
  id: number;
  name: string;
  type: unknown;
}

/** icebird's reading of a table's current schema and properties. */
async function icebirdSchema(metadataLocation: string): Promise<{ fields: Field[]; properties: Record<string, string>; lastColumnId: number }> {
  const cut = metadataLocation.lastIndexOf('/metadata/');
  const m = await icebergMetadata({ tableUrl: metadataLocation.slice(0, cut), metadataFileName: metadataLocation.slice(cut + '/metadata/'.length) });
  const schema = m.schemas.find((s) => s['schema-id'] === m['current-schema-id'])!;
  return { fields: schema.fields as unknown as Field[], properties: m.properties as Record<string, string>, lastColumnId: m['last-column-id'] };
}

describe('siglake index (CLI, SQLite catalog)', () => {
  const lake = useLocalLake('siglake-index-cli-');
  const { dir, flags } = lake;

  const write = (name: string, text: string): string => {
    const f = path.join(dir, name);
    fs.writeFileSync(f, text);
    return f;
  };
  const cli = (...args: string[]) => runCli(['index', ...args, ...flags]);

  it('creates a YAML index with mapped columns after the base columns, readable by icebird', async () => {
    const f = write(
      'acme-payments.yaml',
      `name: payments
retentionDays: 30
mapping:
  - column: http_status
    from: attributes.http.response.status_code
    type: long
  - column: amount
    from: attributes.amount
    type: double
`,
    );
    const r = cli('create', '--file', f, '--tenant', 'acme');
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const shown = JSON.parse(r.stdout);
    expect(shown).toMatchObject({ name: 'payments', retentionDays: 30, registered: true });
    expect(shown.mapping).toEqual([
      { column: 'http_status', from: 'attributes.http.response.status_code', type: 'long', fieldId: 107 },
      { column: 'amount', from: 'attributes.amount', type: 'double', fieldId: 108 },
    ]);
    expect(await lake.catalog.tables('tenant_acme')).toEqual(['payments']);
    const loc = (await lake.catalog.metadataLocation('tenant_acme', 'payments'))!;
    const s = await icebirdSchema(loc);
    expect(s.fields.slice(0, 24).map((x) => x.id)).toEqual(Array.from({ length: 24 }, (_, i) => i + 1));
    expect(s.fields.slice(24)).toMatchObject([
      { id: 107, name: 'http_status', type: 'long' },
      { id: 108, name: 'amount', type: 'double' },
    ]);
    expect(s.lastColumnId).toBe(108);
    expect(s.properties['siglake.index.retention-days']).toBe('30');
    expect(s.properties['siglake.table-kind']).toBe('logs');
  });

  it('two tenants hold a payments index each, with their own mapping and retention', async () => {
    const f = write('globex-payments.json', JSON.stringify({ name: 'payments', retentionDays: 7, mapping: [{ column: 'region', from: 'resource.cloud.region', type: 'string' }] }));
    expect(cli('create', '--file', f, '--tenant', 'globex').status).toBe(0);
    const acme = JSON.parse(cli('show', 'payments', '--tenant', 'acme').stdout);
    const globex = JSON.parse(cli('show', 'payments', '--tenant', 'globex').stdout);
    expect(acme.retentionDays).toBe(30);
    expect(acme.mapping.map((c: { column: string }) => c.column)).toEqual(['http_status', 'amount']);
    expect(globex).toMatchObject({ retentionDays: 7, mapping: [{ column: 'region', from: 'resource.cloud.region', type: 'string', fieldId: 107 }] });
    const gs = await icebirdSchema((await lake.catalog.metadataLocation('tenant_globex', 'payments'))!);
    expect(gs.fields.map((x) => x.name)).not.toContain('http_status');
    expect(await lake.catalog.namespaces()).toEqual(['tenant_acme', 'tenant_globex']);
  });

  it('a tenant cannot see, update or delete another tenant\'s index', async () => {
    const f = write('audit.yaml', 'name: audit\n');
    expect(cli('create', '--file', f, '--tenant', 'acme').status).toBe(0);
    const list = JSON.parse(cli('list', '--tenant', 'globex').stdout);
    expect(list.indexes.map((i: { name: string }) => i.name)).toEqual(['payments']);
    for (const args of [['show', 'audit'], ['delete', 'audit'], ['update', '--file', f]]) {
      const r = cli(...args, '--tenant', 'globex');
      expect(r.status).toBe(1);
      expect(r.stderr).toContain('SIGLAKE_UNKNOWN_INDEX');
    }
    expect(await lake.catalog.tables('tenant_globex')).toEqual(['payments']);
    expect(await lake.catalog.tables('tenant_acme')).toEqual(['audit', 'payments']);
  });

  it('an update adds columns with new ids; a retype is refused; a removed then re-added column gets a new id', async () => {
    const base = `name: payments
retentionDays: 14
mapping:
  - column: http_status
    from: attributes.http.response.status_code
    type: long
`;
    // Drops amount (108) from the current schema, adds ok (109).
    const f1 = write('u1.yaml', `${base}  - column: ok\n    from: attributes.ok\n    type: boolean\n`);
    const r1 = cli('update', '--file', f1, '--tenant', 'acme');
    expect(r1.status).toBe(0);
    expect(JSON.parse(r1.stdout).mapping.map((c: { fieldId: number }) => c.fieldId)).toEqual([107, 109]);
    const retype = write('u2.yaml', base.replace('type: long', 'type: string'));
    const r2 = cli('update', '--file', retype, '--tenant', 'acme');
    expect(r2.status).toBe(1);
    expect(r2.stderr).toContain('SIGLAKE_INDEX_MAPPING_CONFLICT');
    const readd = write('u3.yaml', `${base}  - column: amount\n    from: attributes.amount\n    type: double\n`);
    const r3 = cli('update', '--file', readd, '--tenant', 'acme');
    expect(r3.status).toBe(0);
    expect(JSON.parse(r3.stdout).mapping).toEqual([
      { column: 'http_status', from: 'attributes.http.response.status_code', type: 'long', fieldId: 107 },
      { column: 'amount', from: 'attributes.amount', type: 'double', fieldId: 110 },
    ]);
    const s = await icebirdSchema((await lake.catalog.metadataLocation('tenant_acme', 'payments'))!);
    expect(s.fields.slice(24).map((x) => [x.id, x.name])).toEqual([
      [107, 'http_status'],
      [110, 'amount'],
    ]);
    expect(s.lastColumnId).toBe(110);
    expect(s.properties['siglake.index.retention-days']).toBe('14');
  });

  it('refuses bad definitions with the field named, and creates nothing', async () => {
    const cases: [string, string][] = [
      ['name: logs\n', 'name must be'],
      ['name: ok1\nmapping:\n  - column: body\n    from: body\n    type: string\n', 'base column'],
      ['name: ok2\nmapping:\n  - column: x\n    from: headers.x\n    type: string\n', 'mapping[0].from'],
      ['name: ok3\nmapping:\n  - column: x\n    from: body\n    type: int\n', 'mapping[0].type'],
      ['name: ok4\nretentionDays: -1\n', 'retentionDays'],
      ['name: ok5\nshards: 3\n', 'unknown field "shards"'],
      ['name: [unclosed\n', 'not valid YAML'],
    ];
    for (const [text, msg] of cases) {
      const r = cli('create', '--file', write('bad.yaml', text), '--tenant', 'initech');
      expect(r.status, text).toBe(1);
      expect(r.stderr).toContain('SIGLAKE_BAD_INDEX');
      expect(r.stderr).toContain(msg);
    }
    expect(cli('create', '--file', write('dup.yaml', 'name: audit\n'), '--tenant', 'acme').stderr).toContain('SIGLAKE_INDEX_EXISTS');
    expect(await lake.catalog.namespaces()).toEqual(['tenant_acme', 'tenant_globex']);
    expect(cli('list').status).toBe(0);
    expect(cli('bogus').status).toBe(2);
    expect(cli('show').status).toBe(2);
  });

  it('delete drops the index; kill -9 between the metadata file and the catalog row leaves no index, and a rerun creates it', async () => {
    expect(cli('delete', 'audit', '--tenant', 'acme').status).toBe(0);
    expect(cli('show', 'audit', '--tenant', 'acme').stderr).toContain('SIGLAKE_UNKNOWN_INDEX');
    const f = write('crash.yaml', 'name: crashy\nretentionDays: 3\n');
    const killed = runCli(['index', 'create', '--file', f, '--tenant', 'hooli', ...flags], {
      env: { SIGLAKE_TEST_HOOKS: '1', SIGLAKE_TEST_CRASH_INDEX_CREATE: '1' },
    });
    expect(killed.status).toBeNull(); // SIGKILL
    expect(await lake.catalog.tables('tenant_hooli')).toEqual([]);
    expect(JSON.parse(cli('list', '--tenant', 'hooli').stdout)).toEqual({ indexes: [] });
    const again = cli('create', '--file', f, '--tenant', 'hooli');
    expect(again.status).toBe(0);
    const loc = (await lake.catalog.metadataLocation('tenant_hooli', 'crashy'))!;
    expect((await icebirdSchema(loc)).properties['siglake.index.retention-days']).toBe('3');
  });
});

describe('index API handlers (PostgreSQL catalog)', () => {
  const dir = tempDir('siglake-index-api-');
  let pg: PostgresServer;
  let catalog: SqlCatalog;
  let registry: IndexRegistry;
  let restoreFetch: () => void;

  beforeAll(async () => {
    restoreFetch = installFileFetch();
    pg = await startPostgres();
    catalog = SqlCatalog.open(pg.url, 'siglake');
    registry = new IndexRegistry({ catalog, storage: new FileStorage(path.join(dir, 'warehouse')) });
  }, 120_000);
  afterAll(async () => {
    restoreFetch();
    await catalog?.close();
    await pg?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const call = async (tenant: string, method: string, p: string, body?: unknown) => {
    const r = await handleIndexRequest({ method, path: p, ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}) }, tenant, registry);
    return { status: r.status, headers: r.headers, json: r.body === '' ? undefined : JSON.parse(r.body) };
  };

  it('PUT creates (201) then updates (200); GET lists and shows; the same name in two tenants is independent', async () => {
    const a = await call('acme', 'PUT', '/api/v1/indexes/payments', { retentionDays: 30, mapping: [{ column: 'status', from: 'attributes.status', type: 'long' }] });
    expect(a.status).toBe(201);
    expect(a.json).toMatchObject({ name: 'payments', retentionDays: 30, mapping: [{ column: 'status', fieldId: 107 }] });
    const b = await call('globex', 'PUT', '/api/v1/indexes/payments', 'retentionDays: 5\nmapping:\n  - column: user\n    from: scope.user\n    type: string\n');
    expect(b.status).toBe(201);
    const a2 = await call('acme', 'PUT', '/api/v1/indexes/payments', { retentionDays: 31, mapping: [{ column: 'status', from: 'attributes.status', type: 'long' }, { column: 'at', from: 'body', type: 'timestamp' }] });
    expect(a2.status).toBe(200);
    expect(a2.json.mapping.map((c: { fieldId: number }) => c.fieldId)).toEqual([107, 108]);
    expect((await call('acme', 'GET', '/api/v1/indexes')).json).toEqual({ indexes: [a2.json] });
    expect((await call('globex', 'GET', '/api/v1/indexes/payments')).json).toMatchObject({ retentionDays: 5, mapping: [{ column: 'user', type: 'string', fieldId: 107 }] });
    const loc = (await catalog.metadataLocation('tenant_acme', 'payments'))!;
    expect((await icebirdSchema(loc)).fields.slice(24).map((f) => [f.id, f.name, f.type])).toEqual([
      [107, 'status', 'long'],
      [108, 'at', 'timestamptz'],
    ]);
  });

  it('tenant B cannot see, update or delete tenant A\'s index, and a body cannot name another index', async () => {
    await call('acme', 'PUT', '/api/v1/indexes/audit', {});
    expect((await call('globex', 'GET', '/api/v1/indexes/audit')).status).toBe(404);
    const del = await call('globex', 'DELETE', '/api/v1/indexes/audit');
    expect(del.status).toBe(404);
    expect(del.json.error.code).toBe('SIGLAKE_UNKNOWN_INDEX');
    // A PUT of globex's creates globex's own audit, never touches acme's.
    expect((await call('globex', 'PUT', '/api/v1/indexes/audit', { retentionDays: 1 })).status).toBe(201);
    expect((await call('acme', 'GET', '/api/v1/indexes/audit')).json.retentionDays).toBe(0);
    const renamed = await call('acme', 'PUT', '/api/v1/indexes/audit', { name: 'payments' });
    expect(renamed.status).toBe(400);
    expect(renamed.json.error.code).toBe('SIGLAKE_BAD_INDEX');
    expect((await call('globex', 'GET', '/api/v1/indexes')).json.indexes.map((i: { name: string }) => i.name)).toEqual(['audit', 'payments']);
  });

  it('refusals: bad body 400, retype 409, unknown 404, wrong method 405, reserved name 400; DELETE 204', async () => {
    const bad = await call('acme', 'PUT', '/api/v1/indexes/x1', { mapping: [{ column: 'c', from: 'nope', type: 'long' }] });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toContain('mapping[0].from');
    const retype = await call('acme', 'PUT', '/api/v1/indexes/payments', { retentionDays: 31, mapping: [{ column: 'status', from: 'attributes.status', type: 'string' }] });
    expect(retype.status).toBe(409);
    expect(retype.json.error.code).toBe('SIGLAKE_INDEX_MAPPING_CONFLICT');
    expect((await call('acme', 'PUT', '/api/v1/indexes/traces', {})).status).toBe(400);
    expect((await call('acme', 'GET', '/api/v1/indexes/%ZZ')).status).toBe(404);
    const post = await call('acme', 'POST', '/api/v1/indexes/payments', {});
    expect(post.status).toBe(405);
    expect(post.headers['allow']).toBe('GET, HEAD, PUT, DELETE');
    expect((await call('acme', 'DELETE', '/api/v1/indexes/audit')).status).toBe(204);
    expect((await call('acme', 'GET', '/api/v1/indexes/audit')).status).toBe(404);
    expect((await call('globex', 'GET', '/api/v1/indexes/audit')).status).toBe(200);
    expect(await catalog.tables('tenant_acme')).toEqual(['payments']);
  });

  it('concurrent updates of one index commit through compare-and-set and never reuse a field id', async () => {
    await call('initech', 'PUT', '/api/v1/indexes/c', {});
    const cols = ['a1', 'a2', 'a3', 'a4'];
    // Each writer adds its own column to whatever is there: read-modify-write through the registry.
    await Promise.all(
      cols.map(async (c) => {
        for (;;) {
          const cur = await registry.show('initech', 'c');
          const spec = { name: 'c', retentionDays: 0, mapping: [...cur.mapping.map(({ column, from, type }) => ({ column, from, type })), { column: c, from: `attributes.${c}`, type: 'string' as const }] };
          // update() retries its own compare-and-set; a definition built from a stale read may drop another writer's column (PUT replaces), so retry until ours is in.
          const info = await registry.update('initech', spec);
          if (info.mapping.some((m) => m.column === c)) return;
        }
      }),
    );
    const final = await registry.show('initech', 'c');
    const ids = final.mapping.map((m) => m.id);
    expect(new Set(ids).size).toBe(ids.length);
    // Four adds happened: the ids handed out are 107.. and none twice, whatever the interleaving.
    const s = await icebirdSchema(final.metadataLocation);
    expect(s.lastColumnId).toBeGreaterThanOrEqual(106 + cols.length);
    for (const f of s.fields.slice(24)) expect(f.id).toBeGreaterThan(106);
  });
});

describe('commands that read a catalog do not make one', () => {
  it('index list, show and delete, and migrate, in a place with no catalog: exit 2, nothing made', () => {
    // They opened ./data/catalog.db, made it, and answered {"indexes":[]} (exit 0) from the empty one.
    const dir = tempDir('siglake-no-catalog-');
    const flags = ['--catalog-url', `sqlite:${path.join(dir, 'data', 'catalog.db')}`, '--warehouse', path.join(dir, 'warehouse')];
    for (const args of [['index', 'list'], ['index', 'show', 'payments'], ['index', 'delete', 'payments'], ['migrate', '--dry-run'], ['migrate']]) {
      const r = runCli([...args, ...flags], { cwd: dir });
      expect(r.status, args.join(' ')).toBe(2);
      expect(r.stderr).toContain('no catalog there');
    }
    expect(fs.readdirSync(dir)).toEqual([]);
  });
});
