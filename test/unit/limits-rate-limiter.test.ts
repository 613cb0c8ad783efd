import { describe, expect, it } from 'vitest';
import { LimitsError } from '../../src/limits/limits-error.js';
import { RateLimiter } from '../../src/limits/rate-limiter.js';
import { TenantSlots } from '../../src/limits/tenant-slots.js';

const T0 = 5_000_000_000;
const SEC = 1_000_000;

function takes(n: number, take: () => number): number[] {
  return Array.from({ length: n }, take);
}

describe('RateLimiter', () => {
  it('is off at ratePerSec 0: every take admits', async () => {
    const rl = new RateLimiter({ ratePerSec: 0, maxTenantBuckets: 4 });
    expect(rl.enabled).toBe(false);
    expect(rl.table).toBeNull();
    expect(rl.globalTable).toBeNull();
    for (let i = 0; i < 10_000; i++) {
      expect(rl.takeGlobal()).toBe(0);
      expect(rl.takeTenant(`t${i}`)).toBe(0);
    }
    expect(rl.tenantBuckets).toBe(0); // off: not even the tenant map is touched
    await rl.close();
  });

  it('spends the global bucket: burst, then 429 seconds, then refill', async () => {
    const rl = new RateLimiter({ ratePerSec: 2, burst: 4, globalRatePerSec: 2, globalBurst: 4, maxTenantBuckets: 4, nowMicros: T0 });
    expect(rl.enabled).toBe(true);
    expect(takes(5, () => rl.takeGlobal(T0))).toEqual([0, 0, 0, 0, 1]);
    expect(rl.takeGlobal(T0 + SEC / 2)).toBe(0);
    expect(rl.takeGlobal(T0 + SEC / 2)).toBe(1);
    await rl.close();
  });

  it('defaults burst to ratePerSec rounded up', async () => {
    const rl = new RateLimiter({ ratePerSec: 2.5, maxTenantBuckets: 1, nowMicros: T0 });
    expect(rl.table?.burst).toBe(3);
    expect(takes(4, () => rl.takeTenant('t', T0))).toEqual([0, 0, 0, 1]);
    await rl.close();
  });

  it('keeps one bucket per resolved tenant, apart from the global bucket', async () => {
    const rl = new RateLimiter({ ratePerSec: 1, burst: 2, globalRatePerSec: 1, globalBurst: 2, maxTenantBuckets: 8, nowMicros: T0 });
    expect(takes(3, () => rl.takeTenant('acme', T0))).toEqual([0, 0, 1]);
    expect(takes(3, () => rl.takeTenant('globex', T0))).toEqual([0, 0, 1]);
    expect(takes(3, () => rl.takeGlobal(T0))).toEqual([0, 0, 1]);
    expect(rl.takeTenant('acme', T0 + SEC)).toBe(0);
    expect(rl.takeTenant('acme', T0 + SEC)).toBe(1);
    expect(rl.tenantBuckets).toBe(2);
    await rl.close();
  });

  it('without a global rate there is no global bucket (contract §9): one tenant spending its bucket never refuses another', async () => {
    const rl = new RateLimiter({ ratePerSec: 0.5, burst: 3, maxTenantBuckets: 2, nowMicros: T0 });
    expect(rl.globalTable).toBeNull();
    expect(rl.table?.burst).toBe(3);
    expect(takes(100, () => rl.takeGlobal(T0))).toEqual(Array(100).fill(0));
    expect(takes(4, () => rl.takeTenant('a', T0))).toEqual([0, 0, 0, 2]);
    expect(takes(3, () => rl.takeTenant('b', T0))).toEqual([0, 0, 0]);
    // A global rate given explicitly defaults its burst to that rate rounded up.
    const same = new RateLimiter({ ratePerSec: 0.5, burst: 3, globalRatePerSec: 0.5, maxTenantBuckets: 1, nowMicros: T0 });
    expect(same.globalTable?.burst).toBe(1);
    expect(same.globalTable?.slots).toBe(1);
    const other = new RateLimiter({ ratePerSec: 0.5, burst: 3, globalRatePerSec: 7.5, maxTenantBuckets: 1, nowMicros: T0 });
    expect(other.globalTable?.burst).toBe(8);
    expect(other.table?.burst).toBe(3);
    await Promise.all([rl.close(), same.close(), other.close()]);
  });

  it('gives the global bucket its own rate and burst: it refuses at its own burst and refills at its own rate', async () => {
    const rl = new RateLimiter({ ratePerSec: 1, burst: 2, globalRatePerSec: 10, globalBurst: 5, maxTenantBuckets: 4, nowMicros: T0 });
    expect(rl.globalTable?.burst).toBe(5);
    expect(rl.table?.burst).toBe(2);
    expect(takes(6, () => rl.takeGlobal(T0))).toEqual([0, 0, 0, 0, 0, 1]);
    // One global token back after 1/10 s (the tenant rate would need 1 s).
    expect(rl.takeGlobal(T0 + SEC / 10)).toBe(0);
    expect(rl.takeGlobal(T0 + SEC / 10)).toBe(1);
    // The tenant buckets keep their own burst of 2, whatever the global bucket holds.
    expect(takes(3, () => rl.takeTenant('acme', T0))).toEqual([0, 0, 1]);
    await rl.close();
  });

  it('a tenant bucket refuses at its burst while another tenant is still admitted (global bucket larger)', async () => {
    // Admission's order: the global bucket, then the tenant's (src/ingest/admission.ts).
    const admit = (rl: RateLimiter, tenant: string, now: number) => {
      const g = rl.takeGlobal(now);
      return g > 0 ? { by: 'global', wait: g } : { by: 'tenant', wait: rl.takeTenant(tenant, now) };
    };
    const rl = new RateLimiter({
      ratePerSec: 0.01,
      burst: 3,
      globalRatePerSec: 1000,
      globalBurst: 1000,
      maxTenantBuckets: 8,
      nowMicros: T0,
    });
    expect(takes(3, () => admit(rl, 'a', T0).wait)).toEqual([0, 0, 0]);
    expect(admit(rl, 'a', T0)).toEqual({ by: 'tenant', wait: 100 }); // A's own bucket refuses: one token per 100 s
    expect(takes(3, () => admit(rl, 'b', T0).wait)).toEqual([0, 0, 0]); // B still gets its 3
    expect(admit(rl, 'b', T0)).toEqual({ by: 'tenant', wait: 100 });
    expect(rl.globalTable?.tokens(0, T0)).toBe(1000 - 8); // every request spent a global token
    expect(admit(rl, 'a', T0 + 50 * SEC)).toEqual({ by: 'tenant', wait: 50 });
    await rl.close();

    // With one rate and one burst for both, the global bucket refuses first: B gets nothing.
    const same = new RateLimiter({ ratePerSec: 0.01, burst: 3, globalRatePerSec: 0.01, globalBurst: 3, maxTenantBuckets: 8, nowMicros: T0 });
    expect(takes(3, () => admit(same, 'a', T0).wait)).toEqual([0, 0, 0]);
    expect(admit(same, 'a', T0)).toEqual({ by: 'global', wait: 100 });
    expect(admit(same, 'b', T0)).toEqual({ by: 'global', wait: 100 });
    await same.close();
  });

  it('a stream of novel tenant names cannot grow the tenant buckets past the bound', async () => {
    const max = 100;
    const rl = new RateLimiter({ ratePerSec: 1000, burst: 10, maxTenantBuckets: max, nowMicros: T0 });
    // One novel name per millisecond: each earlier bucket is full again (idle) and is reused.
    let admitted = 0;
    for (let i = 0; i < 100_000; i++) if (rl.takeTenant(`novel-${i}`, T0 + i * 1000) === 0) admitted++;
    expect(admitted).toBe(100_000);
    expect(rl.tenantBuckets).toBe(max);
    // All at one instant: once every bucket is busy, novel names share one overflow bucket.
    const now = T0 + 200 * SEC;
    admitted = 0;
    for (let i = 0; i < 10_000; i++) if (rl.takeTenant(`burst-${i}`, now) === 0) admitted++;
    expect(rl.tenantBuckets).toBe(max);
    expect(admitted).toBe(max + 10); // a fresh bucket for each of `max` names, then the overflow's burst
    await rl.close();
  });

  it('evicts only an idle bucket, so an evicted tenant sees exactly what it would have seen', async () => {
    const rl = new RateLimiter({ ratePerSec: 1, burst: 3, maxTenantBuckets: 2, nowMicros: T0 });
    expect(takes(4, () => rl.takeTenant('a', T0))).toEqual([0, 0, 0, 1]);
    expect(rl.takeTenant('b', T0)).toBe(0);
    const later = T0 + 3 * SEC; // a's bucket and b's are full again
    expect(rl.takeTenant('c', later)).toBe(0); // takes a's slot (least recently used, idle)
    expect(rl.tenantBuckets).toBe(2);
    // a comes back with a fresh bucket: three tokens, as a full bucket of its own would give.
    expect(takes(4, () => rl.takeTenant('a', later))).toEqual([0, 0, 0, 1]);
    expect(rl.tenantBuckets).toBe(2);
    await rl.close();
  });

  it('never evicts a busy bucket: a novel tenant spends the overflow bucket instead', async () => {
    const rl = new RateLimiter({ ratePerSec: 1, burst: 3, maxTenantBuckets: 1, nowMicros: T0 });
    expect(takes(3, () => rl.takeTenant('a', T0))).toEqual([0, 0, 0]);
    const now = T0 + SEC; // a has one token back, its bucket is not full
    expect(takes(4, () => rl.takeTenant('b', now))).toEqual([0, 0, 0, 1]); // the overflow bucket's burst
    expect(takes(2, () => rl.takeTenant('a', now))).toEqual([0, 1]); // a's state survived
    await rl.close();
  });

  it('sweep() keeps idle tenant buckets correct across many 32-bit wraps', async () => {
    const rl = new RateLimiter({ ratePerSec: 1, burst: 2, globalRatePerSec: 1, globalBurst: 2, maxTenantBuckets: 2, nowMicros: T0 });
    expect(takes(3, () => rl.takeTenant('a', T0))).toEqual([0, 0, 1]);
    const period = (rl.table?.sweepIntervalMs ?? 0) * 1000;
    expect(period).toBeGreaterThan(0);
    let now = T0;
    for (; now < T0 + 10 * 2 ** 32; now += period) rl.sweep(now);
    expect(takes(3, () => rl.takeTenant('a', now))).toEqual([0, 0, 1]);
    expect(takes(3, () => rl.takeGlobal(now))).toEqual([0, 0, 1]);
    await rl.close();
  });

  it('sweeps at the shorter interval of the two tables, keeping both correct across wraps', async () => {
    const rl = new RateLimiter({ ratePerSec: 1, burst: 2, globalRatePerSec: 600_000, globalBurst: 6, maxTenantBuckets: 2, nowMicros: T0 });
    const global = rl.globalTable!.sweepIntervalMs;
    expect(global).toBeLessThan(rl.table!.sweepIntervalMs);
    expect(rl.sweepIntervalMs).toBe(global);
    expect(takes(3, () => rl.takeTenant('a', T0))).toEqual([0, 0, 1]);
    expect(takes(7, () => rl.takeGlobal(T0))).toEqual([0, 0, 0, 0, 0, 0, 1]);
    const period = rl.sweepIntervalMs * 1000;
    let now = T0;
    for (; now < T0 + 3 * 2 ** 32; now += period) rl.sweep(now);
    expect(takes(3, () => rl.takeTenant('a', now))).toEqual([0, 0, 1]);
    expect(takes(7, () => rl.takeGlobal(now))).toEqual([0, 0, 0, 0, 0, 0, 1]);
    await rl.close();
  });

  it('works on its own clock', async () => {
    const rl = new RateLimiter({ ratePerSec: 50, burst: 2, maxTenantBuckets: 2 });
    expect(takes(3, () => rl.takeTenant('a'))).toEqual([0, 0, 1]);
    await new Promise((r) => setTimeout(r, 60));
    expect(rl.takeTenant('a')).toBe(0);
    await rl.close();
  });

  it('refuses bad options with a coded error', () => {
    const bad = (fn: () => unknown, param: string) => {
      expect(fn).toThrow(LimitsError);
      try {
        fn();
      } catch (err) {
        expect((err as LimitsError).code).toBe('SIGLAKE_LIMITS_BAD_PARAM');
        expect((err as LimitsError).param).toBe(param);
      }
    };
    bad(() => new RateLimiter({ ratePerSec: -1, maxTenantBuckets: 1 }), 'ratePerSec');
    bad(() => new RateLimiter({ ratePerSec: Number.POSITIVE_INFINITY, maxTenantBuckets: 1 }), 'ratePerSec');
    bad(() => new RateLimiter({ ratePerSec: 10, burst: 0, maxTenantBuckets: 1 }), 'burst');
    bad(() => new RateLimiter({ ratePerSec: 10, maxTenantBuckets: 0 }), 'maxTenantBuckets');
    bad(() => new RateLimiter({ ratePerSec: 0, maxTenantBuckets: 1.5 }), 'maxTenantBuckets');
    bad(() => new RateLimiter({ ratePerSec: 10, globalRatePerSec: -1, maxTenantBuckets: 1 }), 'globalRatePerSec');
    bad(() => new RateLimiter({ ratePerSec: 10, globalRatePerSec: Number.NaN, maxTenantBuckets: 1 }), 'globalRatePerSec');
    bad(() => new RateLimiter({ ratePerSec: 0, globalRatePerSec: 5, maxTenantBuckets: 1 }), 'globalRatePerSec');
    bad(() => new RateLimiter({ ratePerSec: 10, globalRatePerSec: 2_000_000, maxTenantBuckets: 1 }), 'globalRatePerSec');
    bad(() => new RateLimiter({ ratePerSec: 10, globalRatePerSec: 10, globalBurst: 0, maxTenantBuckets: 1 }), 'globalBurst');
    bad(() => new RateLimiter({ ratePerSec: 10, globalRatePerSec: 1, globalBurst: 1074, maxTenantBuckets: 1 }), 'globalBurst');
  });
});

describe('TenantSlots', () => {
  it('frees a removed tenant\'s slot: forgotten, not counted, and the next novel tenant gets it, even with every slot taken and none idle', () => {
    const slots = new TenantSlots(3);
    const never = () => false;
    expect([slots.assign('a', never), slots.assign('b', never), slots.assign('c', never)]).toEqual([0, 1, 2]);
    expect(slots.assign('d', never)).toBe(-1); // full, none idle
    expect(slots.remove('b')).toBe(1);
    expect(slots.remove('b')).toBe(-1);
    expect(slots.size).toBe(2);
    expect(slots.peek('b')).toBe(-1);
    expect(slots.tenantAt(1)).toBeUndefined();
    expect(slots.assign('d', never)).toBe(1);
    expect(slots.lastEvicted).toBeUndefined();
    expect(slots.size).toBe(3);
    expect(slots.lookup('d')).toBe(1);
    // The LRU order survives the removal: the least recently used idle slot is still the one evicted.
    expect(slots.assign('e', (s) => s === 0)).toBe(0);
    expect(slots.lastEvicted).toBe('a');
  });
});
