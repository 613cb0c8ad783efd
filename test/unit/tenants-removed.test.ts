// What a reload takes from a tenant and gives back if the tenant comes back
// (src/tenants/removed-tenants.ts; docs/tenants.md "Reload"):
//
//   - a tenant removed and re-added (a reverted edit, a half-written file read
//     by one reload and whole by the next) keeps what its bucket held, and its
//     budgets' counters, instead of a fresh burst and a fresh day's budget
//   - so does one that loses its rateLimit, budget or an index's budget and
//     gets it back
//   - a request in flight to a removed tenant is charged to what it left
//   - what is remembered goes once it no longer matters (a bucket full again
//     after burst / rate, a budget at its period's end, one that counted
//     nothing once no request admitted before the removal can charge it), and
//     is bounded

import v8 from 'node:v8';
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import { TokenBucketTable } from '../../src/limits/token-bucket-table.js';
import { Budget } from '../../src/tenants/budgets.js';
import { DeclaredTenants } from '../../src/tenants/declared-tenants.js';
import { IN_FLIGHT_GRACE_MS, MAX_REMEMBERED, RemovedTenants } from '../../src/tenants/removed-tenants.js';
import { parseTenantsText } from '../../src/tenants/tenants-file.js';

const at = (iso: string): number => Date.parse(iso);

describe('the remembered set', () => {
  it("keeps a bucket until it would be full again (burst / rate after the removal), then forgets it", () => {
    // A table on the wall clock (isFull reads it): 4 tokens at 0.5/s, all spent: full again 8 s later.
    const table = new TokenBucketTable({ ratePerSec: 0.5, burst: 4, slots: 2 });
    for (let i = 0; i < 4; i++) expect(table.take(0)).toBe(0);
    const r = new RemovedTenants();
    r.rememberBucket('a', table, 0, 1000);
    r.rememberBucket('b', table, 1, 1000); // full: a fresh bucket is the same, nothing to remember
    expect(r.size).toBe(1);
    r.sweep(8999, 0);
    expect(r.size).toBe(1);
    r.sweep(9000, 0);
    expect(r.size).toBe(0);
    expect(r.takeBucket('a', 9000)).toBeUndefined();
    // Taken back within its window: the level (about 0: all spent) refilled for the time elapsed at
    // its rate (2 s at 0.5/s: about 1 token), handed over once, then forgotten.
    r.rememberBucket('a', table, 0, 1000);
    expect(r.takeBucket('a', 3000)).toBeCloseTo(1, 1);
    expect(r.size).toBe(0);
    expect(r.takeBucket('a', 3000)).toBeUndefined();
    // Asked for past its window (before a sweep came): not handed back, and forgotten.
    r.rememberBucket('a', table, 0, 1000);
    expect(r.takeBucket('a', 9000)).toBeUndefined();
    expect(r.size).toBe(0);
  });

  it('keeps a budget that counted something until its UTC period ends', () => {
    const t0 = at('2026-03-10T12:00:00Z');
    const r = new RemovedTenants();
    const spent = new Budget({ period: 'day', records: 10, bytes: undefined }, t0);
    spent.charge(3, 30, t0);
    r.rememberBudget('a', spent, 0);
    const ib = new Budget({ period: 'month', records: 10, bytes: undefined }, t0);
    ib.charge(1, 1, t0);
    r.rememberIndexBudget('a', 'pay', ib, 0);
    expect(r.size).toBe(1);
    r.sweep(IN_FLIGHT_GRACE_MS, at('2026-03-10T23:59:59Z'));
    expect(r.get('a')?.budget).toBe(spent);
    // The day ended: the day's budget goes, the month's stays.
    r.sweep(0, at('2026-03-11T00:00:00Z'));
    expect(r.get('a')?.budget).toBeNull();
    expect(r.get('a')?.indexBudgets?.get('pay')).toBe(ib);
    r.sweep(0, at('2026-04-01T00:00:00Z'));
    expect(r.size).toBe(0);
  });

  it('keeps a budget that counted nothing for as long as a request admitted before the removal may charge it, then for its period if one did', () => {
    const t0 = at('2026-03-10T12:00:00Z');
    const r = new RemovedTenants();
    const idle = new Budget({ period: 'day', records: 10, bytes: undefined }, t0);
    const late = new Budget({ period: 'day', records: 10, bytes: undefined }, t0);
    const lateIndex = new Budget({ period: 'day', records: 10, bytes: undefined }, t0);
    r.rememberBudget('idle', idle, 1000);
    r.rememberBudget('late', late, 1000);
    r.rememberIndexBudget('late', 'pay', lateIndex, 1000);
    r.sweep(1000 + IN_FLIGHT_GRACE_MS - 1, t0);
    expect(r.size).toBe(2);
    // A request admitted before the removal is stored now: charged to what the tenant left.
    r.get('late')!.budget!.charge(1, 10, t0);
    r.get('late')!.indexBudgets!.get('pay')!.charge(1, 10, t0);
    r.sweep(1000 + IN_FLIGHT_GRACE_MS, t0);
    expect(r.get('idle')).toBeUndefined();
    expect(r.get('late')?.budget).toBe(late);
    expect(r.get('late')?.indexBudgets?.get('pay')).toBe(lateIndex);
    expect(r.takeBudget('late', 'day')?.usedRecords).toBe(1);
  });

  it('is bounded: 10,000 removed tenants are forgotten past their windows, and at most MAX_REMEMBERED are held', () => {
    const table = new TokenBucketTable({ ratePerSec: 1, burst: 2, slots: 10_000 });
    const r = new RemovedTenants();
    for (let i = 0; i < 10_000; i++) {
      table.take(i);
      r.rememberBucket(`t${i}`, table, i, 0);
    }
    expect(r.size).toBe(10_000);
    expect(r.sweep(1999, 0)).toBe(0);
    expect(r.sweep(2000, 0)).toBe(10_000);
    expect(r.size).toBe(0);
    // Past the cap the tenant removed longest ago goes first.
    const t0 = at('2026-03-10T12:00:00Z');
    for (let i = 0; i <= MAX_REMEMBERED; i++) {
      const b = new Budget({ period: 'day', records: 10, bytes: undefined }, t0);
      b.charge(1, 1, t0);
      r.rememberBudget(`t${i}`, b, 0);
    }
    expect(r.size).toBe(MAX_REMEMBERED);
    expect(r.get('t0')).toBeUndefined();
    expect(r.get(`t${MAX_REMEMBERED}`)).toBeDefined();
  });
});

describe('a tenant that comes back after a reload removed it', () => {
  const tenant = (id: string, sub: string, extra: string): string => `  - id: ${id}\n    subjects: { subs: [${sub}] }\n${extra}`;
  const file = (...tenants: string[]): ReturnType<typeof parseTenantsText> => parseTenantsText(`tenants:\n${tenants.join('')}`, 't.yaml');

  it('keeps what its bucket held: no fresh burst; the level, at most its new burst', () => {
    const acme = (burst: number) => tenant('acme', 'x', `    rateLimit: { requestsPerSec: 0.01, burst: ${burst} }\n`);
    const other = tenant('other', 'y', '    rateLimit: { requestsPerSec: 0.01, burst: 3 }\n');
    const dt = new DeclaredTenants(file(acme(3), other), { perPrincipalPerSec: 0 });
    try {
      const take = (): number => dt.takeRate(dt.runtimeOf('acme')!, { sub: 'x' }) as number;
      expect(take()).toBe(0); // 2 left
      dt.replace(file(other));
      expect(dt.removedRemembered).toBe(1);
      // Back with a larger burst: the 2 it held, not 5. (It came back full.)
      dt.replace(file(acme(5), other));
      expect(dt.removedRemembered).toBe(0);
      expect([take(), take()]).toEqual([0, 0]);
      expect(take()).toBeGreaterThan(0);
      // Removed empty and back again, twice: still empty.
      for (let i = 0; i < 2; i++) {
        dt.replace(file(other));
        dt.replace(file(acme(5), other));
        expect(take()).toBeGreaterThan(0);
      }
    } finally {
      void dt.close();
    }
  });

  it("remembers a bucket's level, not its table: the replaced table goes", async () => {
    // A table holds every bucket of its (rate, burst) group; held per removed tenant, a run of
    // reloads that each removed one tenant kept one whole table per reload alive for up to burst / rate.
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const acme = tenant('acme', 'x', '    rateLimit: { requestsPerSec: 0.01, burst: 3 }\n');
    const dt = new DeclaredTenants(file(acme), { perPrincipalPerSec: 0 });
    try {
      expect(dt.takeRate(dt.runtimeOf('acme')!, { sub: 'x' })).toBe(0);
      const table = new WeakRef(dt.runtimeOf('acme')!.bucket!);
      dt.replace([]);
      expect(dt.removedRemembered).toBe(1);
      for (let i = 0; i < 3 && table.deref() !== undefined; i++) {
        await new Promise((r) => setTimeout(r, 10));
        gc();
      }
      expect(table.deref()).toBeUndefined();
    } finally {
      void dt.close();
    }
  });

  it('keeps what its bucket held when it loses its rateLimit and gets it back', () => {
    const limited = tenant('acme', 'x', '    rateLimit: { requestsPerSec: 0.01, burst: 2 }\n');
    const dt = new DeclaredTenants(file(limited), { perPrincipalPerSec: 0 });
    try {
      const take = (): number => dt.takeRate(dt.runtimeOf('acme')!, { sub: 'x' }) as number;
      expect([take(), take()]).toEqual([0, 0]);
      expect(take()).toBeGreaterThan(0);
      dt.replace(file(tenant('acme', 'x', '')));
      expect(dt.hasBucket(dt.runtimeOf('acme')!)).toBe(false);
      dt.replace(file(limited));
      expect(take()).toBeGreaterThan(0);
    } finally {
      void dt.close();
    }
  });

  it("takes back its budgets' counters this period, its index's too, and what requests in flight charged after the removal", () => {
    const acme = tenant('acme', 'x', '    budget: { period: day, records: 10 }\n    indexes: [{ name: pay, budget: { period: day, records: 5 } }]\n');
    const dt = new DeclaredTenants(file(acme), { perPrincipalPerSec: 0 });
    try {
      dt.completed('acme', 'pay', undefined, 4, 40);
      dt.replace([]);
      expect(dt.remaining()).toEqual([]);
      // A request that resolved acme before the reload finishes after it.
      dt.completed('acme', 'pay', undefined, 1, 10);
      dt.replace(file(acme));
      expect(dt.remaining()).toEqual([{ tenant: 'acme', unit: 'records', value: 5 }]);
      // The index's budget is spent (5 of 5): refused, as it was before the removal.
      expect(dt.checkBudgets('acme', 'pay', undefined)?.scope).toBe('index');
      // Loses its budget and gets it back: the same.
      dt.replace(file(tenant('acme', 'x', '')));
      dt.replace(file(acme));
      expect(dt.remaining()).toEqual([{ tenant: 'acme', unit: 'records', value: 5 }]);
      expect(dt.removedRemembered).toBe(0);
    } finally {
      void dt.close();
    }
  });

  it("takes back its day's counters when a reload changes its budget's period and the next changes it back", () => {
    const withBudget = (period: string, records: number) => tenant('acme', 'x', `    budget: { period: ${period}, records: ${records} }\n`);
    const dt = new DeclaredTenants(file(withBudget('day', 10)), { perPrincipalPerSec: 0 });
    try {
      dt.completed('acme', undefined, undefined, 4, 40);
      // A month budget counts from 0 (documented: counters are kept for the same period)...
      dt.replace(file(withBudget('month', 100)));
      expect(dt.remaining()).toEqual([{ tenant: 'acme', unit: 'records', value: 100 }]);
      dt.completed('acme', undefined, undefined, 1, 10);
      // ...but back to the day, the day has not started again.
      dt.replace(file(withBudget('day', 10)));
      expect(dt.remaining()).toEqual([{ tenant: 'acme', unit: 'records', value: 6 }]);
      // And the month's counters are there if it comes back this month.
      dt.replace(file(withBudget('month', 100)));
      expect(dt.remaining()).toEqual([{ tenant: 'acme', unit: 'records', value: 99 }]);
    } finally {
      void dt.close();
    }
  });

  it('remembers nothing for tenants whose buckets are full, and budgets that counted nothing only while a request may still charge them', () => {
    let s = '';
    for (let i = 0; i < 1000; i++) s += tenant(`t${i}`, `s${i}`, '    rateLimit: { requestsPerSec: 1, burst: 2 }\n');
    for (let i = 0; i < 1000; i++) s += tenant(`b${i}`, `u${i}`, '    rateLimit: { requestsPerSec: 1, burst: 2 }\n    budget: { period: day, records: 10 }\n');
    const dt = new DeclaredTenants(file(s), { perPrincipalPerSec: 0 });
    try {
      // Requests looked at their budgets (and were refused, say, by something else): nothing charged.
      for (let i = 0; i < 1000; i++) expect(dt.checkBudgets(`b${i}`, undefined, undefined)).toBeUndefined();
      dt.replace([]);
      // The budgets, for IN_FLIGHT_GRACE_MS (RemovedTenants.sweep forgets them then: above); the full buckets not at all.
      expect(dt.removedRemembered).toBe(1000);
    } finally {
      void dt.close();
    }
  });
});
