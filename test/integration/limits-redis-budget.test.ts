// RedisBudget against a real redis-server (test/helpers/redis-server.ts).

import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LimitsError } from '../../src/limits/limits-error.js';
import { LEASE_SCRIPT, RedisBudget } from '../../src/limits/redis-budget.js';
import { delayProxy } from '../helpers/delay-proxy.js';
import { RedisServer } from '../helpers/redis-server.js';
import { holdsWithin, sleep, until } from '../helpers/wait.js';

const tick = () => new Promise<void>((r) => setImmediate(r));

/**
 * The command timeout of every budget below that is not about a failing Redis: far above any
 * answer of a local redis-server on a loaded machine. (The default, 100 ms, would fail open on a
 * slow answer, admit past the budget and count a backend error.)
 */
const COMMAND_TIMEOUT_MS = 5000;

let prefixSeq = 0;
const freshPrefix = () => `test:${process.pid}:${++prefixSeq}:`;

describe('RedisBudget with a shared redis-server', () => {
  let server: RedisServer;
  let admin: Redis;

  beforeAll(async () => {
    server = await RedisServer.start();
    admin = new Redis(server.url);
  });

  afterAll(async () => {
    admin.disconnect();
    await server.stop();
  });

  it('two replicas together respect one budget within burst + rate·Δ + 2·N·leaseSize', async () => {
    const rate = 200;
    const burst = 40;
    const leaseSize = 5;
    const keyPrefix = freshPrefix();
    const replicas = [0, 1].map(
      () => new RedisBudget({ url: server.url, ratePerSec: rate, burst, maxTenantBuckets: 16, leaseSize, keyPrefix, commandTimeoutMs: COMMAND_TIMEOUT_MS }),
    );
    await Promise.all(replicas.map((r) => r.ready()));
    const admitted = [0, 0];
    let refused = 0;
    const start = performance.now();
    const end = start + 2000;
    let last = start;
    while (last < end) {
      for (let k = 0; k < 10; k++) {
        for (let i = 0; i < replicas.length; i++) {
          if ((await replicas[i].takeTenant('acme')) === 0) admitted[i]++;
          else refused++;
        }
      }
      last = performance.now();
      await tick();
    }
    const spanSecs = (last - start) / 1000;
    const total = admitted[0] + admitted[1];
    const budget = burst + rate * spanSecs;
    const bound = budget + 2 * replicas.length * leaseSize;
    expect(admitted[0]).toBeGreaterThan(0);
    expect(admitted[1]).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(total); // the load really was over budget
    expect(total).toBeLessThanOrEqual(bound);
    expect(total).toBeGreaterThanOrEqual(0.8 * budget);
    // Each replica alone would have granted the whole budget: sharing is what held the total down.
    expect(total).toBeLessThan(2 * budget * 0.75);
    expect(replicas.every((r) => r.backendErrors === 0)).toBe(true);
    await Promise.all(replicas.map((r) => r.close()));
  });

  it('without credit, two replicas together admit at most burst + rate·Δ + N·leaseSize, and a replica refuses its first take of an empty bucket', async () => {
    const rate = 200;
    const burst = 40;
    const leaseSize = 5;
    const keyPrefix = freshPrefix();
    const replicas = [0, 1].map(
      () => new RedisBudget({ url: server.url, ratePerSec: rate, burst, maxTenantBuckets: 16, leaseSize, keyPrefix, credit: false, commandTimeoutMs: COMMAND_TIMEOUT_MS }),
    );
    await Promise.all(replicas.map((r) => r.ready()));
    const admitted = [0, 0];
    const start = performance.now();
    const end = start + 1000;
    let last = start;
    while (last < end) {
      for (let k = 0; k < 10; k++) {
        for (let i = 0; i < replicas.length; i++) if ((await replicas[i].takeTenant('acme')) === 0) admitted[i]++;
      }
      last = performance.now();
      await tick();
    }
    const total = admitted[0] + admitted[1];
    const budget = burst + rate * ((last - start) / 1000);
    expect(total).toBeLessThanOrEqual(budget + replicas.length * leaseSize);
    expect(total).toBeGreaterThanOrEqual(0.8 * budget);
    await Promise.all(replicas.map((r) => r.close()));

    // A bucket of burst 1 emptied by one replica: a fresh replica refuses its very first take (no credit).
    const small = freshPrefix();
    const [x, y] = [0, 1].map(() => new RedisBudget({ url: server.url, ratePerSec: 0.01, burst: 1, maxTenantBuckets: 4, keyPrefix: small, credit: false, commandTimeoutMs: COMMAND_TIMEOUT_MS }));
    await Promise.all([x!.ready(), y!.ready()]);
    expect(await x!.takeTenant('p')).toBe(0);
    expect(await x!.takeTenant('p')).toBeGreaterThan(50);
    expect(await y!.takeTenant('p')).toBeGreaterThan(50);
    expect(y!.peekTenant('p')).toBeGreaterThan(50);
    expect(x!.backendErrors + y!.backendErrors).toBe(0);
    await Promise.all([x!.close(), y!.close()]);
  });

  it('keeps the global budget and each tenant budget apart', async () => {
    const keyPrefix = freshPrefix();
    const b = new RedisBudget({
      url: server.url,
      ratePerSec: 1,
      burst: 3,
      globalRatePerSec: 1,
      globalBurst: 3,
      maxTenantBuckets: 4,
      leaseSize: 1,
      keyPrefix,
      commandTimeoutMs: COMMAND_TIMEOUT_MS,
    });
    await b.ready();
    const drain = async (take: () => number | Promise<number>) => {
      let n = 0;
      const refusedSoon = await holdsWithin(async () => {
        const r = await take();
        if (r === 0) n++;
        return r > 0;
      }, 3000, 5);
      expect(refusedSoon).toBe(true);
      return n;
    };
    const g = await drain(() => b.takeGlobal());
    const a = await drain(() => b.takeTenant('a'));
    const c = await drain(() => b.takeTenant('c'));
    // Each budget admits its burst (plus at most the lease credit) before refusing.
    for (const n of [g, a, c]) {
      expect(n).toBeGreaterThanOrEqual(3);
      expect(n).toBeLessThanOrEqual(3 + 2 * 1);
    }
    expect(await admin.exists(`${keyPrefix}global`, `${keyPrefix}t:a`, `${keyPrefix}t:c`)).toBe(3);
    await b.close();
  });

  it('runs the global budget on the global parameters and the tenant budgets on theirs', async () => {
    const keyPrefix = freshPrefix();
    // Tenant budgets: 0.5/s (2 s a token), burst 2. Global budget: 1/s (1 s a token), burst 6.
    const b = new RedisBudget({
      url: server.url,
      ratePerSec: 0.5,
      burst: 2,
      globalRatePerSec: 1,
      globalBurst: 6,
      maxTenantBuckets: 4,
      leaseSize: 1,
      keyPrefix,
      commandTimeoutMs: COMMAND_TIMEOUT_MS,
    });
    await b.ready();
    /** Admitted takes until the first refusal, and that refusal's Retry-After. */
    const drain = async (take: () => number | Promise<number>) => {
      let n = 0;
      let wait = 0;
      const refusedSoon = await holdsWithin(async () => {
        wait = await take();
        if (wait === 0) n++;
        return wait > 0;
      }, 3000, 5);
      expect(refusedSoon).toBe(true);
      return { n, wait };
    };
    /** Tokens missing from a bucket in Redis now, counted in periods of `periodUs`. */
    const missing = async (key: string, periodUs: number) => {
      const [tat, time] = await Promise.all([admin.get(key), admin.time()]);
      const now = Number(time[0]) * 1e6 + Number(time[1]);
      return (Number(tat) - now) / periodUs;
    };
    const g = await drain(() => b.takeGlobal());
    // The global burst (6), plus at most one lease and one credit: not the tenant burst of 2.
    expect(g.n).toBeGreaterThanOrEqual(6);
    expect(g.n).toBeLessThanOrEqual(6 + 2 * 1);
    // A global token is back within one global period (1 s), two if this replica's credit went into deficit.
    expect(g.wait).toBeGreaterThanOrEqual(1);
    expect(g.wait).toBeLessThanOrEqual(2);
    await sleep(50);
    // Refused: the bucket holds less than one token, i.e. TAT − now > (globalBurst − 1) · 1 s.
    const gm = await missing(`${keyPrefix}global`, 1e6);
    expect(gm).toBeGreaterThan(5 - 0.5);
    expect(gm).toBeLessThanOrEqual(6 + 2 * 1);

    const a = await drain(() => b.takeTenant('a'));
    expect(a.n).toBeGreaterThanOrEqual(2);
    expect(a.n).toBeLessThanOrEqual(2 + 2 * 1);
    // A tenant token: one tenant period (2 s), two with a deficit.
    expect(a.wait).toBeGreaterThanOrEqual(2);
    expect(a.wait).toBeLessThanOrEqual(4);
    await sleep(50);
    const am = await missing(`${keyPrefix}t:a`, 2e6);
    expect(am).toBeGreaterThan(1 - 0.25);
    expect(am).toBeLessThanOrEqual(2 + 2 * 1);
    expect(b.backendErrors).toBe(0);
    await b.close();
  });

  it('with a larger global budget, one tenant is refused at its burst while another is still admitted', async () => {
    const keyPrefix = freshPrefix();
    const b = new RedisBudget({
      url: server.url,
      ratePerSec: 0.01,
      burst: 3,
      globalRatePerSec: 1000,
      globalBurst: 1000,
      maxTenantBuckets: 4,
      keyPrefix,
      commandTimeoutMs: COMMAND_TIMEOUT_MS,
    });
    await b.ready();
    expect(b.leaseSize).toBe(1); // ceil(0.01 / 100), per budget
    expect(b.globalLeaseSize).toBe(10); // ceil(1000 / 100)
    const admit = async (tenant: string) => {
      const g = await b.takeGlobal();
      return g > 0 ? { by: 'global', wait: g } : { by: 'tenant', wait: await b.takeTenant(tenant) };
    };
    const run = async (tenant: string) => {
      const out: { by: string; wait: number }[] = [];
      for (let i = 0; i < 6; i++) {
        out.push(await admit(tenant));
        await sleep(20); // each lease request settles
      }
      return out;
    };
    const as = await run('a');
    const bs = await run('b');
    for (const seq of [as, bs]) {
      const admitted = seq.filter((r) => r.wait === 0).length;
      expect(admitted).toBeGreaterThanOrEqual(3);
      expect(admitted).toBeLessThanOrEqual(3 + 2 * 1);
      const refused = seq.filter((r) => r.wait > 0);
      expect(refused.length).toBeGreaterThan(0);
      // Refused by the tenant's own budget, with its period (100 s a token), never by the global one.
      for (const r of refused) {
        expect(r.by).toBe('tenant');
        expect(r.wait).toBeGreaterThan(50);
        expect(r.wait).toBeLessThanOrEqual(400);
      }
    }
    // B was admitted after A had been refused.
    expect(as.at(-1)!.wait).toBeGreaterThan(0);
    expect(bs[0]).toEqual({ by: 'tenant', wait: 0 });
    expect(b.backendErrors).toBe(0);
    await b.close();
  });

  it('admits a concurrent burst on a full shared bucket: takes past the credit wait for the lease', async () => {
    // Regression: with a lease of 1 (the default below 100 req/s) a burst of
    // concurrent requests used to get 429 for every request past the first
    // lease's worth while the lease request was in flight.
    const b = new RedisBudget({ url: server.url, ratePerSec: 1, burst: 100, maxTenantBuckets: 4, keyPrefix: freshPrefix(), commandTimeoutMs: COMMAND_TIMEOUT_MS });
    await b.ready();
    expect(b.leaseSize).toBe(1);
    const results = await Promise.all(Array.from({ length: 10 }, () => b.takeTenant('burst')));
    expect(results).toEqual(Array(10).fill(0));
    const global = await Promise.all(Array.from({ length: 10 }, () => b.takeGlobal()));
    expect(global).toEqual(Array(10).fill(0));
    expect(b.backendErrors).toBe(0);
    await b.close();
  });

  it('returns unspent leases to Redis on close', async () => {
    const keyPrefix = freshPrefix();
    // 0.1/s: a token is 10 s, so the bucket's state cannot move (or its key expire) within the
    // test, however slow the machine: the TAT in Redis is exactly the first lease's time + 2 tokens.
    const period = 10e6; // µs
    const b = new RedisBudget({ url: server.url, ratePerSec: 0.1, burst: 20, maxTenantBuckets: 4, leaseSize: 10, keyPrefix, commandTimeoutMs: COMMAND_TIMEOUT_MS });
    await b.ready();
    const redisNow = async () => {
      const [secs, micros] = (await admin.time()) as [number | string, number | string];
      return Number(secs) * 1e6 + Number(micros);
    };
    const before = await redisNow();
    expect((await b.takeTenant('a'))).toBe(0); // on credit: starts the first lease (of 10, 1 of them owed)
    await sleep(100); // most likely the lease lands meanwhile; if not, close() settles it first
    expect((await b.takeTenant('a'))).toBe(0);
    await b.close(); // 2 spent, 8 unspent go back
    const after = await redisNow();
    const tat = Number(await admin.get(`${keyPrefix}t:a`));
    // The full bucket's first lease set TAT = its Redis time (between before and after) + the 10
    // leased; the debt added 1 and close gave 9 back (or 8, the debt then being 2 and the lease 10):
    // two tokens charged, never the 10 leased.
    expect(tat).toBeGreaterThanOrEqual(before + 2 * period);
    expect(tat).toBeLessThanOrEqual(after + 2 * period);
    expect(b.backendErrors).toBe(0);
  });

  it("release() while the tenant's lease request is out: the take waiting for it is served, the rest goes back once it lands", async () => {
    const keyPrefix = freshPrefix();
    const period = 10e6; // µs: 0.1/s, nothing refills within the test
    // 300 ms to Redis: the lease request is surely still out when release() runs.
    const proxy = await delayProxy(server.port, 300);
    const b = new RedisBudget({ url: `redis://127.0.0.1:${proxy.port}`, ratePerSec: 0.1, burst: 20, maxTenantBuckets: 4, leaseSize: 10, credit: false, keyPrefix, commandTimeoutMs: COMMAND_TIMEOUT_MS });
    try {
      await b.ready();
      const charged = async () => {
        const [tat, t] = await Promise.all([admin.get(`${keyPrefix}t:a`), admin.time()]);
        return tat === null ? 0 : (Number(tat) - (Number(t[0]) * 1e6 + Number(t[1]))) / period;
      };
      const take = b.takeTenant('a'); // no lease, no credit: waits for the lease of 10
      expect(typeof take).not.toBe('number');
      b.release('a'); // the tenant is gone (a reload) while its lease request is out
      expect(await take).toBe(0);
      // The lease landed: 1 token spent, the 9 unspent go back to Redis.
      await until(async () => (await charged()) <= 1, 10_000, 'the unspent 9 back in Redis', 50);
      expect(await charged()).toBeGreaterThan(0.5);
      // Its slot is free again (it stayed the removed tenant's until evicted).
      expect(b.tenantBuckets).toBe(0);
      // The tenant back: it leases again from what the bucket holds.
      expect(await b.takeTenant('a')).toBe(0);
      expect(b.tenantBuckets).toBe(1);
      await until(async () => (await charged()) > 10, 10_000, 'the new lease of 10 charged', 50);
      expect(b.backendErrors).toBe(0);
    } finally {
      await b.close();
      proxy.close();
    }
  });

  it('falls back from EVALSHA to EVAL when Redis has lost the script (NOSCRIPT)', async () => {
    const sha = createHash('sha1').update(LEASE_SCRIPT).digest('hex');
    const keyPrefix = freshPrefix();
    const b = new RedisBudget({ url: server.url, ratePerSec: 1, burst: 2, maxTenantBuckets: 4, leaseSize: 1, keyPrefix, commandTimeoutMs: COMMAND_TIMEOUT_MS });
    await b.ready();
    await b.takeGlobal();
    await sleep(50);
    expect(await admin.script('EXISTS', sha)).toEqual([1]);
    await admin.script('FLUSH');
    expect(await admin.script('EXISTS', sha)).toEqual([0]);
    expect(await holdsWithin(async () => (await b.takeTenant('x')) > 0, 3000)).toBe(true);
    expect(await admin.script('EXISTS', sha)).toEqual([1]);
    expect(b.backendErrors).toBe(0);
    await b.close();
  });

  it('bounds the tenant lease state it keeps', async () => {
    const b = new RedisBudget({ url: server.url, ratePerSec: 100, burst: 10, maxTenantBuckets: 3, leaseSize: 2, keyPrefix: freshPrefix(), commandTimeoutMs: COMMAND_TIMEOUT_MS });
    await b.ready();
    let admitted = 0;
    for (let i = 0; i < 200; i++) {
      if ((await b.takeTenant(`novel-${i}`)) === 0) admitted++;
      await sleep(2); // the lease request settles; the budget becomes idle
    }
    expect(b.tenantBuckets).toBe(3);
    expect(admitted).toBe(200); // every novel tenant has a full budget of its own in Redis
    expect(b.backendErrors).toBe(0);
    await b.close();
  });

  it('is off at ratePerSec 0: no connection, every take admits', async () => {
    const b = new RedisBudget({ url: 'redis://127.0.0.1:1', ratePerSec: 0, maxTenantBuckets: 4 });
    expect(b.enabled).toBe(false);
    for (let i = 0; i < 1000; i++) {
      expect((await b.takeGlobal())).toBe(0);
      expect((await b.takeTenant(`t${i}`))).toBe(0);
    }
    await b.ready();
    await b.close();
    expect(b.backendErrors).toBe(0);
  });

  it('refuses bad options with a coded error', () => {
    const bad = (fn: () => unknown, param: string) => {
      try {
        fn();
      } catch (err) {
        expect(err).toBeInstanceOf(LimitsError);
        expect((err as LimitsError).param).toBe(param);
        return;
      }
      throw new Error(`accepted a bad ${param}`);
    };
    const base = { url: server.url, ratePerSec: 10, burst: 5, maxTenantBuckets: 4 };
    bad(() => new RedisBudget({ ...base, leaseSize: 6 }), 'leaseSize');
    bad(() => new RedisBudget({ ...base, leaseSize: 0 }), 'leaseSize');
    bad(() => new RedisBudget({ ...base, url: 'http://127.0.0.1:6379' }), 'url');
    bad(() => new RedisBudget({ ...base, commandTimeoutMs: 0 }), 'commandTimeoutMs');
    bad(() => new RedisBudget({ ...base, maxTenantBuckets: 0 }), 'maxTenantBuckets');
    bad(() => new RedisBudget({ ...base, ratePerSec: -5 }), 'ratePerSec');
    bad(() => new RedisBudget({ ...base, burst: 0 }), 'burst');
    bad(() => new RedisBudget({ ...base, globalRatePerSec: -1 }), 'globalRatePerSec');
    bad(() => new RedisBudget({ ...base, ratePerSec: 0, globalRatePerSec: 10 }), 'globalRatePerSec');
    bad(() => new RedisBudget({ ...base, globalRatePerSec: 10, globalBurst: 0 }), 'globalBurst');
    // An explicit lease applies to every budget: it must fit the smaller burst.
    bad(() => new RedisBudget({ ...base, globalRatePerSec: 10, globalBurst: 3, leaseSize: 4 }), 'leaseSize');
  });
});

describe('RedisBudget when Redis fails', () => {
  let server: RedisServer;

  beforeAll(async () => {
    server = await RedisServer.start();
  });

  afterAll(async () => {
    await server.stop();
  });

  it('admits and counts backend errors while redis-server is killed, and enforces again once it is back', async () => {
    const errors: Error[] = [];
    const b = new RedisBudget({
      url: server.url,
      ratePerSec: 5,
      burst: 5,
      // Contract §9: a global bucket exists only when its rate is set.
      globalRatePerSec: 5,
      maxTenantBuckets: 4,
      leaseSize: 1,
      // A killed server fails commands at once (its connection closes): no short timeout is needed
      // for that, and a slow answer before the kill must not count as the backend error it expects none of.
      commandTimeoutMs: COMMAND_TIMEOUT_MS,
      backoffMs: 100,
      keyPrefix: freshPrefix(),
      onBackendError: (e) => errors.push(e),
    });
    await b.ready();
    expect(await holdsWithin(async () => (await b.takeGlobal()) > 0, 3000)).toBe(true); // enforced
    expect(b.backendErrors).toBe(0);

    await server.kill9();
    let streak = 0;
    const failedOpen = await holdsWithin(async () => {
      streak = (await b.takeGlobal()) === 0 ? streak + 1 : 0;
      return streak >= 100 && b.backendErrors > 0;
    }, 10_000, 5);
    expect(failedOpen).toBe(true);
    expect(errors.length).toBe(b.backendErrors);
    expect(errors.every((e) => e instanceof Error)).toBe(true);

    await server.restart();
    // The same instance: ioredis reconnects, the next lease request enforces the (fresh) bucket again.
    expect(await holdsWithin(async () => (await b.takeGlobal()) > 0, 15_000)).toBe(true);
    const errorsAfter = b.backendErrors;
    expect(await holdsWithin(async () => (await b.takeTenant('t')) > 0, 3000)).toBe(true);
    expect(b.backendErrors).toBe(errorsAfter);
    await b.close();
  });

  it('admits and counts an error when a command times out (redis-server stopped), then enforces again', async () => {
    const b = new RedisBudget({
      url: server.url,
      ratePerSec: 5,
      burst: 5,
      maxTenantBuckets: 4,
      leaseSize: 1,
      // Short: a stopped server answers nothing, only the timeout ends a command.
      commandTimeoutMs: 50,
      backoffMs: 100,
      keyPrefix: freshPrefix(),
    });
    await b.ready();
    expect(await holdsWithin(async () => (await b.takeTenant('t')) > 0, 3000)).toBe(true);
    server.pause();
    try {
      let streak = 0;
      const failedOpen = await holdsWithin(async () => {
        streak = (await b.takeTenant('t')) === 0 ? streak + 1 : 0;
        return streak >= 50 && b.backendErrors > 0;
      }, 10_000, 5);
      expect(failedOpen).toBe(true);
    } finally {
      server.resume();
    }
    expect(await holdsWithin(async () => (await b.takeTenant('t')) > 0, 10_000)).toBe(true);
    await b.close();
  });
});
