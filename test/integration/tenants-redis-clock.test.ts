// Day budgets shared through a real Redis by two `siglake ingest` whose clocks
// disagree: the period is Redis' (TIME), not each replica's own.
//
// Replica B's Date.now() runs a day ahead (a preloaded module shifts it; a day
// stands for any skew that puts one replica past a period's end while Redis'
// clock is not, as a second does at 23:59:59). Before, each replica chose the
// period of the shared counter by its own clock: B charged tomorrow's key and
// admitted a whole budget more while A refused for today (so near a real day's
// end two replicas a second apart grant up to twice the budget, and the one
// behind refuses with a Retry-After past the real end). Now both count by
// Redis' clock: one key, one refusal, the same Retry-After.

import fs from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIngester, tempDir, type RunningIngester } from '../helpers/ingester.js';
import { AUDIENCE, ISSUER, makeKeyPair, mint, writeJwksFile, type KeyPair } from '../helpers/jwt.js';
import { RedisServer } from '../helpers/redis-server.js';
import { budgetKey } from '../../src/tenants/shared-budgets.js';
import { Client } from '../helpers/tenancy-client.js';
import { clearOfUtcPeriodEnd, nextUtcPeriodStart, UTC_PERIOD_WAIT_MAX_MS } from '../helpers/utc-period.js';
import { until } from '../helpers/wait.js';

const DAY_MS = 86_400_000;

describe('two replicas whose clocks differ by a day share a day budget through Redis', () => {
  let key: KeyPair;
  let redis: RedisServer;
  let admin: Redis;
  let a: RunningIngester;
  let b: RunningIngester;
  let ca: Client;
  let cb: Client;
  beforeAll(async () => {
    await clearOfUtcPeriodEnd('day');
    key = await makeKeyPair('ES256', 'k-clock');
    const dir = tempDir('siglake-redis-clock-');
    const jwks = writeJwksFile(dir, [key.jwk]);
    const file = path.join(dir, 'tenants.yaml');
    fs.writeFileSync(file, 'tenants:\n  - id: acme\n    subjects: { claims: { org_id: acme } }\n    budget: { period: day, records: 3 }\n');
    // Only Date.now() moves (new Date() and the JWT checks keep the real time): the budgets' clock.
    const skew = path.join(dir, 'skew.mjs');
    fs.writeFileSync(skew, `const real = Date.now; Date.now = () => real() + ${DAY_MS};\n`);
    redis = await RedisServer.start();
    admin = new Redis(redis.url);
    const args = ['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks, '--tenants-file', file, '--redis-url', redis.url, '--redis-timeout-ms', '2000'];
    [a, b] = await Promise.all([startIngester({ args }), startIngester({ args, env: { NODE_OPTIONS: `--import=${skew}` } })]);
    ca = new Client(a);
    cb = new Client(b);
  }, UTC_PERIOD_WAIT_MAX_MS + 60_000);
  afterAll(async () => {
    ca?.close();
    cb?.close();
    for (const ing of [a, b]) if (ing) expect(await ing.stop()).toBe(0);
    admin?.disconnect();
    await redis?.stop();
  });

  const remaining = (ing: RunningIngester) => ing.metric('siglake_tenant_budget_remaining{tenant="acme",unit="records"}');

  it("the replica a day ahead counts Redis' day: what A spent is spent on B, one key, the same Retry-After", async () => {
    const hdr = async (sub: string) => ({ authorization: `Bearer ${await mint(key, { org_id: 'acme' }, { sub })}` });
    for (let i = 0; i < 3; i++) expect((await ca.send('http', 'logs', `a${i}`, await hdr(`a${i}`))).status).toBe(200);
    const ra = await ca.send('http', 'logs', 'a3', await hdr('a3'));
    expect(ra.status).toBe(429);
    // B reads the total of Redis' day (it charged nothing itself).
    await until(async () => (await remaining(b)) === 0, 10_000, "B's view of today's budget to reach 0", 20);
    const rb = await cb.send('http', 'logs', 'b0', await hdr('b0'));
    expect(rb.status).toBe(429);
    expect(rb.message).toMatch(/the tenant budget/);
    // Both point at the real end of the day (seconds apart at most: the two requests' times).
    expect(Math.abs(Number(rb.retryAfter) - Number(ra.retryAfter))).toBeLessThanOrEqual(2);
    expect(Number(rb.retryAfter)).toBeLessThanOrEqual(Math.ceil((nextUtcPeriodStart('day') - Date.now()) / 1000) + 2);
    // One counter, today's by Redis' clock, holding the three records.
    const keys = await admin.keys('siglake:budget:t:acme:*:records');
    expect(keys).toEqual([`${budgetKey('t:acme', 'day', nextUtcPeriodStart('day'))}:records`]);
    expect(await admin.get(keys[0]!)).toBe('3');
    expect(await a.metric('siglake_rate_budget_backend_errors_total')).toBe(0);
    expect(await b.metric('siglake_rate_budget_backend_errors_total')).toBe(0);
  });
});
