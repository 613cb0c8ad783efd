// Coordinator and shards (contract query §5) with real processes: shard A
// admits every tenant, shard S only acme; coordinator C1 spreads tenants
// over [A, S] by rendezvous hashing, C2 sends everything to S, C3 to a port
// with no shard behind it (held by the test, every connection reset). Each
// coordinator returns its shard's answer unchanged, a stricter shard's 403
// included; the shard endpoint wants the shard token; a shard that does not
// answer is a 502.

import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/ingester.js';
import { AUDIENCE, ISSUER, makeKeyPair, mint, writeJwksFile, type KeyPair } from '../helpers/jwt.js';
import { bodiesOf, icebergFlags, landTenants, postSql, startQuery, type RunningQuery } from '../helpers/query.js';
import { until } from '../helpers/wait.js';

const TENANTS = ['default', 'acme', 'globex'] as const;
const N = 4;
const SHARD_TOKEN = 'shard-secret-for-tests';

/**
 * A shard that is not there: a port held for the whole test (a port released instead could be
 * handed to another process, a query process of this very test included), whose every connection
 * is reset at once, as a refused one would be, before a byte of a request is read.
 */
async function refusingPort(): Promise<{ port: number; close: () => Promise<void> }> {
  const srv = net.createServer((sock) => sock.resetAndDestroy());
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as net.AddressInfo).port;
  return { port, close: () => new Promise<void>((r) => srv.close(() => r())) };
}

describe('query coordinator and shards', () => {
  const dataDir = tempDir('siglake-query-shards-');
  let key: KeyPair;
  const tokens: Record<string, string> = {};
  const procs: RunningQuery[] = [];
  let A: RunningQuery, S: RunningQuery, C1: RunningQuery, C2: RunningQuery, C3: RunningQuery, C4: RunningQuery, C5: RunningQuery;
  let absentShard: Awaited<ReturnType<typeof refusingPort>> | undefined;

  /** acme's endless query sent to a coordinator with node:http (whose destroy() closes the connection); `failed` settles at the hang-up. */
  const slowQueryAt = (url: string): { caller: http.ClientRequest; failed: Promise<Error> } => {
    const slow = JSON.stringify({ sql: 'SELECT sum(range % 7) FROM range(100000000000000)' });
    const u = new URL(`${url}/api/v1/sql`);
    const caller = http.request({
      hostname: u.hostname,
      port: u.port,
      path: u.pathname,
      method: 'POST',
      headers: { authorization: `Bearer ${tokens['acme']}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(slow) },
    });
    const failed = new Promise<Error>((resolve) => caller.on('error', resolve));
    caller.end(slow);
    return { caller, failed };
  };

  beforeAll(async () => {
    await landTenants(dataDir, TENANTS, 'r1', N);
    key = await makeKeyPair('ES256', 'k1');
    const jwks = writeJwksFile(dataDir, [key.jwk]);
    for (const t of [...TENANTS, 'initech']) tokens[t] = await mint(key, { tenant: t });
    const tokenFile = path.join(dataDir, 'shard-token');
    fs.writeFileSync(tokenFile, `${SHARD_TOKEN}\n`);
    const common = [...icebergFlags(dataDir), '--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks, '--query-tenant-claim', 'tenant'];
    const start = async (args: string[]) => {
      const p = await startQuery(dataDir, [...common, ...args]);
      procs.push(p);
      return p;
    };
    A = await start(['--query-shard-token-file', tokenFile]);
    // A query timeout far beyond any wait below: a query that stops did so because the caller hung up.
    S = await start(['--query-shard-token-file', tokenFile, '--query-allowed-tenants', 'acme', '--query-timeout-secs', '600']);
    const everyone = ['--query-allowed-tenants', TENANTS.join(',')];
    C1 = await start(['--query-shard-token', SHARD_TOKEN, '--query-shards', `${A.url},${S.url}`, ...everyone]);
    C2 = await start(['--query-shard-token', SHARD_TOKEN, '--query-shards', S.url, ...everyone]);
    absentShard = await refusingPort();
    C3 = await start(['--query-shard-token', SHARD_TOKEN, '--query-shards', `http://127.0.0.1:${absentShard.port}`, ...everyone]);
    C4 = await start(['--query-shard-token', `${SHARD_TOKEN}-not`, '--query-shards', A.url, ...everyone]);
    C5 = await start(['--query-shard-token', SHARD_TOKEN, '--query-shards', S.url, '--query-max-concurrent-per-tenant', '1', ...everyone]);
  }, 180_000);

  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    await absentShard?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const shardSql = (target: RunningQuery, sql: string, token: string | undefined, shardToken: string | undefined) =>
    postSql(target.url, sql, {
      path: '/api/v1/sql/shard',
      ...(token !== undefined ? { token } : {}),
      ...(shardToken !== undefined ? { headers: { 'x-siglake-shard-token': shardToken } } : {}),
    });

  const sql = 'SELECT body FROM logs ORDER BY body';

  it('C1 answers each tenant exactly as the one shard rendezvous hashing picks for it, every time', async () => {
    for (const tenant of TENANTS) {
      const viaA = await shardSql(A, sql, tokens[tenant], SHARD_TOKEN);
      const viaS = await shardSql(S, sql, tokens[tenant], SHARD_TOKEN);
      expect(viaA.status).toBe(200);
      expect(viaA.body['rows']).toEqual(bodiesOf(tenant, 'r1', N).sort().map((b) => [b]));
      const answers = [];
      for (let i = 0; i < 3; i++) answers.push(await postSql(C1.url, sql, { token: tokens[tenant] }));
      const statuses = new Set(answers.map((a) => a.status));
      expect(statuses.size, `${tenant} always on one shard`).toBe(1);
      const a = answers[0]!;
      const same = (x: typeof a) => x.status === a.status && JSON.stringify(x.body['rows'] ?? x.body['error']) === JSON.stringify(a.body['rows'] ?? a.body['error']);
      expect(same(viaA) || same(viaS), `${tenant}: ${a.text}`).toBe(true);
      if (tenant === 'acme') expect(a.status).toBe(200);
    }
  });

  it("C2 forwards the stricter shard's 403 unchanged, and counts nothing itself", async () => {
    const c2Before = await C2.metrics();
    const sBefore = await S.metrics();
    const direct = await shardSql(S, sql, tokens['globex'], SHARD_TOKEN);
    expect(direct.status).toBe(403);
    const via = await postSql(C2.url, sql, { token: tokens['globex'] });
    expect(via.status).toBe(403);
    expect(via.text).toBe(direct.text);
    expect((via.body['error'] as { reason: string }).reason).toBe('unlisted');
    expect(via.headers.get('content-type')).toBe('application/json');
    const sAfter = await S.metrics();
    expect(sAfter.get('siglake_query_tenant_denied_total{reason="unlisted"}')! - sBefore.get('siglake_query_tenant_denied_total{reason="unlisted"}')!).toBe(2);
    expect((await C2.metrics()).get('siglake_query_tenant_denied_total{reason="unlisted"}')).toBe(c2Before.get('siglake_query_tenant_denied_total{reason="unlisted"}'));
    // acme is admitted by S: its rows, NDJSON and its headers too.
    const ok = await postSql(C2.url, sql, { token: tokens['acme'], accept: 'application/x-ndjson' });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('content-type')).toBe('application/x-ndjson');
    expect(ok.headers.get('x-siglake-truncated')).toBe('false');
    expect(ok.text.trimEnd().split('\n').map((l) => (JSON.parse(l) as { body: string }).body)).toEqual(bodiesOf('acme', 'r1', N).sort());
  });

  it('a coordinator refuses by its own rules before forwarding: 401, and 403 missing/invalid/unlisted, counted there', async () => {
    const aBefore = await A.metrics();
    const sBefore = await S.metrics();
    const before = await C1.metrics();
    expect((await postSql(C1.url, sql)).status).toBe(401);
    const cases: [string, string][] = [
      [await mint(key, {}), 'missing'],
      [await mint(key, { tenant: '../x' }), 'invalid'],
      [tokens['initech']!, 'unlisted'],
    ];
    for (const [token, reason] of cases) {
      const a = await postSql(C1.url, sql, { token });
      expect(a.status).toBe(403);
      expect((a.body['error'] as { reason: string }).reason).toBe(reason);
    }
    const after = await C1.metrics();
    for (const r of ['missing', 'invalid', 'unlisted']) {
      expect(after.get(`siglake_query_tenant_denied_total{reason="${r}"}`)! - before.get(`siglake_query_tenant_denied_total{reason="${r}"}`)!).toBe(1);
    }
    const served = (m: Map<string, number>) => [...m].filter(([k]) => k.startsWith('siglake_query_requests_total{endpoint="sql_shard"')).reduce((s, [, v]) => s + v, 0);
    expect(served(await A.metrics())).toBe(served(aBefore));
    expect(served(await S.metrics())).toBe(served(sBefore));
  });

  it('/api/v1/sql/shard: 401 without the shard token or with a wrong one; with it, every 403 reason of the shard', async () => {
    for (const shardToken of [undefined, 'wrong', `${SHARD_TOKEN}x`]) {
      const a = await shardSql(A, sql, tokens['acme'], shardToken);
      expect(a.status).toBe(401);
      expect((a.body['error'] as { code: string }).code).toBe('SIGLAKE_UNAUTHENTICATED');
    }
    // The caller's own token is still checked.
    expect((await shardSql(A, sql, undefined, SHARD_TOKEN)).status).toBe(401);
    const cases: [RunningQuery, string, string][] = [
      [A, await mint(key, {}), 'missing'],
      [A, await mint(key, { tenant: 'tmp' }), 'invalid'],
      [S, tokens['default']!, 'unlisted'],
    ];
    for (const [target, token, reason] of cases) {
      const a = await shardSql(target, sql, token, SHARD_TOKEN);
      expect(a.status).toBe(403);
      expect((a.body['error'] as { reason: string }).reason).toBe(reason);
    }
  });

  it("a caller that hangs up at the coordinator stops the shard's query, and is no shard error", async () => {
    const shardErrors = (await C2.metrics()).get('siglake_query_shard_errors_total');
    // node:http, so that the hang-up is certain to close the connection.
    const { caller, failed } = slowQueryAt(C2.url);
    await until(async () => (await S.metrics()).get('siglake_query_running') === 1, 30_000, "the query running on acme's shard");
    caller.destroy();
    expect(await failed).toBeInstanceOf(Error);
    // Stopped long before the shard's query.timeoutSecs (600 s); the bounds are for a loaded 2-core machine.
    await until(async () => (await S.metrics()).get('siglake_query_running') === 0, 30_000, 'the shard to stop the query');
    await until(async () => (await C2.metrics()).get('siglake_query_requests_total{endpoint="sql",status="499"}') === 1, 30_000, 'the coordinator to count the request');
    expect((await C2.metrics()).get('siglake_query_shard_errors_total')).toBe(shardErrors);
  });

  it('regression (coordinator-takes-no-slot): a coordinator holds one of the tenant\'s slots for each request it passes on, from before its body', async () => {
    // A coordinator took no slot: a tenant could have any number of bodies arriving and forwards
    // waiting on it at once, whatever query.maxConcurrentPerTenant said.
    const { caller, failed } = slowQueryAt(C5.url);
    try {
      await until(async () => (await S.metrics()).get('siglake_query_running') === 1, 30_000, "the query running on acme's shard");
      expect((await C5.metrics()).get('siglake_query_running')).toBe(1);
      const shardRequests = (await S.metrics()).get('siglake_query_requests_total{endpoint="sql_shard",status="429"}') ?? 0;
      const second = await postSql(C5.url, sql, { token: tokens['acme'] });
      expect(second.status, second.text).toBe(429);
      expect((second.body['error'] as { code: string }).code).toBe('SIGLAKE_QUERY_CONCURRENCY');
      expect(second.headers.get('retry-after')).toBe('1');
      // Refused by the coordinator itself: the shard saw no second request.
      expect((await S.metrics()).get('siglake_query_requests_total{endpoint="sql_shard",status="429"}') ?? 0).toBe(shardRequests);
      // Another tenant is not touched (it is refused by S's own allow-list, passed on unchanged).
      expect((await postSql(C5.url, sql, { token: tokens['globex'] })).status).toBe(403);
    } finally {
      caller.destroy();
    }
    expect(await failed).toBeInstanceOf(Error);
    await until(async () => (await S.metrics()).get('siglake_query_running') === 0, 30_000, 'the shard to stop the query');
    await until(async () => (await C5.metrics()).get('siglake_query_running') === 0, 30_000, 'the coordinator to give its slot back');
    const ok = await postSql(C5.url, sql, { token: tokens['acme'] });
    expect(ok.status, ok.text).toBe(200);
  });

  it('a shard that does not answer is a 502, counted', async () => {
    const a = await postSql(C3.url, sql, { token: tokens['acme'] });
    expect(a.status).toBe(502);
    expect((a.body['error'] as { code: string }).code).toBe('SIGLAKE_SHARD_UNAVAILABLE');
    expect((await C3.metrics()).get('siglake_query_shard_errors_total')).toBe(1);
  });

  it('regression (shard-401-passed-to-caller): a shard that refuses the coordinator\'s shard token is a 502 to the caller, counted and logged, not the caller\'s 401', async () => {
    const a = await postSql(C4.url, sql, { token: tokens['acme'] });
    expect(a.status, a.text).toBe(502);
    expect((a.body['error'] as { code: string; message: string }).code).toBe('SIGLAKE_SHARD_UNAVAILABLE');
    expect((a.body['error'] as { code: string; message: string }).message).toContain('query.shardToken');
    const m = await C4.metrics();
    expect(m.get('siglake_query_shard_errors_total')).toBe(1);
    expect(m.get('siglake_query_requests_total{endpoint="sql",status="401"}') ?? 0).toBe(0);
    expect(C4.logs.some((l) => l.msg === 'query failed' && l['code'] === 'SIGLAKE_SHARD_UNAVAILABLE')).toBe(true);
  });
});
