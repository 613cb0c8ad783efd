// Rate leases of declared tenants through a real Redis, at an ingester's stop:
//
//   - an ingester stopped (SIGTERM) within 5 s of a tenants reload that
//     replaced a tenant's rate returns the unspent lease of the old rate's
//     budget to the shared bucket. (The replaced budget was settled by a timer
//     5 s after the reload, which a stop never ran: the lease stayed charged,
//     and every other replica saw that much less budget until it refilled.)
//   - a reload that removes a tenant from a (rate, burst) group it keeps (the
//     group's other tenants stay) returns the removed tenant's unspent lease
//     to its shared bucket then, with the ingester running. (It stayed held
//     in the kept lease budget until the stop.)
//   - the lease slots of tenants such a reload removed go to the tenants it
//     (or a later one) added. (A released slot stayed mapped to its removed
//     tenant until evicted, and a slot whose tenant was refused is not
//     evictable: with the group's slots full, a new tenant of the group got
//     none and spent the group's one overflow bucket, so the second new
//     tenant was refused 429 at its first request.)

import fs from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIngester, tempDir, type RunningIngester } from '../helpers/ingester.js';
import { AUDIENCE, ISSUER, makeKeyPair, mint, writeJwksFile, type KeyPair } from '../helpers/jwt.js';
import { RedisServer } from '../helpers/redis-server.js';
import { Client } from '../helpers/tenancy-client.js';
import { until } from '../helpers/wait.js';

const tenants = (rate: number) => `tenants:\n  - id: acme\n    subjects: { claims: { org_id: acme } }\n    rateLimit: { requestsPerSec: ${rate}, burst: 10 }\n`;

/** Tokens of `tenant`'s shared bucket charged now, by Redis' clock: (stored time − TIME) / period. */
async function charged(admin: Redis, periodUs: number, tenant = 'acme'): Promise<number> {
  const [tat, time] = await Promise.all([admin.get(`siglake:tenant-rate:t:${tenant}`), admin.time()]);
  if (tat === null) return 0;
  return (Number(tat) - (Number(time[0]) * 1e6 + Number(time[1]))) / periodUs;
}

/** For one describe block: Redis, a key, a tenants file holding `yaml` (rewritten by the tests) and an ingester on them. */
function ingesterWithRedis(kid: string, prefix: string, yaml: string): { key: KeyPair; admin: Redis; a: RunningIngester; c: Client; file: string } {
  const ctx = {} as { key: KeyPair; redis: RedisServer; admin: Redis; a: RunningIngester; c: Client; file: string };
  beforeAll(async () => {
    ctx.key = await makeKeyPair('ES256', kid);
    const dir = tempDir(prefix);
    const jwks = writeJwksFile(dir, [ctx.key.jwk]);
    ctx.file = path.join(dir, 'tenants.yaml');
    fs.writeFileSync(ctx.file, yaml);
    ctx.redis = await RedisServer.start();
    ctx.admin = new Redis(ctx.redis.url);
    const args = ['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks, '--tenants-file', ctx.file, '--redis-url', ctx.redis.url, '--redis-timeout-ms', '2000'];
    ctx.a = await startIngester({ args });
    ctx.c = new Client(ctx.a);
  });
  afterAll(async () => {
    ctx.c?.close();
    if (ctx.a) expect(await ctx.a.stop()).toBe(0);
    ctx.admin?.disconnect();
    await ctx.redis?.stop();
  });
  return ctx;
}

describe('an ingester stopped right after a tenants reload, with Redis', () => {
  const ctx = ingesterWithRedis('k-stop', 'siglake-redis-stop-', tenants(0.1));

  it('returns the unspent lease of the replaced rate to the shared bucket: the key holds only what was spent', async () => {
    const { key, admin, a, c, file } = ctx;
    const hdr = { authorization: `Bearer ${await mint(key, { org_id: 'acme' }, { sub: 'svc' })}` };
    expect((await c.send('http', 'logs', 'one', hdr)).status).toBe(200);
    // 0.1/s (10 s a token): the request was admitted on credit, then charged, and a lease of one
    // more token is held unspent: two tokens charged in Redis, one spent.
    await until(async () => (await charged(admin, 1e7)) > 1.5, 10_000, 'the credit and the lease charged in Redis', 50);
    // A reload to another rate replaces the 0.1/s budget (its lease still held), then SIGTERM at once.
    fs.writeFileSync(file + '.tmp', tenants(0.2));
    fs.renameSync(file + '.tmp', file);
    a.child.kill('SIGHUP');
    await until(() => a.logs.some((l) => l.msg === 'tenants file reloaded'), 10_000, 'the reload', 20);
    expect(await a.stop()).toBe(0);
    // Only the spent token is left charged (less the few ms since): the lease came back.
    const left = await charged(admin, 1e7);
    expect(left).toBeGreaterThan(0.5);
    expect(left).toBeLessThanOrEqual(1);
    expect(await admin.exists('siglake:tenant-rate:t:acme')).toBe(1);
  });
});

describe('a tenants reload that removes a tenant from a rate group it keeps, with Redis', () => {
  // 0.01/s: a token charged stays charged 100 s, longer than the test.
  const group = (...ids: string[]) =>
    `tenants:\n${ids.map((id) => `  - id: ${id}\n    subjects: { claims: { org_id: ${id} } }\n    rateLimit: { requestsPerSec: 0.01, burst: 10 }\n`).join('')}`;
  const ctx = ingesterWithRedis('k-release', 'siglake-redis-release-', group('acme', 'beta'));

  it('returns the removed tenant\'s unspent lease to its shared bucket at the reload, not at the stop', async () => {
    const { key, admin, a, c, file } = ctx;
    const as = async (org: string) => ({ authorization: `Bearer ${await mint(key, { org_id: org }, { sub: `${org}-1` })}` });
    expect((await c.send('http', 'logs', 'a0', await as('acme'))).status).toBe(200);
    // One token spent, one more leased and held unspent (the lease asked when the first ran out).
    await until(async () => (await charged(admin, 1e8)) > 1.5, 10_000, "acme's spent token and its unspent lease charged in Redis", 50);
    // acme removed; beta stays, so the (0.01/s, 10) group's lease budget is kept.
    fs.writeFileSync(file + '.tmp', group('beta'));
    fs.renameSync(file + '.tmp', file);
    const n = a.logs.length;
    a.child.kill('SIGHUP');
    await until(() => a.logs.slice(n).some((l) => l.msg === 'tenants file reloaded'), 10_000, 'the reload', 20);
    // The lease comes back while the ingester runs: only the spent token stays charged.
    await until(async () => (await charged(admin, 1e8)) <= 1, 10_000, "acme's unspent lease back in Redis", 50);
    expect(await charged(admin, 1e8)).toBeGreaterThan(0.5);
    expect(a.child.exitCode).toBeNull();
    // The kept budget goes on serving the tenant that stayed.
    expect((await c.send('http', 'logs', 'b0', await as('beta'))).status).toBe(200);
    expect(await a.metric('siglake_rate_budget_backend_errors_total')).toBe(0);
  });
});

describe('tenants a reload removed from a rate group it keeps, with Redis', () => {
  // 0.01/s, burst 1: after its first request a tenant's budget knows its bucket is empty (Redis said
  // so for the next 100 s), which makes its lease slot not evictable for that long.
  const group = (ids: string[]) =>
    `tenants:\n${ids.map((id) => `  - id: ${id}\n    subjects: { claims: { org_id: ${id} } }\n    rateLimit: { requestsPerSec: 0.01, burst: 1 }\n`).join('')}`;
  const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);
  // 32 tenants: the group's budget has room for 64 (twice the group, at least 64).
  const first = ids('a', 32);
  const ctx = ingesterWithRedis('k-slots', 'siglake-redis-slots-', group(first));

  it('give their lease slots to the tenants added: every new tenant has its own bucket, none refused at its first request', async () => {
    const { key, admin, a, c, file } = ctx;
    const as = async (org: string) => ({ authorization: `Bearer ${await mint(key, { org_id: org }, { sub: `${org}-1` })}` });
    for (const id of first) {
      const h = await as(id);
      expect((await c.send('http', 'logs', `${id}-0`, h)).status).toBe(200);
      // Its bucket is empty now, and its budget knows it.
      expect((await c.send('http', 'logs', `${id}-1`, h)).status).toBe(429);
    }
    // The first 32 removed, 34 others added: the (0.01/s, 1) group's budget is kept (34 ≤ 64).
    const second = ids('b', 34);
    fs.writeFileSync(file + '.tmp', group(second));
    fs.renameSync(file + '.tmp', file);
    const n = a.logs.length;
    a.child.kill('SIGHUP');
    await until(() => a.logs.slice(n).some((l) => l.msg === 'tenants file reloaded' && l['tenants'] === 34), 10_000, 'the reload', 20);
    // Each new tenant's first request is admitted from its own bucket: the removed tenants' 32 slots
    // went to the new ones (they stayed mapped to the removed tenants, not evictable while refused,
    // so b32 and b33 found no slot and shared the overflow bucket: b33 was refused).
    for (const id of second) expect((await c.send('http', 'logs', `${id}-0`, await as(id))).status, id).toBe(200);
    for (const id of second) expect(await admin.exists(`siglake:tenant-rate:t:${id}`), id).toBe(1);
    expect(await admin.exists('siglake:tenant-rate:overflow')).toBe(0);
    expect(await a.metric('siglake_rate_budget_backend_errors_total')).toBe(0);
  });
});
