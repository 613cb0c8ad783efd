// Declared-tenant budgets shared by two replicas through a real Redis
// (declared-tenants.md §3): what one replica charged counts against the other,
// within the sync window docs/tenants.md states; a Redis outage admits on the
// replica's own view and counts siglake_rate_budget_backend_errors_total.

import fs from 'node:fs';
import { Redis } from 'ioredis';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grpc } from '../helpers/grpc-client.js';
import { until } from '../helpers/wait.js';
import { clearOfUtcPeriodEnd, UTC_PERIOD_WAIT_MAX_MS } from '../helpers/utc-period.js';
import { startIngester, tempDir, type RunningIngester } from '../helpers/ingester.js';
import { AUDIENCE, ISSUER, makeKeyPair, mint, writeJwksFile, type KeyPair } from '../helpers/jwt.js';
import { RedisServer } from '../helpers/redis-server.js';
import { Client } from '../helpers/tenancy-client.js';

describe('two replicas share declared-tenant budgets and buckets through Redis', () => {
  let key: KeyPair;
  let redis: RedisServer;
  let a: RunningIngester;
  let b: RunningIngester;
  let ca: Client;
  let cb: Client;
  let file: string;
  beforeAll(async () => {
    // The month budgets below are spent, then refused: never across the end of the UTC month
    // (the shared counters' keys name the period's end).
    await clearOfUtcPeriodEnd('month');
    key = await makeKeyPair('ES256', 'k-shared');
    const dir = tempDir('siglake-tenants-redis-');
    const jwks = writeJwksFile(dir, [key.jwk]);
    file = path.join(dir, 'tenants.yaml');
    fs.writeFileSync(file, 'tenants:\n  - id: shared\n    subjects: { claims: { org_id: shared } }\n    budget: { period: month, records: 4 }\n  - id: idle\n    subjects: { claims: { org_id: idle } }\n    budget: { period: month, records: 4 }\n  - id: fresh\n    subjects: { claims: { org_id: fresh } }\n    budget: { period: month, records: 4 }\n  - id: flood\n    subjects: { claims: { org_id: flood } }\n    rateLimit: { requestsPerSec: 0.01, burst: 6 }\n  - id: stall\n    subjects: { claims: { org_id: stall } }\n    rateLimit: { requestsPerSec: 0.01, burst: 2 }\n');
    redis = await RedisServer.start();
    const args = ['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks, '--tenants-file', file, '--redis-url', redis.url, '--redis-timeout-ms', '2000'];
    [a, b] = await Promise.all([startIngester({ args }), startIngester({ args })]);
    ca = new Client(a);
    cb = new Client(b);
  }, UTC_PERIOD_WAIT_MAX_MS + 60_000);
  afterAll(async () => {
    ca?.close();
    cb?.close();
    for (const ing of [a, b]) if (ing) expect(await ing.stop()).toBe(0);
    await redis?.stop();
  });

  const remaining = (ing: RunningIngester) => ing.metric('siglake_tenant_budget_remaining{tenant="shared",unit="records"}');
  it("what replica A charged is spent on replica B's budget too", async () => {
    const hdr = async (sub: string) => ({ authorization: `Bearer ${await mint(key, { org_id: 'shared' }, { sub })}` });
    for (let i = 0; i < 3; i++) expect((await ca.send('http', 'logs', `a${i}`, await hdr(`a${i}`))).status).toBe(200);
    expect(await remaining(a)).toBe(1);
    // B has charged nothing itself; its first request makes it sync.
    expect((await cb.send('grpc', 'logs', 'b0', await hdr('b0'))).code).toBe(grpc.status.OK);
    await until(async () => (await remaining(b)) === 0, 10_000, "B's view of the shared budget to reach 0", 20);
    const r = await cb.send('http', 'logs', 'b1', await hdr('b1'));
    expect(r.status).toBe(429);
    expect(r.message).toMatch(/the tenant budget/);
    // And A learns of B's charge within the sync window.
    await until(async () => {
      await ca.send('http', 'logs', 'probe', await hdr('probe')).catch(() => undefined);
      return (await remaining(a)) === 0;
    }, 10_000, "A's view of the shared budget to reach 0", 20);
    expect((await ca.send('grpc', 'logs', 'a9', await hdr('a9'))).code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(await a.metric('siglake_rate_budget_backend_errors_total')).toBe(0);
  });

  it("a replica that no longer serves a tenant still follows what the others spend of its budget", async () => {
    // B charged once and then sat idle: it kept the total of its own push until its next request.
    const idle = (ing: RunningIngester) => ing.metric('siglake_tenant_budget_remaining{tenant="idle",unit="records"}');
    const hdr = async (sub: string) => ({ authorization: `Bearer ${await mint(key, { org_id: 'idle' }, { sub })}` });
    expect((await cb.send('http', 'logs', 'i-b0', await hdr('i-b0'))).status).toBe(200);
    // B's push is confirmed: the shared counter holds it (its view counted it as pending before).
    const admin = new Redis(redis.url);
    try {
      await until(async () => {
        const keys = await admin.keys('siglake:budget:t:idle:*:records');
        return keys.length === 1 && (await admin.get(keys[0]!)) === '1';
      }, 10_000, "B's own charge to reach Redis", 20);
    } finally {
      admin.disconnect();
    }
    await new Promise((r) => setTimeout(r, 500)); // and B has read that total back
    expect(await idle(b)).toBe(3);
    for (let i = 0; i < 3; i++) expect((await ca.send('http', 'logs', `i-a${i}`, await hdr(`i-a${i}`))).status).toBe(200);
    await until(async () => (await idle(b)) === 0, 10_000, "idle B's view of the shared budget to reach 0", 50);
    const r = await cb.send('grpc', 'logs', 'i-b1', await hdr('i-b1'));
    expect(r.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
  });

  it('a replica that never served a tenant reads its budget: gauge and first request right, no request needed', async () => {
    // B counted a scope it had never charged from 0: it admitted a sync window past the spent
    // budget, and its siglake_tenant_budget_remaining showed the budget full.
    const fresh = (ing: RunningIngester) => ing.metric('siglake_tenant_budget_remaining{tenant="fresh",unit="records"}');
    const hdr = async (sub: string) => ({ authorization: `Bearer ${await mint(key, { org_id: 'fresh' }, { sub })}` });
    for (let i = 0; i < 4; i++) expect((await ca.send('http', 'logs', `f-a${i}`, await hdr(`f-a${i}`))).status).toBe(200);
    await until(async () => (await fresh(b)) === 0, 5_000, "B's gauge of a tenant it never served to reach 0", 50);
    expect((await cb.send('http', 'logs', 'f-b0', await hdr('f-b0'))).status).toBe(429);
    expect(await b.metric('siglake_rate_budget_backend_errors_total')).toBe(0);
  });

  it("one tenant bucket for both replicas: the request past the burst is refused on either", async () => {
    const hdr = async (sub: string) => ({ authorization: `Bearer ${await mint(key, { org_id: 'flood' }, { sub })}` });
    for (let i = 0; i < 3; i++) {
      expect((await ca.send('http', 'logs', `fa${i}`, await hdr(`fa${i}`))).status).toBe(200);
      expect((await cb.send('grpc', 'logs', `fb${i}`, await hdr(`fb${i}`))).code).toBe(grpc.status.OK);
    }
    const ra = await ca.send('http', 'logs', 'fa-x', await hdr('fa-x'));
    expect(ra.status).toBe(429);
    expect(Number(ra.retryAfter)).toBeGreaterThan(0);
    expect((await cb.send('grpc', 'logs', 'fb-x', await hdr('fb-x'))).code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(await b.metric('siglake_rate_budget_backend_errors_total')).toBe(0);
  });

  it('a small bucket takes no credit: the request past the burst is refused even while the next lease is still out', async () => {
    // A's lease was spent and its next lease request was not answered yet (Redis slow on a
    // loaded machine): the request was admitted on credit, one past the burst per replica.
    const hdr = async (sub: string) => ({ authorization: `Bearer ${await mint(key, { org_id: 'stall' }, { sub })}` });
    expect((await ca.send('http', 'logs', 's0', await hdr('s0'))).status).toBe(200);
    // A holds the second token (its prefetched lease) once Redis answered.
    await new Promise((r) => setTimeout(r, 300));
    redis.pause();
    let resumed = false;
    try {
      // Spends A's leased token; the lease request it sends waits on the paused Redis.
      expect((await ca.send('http', 'logs', 's1', await hdr('s1'))).status).toBe(200);
      const third = ca.send('http', 'logs', 's2', await hdr('s2'));
      await new Promise((r) => setTimeout(r, 300));
      redis.resume();
      resumed = true;
      const r = await third;
      expect(r.status).toBe(429);
      expect(Number(r.retryAfter)).toBeGreaterThan(0);
    } finally {
      if (!resumed) redis.resume();
    }
    expect(await a.metric('siglake_rate_budget_backend_errors_total')).toBe(0);
  });

  it('a reload keeps the shared bucket of a (rate, burst) it still has: still refused, no backend error', async () => {
    // Each reload made a new Redis budget, which failed open until its connection was up (about a
    // second: hundreds of admissions past an empty bucket) and counted a backend error.
    const hdr = async (sub: string) => ({ authorization: `Bearer ${await mint(key, { org_id: 'flood' }, { sub })}` });
    const errorsBefore = await a.metric('siglake_rate_budget_backend_errors_total');
    fs.appendFileSync(file, '  - id: flood2\n    subjects: { claims: { org_id: flood2 } }\n    rateLimit: { requestsPerSec: 0.01, burst: 6 }\n');
    await until(() => a.logs.some((l) => l.msg === 'tenants file reloaded'), 10_000, 'replica A to reload');
    const codes: number[] = [];
    for (let i = 0; i < 20; i++) codes.push((await ca.send('http', 'logs', `fr${i}`, await hdr(`fr${i}`))).status);
    expect(codes).toEqual(Array(20).fill(429));
    expect(await a.metric('siglake_rate_budget_backend_errors_total')).toBe(errorsBefore);
  });
});

describe('one Redis connection for every rate of the declared tenants', () => {
  it('forty tenants of forty rates: a handful of connections per replica, not one per rate', async () => {
    const key = await makeKeyPair('ES256', 'k-conns');
    const dir = tempDir('siglake-tenants-conns-');
    const jwks = writeJwksFile(dir, [key.jwk]);
    const file = path.join(dir, 'tenants.yaml');
    const tenants = Array.from({ length: 40 }, (_, i) => `  - id: t${i}\n    subjects: { claims: { org_id: t${i} } }\n    rateLimit: { requestsPerSec: ${i + 1}, burst: ${i + 2} }\n`);
    fs.writeFileSync(file, `tenants:\n${tenants.join('')}`);
    const redis = await RedisServer.start();
    // A generous command timeout (the default is 100 ms): a slow answer on a loaded machine would
    // fail open and count the backend error this test asserts there is none of.
    const ing = await startIngester({
      args: ['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks, '--tenants-file', file, '--redis-url', redis.url, '--redis-timeout-ms', '2000'],
    });
    const c = new Client(ing);
    const admin = new Redis(redis.url);
    try {
      for (let i = 0; i < 40; i++) {
        const r = await c.send('http', 'logs', `t${i}`, { authorization: `Bearer ${await mint(key, { org_id: `t${i}` }, { sub: `s${i}` })}` });
        expect(r.status).toBe(200);
      }
      const info = String(await admin.info('clients'));
      const connected = Number(/connected_clients:(\d+)/.exec(info)![1]);
      // This one, and the replica's: its tenants' buckets and its budget sync (one each).
      expect(connected).toBeLessThanOrEqual(4);
      expect(await ing.metric('siglake_rate_budget_backend_errors_total')).toBe(0);
    } finally {
      admin.disconnect();
      c.close();
      expect(await ing.stop()).toBe(0);
      await redis.stop();
    }
  });
});
