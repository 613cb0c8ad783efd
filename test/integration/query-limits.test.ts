// `siglake query`'s per-tenant bound (query.maxConcurrentPerTenant) on every
// endpoint that works for a tenant, and for as long as the work lasts; and
// `Expect` (RFC 9110 §10.1.1): a request refused on its headers is refused
// without inviting its body. Real processes on free ports, an empty catalog
// (SELECT 1 and range() need no table; an index made through the API is the
// one table a test needs).

import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { rawRequest as rawRequestOf } from '../helpers/http.js';
import { tempDir } from '../helpers/ingester.js';
import { AUDIENCE, ISSUER, makeKeyPair, mint, writeJwksFile } from '../helpers/jwt.js';
import { icebergFlags, listFiles, postSql, startQuery, type RunningQuery } from '../helpers/query.js';
import { until } from '../helpers/wait.js';

const running: RunningQuery[] = [];
const sockets: net.Socket[] = [];
const dirs: string[] = [];

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const q of running.splice(0)) await q.stop(5_000);
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

async function start(args: string[]): Promise<{ q: RunningQuery; dataDir: string }> {
  const dataDir = tempDir('siglake-query-limits-');
  dirs.push(dataDir);
  const q = await startQuery(dataDir, [...icebergFlags(dataDir), ...args]);
  running.push(q);
  return { q, dataDir };
}

/** A server with OIDC tenant routing (claim `tenant`), and a token per tenant. */
async function startWithTenants(args: string[]): Promise<{ q: RunningQuery; dataDir: string; token: (tenant: string) => Promise<string> }> {
  const key = await makeKeyPair('ES256', 'k1');
  const jwksDir = tempDir('siglake-query-limits-jwks-');
  dirs.push(jwksDir);
  const jwks = writeJwksFile(jwksDir, [key.jwk]);
  const s = await start(['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks, '--query-tenant-claim', 'tenant', ...args]);
  return { ...s, token: (tenant) => mint(key, { tenant }) };
}

const running$ = async (q: RunningQuery) => (await q.metrics()).get('siglake_query_running');

async function call(q: RunningQuery, method: string, p: string, o: { token?: string; body?: string } = {}): Promise<{ status: number; headers: Headers; code: string | undefined; text: string }> {
  const headers: Record<string, string> = {};
  if (o.token !== undefined) headers['authorization'] = `Bearer ${o.token}`;
  if (o.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${q.url}${p}`, { method, headers, ...(o.body !== undefined ? { body: o.body } : {}) });
  const text = await res.text();
  let code: string | undefined;
  try {
    code = (JSON.parse(text) as { error?: { code?: string } }).error?.code;
  } catch {
    code = undefined;
  }
  return { status: res.status, headers: res.headers, code, text };
}

const rawRequest = (port: number, head: string) => rawRequestOf(port, head, sockets);

const INDEX = JSON.stringify({ retentionDays: 7, mapping: [{ column: 'http_status', from: 'attributes.http.status', type: 'long' }] });

/**
 * Makes the warehouse's one table metadata file a FIFO, so that a read of it
 * waits until the returned `feed` writes the file into it (once the server
 * opened it) and puts the file back; feed again is a no-op.
 */
function metadataAsFifo(dataDir: string): () => Promise<void> {
  const warehouse = path.join(dataDir, 'warehouse');
  const meta = listFiles(warehouse).filter((f) => f.endsWith('.metadata.json'));
  expect(meta).toHaveLength(1);
  const file = path.join(warehouse, meta[0]!);
  const saved = fs.readFileSync(file);
  expect(saved.length).toBeLessThan(60 * 1024); // fits a pipe's buffer: written without blocking below
  fs.renameSync(file, `${file}.saved`);
  execFileSync('mkfifo', [file]);
  let fed = false;
  return async () => {
    if (fed) return;
    let fd: number | undefined;
    await until(
      () => {
        try {
          fd = fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK);
          return true;
        } catch {
          return false; // ENXIO: no reader yet
        }
      },
      20_000,
      'the server to open the metadata file',
    );
    fs.writeSync(fd!, saved);
    fs.closeSync(fd!);
    fs.renameSync(`${file}.saved`, file);
    fed = true;
  };
}

describe('siglake query: one tenant bound on every endpoint, for as long as the work lasts', () => {
  it('regression (query-tables-index-api-unbounded): the table listing and the index API take the tenant\'s slots: 429 + Retry-After: 1 at the limit, nothing created, other tenants served', async () => {
    // The listing and the index API took no slot: a tenant at its query limit could still keep
    // the server busy with as many of them at once as it liked.
    const { q, dataDir, token } = await startWithTenants(['--query-max-concurrent-per-tenant', '1', '--query-timeout-secs', '60']);
    const acme = await token('acme');
    const globex = await token('globex');
    const ac = new AbortController();
    const slow = fetch(`${q.url}/api/v1/sql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acme}`, 'content-type': 'application/json' },
      body: JSON.stringify({ sql: 'SELECT sum(range % 7) FROM range(100000000000000)' }),
      signal: ac.signal,
    }).catch((e: unknown) => e);
    try {
      await until(async () => (await running$(q)) === 1, 20_000, 'acme\'s query to run');
      for (const [method, p, body] of [
        ['GET', '/api/v1/tables', undefined],
        ['HEAD', '/api/v1/tables', undefined],
        ['GET', '/api/v1/indexes', undefined],
        ['GET', '/api/v1/indexes/payments', undefined],
        ['PUT', '/api/v1/indexes/payments', INDEX],
        ['DELETE', '/api/v1/indexes/payments', undefined],
        ['POST', '/api/v1/sql', JSON.stringify({ sql: 'SELECT 1' })],
      ] as const) {
        const r = await call(q, method, p, { token: acme, ...(body !== undefined ? { body } : {}) });
        expect(r.status, `${method} ${p}: ${r.text}`).toBe(429);
        expect(r.headers.get('retry-after'), `${method} ${p}`).toBe('1');
        if (method !== 'HEAD') expect(r.code, `${method} ${p}`).toBe('SIGLAKE_QUERY_CONCURRENCY');
      }
      // A PUT that waits for 100 Continue is refused without being asked for its body.
      const waiting = rawRequest(
        q.port,
        `PUT /api/v1/indexes/payments HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${acme}\r\nContent-Type: application/json\r\nContent-Length: ${INDEX.length}\r\nExpect: 100-continue\r\n\r\n`,
      );
      await waiting.closed;
      expect(waiting.got()).toMatch(/^HTTP\/1\.1 429 /);
      expect(waiting.got()).toContain('"SIGLAKE_QUERY_CONCURRENCY"');
      // The refused PUTs made nothing: no namespace's table, no metadata file.
      expect(listFiles(path.join(dataDir, 'warehouse')).filter((f) => f.includes('payments'))).toEqual([]);
      // Another tenant is not touched.
      expect((await call(q, 'GET', '/api/v1/tables', { token: globex })).status).toBe(200);
      expect((await call(q, 'PUT', '/api/v1/indexes/payments', { token: globex, body: INDEX })).status).toBe(201);
      expect((await call(q, 'GET', '/api/v1/indexes', { token: globex })).status).toBe(200);
      const m = await q.metrics();
      expect(m.get('siglake_query_requests_total{endpoint="tables",status="429"}')).toBe(2);
      expect(m.get('siglake_query_requests_total{endpoint="indexes",status="429"}')).toBe(5);
    } finally {
      ac.abort();
      await slow;
    }
    await until(async () => (await running$(q)) === 0, 20_000, 'acme\'s query to stop');
    // The slot is back: each of them is served again, and none of them holds it afterwards.
    expect((await call(q, 'GET', '/api/v1/tables', { token: acme })).status).toBe(200);
    expect((await call(q, 'PUT', '/api/v1/indexes/payments', { token: acme, body: INDEX })).status).toBe(201);
    expect((await call(q, 'GET', '/api/v1/indexes/payments', { token: acme })).status).toBe(200);
    expect((await call(q, 'DELETE', '/api/v1/indexes/payments', { token: acme })).status).toBe(204);
    expect((await postSql(q.url, 'SELECT 1 AS one', { token: acme })).status).toBe(200);
    expect(await running$(q)).toBe(0);
  }, 90_000);

  it('regression (query-timeout-frees-slot-early): a query answered 504 while its tables are still being read keeps its slot until the read ends', async () => {
    // withinDeadline answered 504 at query.timeoutSecs and the slot went back at once, while the
    // context build (catalog, metadata, engine) went on alone: a tenant could start any number of
    // them, each past the limit. The table's metadata file is made a FIFO, so the build waits on
    // it until the test writes the file into it.
    const { q, dataDir } = await start(['--query-max-concurrent-per-tenant', '2', '--query-timeout-secs', '1']);
    expect((await call(q, 'PUT', '/api/v1/indexes/slow', { body: INDEX })).status).toBe(201);
    const feed = metadataAsFifo(dataDir);
    try {
      const first = await postSql(q.url, 'SELECT 1 AS one');
      expect(first.status, first.text).toBe(504);
      expect(first.body['error']).toMatchObject({ code: 'SIGLAKE_QUERY_TIMEOUT' });
      // The build goes on, and is counted as running.
      expect(await running$(q)).toBe(1);
      // The listing waits on the same read: 504 at the same bound, and it keeps its slot too.
      const tables = await call(q, 'GET', '/api/v1/tables');
      expect(tables.status, tables.text).toBe(504);
      expect(tables.code).toBe('SIGLAKE_QUERY_TIMEOUT');
      expect(await running$(q)).toBe(2);
      // Both slots are held by work still going on: the next request is refused, not started.
      const third = await postSql(q.url, 'SELECT 1 AS one');
      expect(third.status, third.text).toBe(429);
      expect(third.body['error']).toMatchObject({ code: 'SIGLAKE_QUERY_CONCURRENCY' });
      expect(third.headers.get('retry-after')).toBe('1');
      await feed();
      // The reads end: the slots go back, and the context built meanwhile serves the next query.
      await until(async () => (await running$(q)) === 0, 20_000, 'the slots to be given back');
      const after = await postSql(q.url, 'SELECT count(*) AS n FROM slow');
      expect(after.status, after.text).toBe(200);
      expect(after.body['rows']).toEqual([['0']]);
      const listed = await call(q, 'GET', '/api/v1/tables');
      expect(listed.status, listed.text).toBe(200);
      expect(JSON.parse(listed.text)).toMatchObject({ tables: [{ name: 'slow', kind: 'index', retentionDays: 7 }] });
      expect(await running$(q)).toBe(0);
      expect(q.exitCode).toBeNull();
    } finally {
      await feed().catch(() => undefined);
    }
  }, 90_000);
});

describe('siglake query: a statement whose plan would outgrow the engine\'s bounds', () => {
  it('regression (query-union-chain-unbounded): more than 1000 SELECT blocks is refused before anything runs; 1000 run', async () => {
    const { q } = await start([]);
    const chain = (branches: number) => JSON.stringify({ sql: 'SELECT 1 AS x' + ' UNION ALL SELECT 1'.repeat(branches - 1) });
    // Before, the engine built the plan of such a chain in time and memory growing with the square of
    // its branches, outside query.memoryLimitMib and deaf to the interrupt (30,000 branches: minutes
    // past the 504, over 10 GiB); this one answered 200 after seconds and a GiB.
    const big = await call(q, 'POST', '/api/v1/sql', { body: chain(5000) });
    expect(big.status, big.text.slice(0, 300)).toBe(400);
    expect(big.code).toBe('SIGLAKE_SQL_REFUSED');
    expect(big.text).toMatch(/the statement has 5000 SELECT blocks .*at most 1000 are allowed/);
    const explained = await call(q, 'POST', '/api/v1/sql', { body: JSON.stringify({ sql: 'EXPLAIN ' + (JSON.parse(chain(1001)) as { sql: string }).sql }) });
    expect([explained.status, explained.code]).toEqual([400, 'SIGLAKE_SQL_REFUSED']);
    const ok = await call(q, 'POST', '/api/v1/sql', { body: chain(1000) });
    expect(ok.status, ok.text.slice(0, 300)).toBe(200);
    expect((JSON.parse(ok.text) as { rowCount: number }).rowCount).toBe(1000);
  }, 60_000);

  it('regression (query-boolean-chain-outlives-timeout): more than 1000 AND/OR operators is refused before the engine parses it; another tenant is answered meanwhile; 1000 run', async () => {
    const { q, token } = await startWithTenants(['--query-timeout-secs', '5']);
    const [acme, globex] = [await token('acme'), await token('globex')];
    const chain = (op: 'OR' | 'AND', terms: number) =>
      JSON.stringify({ sql: `SELECT count(*) AS n FROM (VALUES ('x')) t(body) WHERE ${Array.from({ length: terms }, (_, i) => `body ${op === 'OR' ? '=' : '<>'} 'a${i}'`).join(` ${op} `)}` });
    // Before, the engine's parser (deaf to the interrupt) and planner took time growing with the
    // square of the chain: 20,000 terms (350 KB) were answered 504 well after query.timeoutSecs,
    // the engine still working on them; 100,000 AND terms held a core for over a minute.
    const big = call(q, 'POST', '/api/v1/sql', { token: acme, body: chain('OR', 20_000) });
    const other = call(q, 'POST', '/api/v1/sql', { token: globex, body: JSON.stringify({ sql: 'SELECT 42 AS x' }) });
    const [refused, served] = await Promise.all([big, other]);
    expect(refused.status, refused.text.slice(0, 300)).toBe(400);
    expect(refused.code).toBe('SIGLAKE_SQL_REFUSED');
    expect(refused.text).toMatch(/the statement has 19999 AND\/OR operators; at most 1000 are allowed/);
    expect(served.status, served.text).toBe(200);
    expect((JSON.parse(served.text) as { rows: unknown[][] }).rows).toEqual([[42]]);
    const and = await call(q, 'POST', '/api/v1/sql', { token: acme, body: chain('AND', 1002) });
    expect([and.status, and.code]).toEqual([400, 'SIGLAKE_SQL_REFUSED']);
    const explained = await call(q, 'POST', '/api/v1/sql', { token: acme, body: JSON.stringify({ sql: 'EXPLAIN ' + (JSON.parse(chain('OR', 1002)) as { sql: string }).sql }) });
    expect([explained.status, explained.code]).toEqual([400, 'SIGLAKE_SQL_REFUSED']);
    // At the limit it runs; the refused tenant's slots were all given back.
    for (const op of ['OR', 'AND'] as const) {
      const ok = await call(q, 'POST', '/api/v1/sql', { token: acme, body: chain(op, 1001) });
      expect(ok.status, ok.text.slice(0, 300)).toBe(200);
      expect((JSON.parse(ok.text) as { rows: unknown[][] }).rows).toEqual([[op === 'OR' ? '0' : '1']]);
    }
    // Words in literals, quoted names and comments are counted too (the count is made on the text, before any parse).
    const words = await call(q, 'POST', '/api/v1/sql', { token: acme, body: JSON.stringify({ sql: `SELECT '${'this or that '.repeat(1001)}' AS x` }) });
    expect([words.status, words.code]).toEqual([400, 'SIGLAKE_SQL_REFUSED']);
    const names = await call(q, 'POST', '/api/v1/sql', { token: acme, body: JSON.stringify({ sql: `SELECT 'color, order, andante, or_else, "or1", sand' AS x` }) });
    expect(names.status, names.text).toBe(200);
    expect(await running$(q)).toBe(0);
  }, 90_000);

  it('regression (query-group-by-list-outlives-timeout): more than 1000 commas in GROUP BY lists is refused before the engine parses it; 1001 items run, and long lists before GROUP BY', async () => {
    const { q } = await start(['--query-timeout-secs', '5']);
    const grouped = (items: number, before = '') =>
      JSON.stringify({ sql: `SELECT count(*) AS n FROM (VALUES ('x')) t(body)${before} GROUP BY ${Array.from({ length: items }, (_, i) => `body || '${i}'`).join(', ')}` });
    // Before, the engine's parser (deaf to the interrupt) and planner took time growing with the square
    // of a GROUP BY list's distinct items: 6,000 took seconds of parse and plan; 150,000 fit the body.
    const big = await call(q, 'POST', '/api/v1/sql', { body: grouped(6000) });
    expect(big.status, big.text.slice(0, 300)).toBe(400);
    expect(big.code).toBe('SIGLAKE_SQL_REFUSED');
    expect(big.text).toMatch(/the statement has 5999 commas in its GROUP BY lists.*at most 1000 are allowed/);
    const ok = await call(q, 'POST', '/api/v1/sql', { body: grouped(1001) });
    expect(ok.status, ok.text.slice(0, 300)).toBe(200);
    expect((JSON.parse(ok.text) as { rows: unknown[][] }).rows).toEqual([['1']]);
    const inList = ` WHERE body IN (${Array.from({ length: 5000 }, (_, i) => `'x${i}'`).join(', ')}, 'x')`;
    const before = await call(q, 'POST', '/api/v1/sql', { body: grouped(2, inList) });
    expect(before.status, before.text.slice(0, 300)).toBe(200);
    expect((JSON.parse(before.text) as { rows: unknown[][] }).rows).toEqual([['1']]);
  }, 60_000);

  it('regression (query-group-commas-past-the-list): commas after a GROUP BY list ends (an outer IN list after a grouped CTE, a HAVING IN list, a word group in a literal) are not counted; a list the count cannot read safely still is', async () => {
    const { q } = await start(['--query-timeout-secs', '5']);
    const values = Array.from({ length: 2000 }, (_, i) => `'s${i}'`).join(', ');
    const sql = (text: string) => call(q, 'POST', '/api/v1/sql', { body: JSON.stringify({ sql: text }) });
    const rows = (r: { text: string }) => (JSON.parse(r.text) as { rows: unknown[][] }).rows;
    // Before, every comma from the first word GROUP to the end of the text was counted: these were
    // refused 400 "commas after its first GROUP", though no GROUP BY list has more than one item.
    const cte = await sql(`WITH agg AS (SELECT body, count(*) AS n FROM (VALUES ('s1')) t(body) GROUP BY body) SELECT count(*) AS c FROM agg WHERE body IN (${values})`);
    expect(cte.status, cte.text.slice(0, 300)).toBe(200);
    expect(rows(cte)).toEqual([['1']]);
    const having = await sql(`SELECT body FROM (VALUES ('s1')) t(body) GROUP BY body HAVING body IN (${values}) ORDER BY body`);
    expect(having.status, having.text.slice(0, 300)).toBe(200);
    expect(rows(having)).toEqual([['s1']]);
    const word = await sql(`SELECT count(*) AS c FROM (VALUES ('resource-group')) t(body) WHERE body = 'resource-group' OR body IN (${values})`);
    expect(word.status, word.text.slice(0, 300)).toBe(200);
    expect(rows(word)).toEqual([['1']]);
    // Still refused: items after a keyword the engine reads as a column name (t . limit), and a
    // list holding a literal (read to the end of the text, as before).
    const items = (n: number) => Array.from({ length: n }, (_, i) => `t.body || ${i}`).join(', ');
    const dotted = await sql(`SELECT count(*) FROM (SELECT 'x' AS body, 1 AS "limit") t GROUP BY t . limit, ${items(1500)}`);
    expect([dotted.status, dotted.code], dotted.text.slice(0, 300)).toEqual([400, 'SIGLAKE_SQL_REFUSED']);
    expect(dotted.text).toMatch(/the statement has 1500 commas in its GROUP BY lists.*at most 1000 are allowed/);
    const quoted = await sql(`SELECT count(*) FROM (SELECT 'x' AS body) t GROUP BY body || ')', ${items(1500)}`);
    expect([quoted.status, quoted.code], quoted.text.slice(0, 300)).toEqual([400, 'SIGLAKE_SQL_REFUSED']);
    expect(await running$(q)).toBe(0);
  }, 60_000);

  it('regression (query-join-order-outlives-timeout): more than 32 joins is refused before the engine plans them; 32 run', async () => {
    const { q } = await start(['--query-timeout-secs', '5']);
    // Each table joined to the first: the engine's join order optimizer planned 40 of them in
    // about 0.3 s, 64 for over a minute without heeding the interrupt.
    const star = (joins: number) =>
      JSON.stringify({
        sql: `SELECT count(*) AS n FROM (VALUES ('x')) a0(body) ${Array.from({ length: joins }, (_, i) => `JOIN (VALUES ('x')) a${i + 1}(body) ON a0.body = a${i + 1}.body`).join(' ')}`,
      });
    const big = await call(q, 'POST', '/api/v1/sql', { body: star(40) });
    expect(big.status, big.text.slice(0, 300)).toBe(400);
    expect(big.code).toBe('SIGLAKE_SQL_REFUSED');
    expect(big.text).toMatch(/the statement has 40 joins .*at most 32 are allowed/);
    const commas = await call(q, 'POST', '/api/v1/sql', {
      body: JSON.stringify({ sql: `SELECT count(*) AS n FROM ${Array.from({ length: 34 }, (_, i) => `(VALUES (1)) t${i}(v)`).join(', ')}` }),
    });
    expect([commas.status, commas.code]).toEqual([400, 'SIGLAKE_SQL_REFUSED']);
    const ok = await call(q, 'POST', '/api/v1/sql', { body: star(32) });
    expect(ok.status, ok.text.slice(0, 300)).toBe(200);
    expect((JSON.parse(ok.text) as { rows: unknown[][] }).rows).toEqual([['1']]);
  }, 60_000);

  it('regression (query-grouping-sets-outlive-timeout): more than 256 grouping sets is refused before anything runs; CUBE of 8 runs', async () => {
    const { q } = await start(['--query-timeout-secs', '5']);
    const cube = (n: number) =>
      JSON.stringify({ sql: `SELECT count(*) AS n FROM (VALUES ('x')) t(body) GROUP BY CUBE(${Array.from({ length: n }, (_, i) => `body || '${i}'`).join(', ')})` });
    // Before, each set was aggregated apart and the interrupt heeded late: CUBE of 14 (16,384 sets,
    // 200 bytes of SQL) ran 83 s without heeding it; this one answered 200.
    const big = await call(q, 'POST', '/api/v1/sql', { body: cube(9) });
    expect(big.status, big.text.slice(0, 300)).toBe(400);
    expect(big.code).toBe('SIGLAKE_SQL_REFUSED');
    expect(big.text).toMatch(/the statement has 512 grouping sets .*at most 256 are allowed/);
    const ok = await call(q, 'POST', '/api/v1/sql', { body: cube(8) });
    expect(ok.status, ok.text.slice(0, 300)).toBe(200);
    expect((JSON.parse(ok.text) as { rowCount: number }).rowCount).toBe(256);
  }, 60_000);

  it('regression (query-parse-tree-in-heap): a statement whose parse tree is past 8 MiB is refused without handing it to the shared heap; 40,000 IN values run', async () => {
    const { q } = await start([]);
    const inList = (values: number) => JSON.stringify({ sql: `SELECT count(*) AS n FROM (VALUES (1)) t(v) WHERE v IN (${Array(values).fill('1').join(',')})` });
    // Before, the engine's parse tree of the whole body (about 160 bytes a value: up to 78 MB for
    // 1 MiB of SQL) was parsed as JSON on the event loop every tenant shares, seconds and hundreds
    // of MB of heap; this one (200 KB of SQL, a 16 MB tree) was answered 200.
    const big = await call(q, 'POST', '/api/v1/sql', { body: inList(100_000) });
    expect(big.status, big.text.slice(0, 300)).toBe(400);
    expect(big.code).toBe('SIGLAKE_SQL_REFUSED');
    expect(big.text).toMatch(/the statement's parse tree is 1\d\.\d MiB; at most 8 MiB is allowed/);
    const explained = await call(q, 'POST', '/api/v1/sql', { body: JSON.stringify({ sql: 'EXPLAIN ' + (JSON.parse(inList(100_000)) as { sql: string }).sql }) });
    expect([explained.status, explained.code]).toEqual([400, 'SIGLAKE_SQL_REFUSED']);
    const ok = await call(q, 'POST', '/api/v1/sql', { body: inList(40_000) });
    expect(ok.status, ok.text.slice(0, 300)).toBe(200);
    expect((JSON.parse(ok.text) as { rows: unknown[][] }).rows).toEqual([['1']]);
  }, 60_000);
});

describe('siglake query: an answer its caller does not read', () => {
  it('regression (query-unread-answers-unbounded): the slot is held until the answer is written, and a caller that takes none of it for query.timeoutSecs is cut; a caller that reads gets it whole', async () => {
    const { q } = await start(['--query-max-concurrent-per-tenant', '1', '--query-timeout-secs', '3']);
    const big = JSON.stringify({ sql: "SELECT repeat('x', 50000) AS s FROM range(1000)" }); // a 50 MB answer
    // A caller that takes the first bytes of its answer, then reads nothing more (its window full).
    const s = net.connect(q.port, '127.0.0.1');
    sockets.push(s);
    let got = 0;
    let closed = false;
    let hold = true;
    s.on('data', (b: Buffer) => {
      got += b.length;
      if (hold) s.pause();
    });
    s.on('close', () => (closed = true));
    s.on('error', () => undefined);
    s.write(`POST /api/v1/sql HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(big)}\r\n\r\n${big}`);
    await until(() => got > 0, 30_000, 'the first bytes of the answer');
    // Its answer is not written yet: the tenant's one slot is still taken. (Before, the whole answer
    // was queued for the socket at once and the slot given back: any number of unread answers, each
    // up to query.maxResultMib, stayed in the heap for as long as their connections stayed open.)
    const second = await call(q, 'POST', '/api/v1/sql', { body: JSON.stringify({ sql: 'SELECT 1 AS one' }) });
    expect(second.status, second.text).toBe(429);
    expect(second.code).toBe('SIGLAKE_QUERY_CONCURRENCY');
    expect(await running$(q)).toBe(1);
    // No byte taken for query.timeoutSecs: the server cuts the connection, counted as the caller's
    // (499), and the slot comes back (before: the answer stayed queued for as long as the caller liked).
    const answered = async () => (await q.metrics()).get('siglake_query_requests_total{endpoint="sql",status="499"}') === 1;
    await until(answered, 30_000, 'the server to cut the connection whose answer was not read (499)');
    expect(await running$(q)).toBe(0);
    expect((await q.metrics()).get('siglake_query_requests_total{endpoint="sql",status="500"}')).toBe(0);
    // What the caller reads now ends short of the answer: the rest was never sent.
    hold = false;
    s.resume();
    await until(() => closed, 30_000, 'the cut connection to end at the caller');
    expect(got).toBeLessThan(50_000_000);
    // A caller that reads gets the whole answer, in JSON and in NDJSON.
    const whole = await fetch(`${q.url}/api/v1/sql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: big });
    const body = (await whole.json()) as { rowCount: number; truncated: boolean; rows: string[][] };
    expect(whole.status).toBe(200);
    expect([body.rowCount, body.truncated, body.rows[999]![0]!.length]).toEqual([1000, false, 50000]);
    const nd = await fetch(`${q.url}/api/v1/sql`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/x-ndjson' }, body: big });
    expect(nd.status).toBe(200);
    expect((await nd.text()).trim().split('\n')).toHaveLength(1000);
    expect((await call(q, 'POST', '/api/v1/sql', { body: JSON.stringify({ sql: 'SELECT 1 AS one' }) })).status).toBe(200);
  }, 90_000);
});

describe('siglake query: the index API\'s time bound, and a query\'s slot while its body arrives', () => {
  it('regression (query-index-api-unbounded): an index call whose reads do not end is answered 504 at query.timeoutSecs and keeps its slot until they end', async () => {
    // The index API took a slot but had no time bound: a warehouse (or catalog) that did not
    // answer left the caller waiting for as long as it took.
    const { q, dataDir } = await start(['--query-max-concurrent-per-tenant', '1', '--query-timeout-secs', '1']);
    expect((await call(q, 'PUT', '/api/v1/indexes/slow', { body: INDEX })).status).toBe(201);
    const feed = metadataAsFifo(dataDir);
    try {
      const shown = await call(q, 'GET', '/api/v1/indexes/slow');
      expect(shown.status, shown.text).toBe(504);
      expect(shown.code).toBe('SIGLAKE_QUERY_TIMEOUT');
      // Its read goes on and holds the tenant's one slot.
      expect(await running$(q)).toBe(1);
      const next = await postSql(q.url, 'SELECT 1 AS one');
      expect(next.status, next.text).toBe(429);
      expect(next.body['error']).toMatchObject({ code: 'SIGLAKE_QUERY_CONCURRENCY' });
      await feed();
      await until(async () => (await running$(q)) === 0, 20_000, 'the slot to be given back');
      const again = await call(q, 'GET', '/api/v1/indexes/slow');
      expect(again.status, again.text).toBe(200);
      expect(JSON.parse(again.text)).toMatchObject({ name: 'slow', retentionDays: 7 });
      expect(q.exitCode).toBeNull();
    } finally {
      await feed().catch(() => undefined);
    }
    const m = await q.metrics();
    expect(m.get('siglake_query_requests_total{endpoint="indexes",status="504"}')).toBe(1);
  }, 90_000);

  it('regression (query-sql-slot-after-body): a query takes its slot before its body: a body still arriving holds it, and a refused one is not invited', async () => {
    // The slot was taken after the body: a tenant could have any number of bodies arriving at
    // once (each up to 1 MiB, held until server.requestTimeoutSecs), and Expect: 100-continue
    // was invited before the 429.
    const { q } = await start(['--query-max-concurrent-per-tenant', '1', '--query-timeout-secs', '10']);
    const sql = JSON.stringify({ sql: 'SELECT 42 AS answer' });
    const slow = rawRequest(q.port, `POST /api/v1/sql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${sql.length}\r\n\r\n${sql.slice(0, 5)}`);
    await until(async () => (await running$(q)) === 1, 20_000, 'the slow body to take the slot');
    const refused = await postSql(q.url, 'SELECT 1 AS one');
    expect(refused.status, refused.text).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('1');
    // Refused on its headers: no 100 Continue, the 429 is the only answer.
    const waiting = rawRequest(q.port, `POST /api/v1/sql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${sql.length}\r\nExpect: 100-continue\r\n\r\n`);
    await waiting.closed;
    expect(waiting.got()).toMatch(/^HTTP\/1\.1 429 /);
    expect(waiting.got()).not.toContain('100 Continue');
    // The rest of the body arrives: the query runs and the slot goes back.
    slow.socket.write(sql.slice(5));
    await until(() => slow.got().includes('\r\n\r\n') && slow.got().includes('42'), 20_000, 'the slow query\'s answer');
    expect(slow.got()).toMatch(/^HTTP\/1\.1 200 /);
    await until(async () => (await running$(q)) === 0, 20_000, 'the slot to be given back');
    // A body that is bad gives its slot back too.
    const bad = await fetch(`${q.url}/api/v1/sql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{not json' });
    expect(bad.status).toBe(400);
    expect(await running$(q)).toBe(0);
    expect((await postSql(q.url, 'SELECT 1 AS one')).status).toBe(200);
  }, 90_000);
});

describe('siglake query: Expect (RFC 9110 §10.1.1)', () => {
  it('regression (query-100-continue-before-413): Expect: 100-continue with a body over the limit is answered 413 at once, without 100 Continue; a body within it is invited and served', async () => {
    const { q, dataDir, token } = await startWithTenants([]);
    const acme = await token('acme');
    // Over the query body limit (1 MiB): the 413 is the first thing sent, and the connection closes.
    const big = rawRequest(
      q.port,
      `POST /api/v1/sql HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${acme}\r\nContent-Type: application/json\r\nContent-Length: ${2 * 1024 * 1024}\r\nExpect: 100-continue\r\n\r\n`,
    );
    await big.closed;
    expect(big.got()).toMatch(/^HTTP\/1\.1 413 /);
    expect(big.got()).not.toContain('100 Continue');
    expect(big.got()).toMatch(/\r\nconnection: close\r\n/i);
    expect(big.got()).toContain('"SIGLAKE_BODY_TOO_LARGE"');

    // Over the index definition limit (256 KiB), within the query one: the same, and nothing is created.
    const bigIndex = rawRequest(
      q.port,
      `PUT /api/v1/indexes/payments HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${acme}\r\nContent-Type: application/json\r\nContent-Length: ${300 * 1024}\r\nExpect: 100-continue\r\n\r\n`,
    );
    await bigIndex.closed;
    expect(bigIndex.got()).toMatch(/^HTTP\/1\.1 413 /);
    expect(bigIndex.got()).toContain('"SIGLAKE_BODY_TOO_LARGE"');
    expect(listFiles(path.join(dataDir, 'warehouse'))).toEqual([]);

    // Refused on its credential: 401 without inviting the body.
    const anon = rawRequest(q.port, `POST /api/v1/sql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 20\r\nExpect: 100-continue\r\n\r\n`);
    await anon.closed;
    expect(anon.got()).toMatch(/^HTTP\/1\.1 401 /);
    expect(anon.got()).toContain('"SIGLAKE_UNAUTHENTICATED"');

    // Within the limit: 100 Continue, then the body, then the answer.
    const body = JSON.stringify({ sql: 'SELECT 42 AS answer' });
    const ok = rawRequest(
      q.port,
      `POST /api/v1/sql HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${acme}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`,
    );
    await until(() => ok.got().length > 0, 20_000, 'an interim answer');
    expect(ok.got()).toBe('HTTP/1.1 100 Continue\r\n\r\n');
    ok.socket.write(body);
    await ok.closed;
    expect(ok.got()).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /);
    expect(ok.got()).toContain('"rows":[[42]'); // chunked: the row's batch ends the chunk

    // And an index PUT within its limit.
    const put = rawRequest(
      q.port,
      `PUT /api/v1/indexes/payments HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${acme}\r\nContent-Type: application/json\r\nContent-Length: ${INDEX.length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`,
    );
    await until(() => put.got().length > 0, 20_000, 'an interim answer');
    expect(put.got()).toBe('HTTP/1.1 100 Continue\r\n\r\n');
    put.socket.write(INDEX);
    await put.closed;
    expect(put.got()).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 201 /);

    const m = await q.metrics();
    expect(m.get('siglake_query_requests_total{endpoint="sql",status="413"}')).toBe(1);
    expect(m.get('siglake_query_requests_total{endpoint="indexes",status="413"}')).toBe(1);
    expect(m.get('siglake_query_requests_total{endpoint="sql",status="401"}')).toBe(1);
    expect(q.exitCode).toBeNull();
  }, 60_000);

  it('regression (query-unknown-expectation): an Expect other than 100-continue is answered 417 with the contract\'s error body, counted, the body not read', async () => {
    const { q } = await start([]);
    for (const [method, p] of [
      ['POST', '/api/v1/sql'],
      ['PUT', '/api/v1/indexes/payments'],
    ] as const) {
      const r = rawRequest(q.port, `${method} ${p} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 20\r\nExpect: 200-ok\r\n\r\n`);
      await r.closed;
      expect(r.got(), `${method} ${p}`).toMatch(/^HTTP\/1\.1 417 /);
      expect(r.got()).toMatch(/\r\nconnection: close\r\n/i);
      expect(r.got()).toMatch(/\r\ncontent-type: application\/json/i);
      expect(r.got()).toContain('"SIGLAKE_EXPECTATION_FAILED"');
    }
    const m = await q.metrics();
    expect(m.get('siglake_query_requests_total{endpoint="sql",status="417"}')).toBe(1);
    expect(m.get('siglake_query_requests_total{endpoint="indexes",status="417"}')).toBe(1);
    // The same connection-less refusal on the other paths, and the server still answers.
    const health = rawRequest(q.port, `GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n\r\n`);
    await health.closed;
    expect(health.got()).toMatch(/^HTTP\/1\.1 417 /);
    expect((await postSql(q.url, 'SELECT 1 AS one')).status).toBe(200);
  }, 60_000);
});
