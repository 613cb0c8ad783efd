// Rate buckets shared through a real Redis, seen from `siglake ingest`:
//
//   - a request waiting for a Redis lease waits about one round trip, and in
//     all at most --redis-timeout-ms (then it is admitted and counted): a burst
//     of concurrent requests of one principal through a Redis 40 ms away is
//     answered at once. (Each lease held one token and a woken request queued
//     again: 50 concurrent requests waited up to 50 round trips.)
//   - when the answers come too slowly for that (a Redis 60 ms away under a
//     100 ms timeout), a waiting request is admitted at the timeout and
//     counted as a backend error, as the docs say, not kept waiting.
//   - a reload that raises a tenant's rate applies at once with Redis, as it
//     does in-process. (The bucket's stored time, left by the old, slower rate,
//     refused the tenant for up to the old refill time.)
//   - a tenant removed by a reload and re-added by the next gets no fresh
//     burst with Redis either: its bucket's state is Redis' own, and the new
//     lease state for its (rate, burst) starts from it (in-process, each
//     remove + re-add was a fresh burst: tenants-reload-live.test.ts).

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisBudget } from '../../src/limits/redis-budget.js';
import { delayProxy, type DelayProxy } from '../helpers/delay-proxy.js';
import { startIngester, tempDir, type RunningIngester } from '../helpers/ingester.js';
import { AUDIENCE, ISSUER, makeKeyPair, mint, writeJwksFile, type KeyPair } from '../helpers/jwt.js';
import { RedisServer } from '../helpers/redis-server.js';
import { Client } from '../helpers/tenancy-client.js';
import { sleep, until } from '../helpers/wait.js';

describe('a burst of one principal through a Redis 40 ms away', () => {
  let key: KeyPair;
  let redis: RedisServer;
  let proxy: DelayProxy;
  let ing: RunningIngester;
  let c: Client;
  beforeAll(async () => {
    key = await makeKeyPair('ES256', 'k-lease');
    const dir = tempDir('siglake-redis-lease-');
    const jwks = writeJwksFile(dir, [key.jwk]);
    const file = path.join(dir, 'tenants.yaml');
    fs.writeFileSync(file, 'tenants:\n  - id: acme\n    subjects: { claims: { org_id: acme } }\n');
    redis = await RedisServer.start();
    proxy = await delayProxy(redis.port, 40);
    const args = ['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks, '--tenants-file', file];
    args.push('--rate-limit-per-principal-per-sec', '50', '--redis-url', `redis://127.0.0.1:${proxy.port}`, '--redis-timeout-ms', '400');
    ing = await startIngester({ args });
    c = new Client(ing);
  });
  afterAll(async () => {
    c?.close();
    if (ing) expect(await ing.stop()).toBe(0);
    proxy?.close();
    await redis?.stop();
  });

  it('50 concurrent requests on a full bucket of 50 are all admitted, within the Redis timeout, without backend errors', async () => {
    const hdr = { authorization: `Bearer ${await mint(key, { org_id: 'acme' }, { sub: 'svc-1' })}` };
    // Connected to Redis: a request of another principal is admitted and counts no error.
    await until(
      async () => {
        const warm = { authorization: `Bearer ${await mint(key, { org_id: 'acme' }, { sub: 'warm' })}` };
        return (await c.send('grpc', 'logs', 'warm', warm)).code === 0 && (await ing.metric('siglake_rate_budget_backend_errors_total')) === 0;
      },
      10_000,
      'the ingester to reach Redis',
      200,
    );
    const errorsBefore = await ing.metric('siglake_rate_budget_backend_errors_total');
    const t0 = performance.now();
    const res = await Promise.all(
      Array.from({ length: 50 }, async (_, i) => {
        const r = await c.send('grpc', 'logs', `m${i}`, hdr);
        return { code: r.code, ms: performance.now() - t0 };
      }),
    );
    expect(res.filter((r) => r.code === 0).length).toBe(50);
    // Generous: a few 40 ms round trips and the write; it took 50 round trips (2 s and more).
    expect(Math.max(...res.map((r) => r.ms))).toBeLessThan(1500);
    expect(await ing.metric('siglake_rate_budget_backend_errors_total')).toBe(errorsBefore);
  });
});

/** An ingester with `yaml` as its tenants file and Redis as its rate backend, and a client of it. */
async function startWithTenantsFile(kid: string, prefix: string, yaml: string): Promise<{ key: KeyPair; redis: RedisServer; ing: RunningIngester; c: Client; file: string }> {
  const key = await makeKeyPair('ES256', kid);
  const dir = tempDir(prefix);
  const jwks = writeJwksFile(dir, [key.jwk]);
  const file = path.join(dir, 'tenants.yaml');
  fs.writeFileSync(file, yaml);
  const redis = await RedisServer.start();
  const args = ['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks, '--tenants-file', file, '--redis-url', redis.url, '--redis-timeout-ms', '2000'];
  const ing = await startIngester({ args }).catch(async (e: unknown) => {
    await redis.stop();
    throw e;
  });
  return { key, redis, ing, c: new Client(ing), file };
}

describe("a reload that raises a tenant's rate, with Redis", () => {
  const slow = 'tenants:\n  - id: acme\n    subjects: { claims: { org_id: acme } }\n    rateLimit: { requestsPerSec: 0.2, burst: 10 }\n';
  const fast = 'tenants:\n  - id: acme\n    subjects: { claims: { org_id: acme } }\n    rateLimit: { requestsPerSec: 1000, burst: 1000 }\n';
  let key: KeyPair;
  let redis: RedisServer;
  let ing: RunningIngester;
  let c: Client;
  let file: string;
  beforeAll(async () => {
    ({ key, redis, ing, c, file } = await startWithTenantsFile('k-raise', 'siglake-redis-raise-', slow));
  });
  afterAll(async () => {
    c?.close();
    if (ing) expect(await ing.stop()).toBe(0);
    await redis?.stop();
  });

  it('admits the tenant at once after the raise, as in-process', async () => {
    const hdr = { authorization: `Bearer ${await mint(key, { org_id: 'acme' }, { sub: 'svc' })}` };
    let last = 0;
    for (let i = 0; i < 40; i++) last = (await c.send('http', 'logs', `x${i}`, hdr)).status;
    expect(last).toBe(429); // 0.2/s, burst 10, and far into deficit on credit: the old refill time is long
    fs.writeFileSync(file + '.tmp', fast);
    fs.renameSync(file + '.tmp', file);
    await until(() => ing.logs.some((l) => l.msg === 'tenants file reloaded'), 10_000, 'the reload', 50);
    await sleep(300);
    const after: number[] = [];
    for (let i = 0; i < 5; i++) after.push((await c.send('http', 'logs', `y${i}`, hdr)).status);
    expect(after).toEqual([200, 200, 200, 200, 200]);
    expect(await ing.metric('siglake_rate_budget_backend_errors_total')).toBe(0);
  });
});

describe('a tenant removed and re-added, with Redis', () => {
  const other = '  - id: other\n    subjects: { claims: { org_id: other } }\n';
  const acme = '  - id: acme\n    subjects: { claims: { org_id: acme } }\n    rateLimit: { requestsPerSec: 0.01, burst: 3 }\n';
  let key: KeyPair;
  let redis: RedisServer;
  let ing: RunningIngester;
  let c: Client;
  let file: string;
  beforeAll(async () => {
    ({ key, redis, ing, c, file } = await startWithTenantsFile('k-readd', 'siglake-redis-readd-', `tenants:\n${other}${acme}`));
  });
  afterAll(async () => {
    c?.close();
    if (ing) expect(await ing.stop()).toBe(0);
    await redis?.stop();
  });

  async function reloadWith(text: string, tenants: number): Promise<void> {
    const n = ing.logs.length;
    fs.writeFileSync(file + '.tmp', text);
    fs.renameSync(file + '.tmp', file);
    ing.child.kill('SIGHUP');
    await until(() => ing.logs.slice(n).some((l) => l.msg === 'tenants file reloaded' && l['tenants'] === tenants), 10_000, 'the reload', 50);
  }

  it('gets no fresh burst: still refused once back', async () => {
    const hdr = { authorization: `Bearer ${await mint(key, { org_id: 'acme' }, { sub: 'svc' })}` };
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await c.send('http', 'logs', `a${i}`, hdr)).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
    await reloadWith(`tenants:\n${other}`, 1);
    await reloadWith(`tenants:\n${other}${acme}`, 2);
    const back = await c.send('http', 'logs', 'a4', hdr);
    expect([back.status, back.errorCode]).toEqual([429, 'SIGLAKE_RATE_LIMITED']);
    expect(await ing.metric('siglake_rate_budget_backend_errors_total')).toBe(0);
  });
});

describe('RedisBudget: a wait for leases is bounded by the command timeout', () => {
  it('admits at the timeout and counts a backend error when Redis answers too slowly for the waiters', async () => {
    const redis = await RedisServer.start();
    const proxy = await delayProxy(redis.port, 60);
    let errors = 0;
    const rb = new RedisBudget({ url: `redis://127.0.0.1:${proxy.port}`, ratePerSec: 50, burst: 50, maxTenantBuckets: 4, commandTimeoutMs: 100, credit: false, keyPrefix: 'lease-deadline:', onBackendError: () => errors++ });
    try {
      await rb.ready(5000);
      const t0 = performance.now();
      const waits: number[] = [];
      const results = await Promise.all(
        Array.from({ length: 50 }, async () => {
          const w = await rb.takeTenant('p');
          waits.push(performance.now() - t0);
          return w;
        }),
      );
      expect(results.every((w) => w === 0)).toBe(true); // a full bucket of 50, or admitted past the timeout
      // Generous bound: one 100 ms timeout, plus scheduling. Each waited for up to 50 round trips (3 s).
      expect(Math.max(...waits)).toBeLessThan(1000);
      expect(errors).toBeGreaterThan(0); // those admitted past the timeout are counted
      expect(rb.backendErrors).toBe(errors);
    } finally {
      await rb.close();
      proxy.close();
      await redis.stop();
    }
  });
});
