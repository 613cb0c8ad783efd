// Budgets shared by every replica through Redis (declared-tenants.md §3, when
// `redis.url` is set). Each replica charges locally and, every syncMs, pushes
// what it charged since the last sync on one counter per scope and period
// (`siglake:budget:<scope>:<period end>:{records,bytes}`, or
// `siglake:budget:<scope>:day:<period end>:…` for a day that ends a month:
// budgetKey(); expiring a day after the period) and reads back the total
// every replica charged. So a replica
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
// A scope this replica does not charge is read again every
// IDLE_REFRESH_ROUNDS rounds (2 s by default; the push script with nothing to
// add): its view, and siglake_tenant_budget_remaining, follow what the other
// replicas spend even while no request for it comes here. A scope never read
// yet (every scope at start, a scope a reload adds) is read at the next round,
// so a fresh replica (a restart, a scale-out) knows what the others spent
// before its first request. (Before, an idle replica kept the total of its
// last push until its next request, and one that had never pushed for a
// scope counted it from 0: it admitted a whole sync window past an exhausted
// budget, and its gauge showed the budget full.)
//
// A round is sent in batches of at most SYNC_BATCH scripts, one after the
// other, each command with at least SYNC_TIMEOUT_MIN_MS. (Before, every scope
// went in one pipeline under the request-path timeout: with ~10,000 scopes
// thousands of commands timed out each round against a healthy Redis, and no
// replica saw the others' spending.) A failed batch counts one backend error
// and ends the round; what it carried is sent again next round.
//
// The period (a counter's key, a refusal's Retry-After) is Redis' clock's:
// every batch reads TIME with its scripts, and the replica counts by its own
// clock plus the offset read (PeriodClock), read first at connection. (Before,
// each replica's own clock chose the period: near its end two replicas a
// second apart charged different days' counters, the tenant got the next
// day's budget early on the one ahead, and the one behind refused with a
// Retry-After past the real end.)
//
// Fail-open, as the rate buckets: a Redis failure counts
// siglake_rate_budget_backend_errors_total and the replica goes on enforcing
// what it knows (its own charges and the last total it read). Within a period
// a replica's view of a shared total only grows: a Redis that lost its data
// (a restart without persistence, FLUSHALL) answers a total below the view,
// and the replica keeps the difference (Budget.lostRecords/lostBytes) on top
// of every total it reads afterwards, so it still counts what was spent
// before the loss and sees what the others spend after it. (Before, it fell
// back to what its own pushes added: each replica then admitted up to its
// share again, and the cluster could spend twice a budget.)

import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { PeriodClock, type Budget } from './budgets.js';
import type { BudgetPeriod } from './tenants-file.js';

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

/**
 * The name of the shared counters (`:records`, `:bytes`, `:pushed` appended) of
 * the budget of `scope` counting the `period` that ends at `endMs`. A month's,
 * and a day's that ends mid-month, name the period's end alone, as they always
 * did: every replica (one started before this name changed included) keeps
 * counting the same counter across a restart, an upgrade or a reload. A day
 * that ends a month (its last day) ends with that month, so its name says
 * `day`. (Before, both were `<scope>:<end>`: a budget whose period a reload or
 * a rollout changed between day and month on a month's last day counted the
 * other's charges as its own: a tenant moved to a day budget that day was
 * refused at once for what it had spent all month.)
 */
export function budgetKey(scope: string, period: BudgetPeriod, endMs: number, prefix = 'siglake:budget:'): string {
  return period === 'day' && new Date(endMs).getUTCDate() === 1 ? `${prefix}${scope}:day:${endMs}` : `${prefix}${scope}:${endMs}`;
}

/** How many sync rounds an idle scope's shared total may age before it is read again. */
export const IDLE_REFRESH_ROUNDS = 10;

/** Scripts per pipeline of a sync round: a round awaits one batch at a time. */
export const SYNC_BATCH = 500;

/** The least command timeout of the sync connection (off the request path; a batch needs more than one command). */
export const SYNC_TIMEOUT_MIN_MS = 1000;

interface SyncWork {
  b: Budget;
  end: number;
  push: NonNullable<Budget['inflight']>;
  key: string;
}

interface PushPipeline {
  siglakeBudgetPush(records: string, bytes: string, pushed: string, r: number, y: number, expireAt: number, replica: string, seq: number): PushPipeline;
  time(): PushPipeline;
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
  /** The clock of the budgets' periods: set to Redis' at connection and at each batch (a fresh one when absent). */
  clock?: PeriodClock;
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
  /** Connected once: until then the first reads of scopes wait (they would only count errors at start-up). */
  #connectedOnce = false;
  readonly #clock: PeriodClock;
  /** Settles once Redis' clock was first read (or failed to be). */
  readonly #clockRead: Promise<void>;

  constructor(o: BudgetSyncOptions) {
    this.#o = o;
    this.#clock = o.clock ?? new PeriodClock();
    this.#prefix = o.keyPrefix ?? 'siglake:budget:';
    this.#client = new Redis(o.url, {
      commandTimeout: Math.max(SYNC_TIMEOUT_MIN_MS, o.commandTimeoutMs),
      connectTimeout: Math.max(1000, o.commandTimeoutMs),
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      lazyConnect: false,
    });
    this.#client.on('error', () => undefined);
    this.#clockRead = new Promise<void>((resolve) => {
      this.#client.once('ready', () => {
        this.#connectedOnce = true;
        // Redis' clock before the first request if it can: the first sync round would read it too.
        const sent = Date.now();
        this.#client.time().then(
          (t) => {
            this.#clock.read(redisMs(t), sent, Date.now());
            resolve();
          },
          () => resolve(),
        );
      });
    });
    // EVALSHA, falling back to EVAL after a Redis restart forgot the script.
    this.#client.defineCommand('siglakeBudgetPush', { numberOfKeys: 3, lua: PUSH_SCRIPT });
  }

  /** Resolves once Redis' clock was read, or after `timeoutMs` (the local clock goes on meanwhile). */
  async clockReady(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.#clockRead, new Promise<void>((r) => (timer = setTimeout(r, timeoutMs)))]);
    clearTimeout(timer);
  }

  start(): void {
    this.#timer = setInterval(() => {
      if (this.#running === undefined) this.#running = this.sync().finally(() => (this.#running = undefined));
    }, this.#o.syncMs ?? 200);
    this.#timer.unref();
  }

  /** One round: push what each touched budget charged, read back the totals. */
  async sync(): Promise<void> {
    const now = this.#clock.now();
    const work: SyncWork[] = [];
    for (const [scope, b] of this.#o.budgets()) {
      b.roll(now);
      let push = b.inflight;
      if (push === null && !b.touched && b.pendingRecords === 0 && b.pendingBytes === 0) {
        // Idle here: only read the total, once at first (idleRounds < 0 until a read
        // succeeds), then now and then (sequence 0 applies nothing).
        if (b.idleRounds >= 0) {
          if (++b.idleRounds < IDLE_REFRESH_ROUNDS) continue;
          b.idleRounds = 0;
        } else if (!this.#connectedOnce) {
          continue;
        }
        work.push({ b, end: b.periodEndMs, push: { seq: 0, records: 0, bytes: 0 }, key: budgetKey(scope, b.decl.period, b.periodEndMs, this.#prefix) });
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
      work.push({ b, end: b.periodEndMs, push, key: budgetKey(scope, b.decl.period, b.periodEndMs, this.#prefix) });
    }
    for (let start = 0; start < work.length; start += SYNC_BATCH) {
      if (!(await this.#send(work.slice(start, start + SYNC_BATCH)))) return;
    }
  }

  /** One batch of a round; false when it failed (counted once): the round ends, the rest waits for the next. */
  async #send(work: SyncWork[]): Promise<boolean> {
    const p = this.#client.pipeline() as unknown as PushPipeline;
    // Redis' clock first, with every batch: the periods follow it (PeriodClock).
    p.time();
    for (const w of work) {
      const expireAt = Math.ceil(w.end / 1000) + 86_400;
      p.siglakeBudgetPush(`${w.key}:records`, `${w.key}:bytes`, `${w.key}:pushed`, w.push.records, w.push.bytes, expireAt, this.#replica, w.push.seq);
    }
    let replies: [Error | null, unknown][] | null;
    const sent = Date.now();
    try {
      replies = await p.exec();
      if (replies === null) throw new Error('Redis pipeline aborted');
      const [timeErr, time] = replies[0]!;
      if (timeErr === null && Array.isArray(time)) this.#clock.read(redisMs(time as unknown[]), sent, Date.now());
      replies = replies.slice(1);
    } catch (e) {
      // Each push stays in flight, to be sent again as it is: Redis may have run it.
      this.#o.onBackendError(e instanceof Error ? e : new Error(String(e)));
      return false;
    }
    let failed: Error | undefined;
    for (let i = 0; i < work.length; i++) {
      const w = work[i]!;
      const [err, reply] = replies[i]!;
      const totals = Array.isArray(reply) ? (reply as unknown[]).map(Number) : [];
      if (err !== null || totals.length !== 2 || !totals.every(Number.isFinite)) {
        failed ??= err ?? new Error('unexpected reply from Redis');
        continue;
      }
      const b = w.b;
      if (b.periodEndMs !== w.end) continue; // rolled over meanwhile
      if (w.push.seq === 0) {
        // A read: taken unless a push of this replica is unconfirmed (its total would count it twice).
        if (b.inflight !== null) continue;
      } else {
        if (b.inflight !== w.push) continue; // adopted and sent by another budget meanwhile
        b.inflight = null;
        b.ownRecords += w.push.records;
        b.ownBytes += w.push.bytes;
      }
      if (b.idleRounds < 0) b.idleRounds = 0;
      // The total includes the push; anything charged since is still pending. Never below the
      // view already held (it includes this push): a total below it means Redis lost data, and
      // the difference is kept on top of every later total of this period.
      const records = totals[0]! + b.lostRecords;
      if (records < b.sharedRecords) b.lostRecords += b.sharedRecords - records;
      const bytes = totals[1]! + b.lostBytes;
      if (bytes < b.sharedBytes) b.lostBytes += b.sharedBytes - bytes;
      b.sharedRecords = Math.max(totals[0]! + b.lostRecords, b.ownRecords);
      b.sharedBytes = Math.max(totals[1]! + b.lostBytes, b.ownBytes);
    }
    if (failed === undefined) return true;
    this.#o.onBackendError(failed);
    return false;
  }

  async close(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    await this.#running;
    await this.sync().catch(() => undefined);
    this.#client.disconnect();
  }
}

/** Redis' TIME reply ([seconds, microseconds] as strings) in ms since the epoch. */
function redisMs(t: readonly unknown[]): number {
  return Number(t[0]) * 1000 + Number(t[1]) / 1000;
}
