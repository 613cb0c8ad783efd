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
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Budget } from '../../src/tenants/budgets.js';
import { BudgetSync } from '../../src/tenants/shared-budgets.js';
import { RedisServer } from '../helpers/redis-server.js';
import { clearOfUtcPeriodEnd, UTC_PERIOD_WAIT_MAX_MS } from '../helpers/utc-period.js';
import { sleep, until } from '../helpers/wait.js';

describe('budgets shared through Redis', () => {
  const cleanup: (() => Promise<void> | void)[] = [];
  // The budgets below count one UTC day, and the counters' keys name its end: never across 00:00 UTC.
  beforeEach(async () => {
    await clearOfUtcPeriodEnd('day');
  }, UTC_PERIOD_WAIT_MAX_MS + 10_000);
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f();
  });

  /** `commandTimeoutMs`: short only where a stalled Redis must make replies time out. */
  async function setUp(limit: number, commandTimeoutMs: number) {
    const srv = await RedisServer.start();
    cleanup.push(() => srv.stop());
    const admin = new Redis(srv.url);
    cleanup.push(() => admin.disconnect());
    const b = new Budget({ period: 'day', records: limit, bytes: undefined });
    let errors = 0;
    let scopes: [string, Budget][] = [];
    const sync = new BudgetSync({ url: srv.url, commandTimeoutMs, budgets: () => scopes, onBackendError: () => errors++ });
    cleanup.push(() => sync.close());
    // Connected: a push of nothing on a scope of its own is confirmed. (Without an offline queue,
    // a command sent before the connection is up fails at once; the push is then sent again.)
    const probe = new Budget({ period: 'day', records: 1, bytes: undefined });
    scopes = [['probe', probe]];
    await until(
      async () => {
        probe.charge(0, 0);
        await sync.sync();
        return probe.inflight === null;
      },
      10_000,
      'BudgetSync to connect to Redis',
      20,
    );
    scopes = [['t:acme', b]];
    errors = 0;
    const counter = async () => Number(await admin.get(`siglake:budget:t:acme:${b.periodEndMs}:records`));
    return { srv, admin, b, sync, counter, errors: () => errors };
  }

  it('a push whose reply timed out while Redis stalled counts once', async () => {
    // 100 ms: the 1.2 s stall below must outlast several commands' timeouts.
    const { srv, b, sync, counter, errors } = await setUp(1_000_000, 100);
    srv.pause();
    const resumed = sleep(1200).then(() => srv.resume());
    try {
      for (let i = 0; i < 6; i++) {
        b.charge(100, 1000);
        await sync.sync(); // times out while Redis is stopped; Redis runs what reached it later
      }
    } finally {
      await resumed;
    }
    expect(errors()).toBeGreaterThan(0); // the stall was seen
    // Redis answers again: sync until every push is confirmed (a reply may still time out on a
    // loaded machine; the unconfirmed push is then sent again, and must still count once).
    await until(
      async () => {
        await sync.sync();
        return b.inflight === null && b.pendingRecords === 0;
      },
      20_000,
      'every push to be confirmed',
      50,
    );
    expect(await counter()).toBe(600);
    expect(b.usedRecords).toBe(600);
    expect(b.exhausted()).toBe(0);
  });

  it('a Redis that lost its data does not give back what this replica charged', async () => {
    // A timeout no reply on a loaded machine reaches: each sync below is confirmed.
    const { admin, b, sync, counter, errors } = await setUp(1000, 5000);
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
    expect(errors()).toBe(0);
  });
});
