// What a reload took from a tenant (removed from the file, or stripped of its
// rateLimit, its budget or an index's budget, or a budget whose period it
// changed) and would hand back fresh if
// the tenant came back: remembered for exactly as long as it could matter
// (docs/tenants.md "Reload").
//
//   - A bucket: what it held at the removal, with its rate and burst, until
//     it would be full again (burst / rate seconds after the removal at
//     most); a fresh bucket is then the same thing. A tenant re-added
//     meanwhile starts from that level refilled for the time elapsed, at most
//     its new burst, as a tenant that stayed does. (The level, not the old
//     table: a table holds every bucket of its (rate, burst) group, and a
//     run of reloads would keep one per reload alive.)
//   - A budget that counted something: until its UTC period ends (a new
//     period starts from 0 anyway). A tenant re-added in the same period
//     takes its counters back. With Redis, what it charged and had not pushed
//     yet is pushed by the next sync round (DeclaredTenants yields it to
//     BudgetSync while it has something to push). A budget that counted
//     nothing yet: for IN_FLIGHT_GRACE_MS, the longest a request admitted
//     before the removal can still be stored and charged to it, then for its
//     period if such a request charged it. (It was not remembered at all: a
//     tenant's first requests, admitted before a reload removed it and stored
//     after, were charged to nothing, so it got them free, and with Redis
//     they were never pushed.)
//
// (Before, the reload dropped all of it: an operator who reverted a bad edit,
// or a half-written file read by one reload and whole by the next, gave every
// tenant past the cut a whole fresh burst and a fresh day's budget, and with
// Redis the charges of the last sync window before the removal were never
// pushed.)
//
// Bounded: entries past their windows are dropped by sweep() (each reload and
// a timer while any are held), and at most MAX_REMEMBERED tenants are held
// (the ones removed longest ago go first).

import type { TokenBucketTable } from '../limits/token-bucket-table.js';
import type { Budget } from './budgets.js';

/** Tenants remembered at most; past it, the one removed longest ago is forgotten. */
export const MAX_REMEMBERED = 100_000;

/**
 * How long a budget that counted nothing is remembered: longer than a request
 * admitted before the removal can take to be stored (its body within
 * server.requestTimeoutSecs, at most 3600 s, then its write).
 */
export const IN_FLIGHT_GRACE_MS = 3_900_000;

export interface RemovedTenant {
  /** Tokens the bucket held at `bucketAtMs` (NaN: no bucket remembered). */
  tokens: number;
  bucketAtMs: number;
  /** Its refill rate (tokens/s) and size. */
  ratePerSec: number;
  burst: number;
  /** Monotonic ms from which the bucket is full again whatever it held. */
  bucketUntilMs: number;
  budget: Budget | null;
  indexBudgets: Map<string, Budget> | null;
  /** Monotonic ms of the last removal that remembered a budget: one that counted nothing is forgotten IN_FLIGHT_GRACE_MS later. */
  budgetsAtMs: number;
}

/** A budget that counted nothing (looked at by requests, perhaps, but charged nothing) is a fresh one, once no request admitted before its removal can still charge it. */
function counted(b: Budget): boolean {
  return b.usedRecords > 0 || b.usedBytes > 0 || b.inflight !== null;
}

/** A budget with something this replica has not pushed to the shared counter yet (with Redis). */
function unpushed(b: Budget): boolean {
  return b.inflight !== null || b.pendingRecords > 0 || b.pendingBytes > 0 || b.touched;
}

export class RemovedTenants {
  readonly #m = new Map<string, RemovedTenant>();

  /** Tenants remembered now. */
  get size(): number {
    return this.#m.size;
  }

  /** What `id` left (for a request still in flight to it), or undefined. */
  get(id: string): RemovedTenant | undefined {
    return this.#m.get(id);
  }

  #entry(id: string): RemovedTenant {
    let e = this.#m.get(id);
    if (e === undefined) {
      if (this.#m.size >= MAX_REMEMBERED) this.#m.delete(this.#m.keys().next().value as string);
      e = { tokens: NaN, bucketAtMs: 0, ratePerSec: 0, burst: 0, bucketUntilMs: 0, budget: null, indexBudgets: null, budgetsAtMs: 0 };
      this.#m.set(id, e);
    }
    return e;
  }

  /** Remembers what bucket `slot` of `table` holds, left by `id` at `nowMs` (monotonic), unless it is full. */
  rememberBucket(id: string, table: TokenBucketTable, slot: number, nowMs: number): void {
    if (table.isFull(slot)) return;
    const e = this.#entry(id);
    e.tokens = table.tokens(slot);
    e.bucketAtMs = nowMs;
    e.ratePerSec = table.ratePerSec;
    e.burst = table.burst;
    e.bucketUntilMs = nowMs + (table.burst / table.ratePerSec) * 1000;
  }

  /** Remembers the tenant budget `id` left at `nowMs` (monotonic); one that counted nothing only for IN_FLIGHT_GRACE_MS. */
  rememberBudget(id: string, b: Budget, nowMs: number): void {
    const e = this.#entry(id);
    e.budget = b;
    e.budgetsAtMs = nowMs;
  }

  /** Remembers the budget of `id`'s index `name` left at `nowMs` (monotonic); one that counted nothing only for IN_FLIGHT_GRACE_MS. */
  rememberIndexBudget(id: string, name: string, b: Budget, nowMs: number): void {
    const e = this.#entry(id);
    (e.indexBudgets ??= new Map()).set(name, b);
    e.budgetsAtMs = nowMs;
  }

  /**
   * What the bucket `id` left holds at `nowMs` (monotonic: its level refilled
   * since, at most its burst), while it is not full again; forgotten once taken.
   */
  takeBucket(id: string, nowMs: number): number | undefined {
    const e = this.#m.get(id);
    if (e === undefined || Number.isNaN(e.tokens)) return undefined;
    const live = nowMs < e.bucketUntilMs;
    const tokens = Math.min(e.burst, e.tokens + (Math.max(0, nowMs - e.bucketAtMs) / 1000) * e.ratePerSec);
    e.tokens = NaN;
    this.#dropIfEmpty(id, e);
    return live ? tokens : undefined;
  }

  /** The tenant budget of `period` that `id` left; forgotten once taken (Budget.adopt decides whether it still counts). */
  takeBudget(id: string, period: Budget['decl']['period']): Budget | undefined {
    const e = this.#m.get(id);
    if (e === undefined || e.budget === null || e.budget.decl.period !== period) return undefined;
    const b = e.budget;
    e.budget = null;
    this.#dropIfEmpty(id, e);
    return b;
  }

  /** The budget of `period` of `id`'s index `name` it left; forgotten once taken. */
  takeIndexBudget(id: string, name: string, period: Budget['decl']['period']): Budget | undefined {
    const e = this.#m.get(id);
    const b = e?.indexBudgets?.get(name);
    if (e === undefined || b === undefined || b.decl.period !== period) return undefined;
    e.indexBudgets!.delete(name);
    this.#dropIfEmpty(id, e);
    return b;
  }

  /** [shared] The remembered budgets with something to push, with their scope names (as DeclaredTenants names them). */
  *unpushed(): Iterable<[string, Budget]> {
    for (const [id, e] of this.#m) {
      if (e.budget !== null && unpushed(e.budget)) yield [`t:${id}`, e.budget];
      if (e.indexBudgets !== null) for (const [name, b] of e.indexBudgets) if (unpushed(b)) yield [`i:${id}:${name}`, b];
    }
  }

  /**
   * Forgets what no longer matters: buckets full again at `nowMs`
   * (monotonic), budgets whose period ended by `periodNowMs` (the budgets'
   * clock), budgets that counted nothing IN_FLIGHT_GRACE_MS after their
   * removal. Returns how many tenants it forgot.
   */
  sweep(nowMs: number, periodNowMs: number): number {
    let forgotten = 0;
    for (const [id, e] of this.#m) {
      if (!Number.isNaN(e.tokens) && nowMs >= e.bucketUntilMs) e.tokens = NaN;
      const settled = nowMs >= e.budgetsAtMs + IN_FLIGHT_GRACE_MS;
      if (e.budget !== null && (e.budget.periodEndMs <= periodNowMs || (settled && !counted(e.budget)))) e.budget = null;
      if (e.indexBudgets !== null) {
        for (const [name, b] of e.indexBudgets) if (b.periodEndMs <= periodNowMs || (settled && !counted(b))) e.indexBudgets.delete(name);
      }
      if (this.#dropIfEmpty(id, e)) forgotten++;
    }
    return forgotten;
  }

  #dropIfEmpty(id: string, e: RemovedTenant): boolean {
    if (!Number.isNaN(e.tokens) || e.budget !== null || (e.indexBudgets !== null && e.indexBudgets.size > 0)) return false;
    this.#m.delete(id);
    return true;
  }
}
