// `siglake query` against the real processes: three tenants' logs and spans
// landed by the real ingester and compactor, read back through the query API
// with OIDC tenant claims, and compared with DuckDB reading the same Parquet
// files directly. Routing refusals, their counters, limits, timeouts, fresh
// data without a restart and a graceful stop.

import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import { SCHEMA_VERSION } from '../../src/iceberg/table-schema.js';
import { duckParquet, duckQuery } from '../helpers/iceberg.js';
import { runCli, startIngester, tempDir, type RunningIngester } from '../helpers/ingester.js';
import { sleep } from '../helpers/wait.js';
import { AUDIENCE, ISSUER, makeKeyPair, mint, writeJwksFile, type KeyPair } from '../helpers/jwt.js';
import { bodiesOf, icebergFlags, landTenants, listFiles, postSql, sendTenants, startQuery, tableFiles, type RunningQuery } from '../helpers/query.js';

const TENANTS = ['default', 'acme', 'globex'] as const;
const N = 20;
const MAX_ROWS = 50;
const TIMEOUT_SECS = 5;

/** CPU seconds (user + system) the process has used, from /proc. */
function cpuSeconds(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

describe('siglake query: tenant-routed SQL over the landed tables', () => {
  const dataDir = tempDir('siglake-query-api-');
  let key: KeyPair;
  let jwks: string;
  let q: RunningQuery;
  const tokens: Record<string, string> = {};
  let catalog: SqlCatalog;

  const oidcArgs = () => ['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks];

  beforeAll(async () => {
    await landTenants(dataDir, TENANTS, 'r1', N);
    key = await makeKeyPair('ES256', 'k1');
    jwks = writeJwksFile(dataDir, [key.jwk]);
    for (const t of TENANTS) tokens[t] = await mint(key, { tenant: t });
    q = await startQuery(dataDir, [
      ...icebergFlags(dataDir),
      ...oidcArgs(),
      '--query-tenant-claim',
      'tenant',
      '--query-allowed-tenants',
      TENANTS.join(','),
      '--query-max-rows',
      String(MAX_ROWS),
      '--query-timeout-secs',
      String(TIMEOUT_SECS),
      '--retention-logs-days',
      '30',
    ]);
    catalog = SqlCatalog.open(`sqlite:${path.join(dataDir, 'catalog.db')}`, 'siglake');
  }, 120_000);

  afterAll(async () => {
    await catalog?.close();
    await q?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('the three siglake_query_tenant_denied_total series are at zero from start-up', async () => {
    const m = await q.metrics();
    for (const r of ['missing', 'invalid', 'unlisted']) expect(m.get(`siglake_query_tenant_denied_total{reason="${r}"}`)).toBe(0);
    expect(m.get('siglake_query_tenant_contexts')).toBe(0);
    expect((await fetch(`${q.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${q.url}/readyz`)).status).toBe(200);
  });

  it('each tenant reads exactly its own logs and spans, in JSON and NDJSON, as DuckDB reads the same Parquet files', async () => {
    const sql = (from: string) => `SELECT body, service_name, attributes['k'] AS k, time::VARCHAR AS t FROM ${from} ORDER BY body`;
    for (const tenant of TENANTS) {
      const files = await tableFiles(dataDir, tenant, 'logs');
      expect(files.length).toBeGreaterThan(0);
      const direct = await duckQuery(sql(duckParquet(files.map((f) => `file://${f}`))));
      expect(direct.map((r) => r['body'])).toEqual([...bodiesOf(tenant, 'r1', N)].sort());

      const a = await postSql(q.url, sql('logs'), { token: tokens[tenant] });
      expect(a.status, a.text).toBe(200);
      expect(a.body['columns']).toEqual([
        { name: 'body', type: 'VARCHAR' },
        { name: 'service_name', type: 'VARCHAR' },
        { name: 'k', type: 'VARCHAR' },
        { name: 't', type: 'VARCHAR' },
      ]);
      expect(a.body['rows']).toEqual(direct.map((r) => [r['body'], r['service_name'], r['k'], r['t']]));
      expect(a.body['rowCount']).toBe(N);
      expect(a.body['truncated']).toBe(false);
      expect(typeof a.body['elapsedMs']).toBe('number');

      const nd = await postSql(q.url, sql('logs'), { token: tokens[tenant], accept: 'application/x-ndjson' });
      expect(nd.status).toBe(200);
      expect(nd.headers.get('content-type')).toBe('application/x-ndjson');
      expect(nd.headers.get('x-siglake-truncated')).toBe('false');
      expect(nd.text.trimEnd().split('\n').map((l) => JSON.parse(l) as unknown)).toEqual(direct);

      const spans = await postSql(q.url, 'SELECT name, service_name FROM traces ORDER BY name', { token: tokens[tenant] });
      expect(spans.body['rows']).toEqual([
        [`r1-${tenant}-span-0`, `svc-${tenant}`],
        [`r1-${tenant}-span-1`, `svc-${tenant}`],
      ]);

      // A plain count is answered from the Iceberg metadata (docs/query.md): the rows the files hold.
      const counted = await duckQuery(`SELECT count(*)::VARCHAR AS n FROM ${duckParquet(files.map((f) => `file://${f}`))}`);
      const n = await postSql(q.url, 'SELECT count(*) AS n FROM logs', { token: tokens[tenant] });
      expect(n.status, n.text).toBe(200);
      expect(n.body['columns']).toEqual([{ name: 'n', type: 'BIGINT' }]);
      expect(n.body['rows']).toEqual([[counted[0]!['n']]]);
      expect(n.body['rows']).toEqual([[String(N)]]);
      const spanFiles = await tableFiles(dataDir, tenant, 'traces');
      const spanCount = await duckQuery(`SELECT count(*)::VARCHAR AS n FROM ${duckParquet(spanFiles.map((f) => `file://${f}`))}`);
      expect((await postSql(q.url, 'SELECT count(*) FROM traces', { token: tokens[tenant], accept: 'application/x-ndjson' })).text).toBe(
        `${JSON.stringify({ 'count_star()': spanCount[0]!['n'] })}\n`,
      );
    }
  });

  it('GET /api/v1/tables lists the tenant\'s tables with their row counts', async () => {
    const res = await fetch(`${q.url}/api/v1/tables`, { headers: { authorization: `Bearer ${tokens['acme']}` } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      tables: [
        // logs and traces: the retention settings the query server shares with the compactor (0: for ever).
        { name: 'logs', kind: 'logs', rowCount: N, retentionDays: 30, schemaVersion: SCHEMA_VERSION },
        { name: 'traces', kind: 'traces', rowCount: 2, retentionDays: 0, schemaVersion: SCHEMA_VERSION },
      ],
    });
  });

  it('refuses each unusable tenant claim with 403 and its reason, counted, before any tenant context or namespace exists', async () => {
    const before = await q.metrics();
    const namespaces = await catalog.namespaces();
    const files = listFiles(path.join(dataDir, 'warehouse'));
    const cases: [string, string][] = [
      [await mint(key, {}), 'missing'],
      [await mint(key, { tenant: 'bad tenant!' }), 'invalid'],
      [await mint(key, { tenant: 'logs' }), 'invalid'],
      [await mint(key, { tenant: 42 }), 'invalid'],
      [await mint(key, { tenant: 'initech' }), 'unlisted'],
    ];
    for (const [token, reason] of cases) {
      for (const p of ['/api/v1/sql', '/api/v1/tables']) {
        const res = await fetch(`${q.url}${p}`, {
          method: p === '/api/v1/sql' ? 'POST' : 'GET',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          ...(p === '/api/v1/sql' ? { body: JSON.stringify({ sql: 'SELECT 1' }) } : {}),
        });
        expect(res.status, `${reason} on ${p}`).toBe(403);
        const body = (await res.json()) as { error: { code: string; reason: string; message: string } };
        expect(body.error.code).toBe('SIGLAKE_TENANT_DENIED');
        expect(body.error.reason).toBe(reason);
        expect(body.error.message).toContain(`(${reason})`);
      }
    }
    const after = await q.metrics();
    expect(after.get('siglake_query_tenant_denied_total{reason="missing"}')! - before.get('siglake_query_tenant_denied_total{reason="missing"}')!).toBe(2);
    expect(after.get('siglake_query_tenant_denied_total{reason="invalid"}')! - before.get('siglake_query_tenant_denied_total{reason="invalid"}')!).toBe(6);
    expect(after.get('siglake_query_tenant_denied_total{reason="unlisted"}')! - before.get('siglake_query_tenant_denied_total{reason="unlisted"}')!).toBe(2);
    expect(after.get('siglake_query_tenant_contexts')).toBe(before.get('siglake_query_tenant_contexts'));
    expect(await catalog.namespaces()).toEqual(namespaces);
    expect(listFiles(path.join(dataDir, 'warehouse'))).toEqual(files);
  });

  it('401 without a token or with a bad one; the body names the code', async () => {
    for (const auth of [undefined, 'Bearer not-a-jwt', `Basic ${Buffer.from('a:b').toString('base64')}`]) {
      const a = await postSql(q.url, 'SELECT 1', auth === undefined ? {} : { headers: { authorization: auth } });
      expect(a.status).toBe(401);
      expect((a.body['error'] as { code: string }).code).toBe('SIGLAKE_UNAUTHENTICATED');
    }
  });

  it('bad SQL is a 400 with the engine\'s message; an unknown table is one too', async () => {
    const a = await postSql(q.url, 'SELEC 1', { token: tokens['acme'] });
    expect(a.status).toBe(400);
    expect((a.body['error'] as { message: string }).message).toMatch(/syntax error/);
    const b = await postSql(q.url, 'SELECT * FROM nope', { token: tokens['acme'] });
    expect(b.status).toBe(400);
    expect((b.body['error'] as { message: string }).message).toMatch(/Table with name nope does not exist/);
  });

  it('a body over 1 MiB is a 413, declared or sent chunked; a caller gone mid-body leaves nothing; the next query is answered', async () => {
    const { hostname, port } = new URL(q.url);
    const send = (headers: Record<string, string>, chunks: Buffer[]) =>
      new Promise<{ status: number; body: Record<string, unknown> }>((resolve, reject) => {
        // A connection of its own each (agent: false): the declared case never sends the body it declares.
        const req = http.request({ host: hostname, port, path: '/api/v1/sql', method: 'POST', agent: false, headers: { authorization: `Bearer ${tokens['acme']}`, 'content-type': 'application/json', ...headers } }, (res) => {
          const parts: Buffer[] = [];
          res.on('data', (c: Buffer) => parts.push(c));
          res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(Buffer.concat(parts).toString()) as Record<string, unknown> }));
        });
        req.on('error', reject);
        for (const c of chunks) req.write(c);
        req.end();
      });
    const big = Buffer.alloc(64 * 1024, 0x20);
    // Refused on the declared length, before any byte of the body is read.
    const declared = await send({ 'content-length': String(2 * 1024 * 1024) }, []);
    expect(declared.status).toBe(413);
    expect((declared.body['error'] as { code: string }).code).toBe('SIGLAKE_BODY_TOO_LARGE');
    const chunked = await send({}, Array.from({ length: 17 }, () => big));
    expect(chunked.status).toBe(413);
    expect((chunked.body['error'] as { code: string }).code).toBe('SIGLAKE_BODY_TOO_LARGE');
    // Headers and a few bytes of a 1000-byte body, then the caller is gone.
    await new Promise<void>((resolve, reject) => {
      const req = http.request({ host: hostname, port, path: '/api/v1/sql', method: 'POST', agent: false, headers: { authorization: `Bearer ${tokens['acme']}`, 'content-type': 'application/json', 'content-length': '1000' } });
      req.on('error', () => resolve());
      req.write('{"sql": "SEL', () => setTimeout(() => req.destroy(), 100));
      req.on('close', () => resolve());
      req.on('response', () => reject(new Error('answered a body that never ended')));
    });
    const next = await postSql(q.url, 'SELECT 42 AS n', { token: tokens['acme'] });
    expect(next.status).toBe(200);
    expect(next.body['rows']).toEqual([[42]]);
  });

  it('every query connection of a tenant context reads the Parquet footers from the context\'s cache', async () => {
    // Set once for the whole engine (a session-scoped SET would hold for the connection that set the context up only).
    for (let i = 0; i < 3; i++) {
      const a = await postSql(q.url, `SELECT current_setting('parquet_metadata_cache') AS c, ${i} AS i`, { token: tokens['globex'] });
      expect(a.status).toBe(200);
      expect(a.body['rows']).toEqual([[true, i]]);
    }
  });

  it(`cuts an answer at query.maxRows (${MAX_ROWS}) and says so, in JSON and NDJSON`, async () => {
    const a = await postSql(q.url, 'SELECT range AS r FROM range(1000)', { token: tokens['acme'] });
    expect(a.status).toBe(200);
    expect(a.body['rowCount']).toBe(MAX_ROWS);
    expect(a.body['truncated']).toBe(true);
    expect((a.body['rows'] as unknown[][]).map((r) => Number(r[0]))).toEqual(Array.from({ length: MAX_ROWS }, (_, i) => i));
    const nd = await postSql(q.url, 'SELECT range AS r FROM range(1000)', { token: tokens['acme'], accept: 'application/x-ndjson' });
    expect(nd.headers.get('x-siglake-truncated')).toBe('true');
    expect(nd.text.trimEnd().split('\n')).toHaveLength(MAX_ROWS);
    const exact = await postSql(q.url, `SELECT range AS r FROM range(${MAX_ROWS})`, { token: tokens['acme'] });
    expect(exact.body['truncated']).toBe(false);
  });

  it('a query past query.timeoutSecs is interrupted in the engine and answered 504; the CPU goes back to idle', async () => {
    const a = await postSql(q.url, 'SELECT sum(range % 7) FROM range(100000000000000)', { token: tokens['globex'] });
    expect(a.status).toBe(504);
    expect((a.body['error'] as { code: string }).code).toBe('SIGLAKE_QUERY_TIMEOUT');
    // Idle: less than a tenth of a core over a 500 ms window, within 20 s.
    const deadline = Date.now() + 20_000;
    for (;;) {
      const c0 = cpuSeconds(q.child.pid!);
      await new Promise((r) => setTimeout(r, 500));
      if (cpuSeconds(q.child.pid!) - c0 < 0.05) break;
      if (Date.now() > deadline) throw new Error('the engine kept working after the 504');
    }
    expect((await q.metrics()).get('siglake_query_timeouts_total')).toBeGreaterThanOrEqual(1);
  });

  it('the fifth concurrent query of one tenant gets 429 + Retry-After: 1 while another tenant\'s runs', async () => {
    const slow = 'SELECT sum(range % 7) FROM range(100000000000000)';
    const running = Array.from({ length: 4 }, () => postSql(q.url, slow, { token: tokens['acme'] }));
    const deadline = Date.now() + 20_000;
    while ((await q.metrics()).get('siglake_query_running')! < 4) {
      if (Date.now() > deadline) throw new Error('the four queries did not start');
      await new Promise((r) => setTimeout(r, 50));
    }
    const fifth = await postSql(q.url, 'SELECT 1', { token: tokens['acme'] });
    expect(fifth.status).toBe(429);
    expect(fifth.headers.get('retry-after')).toBe('1');
    expect((fifth.body['error'] as { code: string }).code).toBe('SIGLAKE_QUERY_CONCURRENCY');
    const other = await postSql(q.url, 'SELECT count(*) AS n FROM logs', { token: tokens['globex'] });
    expect(other.status).toBe(200);
    expect(other.body['rows']).toEqual([[String(N)]]);
    expect((await Promise.all(running)).map((r) => r.status)).toEqual([504, 504, 504, 504]);
    expect((await postSql(q.url, 'SELECT 1', { token: tokens['acme'] })).status).toBe(200);
  });

  it('a caller that hangs up stops its query in the engine (no timeout counted)', async () => {
    const timeoutsBefore = (await q.metrics()).get('siglake_query_timeouts_total')!;
    const ac = new AbortController();
    const pending = fetch(`${q.url}/api/v1/sql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tokens['globex']}`, 'content-type': 'application/json' },
      body: JSON.stringify({ sql: 'SELECT sum(range % 7) FROM range(100000000000000)' }),
      signal: ac.signal,
    }).catch((e: unknown) => e);
    const deadline = Date.now() + 20_000;
    while ((await q.metrics()).get('siglake_query_running')! < 1) {
      if (Date.now() > deadline) throw new Error('the query did not start');
      await new Promise((r) => setTimeout(r, 50));
    }
    ac.abort();
    expect(await pending).toBeInstanceOf(Error);
    while ((await q.metrics()).get('siglake_query_running')! > 0) {
      if (Date.now() > deadline) throw new Error('the query kept running');
      await new Promise((r) => setTimeout(r, 50));
    }
    expect((await q.metrics()).get('siglake_query_timeouts_total')).toBe(timeoutsBefore);
  });

  it('a record acknowledged and compacted is visible to the next query, without a restart', async () => {
    let ing: RunningIngester | undefined = await startIngester({
      dataDir,
      args: ['--trust-tenant-header', '--compact-interval-secs', '1', '--wal-segment-max-age-secs', '1', ...icebergFlags(dataDir)],
    });
    // The same statement text before and after the commit: a connection keeps
    // the statements it prepared, but only within the context (the snapshots)
    // it was prepared in.
    const count = 'SELECT count(*) AS n FROM logs';
    for (let i = 0; i < 3; i++) expect((await postSql(q.url, count, { token: tokens['acme'] })).body['rows']).toEqual([[String(N)]]);
    try {
      await sendTenants(ing.url, ['acme'], 'r2', 3);
      const deadline = Date.now() + 60_000;
      for (;;) {
        const a = await postSql(q.url, "SELECT body FROM logs WHERE body LIKE 'r2-%' ORDER BY body", { token: tokens['acme'] });
        expect(a.status).toBe(200);
        if (a.body['rowCount'] === 3) {
          expect(a.body['rows']).toEqual(bodiesOf('acme', 'r2', 3).map((b) => [b]));
          break;
        }
        if (Date.now() > deadline) throw new Error('r2 did not become visible');
        await new Promise((r) => setTimeout(r, 250));
      }
      expect((await postSql(q.url, count, { token: tokens['acme'] })).body['rows']).toEqual([[String(N + 3)]]);
      // Another tenant's view did not move.
      const g = await postSql(q.url, 'SELECT count(*) AS n FROM logs', { token: tokens['globex'] });
      expect(g.body['rows']).toEqual([[String(N)]]);
    } finally {
      expect(await ing.stop()).toBe(0);
      ing = undefined;
    }
  }, 120_000);

  it('answers a review found wrong: NDJSON keeps a __proto__ column, q=0 is honoured, 405 says Allow, an empty index is an empty table, a missing file is a 500 without a path', async () => {
    const acme = tokens['acme']!;
    const nd = await postSql(q.url, 'SELECT 1 AS a, 42 AS "__proto__"', { token: acme, accept: 'application/x-ndjson' });
    expect(nd.text).toBe('{"a":1,"__proto__":42}\n');
    const notNd = await postSql(q.url, 'SELECT 1 AS a', { token: acme, accept: 'application/x-ndjson;q=0, application/json' });
    expect(notNd.headers.get('content-type')).toMatch(/^application\/json/);
    expect(notNd.body['rows']).toEqual([[1]]);
    const get = await fetch(`${q.url}/api/v1/sql`, { headers: { authorization: `Bearer ${acme}` } });
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');

    // An index nothing landed in yet is a table with its columns and no rows ("does not exist" before).
    const put = await fetch(`${q.url}/api/v1/indexes/fresh`, { method: 'PUT', headers: { authorization: `Bearer ${acme}`, 'content-type': 'application/json' }, body: '{}' });
    expect(put.status).toBe(201);
    const empty = await postSql(q.url, 'SELECT count(*) AS n, max(body) AS b FROM fresh', { token: acme });
    expect(empty.status, empty.text).toBe(200);
    expect(empty.body['rows']).toEqual([['0', null]]);

    // A data file gone from under the table: that table's queries are a 500 naming no server path,
    // the tenant's other tables answer, and it reads again once the file is back.
    const file = (await tableFiles(dataDir, 'globex', 'traces'))[0]!;
    const globex = tokens['globex']!;
    fs.renameSync(file, `${file}.away`);
    try {
      const gone = await postSql(q.url, 'SELECT * FROM traces', { token: globex });
      expect(gone.status, gone.text).toBe(500);
      expect((gone.body['error'] as { code: string }).code).toBe('SIGLAKE_QUERY_ENGINE');
      expect(gone.text).not.toContain(dataDir);
      expect((await postSql(q.url, 'SELECT count(body) AS n FROM logs', { token: globex })).status).toBe(200);
    } finally {
      fs.renameSync(`${file}.away`, file);
    }
    expect((await postSql(q.url, 'SELECT * FROM traces', { token: globex })).status).toBe(200);
  });

  it('regression (unreadable-table-fails-tenant): a table whose metadata is gone answers 500 when named, without a path; the tenant\'s other tables and its listing answer; it heals', async () => {
    // One unreadable metadata file failed every query of its tenant (SELECT 1 included) and
    // GET /api/v1/tables, with the server's path in the answer.
    const acme = tokens['acme']!;
    const put = await fetch(`${q.url}/api/v1/indexes/ledger`, { method: 'PUT', headers: { authorization: `Bearer ${acme}`, 'content-type': 'application/json' }, body: '{}' });
    expect(put.status).toBe(201);
    const loc = (await catalog.tableLocations('tenant_acme')).find((t) => t.name === 'ledger')!.metadataLocation.replace(/^file:\/\//, '');
    fs.renameSync(loc, `${loc}.away`);
    try {
      const one = await postSql(q.url, 'SELECT 1 AS a', { token: acme });
      expect(one.status, one.text).toBe(200);
      expect((await postSql(q.url, 'SELECT count(body) AS n FROM logs', { token: acme })).status).toBe(200);
      const named = await postSql(q.url, 'SELECT * FROM ledger', { token: acme });
      expect(named.status, named.text).toBe(500);
      expect((named.body['error'] as { code: string }).code).toBe('SIGLAKE_QUERY_ENGINE');
      expect(named.text).not.toContain(dataDir);
      const tables = await fetch(`${q.url}/api/v1/tables`, { headers: { authorization: `Bearer ${acme}` } });
      const text = await tables.text();
      expect(tables.status, text).toBe(200);
      expect(text).not.toContain(dataDir);
      const listed = (JSON.parse(text) as { tables: { name: string; rowCount: number | null; schemaVersion: number | null }[] }).tables;
      expect(listed.find((t) => t.name === 'ledger')).toMatchObject({ rowCount: null, schemaVersion: null });
      expect(listed.find((t) => t.name === 'logs')!.rowCount).toBeGreaterThanOrEqual(N);
      expect(q.logs.some((l) => l.msg.startsWith('table not readable') && l['table'] === 'ledger')).toBe(true);
    } finally {
      fs.renameSync(`${loc}.away`, loc);
    }
    // Built again 10 s after: the table reads once its file is back.
    await sleep(10_500);
    const back = await postSql(q.url, 'SELECT count(*) AS n FROM ledger', { token: acme });
    expect(back.status, back.text).toBe(200);
  }, 60_000);

  it('regression (head-and-bom): HEAD is answered wherever GET is, with its head and no body; a JSON body with a byte order mark is read', async () => {
    const acme = tokens['acme']!;
    for (const p of ['/api/v1/tables', '/api/v1/indexes']) {
      const get = await fetch(`${q.url}${p}`, { headers: { authorization: `Bearer ${acme}` } });
      const head = await fetch(`${q.url}${p}`, { method: 'HEAD', headers: { authorization: `Bearer ${acme}` } });
      expect(head.status, p).toBe(200);
      expect(head.headers.get('content-type')).toBe(get.headers.get('content-type'));
      expect((await head.arrayBuffer()).byteLength).toBe(0);
      await get.arrayBuffer();
    }
    const put = await fetch(`${q.url}/api/v1/sql`, { method: 'PUT', headers: { authorization: `Bearer ${acme}` } });
    expect(put.status).toBe(405);
    const tablesPost = await fetch(`${q.url}/api/v1/tables`, { method: 'POST', headers: { authorization: `Bearer ${acme}` } });
    expect(tablesPost.status).toBe(405);
    expect(tablesPost.headers.get('allow')).toBe('GET, HEAD');
    const bom = await fetch(`${q.url}/api/v1/sql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acme}`, 'content-type': 'application/json' },
      body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"sql":"SELECT 7 AS n"}')]),
    });
    expect(bom.status, await bom.clone().text()).toBe(200);
    expect(((await bom.json()) as { rows: unknown[][] }).rows).toEqual([[7]]);
  });

  it('regression (query-sql-cut-at-nul): SQL the engine would not read as sent is refused, never run altered: a NUL, bytes not UTF-8, a lone surrogate', async () => {
    const acme = tokens['acme']!;
    const send = (body: Buffer | string, contentType: string) =>
      fetch(`${q.url}/api/v1/sql`, { method: 'POST', headers: { authorization: `Bearer ${acme}`, 'content-type': contentType }, body });
    const refused = async (r: Response, code: string, message: RegExp) => {
      const text = await r.text();
      expect(r.status, text).toBe(400);
      const err = (JSON.parse(text) as { error: { code: string; message: string } }).error;
      expect(err.code).toBe(code);
      expect(err.message).toMatch(message);
      expect(text).not.toContain('r1-acme');
    };
    // Before, the engine's parser stopped at the NUL: WHERE false was left out and every row came back (200).
    await refused(await send(JSON.stringify({ sql: 'SELECT body FROM logs\u0000 WHERE false' }), 'application/json'), 'SIGLAKE_BAD_SQL', /NUL character/);
    await refused(await send(Buffer.from('SELECT body FROM logs\0 WHERE false'), 'text/plain'), 'SIGLAKE_BAD_SQL', /NUL character/);
    // Before, each invalid byte became U+FFFD inside the literal, and the query answered with it (200).
    await refused(await send(Buffer.from([...Buffer.from("SELECT '"), 0xff, 0xfe, ...Buffer.from("' AS x")]), 'text/plain'), 'SIGLAKE_BAD_BODY', /not valid UTF-8/);
    await refused(await send(Buffer.from([...Buffer.from('{"sql":"SELECT \''), 0xc3, 0x28, ...Buffer.from('\' AS x"}')]), 'application/json'), 'SIGLAKE_BAD_BODY', /not valid UTF-8/);
    await refused(await send('{"sql":"SELECT \'\\ud800\' AS x"}', 'application/json'), 'SIGLAKE_BAD_SQL', /lone surrogate/);
    await refused(await send('{"sql":"SELECT \'\\udc00x\' AS x"}', 'application/json'), 'SIGLAKE_BAD_SQL', /lone surrogate/);
    // A pair written as two escapes is one character, and U+0001 is no NUL: both run as sent.
    const ok = await send('{"sql":"SELECT \'\\ud83d\\ude00\' AS x, \'\\u0001\' AS y, count(*) AS n FROM logs WHERE false"}', 'application/json');
    const okText = await ok.text();
    expect(ok.status, okText).toBe(200);
    expect((JSON.parse(okText) as { rows: unknown[][] }).rows).toEqual([['\u{1f600}', '\u0001', '0']]);
  });

  it('regression (query-charset-ignored): the charset of a text/plain or JSON body is read: UTF-8 and US-ASCII are, any other is refused 415 naming it', async () => {
    const acme = tokens['acme']!;
    const send = (body: Buffer | string, contentType: string) =>
      fetch(`${q.url}/api/v1/sql`, { method: 'POST', headers: { authorization: `Bearer ${acme}`, 'content-type': contentType }, body });
    const sql = "SELECT 'é' AS x, count(*) AS n FROM logs WHERE false";
    // Before, a UTF-16 body was read as UTF-8 and refused for its NUL characters (400 SIGLAKE_BAD_SQL), not for its charset.
    for (const [contentType, charset] of [
      ['text/plain; charset=utf-16', 'utf-16'],
      ['text/plain;charset="UTF-16LE"', 'utf-16le'],
      ['application/json; charset=iso-8859-1', 'iso-8859-1'],
      ['text/plain; format=flowed; Charset=latin1', 'latin1'],
      ['text/plain; charset=', ''],
    ] as const) {
      const body = contentType.startsWith('application/json') ? Buffer.from(JSON.stringify({ sql }), 'latin1') : Buffer.from(sql, 'utf16le');
      const r = await send(body, contentType);
      const text = await r.text();
      expect(r.status, `${contentType}: ${text}`).toBe(415);
      const err = (JSON.parse(text) as { error: { code: string; message: string } }).error;
      expect(err.code).toBe('SIGLAKE_UNSUPPORTED_MEDIA');
      expect(err.message).toContain(`charset "${charset}" is not supported`);
    }
    // UTF-8 (any case, quoted or not, beside other parameters) and US-ASCII are read as UTF-8 text.
    for (const contentType of ['text/plain; charset=utf-8', 'text/plain;charset="UTF-8"', 'TEXT/PLAIN ; format=fixed ; CHARSET=Utf-8', 'application/json; charset=utf-8', 'text/plain; charset=US-ASCII']) {
      const ascii = contentType.endsWith('US-ASCII');
      const text = ascii ? 'SELECT 1 AS x' : sql;
      const r = await send(contentType.startsWith('application/json') ? JSON.stringify({ sql: text }) : Buffer.from(text, 'utf8'), contentType);
      const answer = await r.text();
      expect(r.status, `${contentType}: ${answer}`).toBe(200);
      expect((JSON.parse(answer) as { rows: unknown[][] }).rows).toEqual(ascii ? [[1]] : [['é', '0']]);
    }
  });

  it('regression (query-latin1-ascii-refused): a body of ASCII characters labelled ISO-8859-1 or windows-1252 (Apache HttpClient\'s StringEntity default) is read; one with a byte past ASCII is refused 415 naming the charset', async () => {
    const acme = tokens['acme']!;
    const send = (body: Buffer | string, contentType: string) =>
      fetch(`${q.url}/api/v1/sql`, { method: 'POST', headers: { authorization: `Bearer ${acme}`, 'content-type': contentType }, body });
    // Before, stop 55 refused these 415 on the head, though every byte reads the same in UTF-8 (they ran before stop 55).
    for (const contentType of ['text/plain; charset=ISO-8859-1', 'application/json; charset=windows-1252', 'text/plain;charset="latin1"']) {
      const r = await send(contentType.startsWith('application/json') ? JSON.stringify({ sql: 'SELECT 1 AS x' }) : 'SELECT 1 AS x', contentType);
      const answer = await r.text();
      expect(r.status, `${contentType}: ${answer}`).toBe(200);
      expect((JSON.parse(answer) as { rows: unknown[][] }).rows).toEqual([[1]]);
    }
    // A byte past ASCII would be one character in ISO-8859-1 and another (or none) in UTF-8: refused, never guessed.
    const r = await send(Buffer.from("SELECT 'caf\u00e9' AS x", 'latin1'), 'text/plain; charset=iso-8859-1');
    const text = await r.text();
    expect(r.status, text).toBe(415);
    const err = (JSON.parse(text) as { error: { code: string; message: string } }).error;
    expect(err.code).toBe('SIGLAKE_UNSUPPORTED_MEDIA');
    expect(err.message).toMatch(/charset "iso-8859-1" is not supported for a body with bytes past ASCII/);
  });

  it('regression (query-content-encoding-ignored): a compressed body is refused 415 naming its coding; identity is read', async () => {
    const acme = tokens['acme']!;
    const send = (body: Buffer | string, encoding: string) =>
      fetch(`${q.url}/api/v1/sql`, { method: 'POST', headers: { authorization: `Bearer ${acme}`, 'content-type': 'application/json', 'content-encoding': encoding }, body });
    const json = JSON.stringify({ sql: 'SELECT 7 AS x' });
    // Before, the body was read as it came: gzip bytes were refused 400 as "not valid UTF-8", never for their coding.
    for (const [encoding, body] of [
      ['gzip', gzipSync(json)],
      ['identity, GZIP', gzipSync(json)],
      ['br', Buffer.from(json)],
    ] as const) {
      const r = await send(body, encoding);
      const text = await r.text();
      expect(r.status, `${encoding}: ${text}`).toBe(415);
      const err = (JSON.parse(text) as { error: { code: string; message: string } }).error;
      expect(err.code).toBe('SIGLAKE_UNSUPPORTED_MEDIA');
      expect(err.message).toContain(`content encoding "${encoding.split(', ').pop()!.toLowerCase()}" is not supported`);
    }
    const ok = await send(json, 'Identity');
    const okText = await ok.text();
    expect(ok.status, okText).toBe(200);
    expect((JSON.parse(okText) as { rows: unknown[][] }).rows).toEqual([[7]]);
  });

  it('SIGTERM lets a running query answer, then exits 0', async () => {
    const pending = postSql(q.url, 'SELECT sum(range % 7) FROM range(100000000000000)', { token: tokens['default'] });
    const deadline = Date.now() + 20_000;
    while ((await q.metrics()).get('siglake_query_running')! < 1) {
      if (Date.now() > deadline) throw new Error('the query did not start');
      await new Promise((r) => setTimeout(r, 50));
    }
    q.child.kill('SIGTERM');
    expect((await pending).status).toBe(504);
    expect(await q.exited).toBe(0);
    expect(q.logs.some((l) => l.msg === 'stopped')).toBe(true);
  });
});

describe('siglake query: settings that cannot work together stop start-up', () => {
  const cases: { name: string; args: string[]; want: string }[] = [
    { name: 'query.allowedTenants without query.oidc.tenantClaim', args: ['--query-allowed-tenants', 'acme'], want: 'query.allowedTenants' },
    {
      name: 'query.oidc.tenantClaim without OIDC',
      args: ['--query-tenant-claim', 'tenant'],
      want: 'query.oidc.tenantClaim',
    },
    { name: 'query.shards without a shard token', args: ['--query-shards', 'http://127.0.0.1:9'], want: 'query.shards' },
    { name: 'an invalid tenant in query.allowedTenants', args: ['--query-allowed-tenants', 'bad tenant'], want: 'query.allowedTenants' },
    // A token with a blank at an end could never match (a header's ends are trimmed on the way).
    { name: 'a shard token with a trailing blank', args: ['--query-shard-token', 'tok-s3cret '], want: 'invalid query.shardToken (flag --query-shard-token): must be printable ASCII' },
    { name: 'both query.shardToken and query.shardTokenFile', args: ['--query-shard-token', 'tok-s3cret', '--query-shard-token-file', '/nonexistent/t'], want: 'query.shardToken is set too' },
  ];
  it.each(cases)('$name → exit 2 naming $want', ({ args, want }) => {
    const dir = tempDir('siglake-query-config-');
    try {
      const r = runCli(['query', '--query-listen', '127.0.0.1:0', ...icebergFlags(dir), ...args]);
      expect(r.status).toBe(2);
      expect(r.stderr).toContain(want);
      expect(r.stderr).not.toContain('s3cret');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a shard token file whose token holds a control character → exit 2 naming the file, not the token', () => {
    // Node refuses a control character in a header value: every query the coordinator passed on failed.
    const dir = tempDir('siglake-query-config-');
    try {
      const file = path.join(dir, 'shard-token');
      fs.writeFileSync(file, 'tok\u001bs3cret\n');
      const r = runCli(['query', '--query-listen', '127.0.0.1:0', ...icebergFlags(dir), '--query-shard-token-file', file]);
      expect(r.status).toBe(2);
      expect(r.stderr).toBe(
        `siglake: invalid query.shardTokenFile (flag --query-shard-token-file): ${file}: the token must be printable ASCII, no line break or other control character and no blank at either end (it is sent as an HTTP header)\n`,
      );
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('siglake query: query.maxResultMib', () => {
  it('an answer of wide rows stops at the byte bound, truncated, in JSON and NDJSON; the server answers the next query', async () => {
    // One tenant's 10,000 rows of 110 KB each, four at a time, ended the shared process with a
    // JavaScript heap out of memory: every tenant lost its query server.
    const dataDir = tempDir('siglake-query-bytes-');
    const q = await startQuery(dataDir, [...icebergFlags(dataDir), '--query-max-result-mib', '1']);
    try {
      const wide = "SELECT repeat('x', 100000) || i AS w FROM range(10000) t(i)";
      const r = await postSql(q.url, wide);
      expect(r.status).toBe(200);
      expect(r.body['truncated']).toBe(true);
      const rows = r.body['rows'] as string[][];
      // 1 MiB of 100 KB rows: about ten, never the 10,000 of query.maxRows.
      expect(rows.length).toBeGreaterThan(5);
      expect(rows.length).toBeLessThanOrEqual(11);
      expect(r.body['rowCount']).toBe(rows.length);
      const nd = await postSql(q.url, wide, { accept: 'application/x-ndjson' });
      expect(nd.status).toBe(200);
      expect(nd.headers.get('x-siglake-truncated')).toBe('true');
      expect(nd.text.trim().split('\n').length).toBe(rows.length);
      // Narrow rows are not cut by it.
      const narrow = await postSql(q.url, 'SELECT i FROM range(1000) t(i)');
      expect([narrow.status, narrow.body['truncated'], (narrow.body['rows'] as unknown[]).length]).toEqual([200, false, 1000]);
    } finally {
      await q.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('siglake query on an SQLite catalog file that does not exist', () => {
  it('starts (the ingester beside it may not have made it yet) but says so in a warning naming the URL', async () => {
    const dir = tempDir('siglake-query-nocat-');
    const url = `sqlite:${path.join(dir, 'catlog.db')}`;
    const q = await startQuery(dir, ['--catalog-url', url, '--warehouse', path.join(dir, 'wh')]);
    try {
      const warn = q.logs.filter((l) => l.level === 40 && String(l.msg).startsWith('catalog file did not exist: created empty'));
      expect(warn.map((l) => l['catalog'])).toEqual([url]);
      // A second start on the file the first one made has nothing to warn about.
      await q.stop();
      const again = await startQuery(dir, ['--catalog-url', url, '--warehouse', path.join(dir, 'wh')]);
      expect(again.logs.filter((l) => String(l.msg).startsWith('catalog file did not exist'))).toEqual([]);
      await again.stop();
    } finally {
      await q.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
