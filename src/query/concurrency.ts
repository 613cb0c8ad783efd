// query.maxConcurrentPerTenant: queries one tenant runs at once on this
// server. A tenant at its limit gets 429 + Retry-After: 1; other tenants are
// not affected.

import { QueryError } from './query-error.js';

export class TenantSlots {
  readonly #max: number;
  readonly #running = new Map<string, number>();
  readonly #full: QueryError;

  constructor(max: number) {
    this.#max = max;
    this.#full = new QueryError('SIGLAKE_QUERY_CONCURRENCY', `too many concurrent queries for this tenant (query.maxConcurrentPerTenant = ${max})`, {
      retryAfterSecs: 1,
    });
  }

  /** Takes a slot or throws the 429; the returned function gives it back (once). */
  acquire(tenant: string): () => void {
    const n = this.#running.get(tenant) ?? 0;
    if (n >= this.#max) throw this.#full;
    this.#running.set(tenant, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const m = (this.#running.get(tenant) ?? 1) - 1;
      if (m <= 0) this.#running.delete(tenant);
      else this.#running.set(tenant, m);
    };
  }

  /** Queries running now, all tenants together. */
  get total(): number {
    let t = 0;
    for (const n of this.#running.values()) t += n;
    return t;
  }
}
