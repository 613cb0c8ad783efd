// The in-process rate limiter: one global bucket in a TokenBucketTable of its
// own (its own rate and burst) and a bounded set of tenant buckets in another.
// Every take is synchronous, lock-free and, for a tenant already holding a
// bucket, allocation-free.

import { LimitsError } from './limits-error.js';
import type { RateBudget } from './rate-budget.js';
import { resolveGlobalRateOptions, resolveRateOptions } from './rate-options.js';
import { TenantSlots } from './tenant-slots.js';
import { TokenBucketTable } from './token-bucket-table.js';

export interface RateLimiterOptions {
  /** Refill rate of each tenant bucket, requests/s. 0 turns the limiter off. */
  ratePerSec: number;
  /** Tenant bucket size; defaults to ratePerSec rounded up (contract §2), at least 1. */
  burst?: number;
  /** Refill rate of the global bucket, requests/s; 0 (the default) means no global bucket. */
  globalRatePerSec?: number;
  /** Global bucket size; defaults to the global rate rounded up, at least 1. */
  globalBurst?: number;
  /** How many tenant buckets are held at once (memory per bucket: 4 bytes of shared buffer, 8 of LRU links, one map entry). */
  maxTenantBuckets: number;
  /**
   * Start time (µs) for a caller that passes its own clock to every take (tests).
   * Such a caller also runs sweep() itself: the sweep timer runs only on the table's clock.
   */
  nowMicros?: number;
}

/** Slot of the global bucket in its own table. */
const GLOBAL_SLOT = 0;
/** Tenant table slot shared by novel tenants while every tenant bucket is busy. */
const OVERFLOW_SLOT = 0;
const FIRST_TENANT_SLOT = 1;

/** The global table, with a refused parameter named as the global option it came from. */
function globalTable(ratePerSec: number, burst: number, nowMicros: number | undefined): TokenBucketTable {
  try {
    return new TokenBucketTable({ ratePerSec, burst, slots: 1, nowMicros });
  } catch (e) {
    if (!(e instanceof LimitsError) || e.code !== 'SIGLAKE_LIMITS_BAD_PARAM') throw e;
    const param = e.param === 'ratePerSec' ? 'globalRatePerSec' : e.param === 'burst' ? 'globalBurst' : e.param;
    throw new LimitsError(e.code, `global bucket: ${e.message}`, param);
  }
}

export class RateLimiter implements RateBudget {
  /** null while the limiter is off (ratePerSec 0). */
  readonly #global: TokenBucketTable | null = null;
  /** The overflow and tenant buckets; null while off. */
  readonly #table: TokenBucketTable | null = null;
  readonly #tenants: TenantSlots;
  readonly #isIdle: (slot: number) => boolean;
  #evictionClock: number | undefined = undefined;
  #timer: NodeJS.Timeout | undefined = undefined;

  constructor(options: RateLimiterOptions) {
    const tenant = resolveRateOptions(options.ratePerSec, options.burst);
    const global = resolveGlobalRateOptions(tenant, options.globalRatePerSec, options.globalBurst);
    this.#tenants = new TenantSlots(options.maxTenantBuckets);
    this.#isIdle = (slot) => (this.#table as TokenBucketTable).isFull(FIRST_TENANT_SLOT + slot, this.#evictionClock);
    if (tenant.ratePerSec === 0) return;
    const slots = FIRST_TENANT_SLOT + options.maxTenantBuckets;
    const table = new TokenBucketTable({ ratePerSec: tenant.ratePerSec, burst: tenant.burst, slots, nowMicros: options.nowMicros });
    const gtable = global.ratePerSec > 0 ? globalTable(global.ratePerSec, global.burst, options.nowMicros) : null;
    this.#table = table;
    this.#global = gtable;
    if (options.nowMicros !== undefined) return;
    this.#timer = setInterval(() => {
      gtable?.sweep();
      table.sweep();
    }, this.sweepIntervalMs);
    this.#timer.unref();
  }

  get enabled(): boolean {
    return this.#table !== null;
  }

  /** The tenant bucket table (overflow and tenant buckets; null while off): its buffer can be shared with another thread. */
  get table(): TokenBucketTable | null {
    return this.#table;
  }

  /** The global bucket's table (one slot, slot 0; null while off or without a global rate): its buffer can be shared with another thread. */
  get globalTable(): TokenBucketTable | null {
    return this.#global;
  }

  /** How often sweep() must run: the shorter of the two tables' intervals (0 while off). */
  get sweepIntervalMs(): number {
    if (this.#table === null) return 0;
    if (this.#global === null) return this.#table.sweepIntervalMs;
    return Math.min(this.#table.sweepIntervalMs, this.#global.sweepIntervalMs);
  }

  /** Tenants holding a bucket now (≤ maxTenantBuckets). */
  get tenantBuckets(): number {
    return this.#tenants.size;
  }

  /** Spend a token of the global bucket: 0, or seconds for Retry-After. */
  takeGlobal(nowMicros?: number): number {
    if (this.#global === null) return 0;
    return this.#global.take(GLOBAL_SLOT, nowMicros);
  }

  /**
   * Spend a token of `tenant`'s bucket: 0, or seconds for Retry-After. A novel
   * tenant gets a fresh (full) bucket: a free one, or the bucket of a least
   * recently used tenant whose bucket is full again (idle), which is the same
   * thing. When none of those is idle it spends the shared overflow bucket.
   */
  takeTenant(tenant: string, nowMicros?: number): number {
    const table = this.#table;
    if (table === null) return 0;
    let slot = this.#tenants.lookup(tenant);
    if (slot < 0) {
      this.#evictionClock = nowMicros;
      slot = this.#tenants.assign(tenant, this.#isIdle);
      if (slot < 0) return table.take(OVERFLOW_SLOT, nowMicros);
      table.reset(FIRST_TENANT_SLOT + slot, nowMicros);
    }
    return table.take(FIRST_TENANT_SLOT + slot, nowMicros);
  }

  /** Keep idle buckets' words from wrapping; runs by itself every sweepIntervalMs. Returns the words rewritten. */
  sweep(nowMicros?: number): number {
    if (this.#table === null) return 0;
    return (this.#global?.sweep(nowMicros) ?? 0) + this.#table.sweep(nowMicros);
  }

  /** Stop the sweep timer. Takes keep working. */
  async close(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
