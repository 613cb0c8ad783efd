// Budgets shared by every replica through Redis (declared-tenants.md §3, when
// `redis.url` is set). Each replica charges locally and, every syncMs, pushes
// what it charged since the last sync on one counter per scope and period
// (`siglake:budget:<scope>:<period end>:{records,bytes}`, expiring a day after
// the period) and reads back the total every replica charged. So a replica
// sees the others' spending at most syncMs late: together the replicas may
// overrun a budget by what they admit in that window.
//
// A push is applied once. Its reply may time out while Redis still runs it
// (a Redis that stalls, or a slow network): it is then sent again, the same
// push with the same sequence number, until a reply confirms it, and the
// script applies a push only when its number is above the last one this
// replica's pushes applied to that counter (a hash field per replica). New
// charges wait, pending, until it is confirmed. (Before, a timed-out push was
// merged into the next one and both ran: a one-second stall charged a budget
// several times over, and every replica then refused the tenant all day.)
//
// A scope this replica has pushed for and no longer charges is read again
// every IDLE_REFRESH_ROUNDS rounds (2 s by default; the push script with
// nothing to add): its view, and siglake_tenant_budget_remaining, follow what
// the other replicas spend even while no request for it comes here. (Before,
// an idle replica kept the total of its last push until its next request.)
//
// Fail-open, as the rate buckets: a Redis failure counts
// siglake_rate_budget_backend_errors_total and the replica goes on enforcing
// what it knows (its own charges and the last total it read). A Redis that
// lost its data (a restart without persistence, FLUSHALL) starts the shared
// total again from what the replicas push next; each replica keeps counting
// at least what its own confirmed pushes added this period.

import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import type { Budget } from './budgets.js';

/**
 * KEYS: the records and bytes counters, the hash of the last push applied per
 * replica. ARGV: records, bytes, expire-at (s), replica, sequence number.
 * Applies the push unless this replica's pushes already reached its number;
 * returns both totals.
 */
const PUSH_SCRIPT = `
local last = tonumber(redis.call('HGET', KEYS[3], ARGV[4]) or '0')
if tonumber(ARGV[5]) > last then
  redis.call('INCRBY', KEYS[1], ARGV[1])
  redis.call('INCRBY', KEYS[2], ARGV[2])
  redis.call('HSET', KEYS[3], ARGV[4], ARGV[5])
  redis.call('EXPIREAT', KEYS[1], ARGV[3])
  redis.call('EXPIREAT', KEYS[2], ARGV[3])
  redis.call('EXPIREAT', KEYS[3], ARGV[3])
end
return {tonumber(redis.call('GET', KEYS[1]) or '0'), tonumber(redis.call('GET', KEYS[2]) or '0')}
`;

/** How many sync rounds an idle scope's shared total may age before it is read again. */
export const IDLE_REFRESH_ROUNDS = 10;

interface PushPipeline {
  siglakeBudgetPush(records: string, bytes: string, pushed: string, r: number, y: number, expireAt: number, replica: string, seq: number): PushPipeline;
  exec(): Promise<[Error | null, unknown][] | null>;
}

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
  /** This replica among those pushing to the same counters (a fresh one per process). */
  readonly #replica = randomUUID();
  #seq = 0;

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
    // EVALSHA, falling back to EVAL after a Redis restart forgot the script.
    this.#client.defineCommand('siglakeBudgetPush', { numberOfKeys: 3, lua: PUSH_SCRIPT });
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
    const work: { b: Budget; end: number; push: NonNullable<Budget['inflight']>; key: string }[] = [];
    for (const [scope, b] of this.#o.budgets()) {
      b.roll(now);
      let push = b.inflight;
      if (push === null && !b.touched && b.pendingRecords === 0 && b.pendingBytes === 0) {
        // Idle here: only read the total again, now and then (sequence 0 applies nothing).
        if (b.idleRounds < 0 || ++b.idleRounds < IDLE_REFRESH_ROUNDS) continue;
        b.idleRounds = 0;
        work.push({ b, end: b.periodEndMs, push: { seq: 0, records: 0, bytes: 0 }, key: `${this.#prefix}${scope}:${b.periodEndMs}` });
        continue;
      }
      if (push === null) {
        push = { seq: ++this.#seq, records: b.pendingRecords, bytes: b.pendingBytes };
        // Counted as shared at once, so the local view never dips while the push is in flight.
        b.sharedRecords += push.records;
        b.sharedBytes += push.bytes;
        b.pendingRecords = 0;
        b.pendingBytes = 0;
        b.inflight = push;
      }
      b.touched = false;
      b.idleRounds = 0;
      work.push({ b, end: b.periodEndMs, push, key: `${this.#prefix}${scope}:${b.periodEndMs}` });
    }
    if (work.length === 0) return;
    const p = this.#client.pipeline() as unknown as PushPipeline;
    for (const w of work) {
      const expireAt = Math.ceil(w.end / 1000) + 86_400;
      p.siglakeBudgetPush(`${w.key}:records`, `${w.key}:bytes`, `${w.key}:pushed`, w.push.records, w.push.bytes, expireAt, this.#replica, w.push.seq);
    }
    let replies: [Error | null, unknown][] | null;
    try {
      replies = await p.exec();
      if (replies === null) throw new Error('Redis pipeline aborted');
    } catch (e) {
      // Each push stays in flight, to be sent again as it is: Redis may have run it.
      this.#o.onBackendError(e instanceof Error ? e : new Error(String(e)));
      return;
    }
    for (let i = 0; i < work.length; i++) {
      const w = work[i]!;
      const [err, reply] = replies[i]!;
      const totals = Array.isArray(reply) ? (reply as unknown[]).map(Number) : [];
      if (err !== null || totals.length !== 2 || !totals.every(Number.isFinite)) {
        this.#o.onBackendError(err ?? new Error('unexpected reply from Redis'));
        continue;
      }
      if (w.b.periodEndMs !== w.end) continue; // rolled over meanwhile
      if (w.push.seq === 0) {
        // A read: taken unless a push of this replica is unconfirmed (its total would count it twice).
        if (w.b.inflight !== null) continue;
      } else {
        if (w.b.inflight !== w.push) continue; // adopted and sent by another budget meanwhile
        w.b.inflight = null;
        w.b.ownRecords += w.push.records;
        w.b.ownBytes += w.push.bytes;
      }
      // The total includes the push; anything charged since is still pending. Never below what
      // this replica itself added (a Redis that lost its data).
      w.b.sharedRecords = Math.max(totals[0]!, w.b.ownRecords);
      w.b.sharedBytes = Math.max(totals[1]!, w.b.ownBytes);
    }
  }

  async close(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    await this.#running;
    await this.sync().catch(() => undefined);
    this.#client.disconnect();
  }
}
