// One token bucket per verified subject (`ingester.rateLimit.perPrincipalPerSec`),
// per replica on the SharedArrayBuffer bucket table (shared by every replica
// through Redis with `redis.url`: sharedPrincipalBuckets below), with the bounded LRU of tenant-slots.ts
// (an evicted bucket is idle, i.e. full, so eviction changes nothing). Split
// into slotOf / tokens / take so that admission can read the principal's
// bucket before it spends the tenant's and spend it after: a refusal by
// either spends nothing of the other.

import { RedisBudget } from '../limits/redis-budget.js';
import { TenantSlots } from '../limits/tenant-slots.js';
import { TokenBucketTable } from '../limits/token-bucket-table.js';

const OVERFLOW_SLOT = 0;
/** Principals whose bucket (or, shared, whose lease state) a replica holds at once. */
export const PRINCIPAL_BUCKETS = 65_536;

/**
 * With `redis.url`: the principals' buckets shared by every replica, on the
 * lease machinery of the tenant buckets (src/limits/redis-budget.ts, keys
 * `siglake:principal-rate:t:<sub>`, the same rate and burst as in-process),
 * with its fail-open rule: a Redis failure admits and calls onBackendError.
 * Without credit: over any Δ s the N replicas together admit at most
 * burst + rate·Δ + N·L of one principal (L = ceil(rate / 100), at most burst).
 */
export function sharedPrincipalBuckets(
  ratePerSec: number,
  o: { url: string; commandTimeoutMs: number; onBackendError: (err: Error) => void },
): RedisBudget {
  return new RedisBudget({
    url: o.url,
    ratePerSec,
    burst: Math.max(1, Math.ceil(ratePerSec)),
    maxTenantBuckets: PRINCIPAL_BUCKETS,
    commandTimeoutMs: o.commandTimeoutMs,
    keyPrefix: 'siglake:principal-rate:',
    onBackendError: o.onBackendError,
    // A principal's bucket is small (burst = its rate, often a handful): no
    // credit, so the request past the burst is refused on every replica, and
    // a replica's first request of a principal waits one Redis round trip.
    credit: false,
  });
}

export class PrincipalBuckets {
  readonly #slots: TenantSlots;
  readonly #table: TokenBucketTable;
  readonly #isIdle: (slot: number) => boolean;
  readonly #timer: NodeJS.Timeout;

  constructor(ratePerSec: number, capacity = PRINCIPAL_BUCKETS) {
    this.#slots = new TenantSlots(capacity);
    this.#table = new TokenBucketTable({ ratePerSec, burst: Math.max(1, Math.ceil(ratePerSec)), slots: 1 + capacity });
    this.#isIdle = (slot) => this.#table.isFull(1 + slot);
    const table = this.#table;
    this.#timer = setInterval(() => table.sweep(), table.sweepIntervalMs);
    this.#timer.unref();
  }

  /** The table slot of `sub`'s bucket (a fresh one for a new subject; the shared overflow bucket when every slot is busy). */
  slotOf(sub: string): number {
    let slot = this.#slots.lookup(sub);
    if (slot >= 0) return 1 + slot;
    slot = this.#slots.assign(sub, this.#isIdle);
    if (slot < 0) return OVERFLOW_SLOT;
    this.#table.reset(1 + slot);
    return 1 + slot;
  }

  /** 0 when a token is there (nothing spent), else seconds for Retry-After. */
  peek(slot: number): number {
    return this.#table.tokens(slot) >= 1 ? 0 : Math.max(1, this.#table.take(slot));
  }

  take(slot: number): number {
    return this.#table.take(slot);
  }

  close(): void {
    clearInterval(this.#timer);
  }
}
