// Budgets shared through a real redis-server (src/tenants/shared-budgets.ts):
//
//   - a Redis that stalls (SIGSTOP) while pushes are in flight: their replies
//     time out, Redis runs them when it wakes, and they are sent again. Each
//     must count once. (They were merged into the next push and ran twice or
//     more: a 1.2 s stall turned 600 records into 2,700, and every replica
//     then refused the tenant until the end of the day.)
//   - a Redis that lost its data (FLUSHALL, a restart without persistence):
//     the replica keeps counting what its own pushes added this period.

import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { Budget } from '../../src/tenants/budgets.js';
import { BudgetSync } from '../../src/tenants/shared-budgets.js';
import { RedisServer } from '../helpers/redis-server.js';
import { sleep } from '../helpers/wait.js';

describe('budgets shared through Redis', () => {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f();
  });

  async function setUp(limit: number) {
    const srv = await RedisServer.start();
    cleanup.push(() => srv.stop());
    const admin = new Redis(srv.url);
    cleanup.push(() => admin.disconnect());
    const b = new Budget({ period: 'day', records: limit, bytes: undefined });
    let errors = 0;
    const sync = new BudgetSync({ url: srv.url, commandTimeoutMs: 100, budgets: () => [['t:acme', b]], onBackendError: () => errors++ });
    cleanup.push(() => sync.close());
    await sleep(300); // connected
    const counter = async () => Number(await admin.get(`siglake:budget:t:acme:${b.periodEndMs}:records`));
    return { srv, admin, b, sync, counter, errors: () => errors };
  }

  it('a push whose reply timed out while Redis stalled counts once', async () => {
    const { srv, b, sync, counter, errors } = await setUp(1_000_000);
    srv.pause();
    setTimeout(() => srv.resume(), 1200);
    for (let i = 0; i < 6; i++) {
      b.charge(100, 1000);
      await sync.sync(); // times out while Redis is stopped; Redis runs what reached it later
    }
    await sleep(1500);
    await sync.sync();
    await sync.sync();
    expect(errors()).toBeGreaterThan(0); // the stall was seen
    expect(await counter()).toBe(600);
    expect(b.usedRecords).toBe(600);
    expect(b.exhausted()).toBe(0);
  });

  it('a Redis that lost its data does not give back what this replica charged', async () => {
    const { admin, b, sync, counter } = await setUp(1000);
    b.charge(1000, 10);
    await sync.sync();
    expect(await counter()).toBe(1000);
    expect(b.exhausted()).toBeGreaterThan(0);
    await admin.flushall();
    b.charge(1, 1);
    await sync.sync();
    expect(await counter()).toBe(1); // the shared total starts again ...
    expect(b.usedRecords).toBe(1001); // ... but this replica still counts its own
    expect(b.exhausted()).toBeGreaterThan(0);
  });
});
