// One token bucket per verified subject (`ingester.rateLimit.perPrincipalPerSec`),
// on the SharedArrayBuffer bucket table, with the bounded LRU of tenant-slots.ts
// (an evicted bucket is idle, i.e. full, so eviction changes nothing). Split
// into slotOf / tokens / take so that admission can read the principal's
// bucket before it spends the tenant's and spend it after: a refusal by
// either spends nothing of the other.

import { TenantSlots } from '../limits/tenant-slots.js';
import { TokenBucketTable } from '../limits/token-bucket-table.js';

const OVERFLOW_SLOT = 0;

export class PrincipalBuckets {
  readonly #slots: TenantSlots;
  readonly #table: TokenBucketTable;
  readonly #isIdle: (slot: number) => boolean;
  readonly #timer: NodeJS.Timeout;

  constructor(ratePerSec: number, capacity = 65_536) {
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
