// query.maxConcurrentPerTenant: the requests of one tenant this server works
// on at once: queries, table listings and index API calls together (each of
// them reads the catalog and the warehouse; the listing and the index API
// took no slot, so a tenant at its query limit could still keep the server
// busy with as many of them as it liked). A tenant at its limit gets 429 +
// Retry-After: 1; other tenants are not affected.
//
// A slot is held for as long as the work it was taken for goes on, not for as
// long as its caller waits: a request answered 504 while its tables are still
// being read keeps its slot until the read ends (holdUntil). Given back at the
// 504, a tenant could start any number of such reads by sending requests that
// time out, each one past its limit (as Mimir's and Loki's queriers, whose
// worker stays busy until the query's handler returns, however long the
// frontend waited).

import { QueryError } from './query-error.js';

/** One slot of a tenant. */
export interface Slot {
  /** Gives the slot back (once); ignored after holdUntil, whose work gives it back. */
  release(): void;
  /** The slot now belongs to `work`: it goes back when `work` settles, whatever release() says meanwhile. */
  holdUntil(work: Promise<unknown>): void;
}

export class TenantSlots {
  readonly #max: number;
  readonly #running = new Map<string, number>();
  readonly #full: QueryError;

  constructor(max: number) {
    this.#max = max;
    this.#full = new QueryError(
      'SIGLAKE_QUERY_CONCURRENCY',
      `too many concurrent requests for this tenant (query.maxConcurrentPerTenant = ${max}: queries, table listings and index API calls together)`,
      { retryAfterSecs: 1 },
    );
  }

  /** Takes a slot or throws the 429. */
  acquire(tenant: string): Slot {
    const n = this.#running.get(tenant) ?? 0;
    if (n >= this.#max) throw this.#full;
    this.#running.set(tenant, n + 1);
    let released = false;
    let held = false;
    const giveBack = (): void => {
      if (released) return;
      released = true;
      const m = (this.#running.get(tenant) ?? 1) - 1;
      if (m <= 0) this.#running.delete(tenant);
      else this.#running.set(tenant, m);
    };
    return {
      release: () => {
        if (!held) giveBack();
      },
      holdUntil: (work) => {
        if (released || held) return;
        held = true;
        work.then(giveBack, giveBack);
      },
    };
  }

  /** Slots held now, all tenants together (siglake_query_running). */
  get total(): number {
    let t = 0;
    for (const n of this.#running.values()) t += n;
    return t;
  }
}
