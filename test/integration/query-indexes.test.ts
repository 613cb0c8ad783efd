// The index API mounted on `siglake query` (contract query §3, §4, §6),
// against the real process: the tenant comes from the caller's verified
// token exactly as for SQL (same 401/403 and denial counters), each tenant
// sees and changes only its own indexes, and the catalog holds what the API
// said it did.

import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import { tempDir } from '../helpers/ingester.js';
import { AUDIENCE, ISSUER, makeKeyPair, mint, writeJwksFile } from '../helpers/jwt.js';
import { icebergFlags, listFiles, postSql, startQuery, type RunningQuery } from '../helpers/query.js';

interface Answer {
  status: number;
  headers: Headers;
  /** The parsed JSON body (undefined for an empty one); shapes vary by answer. */
  json: any;
}

describe('siglake query: the index API, tenant-routed', () => {
  const dataDir = tempDir('siglake-query-indexes-');
  let q: RunningQuery;
  let oidc: string[] = [];
  const tokens: Record<string, string> = {};

  const call = async (method: string, p: string, o: { token?: string; body?: unknown; contentType?: string } = {}): Promise<Answer> => {
    const headers: Record<string, string> = {};
    if (o.token !== undefined) headers['authorization'] = `Bearer ${o.token}`;
    let body: string | undefined;
    if (o.body !== undefined) {
      body = typeof o.body === 'string' ? o.body : JSON.stringify(o.body);
      headers['content-type'] = o.contentType ?? 'application/json';
    }
    const res = await fetch(`${q.url}${p}`, { method, headers, ...(body !== undefined ? { body } : {}) });
    const text = await res.text();
    return { status: res.status, headers: res.headers, json: text === '' ? undefined : JSON.parse(text) };
  };

  beforeAll(async () => {
    const key = await makeKeyPair('ES256', 'k1');
    const jwks = writeJwksFile(dataDir, [key.jwk]);
    for (const t of ['acme', 'globex', 'initech']) tokens[t] = await mint(key, { tenant: t });
    tokens['noclaim'] = await mint(key, {});
    tokens['badclaim'] = await mint(key, { tenant: '../acme' });
    oidc = ['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks];
    q = await startQuery(dataDir, [
      ...icebergFlags(dataDir),
      ...oidc,
      ...['--query-tenant-claim', 'tenant', '--query-allowed-tenants', 'acme,globex'],
    ]);
  }, 60_000);

  afterAll(async () => {
    await q?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('acme creates payments; globex cannot see, update or delete it (404); both hold their own with different mappings; GET lists only one\'s own', async () => {
    const a = await call('PUT', '/api/v1/indexes/payments', {
      token: tokens['acme'],
      body: { retentionDays: 30, mapping: [{ column: 'http_status', from: 'attributes.http.response.status_code', type: 'long' }] },
    });
    expect(a.status, JSON.stringify(a.json)).toBe(201);
    expect(a.json).toMatchObject({ name: 'payments', retentionDays: 30, mapping: [{ column: 'http_status', type: 'long' }] });

    const seen = await call('GET', '/api/v1/indexes/payments', { token: tokens['globex'] });
    expect(seen.status).toBe(404);
    expect(seen.json.error.code).toBe('SIGLAKE_UNKNOWN_INDEX');
    const del = await call('DELETE', '/api/v1/indexes/payments', { token: tokens['globex'] });
    expect(del.status).toBe(404);
    expect(del.json.error.code).toBe('SIGLAKE_UNKNOWN_INDEX');
    expect((await call('GET', '/api/v1/indexes', { token: tokens['globex'] })).json).toEqual({ indexes: [] });

    // globex's PUT of the same name (YAML this time) creates globex's own; acme's is untouched.
    const g = await call('PUT', '/api/v1/indexes/payments', {
      token: tokens['globex'],
      body: 'retentionDays: 5\nmapping:\n  - column: user\n    from: resource.user.id\n    type: string\n',
      contentType: 'application/yaml',
    });
    expect(g.status, JSON.stringify(g.json)).toBe(201);
    expect((await call('GET', '/api/v1/indexes/payments', { token: tokens['acme'] })).json).toEqual(a.json);
    expect((await call('GET', '/api/v1/indexes/payments', { token: tokens['globex'] })).json).toMatchObject({
      retentionDays: 5,
      mapping: [{ column: 'user', from: 'resource.user.id', type: 'string' }],
    });

    await call('PUT', '/api/v1/indexes/audit', { token: tokens['acme'], body: {} });
    const acmeList = await call('GET', '/api/v1/indexes', { token: tokens['acme'] });
    expect(acmeList.status).toBe(200);
    expect(acmeList.json.indexes.map((i: { name: string }) => i.name).sort()).toEqual(['audit', 'payments']);
    const globexList = await call('GET', '/api/v1/indexes', { token: tokens['globex'] });
    expect(globexList.json.indexes).toEqual([(await call('GET', '/api/v1/indexes/payments', { token: tokens['globex'] })).json]);

    // The catalog holds each in its tenant's namespace; the SQL side lists them too.
    const catalog = SqlCatalog.open(`sqlite:${dataDir}/catalog.db`, 'siglake');
    try {
      expect((await catalog.tables('tenant_acme')).sort()).toEqual(['audit', 'payments']);
      expect(await catalog.tables('tenant_globex')).toEqual(['payments']);
    } finally {
      await catalog.close();
    }

    const tables = await fetch(`${q.url}/api/v1/tables`, { headers: { authorization: `Bearer ${tokens['globex']}` } });
    expect(((await tables.json()) as { tables: unknown[] }).tables).toEqual([{ name: 'payments', kind: 'index', rowCount: 0, retentionDays: 5, schemaVersion: expect.anything() }]);

    // An update by acme adds a column to acme's index only; a DELETE by acme removes acme's only.
    const up = await call('PUT', '/api/v1/indexes/payments', {
      token: tokens['acme'],
      body: { retentionDays: 30, mapping: [{ column: 'http_status', from: 'attributes.http.response.status_code', type: 'long' }, { column: 'route', from: 'attributes.http.route', type: 'string' }] },
    });
    expect(up.status).toBe(200);
    expect((await call('GET', '/api/v1/indexes/payments', { token: tokens['globex'] })).json.mapping.map((c: { column: string }) => c.column)).toEqual(['user']);
    expect((await call('DELETE', '/api/v1/indexes/audit', { token: tokens['acme'] })).status).toBe(204);
    expect((await call('GET', '/api/v1/indexes/audit', { token: tokens['acme'] })).status).toBe(404);
  });

  it('refusals: unauthenticated 401, tenant denied 403 with its reason counted, bad body 400 SIGLAKE_BAD_INDEX, wrong method 405; nothing created', async () => {
    const before = await q.metrics();
    const none = await call('GET', '/api/v1/indexes');
    expect(none.status).toBe(401);
    expect(none.json.error.code).toBe('SIGLAKE_UNAUTHENTICATED');
    const forged = await call('PUT', '/api/v1/indexes/x', { token: 'not-a-token', body: {} });
    expect(forged.status).toBe(401);

    const denied: Array<[string, string]> = [
      ['noclaim', 'missing'],
      ['badclaim', 'invalid'],
      ['initech', 'unlisted'],
    ];
    for (const [who, reason] of denied) {
      const r = await call('PUT', '/api/v1/indexes/payments', { token: tokens[who], body: {} });
      expect(r.status, who).toBe(403);
      expect(r.json.error.code).toBe('SIGLAKE_TENANT_DENIED');
      expect(r.json.error.message).toContain(`(${reason})`);
    }
    const after = await q.metrics();
    for (const [, reason] of denied) {
      const k = `siglake_query_tenant_denied_total{reason="${reason}"}`;
      expect(after.get(k), k).toBe((before.get(k) ?? 0) + 1);
    }

    const notJson = await call('PUT', '/api/v1/indexes/broken', { token: tokens['acme'], body: '{"mapping": [', contentType: 'application/json' });
    expect(notJson.status).toBe(400);
    expect(notJson.json.error.code).toBe('SIGLAKE_BAD_INDEX');
    const badFrom = await call('PUT', '/api/v1/indexes/broken', { token: tokens['acme'], body: { mapping: [{ column: 'c', from: 'nowhere', type: 'long' }] } });
    expect(badFrom.status).toBe(400);
    expect(badFrom.json.error.code).toBe('SIGLAKE_BAD_INDEX');
    expect(badFrom.json.error.message).toContain('mapping[0].from');
    const reserved = await call('PUT', '/api/v1/indexes/logs', { token: tokens['acme'], body: {} });
    expect(reserved.status).toBe(400);
    const post = await call('POST', '/api/v1/indexes/payments', { token: tokens['acme'], body: {} });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD, PUT, DELETE');

    expect((await call('GET', '/api/v1/indexes/broken', { token: tokens['acme'] })).status).toBe(404);
    const catalog = SqlCatalog.open(`sqlite:${dataDir}/catalog.db`, 'siglake');
    try {
      expect(await catalog.tables('tenant_initech')).toEqual([]);
      expect(await catalog.tables('main')).toEqual([]);
    } finally {
      await catalog.close();
    }
    const m = await q.metrics();
    expect(m.get('siglake_query_requests_total{endpoint="indexes",status="401"}')).toBe(2);
    expect(m.get('siglake_query_requests_total{endpoint="indexes",status="403"}')).toBe(3);
  });

  it('a coordinator serves the index API itself (the catalog is shared; contract §5 forwards only queries), even with its shard down', async () => {
    const srv = net.createServer();
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const closed = (srv.address() as net.AddressInfo).port;
    await new Promise<void>((r) => srv.close(() => r()));
    const c = await startQuery(dataDir, [
      ...icebergFlags(dataDir),
      ...oidc,
      ...['--query-tenant-claim', 'tenant', '--query-allowed-tenants', 'acme,globex'],
      ...['--query-shard-token', 'shard-secret', '--query-shards', `http://127.0.0.1:${closed}`],
    ]);
    try {
      const at = (p: string, init: RequestInit = {}) => fetch(`${c.url}${p}`, { ...init, headers: { authorization: `Bearer ${tokens['globex']}`, 'content-type': 'application/json' } });
      const put = await at('/api/v1/indexes/refunds', { method: 'PUT', body: JSON.stringify({ retentionDays: 7 }) });
      expect(put.status).toBe(201);
      const list = (await (await at('/api/v1/indexes')).json()) as { indexes: { name: string }[] };
      expect(list.indexes.map((i) => i.name).sort()).toEqual(['payments', 'refunds']);
      // The worker sees what the coordinator created: one catalog.
      expect((await call('GET', '/api/v1/indexes/refunds', { token: tokens['globex'] })).json.retentionDays).toBe(7);
      // A query, by contrast, is forwarded, and its shard is down.
      const sql = await at('/api/v1/sql', { method: 'POST', body: JSON.stringify({ sql: 'SELECT 1' }) });
      expect(sql.status).toBe(502);
      expect((await c.metrics()).get('siglake_query_requests_total{endpoint="indexes",status="201"}')).toBe(1);
    } finally {
      await c.stop();
    }
  });
});

describe('siglake query: query.maxIndexesPerTenant', () => {
  it('a tenant at its limit gets 409 SIGLAKE_INDEX_LIMIT for one more; updates, other tenants and a create after a delete still go', async () => {
    // Every index name is a label value of per-table series: a tenant must not make them without bound.
    const dataDir = tempDir('siglake-query-index-limit-');
    const key = await makeKeyPair('ES256', 'k1');
    const jwks = writeJwksFile(dataDir, [key.jwk]);
    const acme = await mint(key, { tenant: 'acme' });
    const globex = await mint(key, { tenant: 'globex' });
    const q = await startQuery(dataDir, [
      ...icebergFlags(dataDir),
      ...['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks, '--query-tenant-claim', 'tenant'],
      ...['--query-max-indexes-per-tenant', '2'],
    ]);
    const put = async (token: string, name: string, days = 1) => {
      const res = await fetch(`${q.url}/api/v1/indexes/${name}`, { method: 'PUT', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ retentionDays: days }) });
      return { status: res.status, json: (await res.json()) as any };
    };
    try {
      expect((await put(acme, 'a')).status).toBe(201);
      expect((await put(acme, 'b')).status).toBe(201);
      const over = await put(acme, 'c');
      expect(over.status).toBe(409);
      expect(over.json.error.code).toBe('SIGLAKE_INDEX_LIMIT');
      expect(over.json.error.message).toMatch(/has 2 indexes.*query\.maxIndexesPerTenant \(2\)/);
      // Nothing was created: no such index, no table in the catalog.
      const none = await fetch(`${q.url}/api/v1/indexes/c`, { headers: { authorization: `Bearer ${acme}` } });
      expect(none.status).toBe(404);
      const catalog = SqlCatalog.open(`sqlite:${path.join(dataDir, 'catalog.db')}`, 'siglake');
      try {
        expect(await catalog.tables('tenant_acme')).not.toContain('c');
      } finally {
        await catalog.close();
      }
      expect((await put(acme, 'b', 7)).status).toBe(200); // an update is no new index
      expect((await put(globex, 'c')).status).toBe(201); // the limit is per tenant
      const del = await fetch(`${q.url}/api/v1/indexes/a`, { method: 'DELETE', headers: { authorization: `Bearer ${acme}` } });
      expect(del.status).toBe(204);
      expect((await put(acme, 'c')).status).toBe(201);
      const list = await fetch(`${q.url}/api/v1/indexes`, { headers: { authorization: `Bearer ${acme}` } });
      expect(((await list.json()) as { indexes: { name: string }[] }).indexes.map((i) => i.name).sort()).toEqual(['b', 'c']);
    } finally {
      await q.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('siglake query: an index name in another case', () => {
  // PUT /api/v1/indexes/Payments beside `payments`: update found no such name, create refused the
  // case twin with 409, and put took that 409 for a create race and tried again, for good, on the
  // server's only thread: /healthz and every tenant's queries stopped answering.
  it('PUT of a case twin answers 409 SIGLAKE_INDEX_EXISTS at once, and the server goes on serving', async () => {
    const dataDir = tempDir('siglake-query-index-twin-');
    const key = await makeKeyPair('ES256', 'k1');
    const jwks = writeJwksFile(dataDir, [key.jwk]);
    const acme = await mint(key, { tenant: 'acme' });
    const q = await startQuery(dataDir, [
      ...icebergFlags(dataDir),
      ...['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks, '--query-tenant-claim', 'tenant'],
    ]);
    const put = async (name: string) => {
      const res = await fetch(`${q.url}/api/v1/indexes/${name}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${acme}`, 'content-type': 'application/json' },
        body: JSON.stringify({ retentionDays: 3 }),
        signal: AbortSignal.timeout(10_000),
      });
      return { status: res.status, json: (await res.json()) as any };
    };
    try {
      expect((await put('payments')).status).toBe(201);
      const twin = await put('Payments');
      expect(twin.status).toBe(409);
      expect(twin.json.error.code).toBe('SIGLAKE_INDEX_EXISTS');
      expect(twin.json.error.message).toBe('index "Payments" exists already as "payments" (names are compared without case, as SQL does)');
      // Nothing was created under the twin's name.
      const catalog = SqlCatalog.open(`sqlite:${path.join(dataDir, 'catalog.db')}`, 'siglake');
      try {
        expect(await catalog.tables('tenant_acme')).toEqual(['payments']);
      } finally {
        await catalog.close();
      }
      expect((await fetch(`${q.url}/healthz`, { signal: AbortSignal.timeout(5_000) })).status).toBe(200);
      expect((await put('payments')).status).toBe(200); // the index itself still updates
    } finally {
      await q.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('siglake query: the index API under concurrent calls', () => {
  // The checks of a create (the name, its twin in another case, the tenant's count) and the catalog
  // insert are not one transaction: creates at once all passed them. Six new names at once against a
  // limit of 3 made six indexes; `Pay` and `pay` at once made both.
  it('regression (index-create-checks-race): creates at once keep query.maxIndexesPerTenant and the case rule; PUTs and DELETEs of one name at once end consistent', async () => {
    const dataDir = tempDir('siglake-query-index-race-');
    const q = await startQuery(dataDir, [...icebergFlags(dataDir), '--query-max-indexes-per-tenant', '3', '--query-max-concurrent-per-tenant', '16']);
    const call = async (method: string, name: string, retentionDays = 3) => {
      const res = await fetch(`${q.url}/api/v1/indexes/${name}`, {
        method,
        ...(method === 'PUT' ? { headers: { 'content-type': 'application/json' }, body: JSON.stringify({ retentionDays }) } : {}),
      });
      const text = await res.text();
      return `${res.status}${text === '' ? '' : ` ${String((JSON.parse(text) as { error?: { code?: string } }).error?.code ?? '')}`}`.trim();
    };
    const catalog = SqlCatalog.open(`sqlite:${path.join(dataDir, 'catalog.db')}`, 'siglake');
    const count = (xs: string[]) => xs.reduce<Record<string, number>>((m, x) => ({ ...m, [x]: (m[x] ?? 0) + 1 }), {});
    try {
      const six = await Promise.all(['n0', 'n1', 'n2', 'n3', 'n4', 'n5'].map((n) => call('PUT', n)));
      expect(count(six)).toEqual({ '201': 3, '409 SIGLAKE_INDEX_LIMIT': 3 });
      expect(await catalog.tables('main')).toHaveLength(3);
      // The refused ones left no metadata file behind.
      const made = await catalog.tables('main');
      expect(listFiles(path.join(dataDir, 'warehouse')).map((f) => f.split(path.sep)[1]).sort()).toEqual([...made].sort());

      // Room for one: the two names of one SQL name at once make one index, the other is the 409 it is.
      for (const n of made.slice(0, 2)) expect(await call('DELETE', n)).toBe('204');
      const twins = await Promise.all([call('PUT', 'Pay'), call('PUT', 'pay')]);
      expect(twins.sort()).toEqual(['201', '409 SIGLAKE_INDEX_EXISTS']);
      expect((await catalog.tables('main')).filter((t) => t.toLowerCase() === 'pay')).toHaveLength(1);

      // One name, PUT at once: one creates, the others update it (same definition: nothing changes).
      expect(await call('DELETE', made[2]!)).toBe('204');
      expect(count(await Promise.all(Array.from({ length: 8 }, () => call('PUT', 'same'))))).toEqual({ '201': 1, '200': 7 });
      // Different retentions at once: each is applied in turn; the last one committed is what GET shows.
      const days = [1, 2, 3, 4, 5, 6];
      expect(count(await Promise.all(days.map((d) => call('PUT', 'same', d))))).toEqual({ '200': 6 });
      const shown = (await (await fetch(`${q.url}/api/v1/indexes/same`)).json()) as { retentionDays: number };
      expect(days).toContain(shown.retentionDays);
      // DELETEs at once: one deletes, the others find nothing.
      expect(count(await Promise.all(Array.from({ length: 5 }, () => call('DELETE', 'same'))))).toEqual({ '204': 1, '404 SIGLAKE_UNKNOWN_INDEX': 4 });
      expect((await catalog.tables('main')).map((t) => t.toLowerCase())).toEqual(['pay']);

      // PUTs that change the schema racing queries of the index: each query reads the index as the
      // catalog had it when planned, whole (never a 500, never a half-applied definition).
      const idx = twins[0] === '201' ? 'Pay' : 'pay';
      const work: Promise<unknown>[] = [];
      const statuses: number[] = [];
      for (let i = 0; i < 8; i++) {
        const mapping = Array.from({ length: i + 1 }, (_, k) => ({ column: `m${k}`, from: `attributes.m${k}`, type: 'long' }));
        work.push(
          fetch(`${q.url}/api/v1/indexes/${idx}`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ retentionDays: 3, mapping }) }).then((r) => {
            statuses.push(r.status);
          }),
        );
        work.push(
          postSql(q.url, `SELECT * FROM ${idx}`).then((r) => {
            statuses.push(r.status);
            expect(r.status, r.text).toBe(200);
            // The columns are one definition's: the base columns, then m0..mK for some K, in order.
            const mapped = (r.body['columns'] as { name: string }[]).map((c) => c.name).filter((n) => /^m\d+$/.test(n));
            expect(mapped).toEqual(mapped.map((_, k) => `m${k}`));
          }),
        );
      }
      await Promise.all(work);
      expect(statuses.filter((x) => x !== 200)).toEqual([]);
      const last = (await (await fetch(`${q.url}/api/v1/indexes/${idx}`)).json()) as { mapping: unknown[] };
      expect(last.mapping.length).toBeGreaterThanOrEqual(1);
      expect(q.logs.filter((l) => l.msg === 'query failed')).toEqual([]);
    } finally {
      await catalog.close();
      await q.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});
