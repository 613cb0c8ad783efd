// The in-process rate limiter: one global bucket and a bounded set of tenant
// buckets in one TokenBucketTable. Every take is synchronous, lock-free and, for
// a tenant already holding a bucket, allocation-free.

import type { RateBudget } from './rate-budget.js';
import { resolveRateOptions } from './rate-options.js';
import { TenantSlots } from './tenant-slots.js';
import { TokenBucketTable } from './token-bucket-table.js';

export interface RateLimiterOptions {
  /** Refill rate per bucket, requests/s. 0 turns the limiter off. */
  ratePerSec: number;
  /** Bucket size; defaults to ratePerSec rounded up (contract §2), at least 1. */
  burst?: number;
  /** How many tenant buckets are held at once (memory per bucket: 4 bytes of shared buffer, 8 of LRU links, one map entry). */
  maxTenantBuckets: number;
  /**
   * Start time (µs) for a caller that passes its own clock to every take (tests).
   * Such a caller also runs sweep() itself: the sweep timer runs only on the table's clock.
   */
  nowMicros?: number;
}

/** Table slot of the global bucket. */
const GLOBAL_SLOT = 0;
/** Table slot shared by novel tenants while every tenant bucket is busy. */
const OVERFLOW_SLOT = 1;
const FIRST_TENANT_SLOT = 2;

export class RateLimiter implements RateBudget {
  /** null while the limiter is off (ratePerSec 0). */
  readonly #table: TokenBucketTable | null = null;
  readonly #tenants: TenantSlots;
  readonly #isIdle: (slot: number) => boolean;
  #evictionClock: number | undefined = undefined;
  #timer: NodeJS.Timeout | undefined = undefined;

  constructor(options: RateLimiterOptions) {
    const { ratePerSec, burst } = resolveRateOptions(options.ratePerSec, options.burst);
    this.#tenants = new TenantSlots(options.maxTenantBuckets);
    this.#isIdle = (slot) => (this.#table as TokenBucketTable).isFull(FIRST_TENANT_SLOT + slot, this.#evictionClock);
    if (ratePerSec === 0) {
      this.#table = null;
      return;
    }
    const slots = FIRST_TENANT_SLOT + options.maxTenantBuckets;
    const table = new TokenBucketTable({ ratePerSec, burst, slots, nowMicros: options.nowMicros });
    this.#table = table;
    if (options.nowMicros !== undefined) return;
    this.#timer = setInterval(() => table.sweep(), table.sweepIntervalMs);
    this.#timer.unref();
  }

  get enabled(): boolean {
    return this.#table !== null;
  }

  /** The bucket table (null while off): its buffer can be shared with another thread. */
  get table(): TokenBucketTable | null {
    return this.#table;
  }

  /** Tenants holding a bucket now (≤ maxTenantBuckets). */
  get tenantBuckets(): number {
    return this.#tenants.size;
  }

  /** Spend a token of the global bucket: 0, or seconds for Retry-After. */
  takeGlobal(nowMicros?: number): number {
    if (this.#table === null) return 0;
    return this.#table.take(GLOBAL_SLOT, nowMicros);
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

  /** Keep idle buckets' words from wrapping; runs by itself every table.sweepIntervalMs. */
  sweep(nowMicros?: number): number {
    return this.#table === null ? 0 : this.#table.sweep(nowMicros);
  }

  /** Stop the sweep timer. Takes keep working. */
  async close(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
