// Budgets (declared-tenants.md §3): how much a scope may write per UTC day or
// month, in records and/or bytes. Charged narrowest first (index, tenant,
// server) and only for a body the worker accepted; a request that any of them
// refuses is charged nothing (a refusal writes nothing, so nothing wider
// burns on its way to the refusal). In-process: each replica holds its own
// counters, so N replicas together grant up to N times a budget.
//
// The check happens at admission (an exhausted budget refuses once the worker
// found the body valid: contract §4 step 11, then 12) and the charge when the
// body was written, so requests in flight when a budget runs out may overrun
// it by what they carry (at most the in-flight requests of that scope).

import type { BudgetDecl, BudgetPeriod } from './tenants-file.js';

/** The first instant (ms since the epoch) of the UTC period after the one holding `nowMs`. */
export function periodEnd(period: BudgetPeriod, nowMs: number): number {
  const d = new Date(nowMs);
  return period === 'day'
    ? Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1)
    : Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

/** The first instant (ms since the epoch) of the UTC period holding `nowMs`. */
export function periodStart(period: BudgetPeriod, nowMs: number): number {
  const d = new Date(nowMs);
  return period === 'day'
    ? Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate())
    : Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
}

export class Budget {
  readonly decl: BudgetDecl;
  readonly #recordsLimit: number;
  readonly #bytesLimit: number;
  #start = 0;
  #end = 0;
  /** What every replica had charged at the last sync (0 in-process). */
  sharedRecords = 0;
  sharedBytes = 0;
  /** Charged here and not yet pushed to the shared counter (everything, in-process). */
  pendingRecords = 0;
  pendingBytes = 0;
  /** Checked or charged since the last sync (only those are pushed). */
  touched = false;
  /**
   * [shared] Rounds since this replica last read the shared total (-1 before
   * its first read, which the next sync does): an idle scope is read again
   * every few rounds, so its view and siglake_tenant_budget_remaining follow
   * the other replicas.
   */
  idleRounds = -1;
  /**
   * [shared] A push to the shared counter not yet confirmed (its reply timed
   * out or failed): sent again, the same one, until Redis confirms it, which
   * applies it once (shared-budgets.ts). Null when none.
   */
  inflight: { readonly seq: number; readonly records: number; readonly bytes: number } | null = null;
  /** [shared] What this replica's confirmed pushes added this period: the floor of the shared total (a Redis that lost its data). */
  ownRecords = 0;
  ownBytes = 0;
  /**
   * [shared] What the shared total lost this period (a Redis that lost its data
   * answered a total below this replica's view): added to every total read
   * afterwards, so that the view only grows within a period.
   */
  lostRecords = 0;
  lostBytes = 0;

  constructor(decl: BudgetDecl, nowMs = Date.now()) {
    this.decl = decl;
    this.#recordsLimit = decl.records ?? Infinity;
    this.#bytesLimit = decl.bytes ?? Infinity;
    this.#start = periodStart(decl.period, nowMs);
    this.#end = periodEnd(decl.period, nowMs);
  }

  get usedRecords(): number {
    return this.sharedRecords + this.pendingRecords;
  }

  get usedBytes(): number {
    return this.sharedBytes + this.pendingBytes;
  }

  /** The end (ms) of the period now counted; the shared counter's key names it. */
  get periodEndMs(): number {
    return this.#end;
  }

  /** Keeps the counters of `prev` when it counts the same period (a reload that kept the tenant). */
  adopt(prev: Budget, nowMs = Date.now()): void {
    prev.roll(nowMs);
    if (prev.decl.period !== this.decl.period) return;
    this.sharedRecords = prev.sharedRecords;
    this.sharedBytes = prev.sharedBytes;
    this.pendingRecords = prev.pendingRecords;
    this.pendingBytes = prev.pendingBytes;
    this.inflight = prev.inflight;
    this.ownRecords = prev.ownRecords;
    this.ownBytes = prev.ownBytes;
    this.lostRecords = prev.lostRecords;
    this.lostBytes = prev.lostBytes;
    this.idleRounds = prev.idleRounds;
    // Whatever prev had not pushed yet is this budget's to push now.
    prev.pendingRecords = 0;
    prev.pendingBytes = 0;
    prev.inflight = null;
    this.#start = prev.#start;
    this.#end = prev.#end;
  }

  /**
   * Starts counting the period holding `nowMs` when it is not the current one;
   * returns whether it did. Mostly the next period; an earlier one only when
   * the clock went back across a period's start (with Redis, a replica whose
   * own clock is ahead counts by Redis' clock once it has read it).
   */
  roll(nowMs: number): boolean {
    if (nowMs < this.#end && nowMs >= this.#start) return false;
    this.sharedRecords = 0;
    this.sharedBytes = 0;
    this.pendingRecords = 0;
    this.pendingBytes = 0;
    this.inflight = null;
    this.ownRecords = 0;
    this.ownBytes = 0;
    this.lostRecords = 0;
    this.lostBytes = 0;
    this.#start = periodStart(this.decl.period, nowMs);
    this.#end = periodEnd(this.decl.period, nowMs);
    return true;
  }

  /** 0 while there is budget left, else whole seconds until the period ends (≥ 1). */
  exhausted(nowMs = Date.now()): number {
    this.roll(nowMs);
    this.touched = true;
    if (this.usedRecords < this.#recordsLimit && this.usedBytes < this.#bytesLimit) return 0;
    return Math.max(1, Math.ceil((this.#end - nowMs) / 1000));
  }

  charge(records: number, bytes: number, nowMs = Date.now()): void {
    this.roll(nowMs);
    this.touched = true;
    this.pendingRecords += records;
    this.pendingBytes += bytes;
  }

  /** What is left in `unit` (Infinity when the unit is not limited). */
  remaining(unit: 'records' | 'bytes', nowMs = Date.now()): number {
    this.roll(nowMs);
    return unit === 'records' ? Math.max(0, this.#recordsLimit - this.usedRecords) : Math.max(0, this.#bytesLimit - this.usedBytes);
  }
}

/**
 * The clock that picks a budget's period: the local clock, never going back,
 * or (with Redis, shared-budgets.ts) Redis' clock, so that every replica
 * charges the same period's counter and tells the same Retry-After at a
 * period's end whatever its own clock says. Its first reading of Redis' clock
 * may step it back (a replica whose clock is ahead); later ones never do, so
 * a reading's jitter at a period's end cannot switch back to the period before.
 */
export class PeriodClock {
  #offsetMs = 0;
  #lastMs = 0;
  #synced = false;

  /** ms since the epoch: the local clock plus the last offset read, never less than a time already returned. */
  now(): number {
    const t = Date.now() + this.#offsetMs;
    if (t > this.#lastMs) this.#lastMs = t;
    return this.#lastMs;
  }

  /** Whether Redis' clock was read (until then, the local one). */
  get synced(): boolean {
    return this.#synced;
  }

  /** The local clock's offset from Redis' (ms; positive: the local clock is behind). */
  get offsetMs(): number {
    return this.#offsetMs;
  }

  /** Redis' TIME (`refMs`) read between the local `sentMs` and `receivedMs`: taken at the midpoint. */
  read(refMs: number, sentMs: number, receivedMs: number): void {
    if (!Number.isFinite(refMs)) return;
    this.#offsetMs = refMs - (sentMs + receivedMs) / 2;
    if (!this.#synced) {
      this.#synced = true;
      this.#lastMs = 0;
    }
  }
}
