// Budgets (declared-tenants.md §3) and the audit sink's bounded queue (§4).

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import { AuditLog, MAX_QUEUED_BYTES } from '../../src/tenants/audit-log.js';
import { Budget, PeriodClock, periodEnd } from '../../src/tenants/budgets.js';
import { DeclaredTenants } from '../../src/tenants/declared-tenants.js';
import { parseTenantsText } from '../../src/tenants/tenants-file.js';

const at = (iso: string): number => Date.parse(iso);

describe('budget periods (UTC)', () => {
  it('a day ends at the next UTC midnight, a month on the first of the next month', () => {
    expect(periodEnd('day', at('2026-02-28T23:59:59.999Z'))).toBe(at('2026-03-01T00:00:00Z'));
    expect(periodEnd('day', at('2026-12-31T12:00:00Z'))).toBe(at('2027-01-01T00:00:00Z'));
    expect(periodEnd('month', at('2026-12-31T12:00:00Z'))).toBe(at('2027-01-01T00:00:00Z'));
    expect(periodEnd('month', at('2026-02-01T00:00:00Z'))).toBe(at('2026-03-01T00:00:00Z'));
  });

  it('refuses once spent, with the seconds to the period end, and rolls over', () => {
    const t0 = at('2026-05-10T23:59:00Z');
    const b = new Budget({ period: 'day', records: 10, bytes: undefined }, t0);
    expect(b.exhausted(t0)).toBe(0);
    b.charge(10, 1e9, t0);
    expect(b.exhausted(t0)).toBe(60);
    expect(b.remaining('records', t0)).toBe(0);
    expect(b.remaining('bytes', t0)).toBe(Infinity);
    expect(b.exhausted(at('2026-05-11T00:00:00Z'))).toBe(0);
    expect(b.remaining('records', at('2026-05-11T00:00:00Z'))).toBe(10);
  });

  it('bytes and records are separate limits: either spent refuses', () => {
    const t0 = at('2026-05-10T00:00:00Z');
    const b = new Budget({ period: 'month', records: 100, bytes: 1000 }, t0);
    b.charge(1, 1000, t0);
    expect(b.exhausted(t0)).toBe((at('2026-06-01T00:00:00Z') - t0) / 1000);
  });

  it('a reload keeps the counters of a tenant that stays, and drops a removed one', () => {
    const file = (budget: string): string => `tenants:\n  - id: a\n    subjects: { subs: [x] }\n    budget: ${budget}\n`;
    const dt = new DeclaredTenants(parseTenantsText(file('{ period: day, records: 5 }'), 't.yaml'), { perPrincipalPerSec: 0 });
    dt.completed('a', undefined, undefined, 3, 10);
    expect(dt.remaining()).toEqual([{ tenant: 'a', unit: 'records', value: 2 }]);
    dt.replace(parseTenantsText(file('{ period: day, records: 6 }'), 't.yaml'));
    expect(dt.remaining()).toEqual([{ tenant: 'a', unit: 'records', value: 3 }]);
    const r = dt.replace([]);
    expect(r.removed).toEqual(['a']);
    expect(dt.remaining()).toEqual([]);
    void dt.close();
  });

  it("a reload gives back no token: a tenant that stays keeps what its bucket holds, at most its new burst", () => {
    // Every reload started the buckets full: a SIGHUP (logrotate's included) was a fresh burst for every tenant.
    const file = (rate: string): string =>
      `tenants:\n  - id: a\n    subjects: { subs: [x] }\n    rateLimit: ${rate}\n  - id: b\n    subjects: { subs: [y] }\n    rateLimit: ${rate}\n`;
    const claims = Object.freeze({ sub: 'x' });
    const dt = new DeclaredTenants(parseTenantsText(file('{ requestsPerSec: 0.01, burst: 3 }'), 't.yaml'), { perPrincipalPerSec: 0 });
    const take = (): number => dt.takeRate(dt.runtimeOf('a')!, claims) as number;
    expect([take(), take(), take()]).toEqual([0, 0, 0]);
    expect(take()).toBeGreaterThan(0);
    for (let i = 0; i < 3; i++) dt.replace(parseTenantsText(file('{ requestsPerSec: 0.01, burst: 3 }'), 't.yaml'));
    expect(take()).toBeGreaterThan(0);
    // Another rate and a larger burst: still empty, refilling at the new rate.
    dt.replace(parseTenantsText(file('{ requestsPerSec: 0.02, burst: 10 }'), 't.yaml'));
    expect(take()).toBeGreaterThan(0);
    // b spent nothing: full, and capped at a smaller burst.
    dt.replace(parseTenantsText(file('{ requestsPerSec: 0.02, burst: 2 }'), 't.yaml'));
    const b = dt.runtimeOf('b')!;
    expect([dt.takeRate(b, { sub: 'y' }), dt.takeRate(b, { sub: 'y' })]).toEqual([0, 0]);
    expect(dt.takeRate(b, { sub: 'y' })).toBeGreaterThan(0);
    void dt.close();
  });
});

describe('a reload with shared buckets (redis.url)', () => {
  it('lets the replaced set go while its buckets wait 5 s to settle with Redis', async () => {
    // The settle timer's closure shared replace()'s scope and held the whole replaced set (every
    // runtime and budget) for those 5 s: at 100 reloads a second, 500 sets of every tenant.
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const file = (rate: number): string => `tenants:\n  - id: a\n    subjects: { subs: [x] }\n    rateLimit: { requestsPerSec: ${rate} }\n    budget: { period: day, records: 5 }\n`;
    // Nothing listens there: the buckets fail open, which is all this needs.
    const shared = { url: 'redis://127.0.0.1:1', commandTimeoutMs: 100, onBackendError: () => undefined };
    const dt = new DeclaredTenants(parseTenantsText(file(10), 't.yaml'), { perPrincipalPerSec: 0, shared });
    try {
      const old = new WeakRef(dt.runtimeOf('a')!);
      dt.replace(parseTenantsText(file(20), 't.yaml')); // another rate: the old bucket retires for 5 s
      expect(dt.runtimeOf('a')).not.toBe(old.deref());
      for (let i = 0; i < 3 && old.deref() !== undefined; i++) {
        await new Promise((r) => setTimeout(r, 10));
        gc();
      }
      expect(old.deref()).toBeUndefined();
    } finally {
      await dt.close();
    }
  });
});

describe("the budgets' clock (Redis' once read)", () => {
  it("a budget started by a clock ahead of Redis' counts Redis' period once told, with its Retry-After", () => {
    const b = new Budget({ period: 'day', records: 1, bytes: undefined }, at('2026-03-11T00:00:00.500Z'));
    expect(b.periodEndMs).toBe(at('2026-03-12T00:00:00Z'));
    b.charge(1, 10, at('2026-03-11T00:00:00.600Z'));
    expect(b.exhausted(at('2026-03-11T00:00:00.700Z'))).toBe(86_400);
    // Redis says it is still the 10th: the period before, its own counters.
    expect(b.exhausted(at('2026-03-10T23:59:59.200Z'))).toBe(0);
    expect(b.periodEndMs).toBe(at('2026-03-11T00:00:00Z'));
  });

  it('steps back at its first reading of Redis, never after (jitter at a period end does not switch back)', () => {
    const clock = new PeriodClock();
    const sent = Date.now();
    clock.read(sent - 60_000, sent, sent);
    expect(clock.synced).toBe(true);
    const t1 = clock.now();
    expect(Math.abs(t1 - (Date.now() - 60_000))).toBeLessThan(1000);
    clock.read(Date.now() - 61_000, Date.now(), Date.now());
    expect(clock.now()).toBeGreaterThanOrEqual(t1);
    clock.read(Number.NaN, Date.now(), Date.now());
    expect(Number.isFinite(clock.now())).toBe(true);
  });
});

describe('several budgets spent at once', () => {
  it('the narrowest refuses and names itself; Retry-After is the latest end of every spent one', () => {
    // An index's day budget and its tenant's month budget, both spent: a retry tonight would be refused
    // again by the month (before stop 48 Retry-After said tonight).
    const file = `tenants:\n  - id: a\n    subjects: { subs: [x] }\n    budget: { period: month, records: 1 }\n    indexes: [{ name: pay, budget: { period: day, records: 1 } }]\n`;
    const dt = new DeclaredTenants(parseTenantsText(file, 't.yaml'), { perPrincipalPerSec: 0 });
    const now = new Date();
    const dayEnd = (Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1) - now.getTime()) / 1000;
    const monthEnd = (Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1) - now.getTime()) / 1000;
    dt.completed('a', 'pay', undefined, 1, 10);
    const both = dt.checkBudgets('a', 'pay', undefined)!;
    expect(both.scope).toBe('index');
    expect(Math.abs(both.error.retryAfterSecs - monthEnd)).toBeLessThan(5);
    // (On a month's last day the two ends are one: nothing wider to name.)
    expect(both.error.message).toMatch(
      monthEnd - dayEnd > 60
        ? /^budget exhausted: the index budget is spent until its UTC period ends in \d+ s; a wider budget is spent too, until \d+ s from now$/
        : /^budget exhausted: the index budget is spent until its UTC period ends in \d+ s$/,
    );
    const tenantOnly = dt.checkBudgets('a', undefined, undefined)!;
    expect(tenantOnly.scope).toBe('tenant');
    expect(Math.abs(tenantOnly.error.retryAfterSecs - monthEnd)).toBeLessThan(5);
    // The index's day budget alone spent (a new month's tenant budget, here: another tenant file).
    const alone = new DeclaredTenants(parseTenantsText(file.replace('records: 1 }\n    indexes', 'records: 100 }\n    indexes'), 't.yaml'), { perPrincipalPerSec: 0 });
    alone.completed('a', 'pay', undefined, 1, 10);
    const dayOnly = alone.checkBudgets('a', 'pay', undefined)!;
    expect(Math.abs(dayOnly.error.retryAfterSecs - dayEnd)).toBeLessThan(5);
    expect(dayOnly.error.message).not.toMatch(/wider/);
    void dt.close();
    void alone.close();
  });
});

describe('audit log', () => {
  it('writes JSON lines, and drops (counting) past its queue bound instead of blocking', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'siglake-audit-'));
    const file = path.join(dir, 'audit.jsonl');
    const log = new AuditLog(file);
    const reason = 'x'.repeat(1024);
    const n = Math.ceil(MAX_QUEUED_BYTES / 1024) + 100;
    for (let i = 0; i < n; i++) log.write({ event: 'refusal', tenant: 't', subject: `s${i}`, reason, remote: null });
    expect(log.dropped).toBeGreaterThan(0);
    await log.close();
    const lines = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean);
    expect(lines.length + log.dropped).toBe(n);
    expect(JSON.parse(lines[0]!)).toMatchObject({ event: 'refusal', tenant: 't', subject: 's0', remote: null });
    expect(typeof JSON.parse(lines[0]!).time).toBe('string');
  });
});
