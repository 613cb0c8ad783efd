// Budgets shared through a real redis-server (src/tenants/shared-budgets.ts):
//
//   - a Redis that stalls (SIGSTOP) while pushes are in flight: their replies
//     time out, Redis runs them when it wakes, and they are sent again. Each
//     must count once. (They were merged into the next push and ran twice or
//     more: a 1.2 s stall turned 600 records into 2,700, and every replica
//     then refused the tenant until the end of the day.)
//   - a Redis that lost its data (FLUSHALL, a restart without persistence):
//     the replica keeps counting what the shared total held before, its own
//     pushes and the others' (it fell back to its own: two replicas could
//     spend twice a budget), and sees what the others spend afterwards.
//   - a replica that never charged a scope reads its total at its next sync
//     (it counted the scope from 0: a fresh replica admitted past an
//     exhausted budget and showed it full).
//   - 10,000 scopes in one round against a healthy Redis: no backend error,
//     every push confirmed (one pipeline of all of them under the 100 ms
//     request-path timeout timed thousands out every round).
//   - a tenant a reload removes, or whose budget's period a reload changes:
//     what it charged since the last sync is still pushed, and the others
//     see it (it never was: the last sync window before the reload was lost
//     to every replica), and the replica takes its counters back when it is
//     re-added.
//   - a day and a month budget of one scope whose periods end together (a
//     budget whose period a reload or a rollout changes on a month's last
//     day) count on counters of their own (both had one key, named by the
//     end alone: a tenant moved to a day budget that day was refused at once
//     for what it spent all month), and the month's keeps the name it had.

import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Budget, PeriodClock, periodEnd } from '../../src/tenants/budgets.js';
import { DeclaredTenants } from '../../src/tenants/declared-tenants.js';
import { parseTenantsText } from '../../src/tenants/tenants-file.js';
import { BudgetSync, budgetKey } from '../../src/tenants/shared-budgets.js';
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
    const counter = async () => Number(await admin.get(`${budgetKey('t:acme', 'day', b.periodEndMs)}:records`));
    return { srv, admin, b, sync, counter, errors: () => errors };
  }

  it('a push whose reply timed out while Redis stalled counts once', async () => {
    // The sync's commands time out after max(100 ms, SYNC_TIMEOUT_MIN_MS = 1 s): the 1.2 s stall below
    // outlasts the first push's timeout, and Redis runs that push when it wakes.
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

  /** A second replica's BudgetSync on the same Redis, with its own budget for t:acme. */
  function replica(url: string, limit: number, commandTimeoutMs = 5000) {
    const b = new Budget({ period: 'day', records: limit, bytes: undefined });
    let errors = 0;
    const sync = new BudgetSync({ url, commandTimeoutMs, budgets: () => [['t:acme', b]], onBackendError: () => errors++ });
    cleanup.push(() => sync.close());
    return { b, sync, errors: () => errors };
  }

  it('a Redis that lost its data: neither replica admits again what both spent before, and each sees what the other spends after', async () => {
    const a = await setUp(10, 5000);
    const r = replica(a.srv.url, 10);
    a.b.charge(6, 0);
    await a.sync.sync();
    await until(async () => {
      r.b.charge(0, 0);
      await r.sync.sync();
      return r.b.inflight === null;
    }, 10_000, 'replica B to connect', 20);
    const rErrors = r.errors(); // a push before its connection was up fails at once
    r.b.charge(4, 0);
    await r.sync.sync();
    a.b.charge(0, 0);
    await a.sync.sync();
    expect(a.b.remaining('records')).toBe(0);
    expect(r.b.remaining('records')).toBe(0);
    await a.admin.flushall(); // as a restart without persistence
    a.b.charge(0, 0);
    r.b.charge(0, 0);
    await a.sync.sync();
    await r.sync.sync();
    expect(a.b.remaining('records')).toBe(0);
    expect(r.b.remaining('records')).toBe(0);
    expect(a.b.exhausted()).toBeGreaterThan(0);
    expect(r.b.exhausted()).toBeGreaterThan(0);
    // After the loss, what B charges reaches A on top of what A counted before.
    r.b.charge(5, 0);
    await r.sync.sync();
    a.b.charge(0, 0);
    await a.sync.sync();
    expect(a.b.usedRecords).toBe(15);
    expect(a.errors()).toBe(0);
    expect(r.errors()).toBe(rErrors);
  });

  it('a replica that never charged a scope reads what the others spent at its next sync', async () => {
    const a = await setUp(10, 5000);
    a.b.charge(10, 0);
    await a.sync.sync();
    expect(await a.counter()).toBe(10);
    const fresh = replica(a.srv.url, 10);
    // No request for t:acme reaches the fresh replica: syncs alone must read the total.
    await until(async () => {
      await fresh.sync.sync();
      return fresh.b.remaining('records') === 0;
    }, 5_000, 'the fresh replica to read the shared total', 50);
    expect(fresh.b.exhausted()).toBeGreaterThan(0);
    expect(fresh.errors()).toBe(0);
  });

  it('10,000 scopes against a healthy Redis: every push confirmed, no backend error', async () => {
    const srv = await RedisServer.start();
    cleanup.push(() => srv.stop());
    const N = 10_000;
    const scopes: [string, Budget][] = Array.from({ length: N }, (_, i) => [`t:tenant-${i}`, new Budget({ period: 'day', records: 1_000_000, bytes: undefined })]);
    let errors = 0;
    // The request-path timeout a deployment sets (--redis-timeout-ms 100, the default).
    const sync = new BudgetSync({ url: srv.url, commandTimeoutMs: 100, budgets: () => scopes, onBackendError: () => errors++ });
    cleanup.push(() => sync.close());
    const probe = new Budget({ period: 'day', records: 1, bytes: undefined });
    const probeSync = new BudgetSync({ url: srv.url, commandTimeoutMs: 5000, budgets: () => [['probe', probe]], onBackendError: () => undefined });
    cleanup.push(() => probeSync.close());
    await until(async () => {
      probe.charge(0, 0);
      await probeSync.sync();
      return probe.inflight === null;
    }, 10_000, 'Redis to answer', 20);
    await sleep(300); // the sync's own connection is up too
    for (let round = 0; round < 3; round++) {
      for (const [, b] of scopes) b.charge(1, 10);
      await sync.sync();
    }
    expect(errors).toBe(0);
    expect(scopes.filter(([, b]) => b.inflight !== null || b.pendingRecords !== 0).length).toBe(0);
    expect(scopes.every(([, b]) => b.usedRecords === 3)).toBe(true);
    const admin = new Redis(srv.url);
    cleanup.push(() => admin.disconnect());
    const end = scopes[0]![1].periodEndMs;
    let sum = 0;
    for (let i = 0; i < N; i += 1000) {
      const keys = Array.from({ length: Math.min(1000, N - i) }, (_, j) => `${budgetKey(`t:tenant-${i + j}`, 'day', end)}:records`);
      for (const v of await admin.mget(keys)) sum += Number(v ?? 0);
    }
    expect(sum).toBe(3 * N);
  }, 120_000);

  it('a tenant a reload removes: what it charged since the last sync is pushed, and another replica sees it', async () => {
    const srv = await RedisServer.start();
    cleanup.push(() => srv.stop());
    const admin = new Redis(srv.url);
    cleanup.push(() => admin.disconnect());
    const shared = { url: srv.url, commandTimeoutMs: 1000, onBackendError: () => undefined };
    const file = parseTenantsText('tenants:\n  - id: acme\n    subjects: { subs: [x] }\n    budget: { period: day, records: 10 }\n', 't.yaml');
    const one = new DeclaredTenants(file, { perPrincipalPerSec: 0, shared });
    cleanup.push(() => one.close());
    await one.ready(5000);
    const key = `${budgetKey('t:acme', 'day', periodEnd('day', Date.now()))}:records`;
    // Charged and removed in one turn of the event loop: no sync round in between.
    one.completed('acme', undefined, undefined, 3, 30);
    expect(one.replace([]).removed).toEqual(['acme']);
    await until(async () => Number(await admin.get(key)) === 3, 10_000, 'the removed tenant\'s charge to reach Redis');
    // Another replica sees it.
    const two = new DeclaredTenants(file, { perPrincipalPerSec: 0, shared });
    cleanup.push(() => two.close());
    await until(() => two.remaining()[0]?.value === 7, 10_000, 'the other replica to read the shared total');
    // Re-added here: its counters, at once.
    one.replace(file);
    expect(one.remaining()).toEqual([{ tenant: 'acme', unit: 'records', value: 7 }]);
    // A reload that changes the budget's period: what the day's budget charged since the last sync is pushed too.
    one.completed('acme', undefined, undefined, 2, 20);
    one.replace(parseTenantsText('tenants:\n  - id: acme\n    subjects: { subs: [x] }\n    budget: { period: month, records: 100 }\n', 't.yaml'));
    await until(async () => Number(await admin.get(key)) === 5, 10_000, "the day budget's last charge to reach Redis after its period changed");
  });

  it("a day and a month budget ending together (a period changed on a month's last day) count their own counters", async () => {
    const srv = await RedisServer.start();
    cleanup.push(() => srv.stop());
    const admin = new Redis(srv.url);
    cleanup.push(() => admin.disconnect());
    // Noon of this month's last day, whatever today is: the budgets' clock (Redis' TIME only sets an offset it ignores).
    const monthEnd = periodEnd('month', Date.now());
    const lastDay = monthEnd - 12 * 3600_000;
    class LastDayClock extends PeriodClock {
      override now(): number {
        return lastDay;
      }
    }
    const month = new Budget({ period: 'month', records: 100, bytes: undefined }, lastDay);
    const day = new Budget({ period: 'day', records: 10, bytes: undefined }, lastDay);
    expect(day.periodEndMs).toBe(month.periodEndMs);
    let errors = 0;
    let scopes: [string, Budget][] = [['t:acme', month]];
    const sync = new BudgetSync({ url: srv.url, commandTimeoutMs: 1000, budgets: () => scopes, onBackendError: () => errors++, clock: new LastDayClock() });
    cleanup.push(() => sync.close());
    // The month budget spends 8 records this month, confirmed by Redis.
    month.charge(8, 80, lastDay);
    await until(
      async () => {
        await sync.sync();
        return month.inflight === null && month.pendingRecords === 0;
      },
      10_000,
      "the month's push to be confirmed",
      20,
    );
    errors = 0; // (a round sent before the connection was up fails, counted)
    // The month's counter keeps the name it always had (replicas of before this change count on it too).
    expect(await admin.get(`siglake:budget:t:acme:${monthEnd}:records`)).toBe('8');
    // A reload to a day budget: the new day budget and the replaced month budget (remembered) both sync.
    scopes = [
      ['t:acme', day],
      ['t:acme', month],
    ];
    await sync.sync();
    expect(day.idleRounds).toBe(0); // read its shared total
    // Nothing was charged under a day budget today: the day has all of its 10 (it read the month's 8: 2).
    expect(day.remaining('records', lastDay)).toBe(10);
    day.charge(1, 10, lastDay);
    await sync.sync();
    expect(day.inflight).toBeNull();
    expect(day.remaining('records', lastDay)).toBe(9);
    expect(month.remaining('records', lastDay)).toBe(92);
    expect(await admin.get(`siglake:budget:t:acme:${monthEnd}:records`)).toBe('8');
    expect(await admin.get(`${budgetKey('t:acme', 'day', monthEnd)}:records`)).toBe('1');
    expect(budgetKey('t:acme', 'day', monthEnd)).toBe(`siglake:budget:t:acme:day:${monthEnd}`);
    // A day ending mid-month keeps the name it had too.
    expect(budgetKey('t:acme', 'day', Date.UTC(2026, 11, 8))).toBe(`siglake:budget:t:acme:${Date.UTC(2026, 11, 8)}`);
    expect(errors).toBe(0);
  });
});
