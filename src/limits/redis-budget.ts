// Rate budgets shared by every replica through Redis (`redis.url`), without
// Redis on the request's critical path.
//
// Each budget (the global one, one per tenant) is one GCRA bucket in Redis,
// updated atomically by LEASE_SCRIPT with Redis' own clock (TIME); the script
// takes the bucket's period and burst with every call, so the global budget runs
// on its own parameters (globalRatePerSec, globalBurst) and the tenant budgets on
// theirs (ratePerSec, burst). A replica
// leases small batches of tokens into a local counter and spends them
// synchronously; it asks for the next batch asynchronously when the counter runs
// low. While a lease request is in flight and the counter is empty, a replica may
// admit up to `leaseSize` requests on credit ("debt"); the next request charges
// that debt to the Redis bucket unconditionally, so the shared bucket remembers
// it. docs/limits.md derives the bound this gives: over any window of Δ seconds
// the N replicas together admit at most burst + rate·Δ + 2·N·leaseSize requests
// per budget while Redis answers.
//
// A failed or timed-out Redis command admits (fail open) and counts a backend
// error; for `backoffMs` afterwards no budget asks Redis and requests without a
// lease are admitted. ioredis reconnects by itself; the first lease request after
// the back-off is the probe that resumes enforcement.

import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import type { RateBudget } from './rate-budget.js';
import { LimitsError } from './limits-error.js';
import { resolveGlobalRateOptions, resolveRateOptions } from './rate-options.js';
import { TenantSlots } from './tenant-slots.js';

/**
 * KEYS[1]: the bucket. ARGV: want (tokens to lease), force (tokens to charge
 * unconditionally: debt, or a negative number to return an unspent lease),
 * period (µs per token, may be fractional), burst, fresh (1 on a replica's
 * first request for the bucket under these parameters: a stored time past an
 * empty bucket of these parameters, left by other ones, e.g. a lower rate
 * before a tenants reload, is cut to an empty bucket; 0 keeps a deficit).
 * The key holds the theoretical arrival time in µs of Redis' clock; a missing key
 * is a full bucket, and the key expires when the bucket would be full again.
 * Returns {granted, µs until the bucket next holds a whole token}.
 */
export const LEASE_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local want = tonumber(ARGV[1])
local force = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local burst = tonumber(ARGV[4])
local tat = tonumber(redis.call('GET', KEYS[1]))
if tat == nil or tat < now then tat = now end
if tonumber(ARGV[5]) == 1 and tat > now + burst * period then tat = now + burst * period end
local avail = math.floor((now + burst * period - tat) / period)
local grant = avail - force
if grant > want then grant = want end
if grant < 0 then grant = 0 end
tat = tat + (force + grant) * period
if tat <= now then
  redis.call('DEL', KEYS[1])
  tat = now
else
  redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000))
end
local wait = tat - now - (burst - 1) * period
if wait < 0 then wait = 0 end
return {grant, math.ceil(wait)}
`;

const LEASE_SCRIPT_SHA = createHash('sha1').update(LEASE_SCRIPT).digest('hex');

export interface RedisBudgetOptions {
  /** `redis://[user:pass@]host:port[/db]` */
  url: string;
  /** Refill rate of each tenant budget, requests/s, shared by all replicas. 0 turns the budget off (no connection). */
  ratePerSec: number;
  /** Tenant bucket size; defaults to ratePerSec rounded up, at least 1. */
  burst?: number;
  /** Refill rate of the global budget, requests/s; 0 (the default) means no global budget. */
  globalRatePerSec?: number;
  /** Global bucket size; defaults to the global rate rounded up, at least 1. */
  globalBurst?: number;
  /** Tenant budgets whose lease state is kept at once in this replica. */
  maxTenantBuckets: number;
  /**
   * Tokens per lease, for every budget (1..min(burst, globalBurst)). Default, per
   * budget, its rate / 100 rounded up, capped at its burst: one lease per 10 ms at full rate.
   */
  leaseSize?: number;
  /** A Redis command that has not answered after this long counts as failed. Default 100 ms. */
  commandTimeoutMs?: number;
  /** After a failure, how long requests without a lease are admitted before Redis is asked again. Default 1000 ms. */
  backoffMs?: number;
  /** Prefix of every key. Default `siglake:rate:`. */
  keyPrefix?: string;
  /**
   * A connection from redisBudgetClient() to use instead of a new one, shared
   * by several budgets (one per rate of declared tenants): close() then leaves
   * it connected. Its URL and timeout win over `url` and `commandTimeoutMs`.
   */
  client?: Redis;
  /** Called once per failed command: the caller counts siglake_rate_budget_backend_errors_total. */
  onBackendError?: (err: Error) => void;
  /**
   * Whether a budget without a lease admits up to leaseSize requests on credit
   * while its lease request is in flight (default true). False: such a request
   * waits for the lease's answer (one round trip, at most commandTimeoutMs,
   * failing open), and the bound loses its credit term: burst + rate·Δ + N·L.
   * For small buckets (the per-principal ones) where 2·N·L would dwarf the burst.
   */
  credit?: boolean;
}

const GLOBAL_SLOT = 0;
const OVERFLOW_SLOT = 1;
const FIRST_TENANT_SLOT = 2;

function positiveInteger(value: number, param: string, max: number): number {
  if (!Number.isInteger(value) || value < 1 || value > max) {
    throw new LimitsError('SIGLAKE_LIMITS_BAD_PARAM', `${param} must be an integer in [1, ${max}], got ${String(value)}`, param);
  }
  return value;
}

/** The default lease for a budget: rate / 100 rounded up, at least 1, at most burst. */
function defaultLease(ratePerSec: number, burst: number): number {
  return Math.min(burst, Math.max(1, Math.ceil(ratePerSec / 100)));
}

export class RedisBudget implements RateBudget {
  readonly #client: Redis | null;
  /** False when the client was handed in (shared by several budgets): its owner disconnects it. */
  #ownsClient = true;
  /** Tokens per lease of a tenant (and the overflow) budget. */
  readonly #lease: number = 0;
  /** Ask for the next lease when a tenant budget's counter falls to this. */
  readonly #lowWater: number = 0;
  /** The global budget's lease size and low-water mark. */
  readonly #globalLease: number = 0;
  readonly #globalLowWater: number = 0;
  /** LEASE_SCRIPT's period (µs per token) and burst arguments for the tenant (and overflow) budgets. */
  readonly #period: string;
  readonly #burst: string;
  /** The same for the global budget. */
  readonly #globalPeriod: string;
  readonly #globalBurst: string;
  readonly #backoffUs: number = 0;
  readonly #keyPrefix: string;
  readonly #onBackendError: ((err: Error) => void) | undefined;
  readonly #tenants: TenantSlots;
  readonly #isIdle: (slot: number) => boolean;
  /** Per budget (slot 0 global, 1 overflow, 2.. tenants): Redis key. */
  readonly #keys: string[];
  /** Leased tokens not yet spent. */
  readonly #avail: Int32Array;
  /** Requests admitted on credit, not yet charged to Redis. */
  readonly #debt: Int32Array;
  /** Local µs before which Redis said the budget is empty. */
  readonly #deniedUntil: Float64Array;
  readonly #inflight: Uint8Array;
  readonly #sentWant: Int32Array;
  readonly #sentForce: Int32Array;
  readonly #pending = new Set<Promise<void>>();
  /** Per budget: requests waiting for the lease request in flight. */
  readonly #waiters: ((() => void)[] | undefined)[];
  /** Per budget: 1 until Redis answered a request for its current key (LEASE_SCRIPT's fresh). */
  readonly #fresh: Uint8Array;
  /** Per budget: 1 while its tenant's unspent lease is to go back to Redis (release()), once its lease request in flight answers. */
  readonly #releasing: Uint8Array;
  /** How long a request may wait for leases, in all, before it is admitted (the command timeout, µs and ms). */
  readonly #waitUs: number;
  readonly #waitMs: number;
  /** Local µs before which no budget asks Redis (after a failure). */
  #downUntil = 0;
  /** The last command failed and none has succeeded since: a request beyond the credit is admitted too. */
  #suspect = false;
  #backendErrors = 0;
  #closed = false;
  /** Whether a global budget exists (globalRatePerSec > 0). */
  readonly #globalOn: boolean;
  /** Whether requests without a lease are admitted on credit (RedisBudgetOptions.credit). */
  readonly #credit: boolean;

  constructor(options: RedisBudgetOptions) {
    const tenant = resolveRateOptions(options.ratePerSec, options.burst);
    const global = resolveGlobalRateOptions(tenant, options.globalRatePerSec, options.globalBurst);
    const { ratePerSec, burst } = tenant;
    this.#tenants = new TenantSlots(options.maxTenantBuckets);
    const slots = FIRST_TENANT_SLOT + options.maxTenantBuckets;
    this.#keys = new Array<string>(slots).fill('');
    this.#avail = new Int32Array(slots);
    this.#debt = new Int32Array(slots);
    this.#deniedUntil = new Float64Array(slots);
    this.#inflight = new Uint8Array(slots);
    this.#sentWant = new Int32Array(slots);
    this.#sentForce = new Int32Array(slots);
    this.#waiters = new Array<(() => void)[] | undefined>(slots);
    this.#fresh = new Uint8Array(slots).fill(1);
    this.#releasing = new Uint8Array(slots);
    this.#keyPrefix = options.keyPrefix ?? 'siglake:rate:';
    this.#keys[GLOBAL_SLOT] = `${this.#keyPrefix}global`;
    this.#keys[OVERFLOW_SLOT] = `${this.#keyPrefix}overflow`;
    this.#onBackendError = options.onBackendError;
    this.#credit = options.credit ?? true;
    this.#isIdle = (slot) => this.#idle(FIRST_TENANT_SLOT + slot);
    const on = ratePerSec > 0;
    const globalOn = on && global.ratePerSec > 0;
    this.#globalOn = globalOn;
    if (on) positiveInteger(burst, 'burst', 2 ** 31 - 1);
    if (globalOn) positiveInteger(global.burst, 'globalBurst', 2 ** 31 - 1);
    // An explicit leaseSize applies to every budget, so it must fit the smaller burst.
    const lease =
      on && options.leaseSize !== undefined
        ? positiveInteger(options.leaseSize, 'leaseSize', globalOn ? Math.min(burst, global.burst) : burst)
        : undefined;
    this.#lease = on ? (lease ?? defaultLease(ratePerSec, burst)) : 1;
    this.#globalLease = globalOn ? (lease ?? defaultLease(global.ratePerSec, global.burst)) : 1;
    this.#lowWater = Math.floor(this.#lease / 2);
    this.#globalLowWater = Math.floor(this.#globalLease / 2);
    this.#period = String(on ? 1e6 / ratePerSec : 0);
    this.#burst = String(burst);
    this.#globalPeriod = String(globalOn ? 1e6 / global.ratePerSec : 0);
    this.#globalBurst = String(global.burst);
    const commandTimeoutMs = positiveInteger(options.commandTimeoutMs ?? 100, 'commandTimeoutMs', 60_000);
    // A handed-in client's own timeout bounds its commands, so it bounds a wait too.
    const clientTimeout = options.client?.options.commandTimeout;
    this.#waitMs = typeof clientTimeout === 'number' && clientTimeout > 0 ? clientTimeout : commandTimeoutMs;
    this.#waitUs = this.#waitMs * 1000;
    this.#backoffUs = positiveInteger(options.backoffMs ?? 1000, 'backoffMs', 3_600_000) * 1000;
    if (typeof options.url !== 'string' || !/^rediss?:\/\//.test(options.url)) {
      throw new LimitsError('SIGLAKE_LIMITS_BAD_PARAM', 'url must be a redis:// or rediss:// URL', 'url');
    }
    if (!on) {
      this.#client = null;
      return;
    }
    this.#ownsClient = options.client === undefined;
    this.#client = options.client ?? redisBudgetClient(options.url, commandTimeoutMs);
  }

  get enabled(): boolean {
    return this.#client !== null;
  }

  /** Failed or timed-out Redis commands so far (each also reported to onBackendError). */
  get backendErrors(): number {
    return this.#backendErrors;
  }

  /** Tenants whose lease state this replica holds now (≤ maxTenantBuckets). */
  get tenantBuckets(): number {
    return this.#tenants.size;
  }

  /** Tokens per lease of a tenant budget. */
  get leaseSize(): number {
    return this.#lease;
  }

  /** Tokens per lease of the global budget. */
  get globalLeaseSize(): number {
    return this.#globalLease;
  }

  /** Resolves once connected to Redis; rejects after `timeoutMs`. Requests before that fail open and count errors. */
  async ready(timeoutMs = 5000): Promise<void> {
    const client = this.#client;
    if (client === null || client.status === 'ready') return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        client.off('ready', onReady);
        reject(new LimitsError('SIGLAKE_LIMITS_BACKEND', `Redis not ready after ${timeoutMs} ms`));
      }, timeoutMs);
      const onReady = () => {
        clearTimeout(timer);
        resolve();
      };
      client.once('ready', onReady);
    });
  }

  /** Spend a token of the global budget: 0, or seconds for Retry-After (a Promise while a lease is on its way). */
  takeGlobal(): number | Promise<number> {
    if (this.#client === null || !this.#globalOn) return 0;
    return this.#take(GLOBAL_SLOT);
  }

  /** Spend a token of `tenant`'s budget: 0, or seconds for Retry-After (a Promise while a lease is on its way). */
  takeTenant(tenant: string): number | Promise<number> {
    if (this.#client === null) return 0;
    let slot = this.#tenants.lookup(tenant);
    if (slot < 0) {
      slot = this.#tenants.assign(tenant, this.#isIdle);
      if (slot < 0) return this.#take(OVERFLOW_SLOT);
      this.#adopt(FIRST_TENANT_SLOT + slot, tenant);
    } else if (this.#releasing[FIRST_TENANT_SLOT + slot] !== 0) {
      this.#releasing[FIRST_TENANT_SLOT + slot] = 0; // back (a reload re-added it) before its lease went back
    }
    return this.#take(FIRST_TENANT_SLOT + slot);
  }

  /**
   * `tenant` no longer spends this budget (a tenants reload removed it, or
   * moved it to another rate): its unspent lease goes back to Redis and its
   * debt is charged, at once, or once its lease request in flight has
   * answered (and served the requests that waited for it). Its slot is then
   * freed, the first a novel tenant gets; a take for it before that (the
   * tenant back) cancels the release, and one after leases again in a slot of
   * its own. (Before, a removed tenant's lease stayed held in a budget the
   * reload kept, until the ingester stopped: its shared bucket stayed
   * charged for it, and a tenant re-added hours later spent tokens leased
   * then. And its slot stayed its own until evicted, which a slot whose
   * tenant was refused is not for up to a token's period: with every slot
   * taken, a tenant the reload added got none and spent the overflow bucket
   * that every such tenant shares, refused with them.)
   */
  release(tenant: string): void {
    if (this.#client === null || this.#closed) return;
    const slot = this.#tenants.peek(tenant);
    if (slot < 0) return;
    const i = FIRST_TENANT_SLOT + slot;
    this.#releasing[i] = 1;
    this.#tryRelease(i);
  }

  /**
   * Returns budget `i`'s unspent lease (and charges its debt) if release()
   * asked for it and no lease request of it is out, and frees its slot.
   */
  #tryRelease(i: number): void {
    if (this.#releasing[i] === 0 || this.#inflight[i] !== 0 || (this.#waiters[i]?.length ?? 0) > 0) return;
    this.#releasing[i] = 0;
    const force = this.#debt[i] - this.#avail[i];
    const key = this.#keys[i];
    this.#avail[i] = 0;
    this.#debt[i] = 0;
    this.#deniedUntil[i] = 0;
    this.#keys[i] = '';
    const tenant = this.#tenants.tenantAt(i - FIRST_TENANT_SLOT);
    if (tenant !== undefined) this.#tenants.remove(tenant);
    if (force !== 0 && !this.#closed) void this.#settle(i, key, force);
  }

  /**
   * Without spending: the seconds of a refusal this replica already knows of
   * for `tenant`'s budget (Redis answered that it is empty and no leased token
   * is left), else 0 (a take may admit). Never asks Redis, never allocates;
   * lets a caller read a narrower bucket before it spends a wider one.
   */
  peekTenant(tenant: string): number {
    if (this.#client === null) return 0;
    const slot = this.#tenants.lookup(tenant);
    if (slot < 0) return 0;
    const i = FIRST_TENANT_SLOT + slot;
    if (this.#avail[i] > 0) return 0;
    const now = this.#nowUs();
    const until = this.#deniedUntil[i];
    return now < until ? Math.ceil((until - now) / 1e6) : 0;
  }

  /**
   * Settle with Redis (return unspent leases, charge outstanding debt), then
   * disconnect. Takes after close admit.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const client = this.#client;
    if (client === null) return;
    await Promise.allSettled([...this.#pending]);
    const settling: Promise<void>[] = [];
    for (let i = 0; i < this.#keys.length; i++) {
      const force = this.#debt[i] - this.#avail[i];
      if (force !== 0 && this.#keys[i] !== '') settling.push(this.#settle(i, this.#keys[i], force));
      this.#avail[i] = 0;
      this.#debt[i] = 0;
    }
    await Promise.allSettled(settling);
    if (this.#ownsClient) client.disconnect();
  }

  /** Tokens per lease of budget `i`. */
  #leaseOf(i: number): number {
    return i === GLOBAL_SLOT ? this.#globalLease : this.#lease;
  }

  /** Low-water mark of budget `i`: ask for the next lease when its counter falls to this. */
  #lowWaterOf(i: number): number {
    return i === GLOBAL_SLOT ? this.#globalLowWater : this.#lowWater;
  }

  /** Bucket size of budget `i`. */
  #burstOf(i: number): number {
    return Number(i === GLOBAL_SLOT ? this.#globalBurst : this.#burst);
  }

  #take(i: number): number | Promise<number> {
    const r = this.#takeNow(i);
    return r >= 0 ? r : this.#wait(i);
  }

  /** #take without waiting: -1 where it would wait for the lease request in flight. */
  #takeNow(i: number): number {
    const avail = this.#avail[i];
    if (avail > 0) {
      this.#avail[i] = avail - 1;
      if (avail - 1 <= this.#lowWaterOf(i) && this.#inflight[i] === 0) this.#prefetch(i);
      return 0;
    }
    const now = this.#nowUs();
    const until = this.#deniedUntil[i];
    if (now < until) return Math.ceil((until - now) / 1e6);
    if (now < this.#downUntil || this.#closed) return 0; // fail open
    if (this.#inflight[i] === 0) this.#refill(i);
    if (this.#credit && this.#debt[i] < this.#leaseOf(i)) {
      this.#debt[i]++;
      return 0;
    }
    if (this.#suspect) return 0; // Redis known to be failing: fail open
    return -1;
  }

  /**
   * Credit spent and the lease request still in flight: wait for its answer and
   * take again (a full shared bucket must admit a burst of concurrent requests,
   * not refuse all but the first lease's worth). The next lease is sized to the
   * waiters (#refill), but a take may still find the lease spent by those ahead
   * of it and wait again: the whole wait is bounded by one command timeout from
   * the first, past which the request is admitted and counted as a backend error.
   */
  #wait(i: number): Promise<number> {
    return new Promise<number>((resolve) => {
      let done = false;
      const timer = setTimeout(() => {
        if (done) return;
        done = true;
        this.#waitTimedOut(i);
        resolve(0);
      }, this.#waitMs);
      const retry = () => {
        if (done) return;
        const r = this.#takeNow(i);
        if (r < 0) {
          (this.#waiters[i] ??= []).push(retry);
          return;
        }
        done = true;
        clearTimeout(timer);
        resolve(r);
      };
      (this.#waiters[i] ??= []).push(retry);
    });
  }

  /** A request waited for leases past the command timeout: admitted unenforced, counted as a backend error. */
  #waitTimedOut(i: number): void {
    this.#backendErrors++;
    const cb = this.#onBackendError;
    if (cb === undefined) return;
    try {
      cb(new LimitsError('SIGLAKE_LIMITS_BACKEND', `waited ${this.#waitMs} ms for a Redis lease of ${this.#keys[i]}; admitted`));
    } catch {
      // A failing metrics callback must not turn into an unhandled rejection.
    }
  }

  /** Lets the requests that waited for slot `i`'s lease request take again. */
  #wakeWaiters(i: number): void {
    const w = this.#waiters[i];
    if (w === undefined || w.length === 0) return;
    this.#waiters[i] = undefined;
    for (const fn of w) fn();
  }

  #prefetch(i: number): void {
    if (this.#releasing[i] !== 0) return; // its tenant is gone: no more lease for it
    const now = this.#nowUs();
    if (now >= this.#deniedUntil[i] && now >= this.#downUntil && !this.#closed) this.#refill(i);
  }

  /** An idle tenant budget: nothing owed to Redis, nothing in flight, not refused. */
  #idle(i: number): boolean {
    return this.#debt[i] === 0 && this.#inflight[i] === 0 && this.#nowUs() >= this.#deniedUntil[i];
  }

  /** Slot `i` now belongs to `tenant`; return the evicted tenant's unspent lease to Redis. */
  #adopt(i: number, tenant: string): void {
    const unspent = this.#avail[i];
    if (unspent > 0 && this.#tenants.lastEvicted !== undefined) this.#settle(i, this.#keys[i], -unspent);
    this.#keys[i] = this.#keyPrefix + 't:' + tenant;
    this.#avail[i] = 0;
    this.#debt[i] = 0;
    this.#deniedUntil[i] = 0;
    this.#fresh[i] = 1;
    this.#releasing[i] = 0;
  }

  #refill(i: number): void {
    // Enough for the requests waiting (at most a burst), so that they need one round trip, not one each.
    const queued = this.#waiters[i]?.length ?? 0;
    const want = Math.max(0, Math.max(this.#leaseOf(i), Math.min(queued, this.#burstOf(i))) - this.#avail[i]);
    const force = this.#debt[i];
    this.#inflight[i] = 1;
    this.#sentWant[i] = want;
    this.#sentForce[i] = force;
    this.#track(
      this.#evalLease(i, this.#keys[i], want, force).then(
        (reply) => this.#onReply(i, reply),
        (err: unknown) => {
          // Fail open: requests admitted on credit while Redis failed are forgiven (a
          // timed-out script may even have charged them), so none is refused for them.
          this.#inflight[i] = 0;
          this.#debt[i] = 0;
          this.#failed(err);
          this.#wakeWaiters(i);
          this.#tryRelease(i);
        },
      ),
    );
  }

  #onReply(i: number, reply: [number, number]): void {
    const granted = reply[0];
    this.#suspect = false;
    this.#inflight[i] = 0;
    this.#debt[i] -= this.#sentForce[i];
    this.#avail[i] += granted;
    this.#fresh[i] = 0;
    const now = this.#nowUs();
    this.#deniedUntil[i] = granted < this.#sentWant[i] ? now + Math.max(1, reply[1]) : 0;
    const queued = this.#waiters[i]?.length ?? 0;
    if (
      !this.#closed &&
      now >= this.#deniedUntil[i] &&
      // A released budget asks only for the requests that wait (its debt is charged by the release).
      (this.#releasing[i] === 0 ? this.#debt[i] > 0 || this.#avail[i] <= this.#lowWaterOf(i) || queued > this.#avail[i] : queued > this.#avail[i])
    ) {
      this.#refill(i);
    }
    this.#wakeWaiters(i);
    this.#tryRelease(i);
  }

  /** Charge (force > 0) or return (force < 0) tokens of budget `i` (under `key`) outside any lease request. */
  #settle(i: number, key: string, force: number): Promise<void> {
    return this.#track(
      this.#evalLease(i, key, 0, force).then(
        () => undefined,
        (err: unknown) => this.#failed(err),
      ),
    );
  }

  #track(p: Promise<void>): Promise<void> {
    this.#pending.add(p);
    const done = () => {
      this.#pending.delete(p);
    };
    p.then(done, done);
    return p;
  }

  #failed(err: unknown): void {
    this.#backendErrors++;
    this.#suspect = true;
    this.#downUntil = this.#nowUs() + this.#backoffUs;
    const cb = this.#onBackendError;
    if (cb === undefined) return;
    try {
      cb(err instanceof Error ? err : new Error(String(err)));
    } catch {
      // A failing metrics callback must not turn into an unhandled rejection.
    }
  }

  /** Monotonic µs (CLOCK_MONOTONIC via process.hrtime(): no boxed double once inlined, unlike performance.now() on Node 20). */
  #nowUs(): number {
    const t = process.hrtime();
    return t[0] * 1e6 + t[1] / 1000;
  }

  /**
   * LEASE_SCRIPT on budget `i`'s bucket `key`, with that budget's parameters (the
   * global ones for the global budget): EVALSHA, falling back to EVAL (which also
   * caches the script) when Redis answers NOSCRIPT.
   */
  async #evalLease(i: number, key: string, want: number, force: number): Promise<[number, number]> {
    const client = this.#client as Redis;
    const global = i === GLOBAL_SLOT;
    const period = global ? this.#globalPeriod : this.#period;
    const burst = global ? this.#globalBurst : this.#burst;
    const fresh = this.#fresh[i];
    let reply: unknown;
    try {
      reply = await client.evalsha(LEASE_SCRIPT_SHA, 1, key, want, force, period, burst, fresh);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      reply = await client.eval(LEASE_SCRIPT, 1, key, want, force, period, burst, fresh);
    }
    if (!Array.isArray(reply) || typeof reply[0] !== 'number' || typeof reply[1] !== 'number') {
      throw new LimitsError('SIGLAKE_LIMITS_BACKEND', 'unexpected reply from the lease script');
    }
    return [reply[0], reply[1]];
  }
}

/**
 * The connection a RedisBudget uses: commands fail at once while disconnected
 * (a queued lease request would only delay the fail-open answer), none is
 * retried or resent, and each has `commandTimeoutMs`.
 */
export function redisBudgetClient(url: string, commandTimeoutMs: number): Redis {
  const client = new Redis(url, {
    commandTimeout: commandTimeoutMs,
    connectTimeout: Math.max(1000, commandTimeoutMs),
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
  });
  // Connection errors are reported by the commands that fail; reconnection is ioredis' own (retryStrategy).
  client.on('error', () => undefined);
  return client;
}
