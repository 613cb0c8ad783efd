// Per-principal buckets (`--rate-limit-per-principal-per-sec`) shared by two
// real replicas through a real redis-server (declared-tenants.md §3, with
// `redis.url`), on the lease machinery of the tenant buckets
// (docs/limits.md): one bucket per verified `sub` under
// `siglake:principal-rate:t:<sub>`, whichever replica the principal's
// requests reach, for an undeclared principal (after the generic tenant
// bucket) and for a principal of a declared tenant with its own bucket
// (tenant, then principal). A Redis failure admits and counts
// siglake_rate_budget_backend_errors_total, as for the other shared buckets.
//
// The rate is 0.01/s (burst 1, lease 1): within a test a bucket never
// refills. Principal buckets take no credit (docs/limits.md): the request
// past the burst is refused on every replica, the first one a replica sees
// of that principal included, where per-replica buckets would admit one
// request per replica.

import fs from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grpc } from '../helpers/grpc-client.js';
import { until } from '../helpers/wait.js';
import { startIngester, tempDir, type RunningIngester } from '../helpers/ingester.js';
import { AUDIENCE, ISSUER, makeKeyPair, mint, writeJwksFile, type KeyPair } from '../helpers/jwt.js';
import { RedisServer } from '../helpers/redis-server.js';
import { Client, type Reply } from '../helpers/tenancy-client.js';

const PERIOD_US = 100e6; // 0.01 requests/s
const KEY = 'siglake:principal-rate:t:';

describe('per-principal buckets shared by two replicas through Redis', () => {
  let key: KeyPair;
  let redis: RedisServer;
  let admin: Redis;
  let a: RunningIngester;
  let b: RunningIngester;
  let ca: Client;
  let cb: Client;
  beforeAll(async () => {
    key = await makeKeyPair('ES256', 'k-principal-redis');
    const dir = tempDir('siglake-principal-redis-');
    const jwks = writeJwksFile(dir, [key.jwk]);
    const file = path.join(dir, 'tenants.yaml');
    // globex has a bucket of its own, far from empty here: only the principal's bucket refuses.
    fs.writeFileSync(file, 'tenants:\n  - id: globex\n    subjects: { groups: [globex-writers] }\n    rateLimit: { requestsPerSec: 0.05, burst: 50 }\n');
    redis = await RedisServer.start();
    admin = new Redis(redis.url);
    admin.on('error', () => undefined); // the last test kills the server under it
    const args = [
      '--oidc-issuer',
      ISSUER,
      '--oidc-audience',
      AUDIENCE,
      '--oidc-jwks-file',
      jwks,
      '--tenants-file',
      file,
      '--rate-limit-per-principal-per-sec',
      '0.01',
      '--redis-url',
      redis.url,
      // A loaded test machine must not turn slow answers into backend errors (fail-open) here.
      '--redis-timeout-ms',
      '2000',
    ];
    [a, b] = await Promise.all([startIngester({ args }), startIngester({ args })]);
    ca = new Client(a);
    cb = new Client(b);
  });
  afterAll(async () => {
    ca?.close();
    cb?.close();
    for (const ing of [a, b]) if (ing) expect(await ing.stop()).toBe(0);
    admin?.disconnect();
    await redis?.stop();
  });

  /** Tokens the principal's shared bucket is short of now (0: no key, a full bucket). */
  async function missing(sub: string): Promise<number> {
    const [tat, time] = await Promise.all([admin.get(KEY + sub), admin.time()]);
    if (tat === null) return 0;
    const now = Number(time[0]) * 1e6 + Number(time[1]);
    return Math.max(0, (Number(tat) - now) / PERIOD_US);
  }

  function ok(r: Reply): void {
    if (r.transport === 'http') expect(r.status, r.message).toBe(200);
    else expect(r.code, r.message).toBe(grpc.status.OK);
  }

  function limited(r: Reply): number {
    if (r.transport === 'http') expect(r.status, r.message).toBe(429);
    else expect(r.code, r.message).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(r.errorCode).toBe('SIGLAKE_RATE_LIMITED');
    return Number(r.retryAfter);
  }

  const errors = async (ing: RunningIngester) => (await ing.metric('siglake_rate_budget_backend_errors_total')) ?? 0;

  for (const [who, claims] of [
    ['an undeclared principal', {}],
    ['a principal of a declared tenant with its own bucket', { groups: ['globex-writers'] }],
  ] as const) {
    it(`${who}: one bucket for both replicas`, async () => {
      const sub = who.startsWith('an') ? 'svc-undeclared' : 'svc-globex';
      const hdr = async () => ({ authorization: `Bearer ${await mint(key, claims, { sub })}` });
      ok(await ca.send('http', 'logs', `${sub}-a1`, await hdr()));
      // Replica A's admission reached the shared bucket in Redis: one token short.
      await until(async () => (await missing(sub)) > 0.5, 10_000, 'the shared bucket in Redis to be one token short', 20);
      const waitA = limited(await ca.send('grpc', 'logs', `${sub}-a2`, await hdr()));
      expect(waitA).toBeGreaterThan(50);
      expect(waitA).toBeLessThanOrEqual(101);
      // Replica B never saw the principal: refused at its first request, on both transports.
      const waitB = limited(await cb.send('grpc', 'logs', `${sub}-b1`, await hdr()));
      expect(waitB).toBeGreaterThan(50);
      expect(waitB).toBeLessThanOrEqual(101);
      limited(await cb.send('http', 'logs', `${sub}-b2`, await hdr()));
      // Refusals charge nothing: the shared bucket is still short of the one token A admitted.
      expect(await missing(sub)).toBeLessThan(1.01);
      // The principal's refusals spent nothing of anyone else's: another principal is admitted on both.
      const other = async (s: string) => ({ authorization: `Bearer ${await mint(key, claims, { sub: s })}` });
      ok(await ca.send('http', 'logs', `${sub}-other-a`, await other(`${sub}-other-a`)));
      ok(await cb.send('grpc', 'logs', `${sub}-other-b`, await other(`${sub}-other-b`)));
      expect(await errors(a)).toBe(0);
      expect(await errors(b)).toBe(0);
    });
  }

  it('a Redis failure admits (fail open) and counts siglake_rate_budget_backend_errors_total', async () => {
    const hdr = async () => ({ authorization: `Bearer ${await mint(key, {}, { sub: 'svc-outage' })}` });
    await redis.kill9();
    // While Redis answers, the principal's second request would be refused (burst 1).
    for (let i = 0; i < 4; i++) ok(await ca.send(i % 2 ? 'grpc' : 'http', 'logs', `outage-${i}`, await hdr()));
    expect(await errors(a)).toBeGreaterThanOrEqual(1);
    expect(a.logs.some((l) => l.msg.startsWith('budget backend (Redis) failed') || l.msg.startsWith('rate budget backend (Redis) failed'))).toBe(
      true,
    );
  });
});
