// Budgets shared by every replica through Redis (declared-tenants.md §3, when
// `redis.url` is set). Each replica charges locally and, every syncMs, pushes
// what it charged since the last sync with INCRBY on one counter per scope and
// period (`siglake:budget:<scope>:<period end>:{records,bytes}`, expiring a
// day after the period) and reads back the total every replica charged. So a
// replica sees the others' spending at most syncMs late: together the
// replicas may overrun a budget by what they admit in that window.
//
// Fail-open, as the rate buckets: a Redis failure counts
// siglake_rate_budget_backend_errors_total and the replica goes on enforcing
// what it knows (its own charges and the last total it read); what it could
// not push is pushed with the next sync.

import { Redis } from 'ioredis';
import type { Budget } from './budgets.js';

export interface BudgetSyncOptions {
  url: string;
  commandTimeoutMs: number;
  syncMs?: number;
  keyPrefix?: string;
  /** Every budget now in force, with its scope name (`s`, `t:<tenant>`, `i:<tenant>:<index>`). */
  budgets: () => Iterable<[string, Budget]>;
  onBackendError: (err: Error) => void;
}

export class BudgetSync {
  readonly #o: BudgetSyncOptions;
  readonly #client: Redis;
  readonly #prefix: string;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;

  constructor(o: BudgetSyncOptions) {
    this.#o = o;
    this.#prefix = o.keyPrefix ?? 'siglake:budget:';
    this.#client = new Redis(o.url, {
      commandTimeout: o.commandTimeoutMs,
      connectTimeout: Math.max(1000, o.commandTimeoutMs),
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      lazyConnect: false,
    });
    this.#client.on('error', () => undefined);
  }

  start(): void {
    this.#timer = setInterval(() => {
      if (this.#running === undefined) this.#running = this.sync().finally(() => (this.#running = undefined));
    }, this.#o.syncMs ?? 200);
    this.#timer.unref();
  }

  /** One round: push what each touched budget charged, read back the totals. */
  async sync(): Promise<void> {
    const now = Date.now();
    const work: { b: Budget; end: number; r: number; y: number; key: string }[] = [];
    for (const [scope, b] of this.#o.budgets()) {
      b.roll(now);
      if (!b.touched && b.pendingRecords === 0 && b.pendingBytes === 0) continue;
      b.touched = false;
      const r = b.pendingRecords;
      const y = b.pendingBytes;
      // Counted as shared at once, so the local view never dips while the push is in flight.
      b.sharedRecords += r;
      b.sharedBytes += y;
      b.pendingRecords = 0;
      b.pendingBytes = 0;
      work.push({ b, end: b.periodEndMs, r, y, key: `${this.#prefix}${scope}:${b.periodEndMs}` });
    }
    if (work.length === 0) return;
    const p = this.#client.pipeline();
    for (const w of work) {
      const expireAt = Math.ceil(w.end / 1000) + 86_400;
      p.incrby(`${w.key}:records`, w.r).expireat(`${w.key}:records`, expireAt);
      p.incrby(`${w.key}:bytes`, w.y).expireat(`${w.key}:bytes`, expireAt);
    }
    let replies: [Error | null, unknown][] | null;
    try {
      replies = await p.exec();
      if (replies === null) throw new Error('Redis pipeline aborted');
    } catch (e) {
      this.#giveBack(work);
      this.#o.onBackendError(e instanceof Error ? e : new Error(String(e)));
      return;
    }
    for (let i = 0; i < work.length; i++) {
      const w = work[i]!;
      const [er, rr] = replies[i * 4]!;
      const [eb, rb] = replies[i * 4 + 2]!;
      if (er !== null || eb !== null || typeof rr !== 'number' || typeof rb !== 'number') {
        this.#giveBack([w]);
        this.#o.onBackendError(er ?? eb ?? new Error('unexpected reply from Redis'));
        continue;
      }
      if (w.b.periodEndMs !== w.end) continue; // rolled over meanwhile
      // The total includes what was pushed; anything charged since is still pending.
      w.b.sharedRecords = rr;
      w.b.sharedBytes = rb;
    }
  }

  #giveBack(work: { b: Budget; end: number; r: number; y: number }[]): void {
    for (const w of work) {
      if (w.b.periodEndMs !== w.end) continue;
      w.b.sharedRecords -= w.r;
      w.b.sharedBytes -= w.y;
      w.b.pendingRecords += w.r;
      w.b.pendingBytes += w.y;
      w.b.touched = true;
    }
  }

  async close(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    await this.#running;
    await this.sync().catch(() => undefined);
    this.#client.disconnect();
  }
}
