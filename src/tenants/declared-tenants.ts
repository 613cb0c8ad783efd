// Declared tenants at admission (declared-tenants.md, ingest-contract.md §4 as
// amended): the loaded set, the tenant buckets, the per-principal buckets and
// the budgets, behind the few calls src/ingest/admission.ts makes. Swapping
// the set (a reload) replaces one reference: a request in flight keeps the
// runtime it resolved; a removed tenant's series go, and its buckets and
// budgets are remembered while a tenant coming back would otherwise get them
// fresh (removed-tenants.ts).
//
// Rate limits, widest first: global (admission) → the tenant's bucket → the
// principal's. The tenant's bucket is only read before the principal's is
// spent and spent after, so a request refused by either spends nothing of
// the other: a principal over its own bucket spends nothing of its tenant's.
// Budgets, narrowest first: index → tenant → server, looked at during
// admission, refused only once the worker found the body valid (contract §4:
// step 11 before 12), and charged once the worker wrote it.

import { IngestError, tenantDenied, type ErrorCode } from '../errors.js';
import type { Redis } from 'ioredis';
import { RedisBudget, redisBudgetClient } from '../limits/redis-budget.js';
import { TokenBucketTable } from '../limits/token-bucket-table.js';
import { noteRefusal, reloadIndexChanges, type AuditEvent, type AuditLog, type AuditNote } from './audit-log.js';
import { Budget, PeriodClock } from './budgets.js';
import { PrincipalBuckets, sharedPrincipalBuckets } from './principal-buckets.js';
import { RemovedTenants } from './removed-tenants.js';
import { BudgetSync, type BudgetSyncOptions } from './shared-budgets.js';
import { AMBIGUOUS, TenantIndex, type DeclaredTenant, type ResolveResult } from './tenant-index.js';
import type { TenantMetrics, TenantSeries } from './tenant-metrics.js';
import type { BudgetDecl, TenantDecl } from './tenants-file.js';

/** Outcome slots of TenantSeries.outcome (tenant-metrics.ts OUTCOMES). */
const ACCEPTED = 0;
const RATE_LIMITED = 1;
const BUDGET_EXHAUSTED = 2;
const INDEX_REFUSED = 3;
const REFUSED = 4;
/**
 * A shared tenant bucket admits on credit (src/limits/redis-budget.ts) only
 * from this burst up, where the credit term of its bound (2·N·L, L = 1 up to
 * 100/s) is a few per cent of the burst; a smaller one is exact, at the cost
 * of one Redis round trip for a request that outruns its replica's lease.
 */
export const CREDIT_MIN_BURST = 100;
/** Removed tenants whose audited first admission is remembered (ids, a few tens of bytes each). */
export const MAX_ADMITTED_REMOVED = 100_000;
/** How often what removed tenants left is looked at, to forget what expired, while any is held. */
const REMOVED_SWEEP_MS = 5000;

export interface TenantRuntime {
  readonly tenant: DeclaredTenant;
  readonly id: string;
  /** The tenant's own bucket (null: no rateLimit, the generic per-tenant bucket applies). */
  readonly bucket: TokenBucketTable | null;
  readonly slot: number;
  /** With `redis.url`: the tenant's bucket shared by every replica (then `bucket` is null). */
  readonly shared: RedisBudget | null;
  readonly budget: Budget | null;
  readonly indexBudgets: ReadonlyMap<string, Budget>;
  readonly indexes: ReadonlySet<string> | undefined;
  readonly series: TenantSeries | null;
  admitted: boolean;
}

/**
 * A budget found exhausted at admission (checkBudgets), carried with the
 * request to its worker and back: the 429 to send if the body is valid.
 */
export interface BudgetRefusal {
  readonly error: IngestError;
  readonly scope: string;
  readonly rt: TenantRuntime | undefined;
  readonly claims: Readonly<Record<string, unknown>> | undefined;
  /** The request's audit note (auditing on), for the refusal's reason. */
  readonly note: AuditNote | undefined;
}

class Snapshot {
  readonly byOrd: TenantRuntime[] = [];
  readonly byId = new Map<string, TenantRuntime>();
  readonly tables: TokenBucketTable[] = [];
  readonly redis: RedisBudget[] = [];
  /** The shared budget of each (rate, burst) group, with the tenants it has room for: a reload keeps it. */
  readonly redisByKey = new Map<string, { rb: RedisBudget; capacity: number }>();
  constructor(readonly index: TenantIndex) {}
}

export interface DeclaredTenantsOptions {
  /** `ingester.rateLimit.perPrincipalPerSec`: one bucket per verified `sub` (0 = off). */
  perPrincipalPerSec: number;
  serverBudget?: BudgetDecl | undefined;
  metrics?: TenantMetrics;
  audit?: AuditLog;
  /** With `redis.url`: budgets shared by every replica (shared-budgets.ts). */
  shared?: Omit<BudgetSyncOptions, 'budgets'>;
}

export class DeclaredTenants {
  #snap: Snapshot;
  /** [shared] The one Redis connection of the tenants' rate buckets (every (rate, burst) group). */
  #redisClient: Redis | undefined;
  readonly #o: DeclaredTenantsOptions;
  /** The principals' buckets in this replica (null with `redis.url`, or without perPrincipalPerSec). */
  readonly #principals: PrincipalBuckets | null;
  /** With `redis.url`: the principals' buckets shared by every replica. */
  readonly #sharedPrincipals: RedisBudget | null;
  readonly #server: Budget | null;
  readonly #sync: BudgetSync | undefined;
  /** [shared] Rate budgets a reload replaced, settled with Redis 5 s later (or at close, if that comes first). */
  readonly #retired = new Map<RedisBudget, NodeJS.Timeout>();
  /** The clock of the budgets' periods: the local one, or Redis' once read (shared-budgets.ts). */
  readonly #clock = new PeriodClock();
  #timer: NodeJS.Timeout | undefined;
  /**
   * What reloads took from tenants (buckets, budgets) that a tenant coming
   * back takes back, while it still matters (removed-tenants.ts), and the
   * timer that forgets it past its window while any is held.
   */
  readonly #removed = new RemovedTenants();
  #removedTimer: NodeJS.Timeout | undefined;
  /**
   * [auditing on] Tenants whose first admission was audited and that a reload
   * removed since: one re-added is not audited again (once per process,
   * docs/tenants.md "Observability"). At most MAX_ADMITTED_REMOVED ids, the
   * ones removed longest ago forgotten first; a tenant still declared carries
   * its flag in its runtime.
   */
  readonly #admittedRemoved = new Set<string>();
  readonly #ambiguous = new IngestError(
    'SIGLAKE_TENANT_AMBIGUOUS',
    'tenant ambiguous: the verified principal matches more than one declared tenant; the operator must make the tenants file unambiguous',
  );
  readonly #headerMismatch = tenantDenied('header_mismatch', 'X-Scope-OrgID differs from the declared tenant of the verified principal');
  readonly #retry = new Map<string, IngestError>();
  readonly #twoOrgIds = new IngestError('SIGLAKE_BAD_HEADER', 'bad header: X-Scope-OrgID sent more than once');
  readonly #emptyOrgId = new IngestError('SIGLAKE_BAD_HEADER', 'bad header: X-Scope-OrgID is empty');
  readonly #controlOrgId = new IngestError('SIGLAKE_BAD_HEADER', 'bad header: X-Scope-OrgID holds control characters');

  constructor(decls: readonly TenantDecl[], opts: DeclaredTenantsOptions) {
    // The index first: an overlap the file decides throws before any bucket, Redis client or timer exists.
    const index = new TenantIndex(decls);
    this.#o = opts;
    const perPrincipal = opts.perPrincipalPerSec > 0;
    this.#sharedPrincipals = perPrincipal && opts.shared !== undefined ? sharedPrincipalBuckets(opts.perPrincipalPerSec, opts.shared) : null;
    this.#principals = perPrincipal && this.#sharedPrincipals === null ? new PrincipalBuckets(opts.perPrincipalPerSec) : null;
    this.#server = opts.serverBudget === undefined ? null : new Budget(opts.serverBudget, this.#clock.now());
    this.#snap = this.#build(index, undefined);
    this.#arm();
    if (opts.shared !== undefined) {
      this.#sync = new BudgetSync({ ...opts.shared, budgets: () => this.#budgets(), clock: this.#clock });
      this.#sync.start();
    }
  }

  *#budgets(): Iterable<[string, Budget]> {
    if (this.#server !== null) yield ['s', this.#server];
    for (const rt of this.#snap.byOrd) {
      if (rt.budget !== null) yield [`t:${rt.id}`, rt.budget];
      for (const [name, b] of rt.indexBudgets) yield [`i:${rt.id}:${name}`, b];
    }
    // What removed tenants charged and this replica has not pushed yet (the last sync window before
    // the removal, requests that were in flight): pushed as if they had stayed. (It never was.)
    yield* this.#removed.unpushed();
  }

  /** Tenants whose buckets or budgets a reload took and may still give back (removed-tenants.ts). */
  get removedRemembered(): number {
    return this.#removed.size;
  }

  get size(): number {
    return this.#snap.byOrd.length;
  }

  /** Waits (bounded) for the shared buckets' Redis connections; not fatal: without Redis they admit and count. */
  async ready(timeoutMs = 2000): Promise<void> {
    const all = this.#sharedPrincipals === null ? this.#snap.redis : [...this.#snap.redis, this.#sharedPrincipals];
    await Promise.all([...all.map((rb) => rb.ready(timeoutMs).catch(() => undefined)), this.#sync?.clockReady(timeoutMs)]);
  }

  get index(): TenantIndex {
    return this.#snap.index;
  }

  /** Transport-agnostic resolution (the query server): never throws, never allocates on the ingest path. */
  resolvePrincipal(claims: Readonly<Record<string, unknown>> | undefined): ResolveResult {
    return this.#snap.index.resolvePrincipal(claims);
  }

  /**
   * Replace the set with `decls` (already validated by parseTenantsText). The
   * index is built first: an overlap throws and leaves the old set in force.
   */
  replace(decls: readonly TenantDecl[]): { added: string[]; removed: string[] } {
    const index = new TenantIndex(decls);
    const old = this.#snap;
    const next = this.#build(index, old);
    this.#snap = next;
    this.#arm();
    // Requests in flight finish on the old buckets; settle them with Redis once they are done
    // (those the new set took over stay open). Until then close() settles them too: a stop within
    // those 5 s returned none of their unspent leases, and every replica saw that much less budget.
    for (const rb of old.redis) {
      if (next.redis.includes(rb) || this.#retired.has(rb)) continue;
      this.#retire(rb);
    }
    // A tenant that leaves a budget the new set keeps (removed, or moved to another rate) gives its
    // unspent lease back to Redis now: no request resolves it there any more (a take follows its
    // resolution in the same turn), and the lease request it has out is waited for. (It stayed
    // held until the stop: its shared bucket stayed charged for it, for every replica.)
    const kept = new Set(next.redis);
    for (const rt of old.byOrd) {
      const rb = rt.shared;
      if (rb !== null && next.byId.get(rt.id)?.shared !== rb && kept.has(rb)) rb.release(rt.id);
    }
    const removed: string[] = [];
    for (const [id, rt] of old.byId) {
      if (!next.byId.has(id)) {
        removed.push(id);
        this.#o.metrics?.forget(id);
        if (rt.admitted && this.#o.audit !== undefined) this.#rememberAdmitted(id);
      }
    }
    const added = [...next.byId.keys()].filter((id) => !old.byId.has(id));
    // Back in force: its runtime carries its admitted flag now.
    if (this.#admittedRemoved.size > 0) for (const id of added) this.#admittedRemoved.delete(id);
    this.#remember(old, next);
    const audit = this.#o.audit;
    if (audit !== undefined) {
      const subsets = (s: Snapshot) => new Map([...s.byId].map(([id, rt]) => [id, rt.indexes] as const));
      for (const ev of reloadIndexChanges(subsets(old), subsets(next))) audit.write(ev);
    }
    return { added, removed };
  }

  /**
   * Remembers what `old` held and `next` does not carry (a removed tenant's
   * bucket and budgets, or those of a tenant that lost its rateLimit, budget
   * or an index's budget), forgets what expired, and keeps a timer that
   * forgets the rest past its window while any is held.
   */
  #remember(old: Snapshot, next: Snapshot): void {
    const removed = this.#removed;
    const nowMs = performance.now();
    for (const rt of old.byOrd) {
      const n = next.byId.get(rt.id);
      if (rt.bucket !== null && (n === undefined || n.bucket === null)) removed.rememberBucket(rt.id, rt.bucket, rt.slot, nowMs);
      // A budget whose period changed is not carried either: with Redis, what it charged since the
      // last sync round is still pushed (it never was), and a reload back to its period takes it back.
      const b = rt.budget;
      if (b !== null && (n === undefined || n.budget === null || n.budget.decl.period !== b.decl.period)) removed.rememberBudget(rt.id, b, nowMs);
      for (const [name, ib] of rt.indexBudgets) {
        const nb = n?.indexBudgets.get(name);
        if (nb === undefined || nb.decl.period !== ib.decl.period) removed.rememberIndexBudget(rt.id, name, ib, nowMs);
      }
    }
    removed.sweep(nowMs, this.#clock.now());
    if (removed.size === 0 || this.#removedTimer !== undefined) return;
    this.#removedTimer = setInterval(() => {
      removed.sweep(performance.now(), this.#clock.now());
      if (removed.size > 0) return;
      clearInterval(this.#removedTimer);
      this.#removedTimer = undefined;
    }, REMOVED_SWEEP_MS);
    this.#removedTimer.unref();
  }

  /** `id`, whose first admission was audited, was removed: a re-add is not a first admission. */
  #rememberAdmitted(id: string): void {
    const set = this.#admittedRemoved;
    set.delete(id);
    if (set.size >= MAX_ADMITTED_REMOVED) set.delete(set.values().next().value as string);
    set.add(id);
  }

  /**
   * Settles `rb` with Redis 5 s from now. A method of its own: its timer's
   * closure then holds `rb` alone (created in replace(), it shared replace's
   * scope and held the whole replaced set, every runtime and budget of it,
   * for those 5 s: at 100 reloads a second, 500 sets).
   */
  #retire(rb: RedisBudget): void {
    const timer = setTimeout(() => {
      this.#retired.delete(rb);
      void rb.close();
    }, 5000);
    timer.unref();
    this.#retired.set(rb, timer);
  }

  #build(index: TenantIndex, prev: Snapshot | undefined): Snapshot {
    const snap = new Snapshot(index);
    const groups = new Map<string, TenantDecl[]>();
    for (const t of index.tenants) {
      const r = t.decl.rateLimit;
      if (r === undefined) continue;
      const key = `${r.requestsPerSec}/${r.burst}`;
      let g = groups.get(key);
      if (g === undefined) groups.set(key, (g = []));
      g.push(t.decl);
    }
    const slotOf = new Map<string, { table: TokenBucketTable; slot: number }>();
    const sharedOf = new Map<string, RedisBudget>();
    const shared = this.#o.shared;
    for (const g of groups.values()) {
      const r = g[0]!.rateLimit!;
      if (shared !== undefined) {
        // One lease-based Redis budget per (rate, burst): keys are per tenant id, shared by every replica.
        // A reload keeps the one it had for the same (rate, burst), connected, with its leases: a new one
        // fails open until its connection is up (about a second, counted as backend errors).
        const key = `${r.requestsPerSec}/${r.burst}`;
        const kept = prev?.redisByKey.get(key);
        if (kept !== undefined && kept.capacity >= g.length) {
          snap.redis.push(kept.rb);
          snap.redisByKey.set(key, kept);
          for (const d of g) sharedOf.set(d.id, kept.rb);
          continue;
        }
        // Room for twice the group (at least 64), so that a reload adding tenants of this rate keeps it.
        const capacity = Math.max(64, 2 * g.length);
        // One connection for every group (10,000 tenants of distinct rates made 10,000 connections
        // per replica, past Redis's default maxclients), already up when a reload adds a group.
        this.#redisClient ??= redisBudgetClient(shared.url, shared.commandTimeoutMs);
        const rb = new RedisBudget({
          client: this.#redisClient,
          url: shared.url,
          ratePerSec: r.requestsPerSec,
          burst: r.burst,
          maxTenantBuckets: capacity,
          commandTimeoutMs: shared.commandTimeoutMs,
          keyPrefix: 'siglake:tenant-rate:',
          onBackendError: shared.onBackendError,
          // A small bucket takes no credit, as a principal's: with credit, a request that found its
          // replica's lease spent while the next lease request was still out was admitted, so two
          // replicas admitted up to 2·N·L past a burst of 6 (seen on a loaded machine).
          credit: r.burst >= CREDIT_MIN_BURST,
        });
        snap.redis.push(rb);
        snap.redisByKey.set(key, { rb, capacity });
        for (const d of g) sharedOf.set(d.id, rb);
        continue;
      }
      const table = new TokenBucketTable({ ratePerSec: r.requestsPerSec, burst: r.burst, slots: g.length });
      snap.tables.push(table);
      g.forEach((d, slot) => {
        slotOf.set(d.id, { table, slot });
        // A tenant that stays keeps what its bucket holds (at most the new burst), whatever its rate
        // now: a reload gives back no token. (Every reload started the buckets full: a SIGHUP, the
        // audit file's logrotate included, gave every tenant a fresh burst, and 100 SIGHUPs in a
        // second a hundred.)
        // So does a tenant that comes back (a reverted edit, a half-written file read by the
        // reload before) while its old bucket is not full again (removed-tenants.ts).
        const was = prev?.byId.get(d.id);
        const held = was?.bucket != null ? was.bucket.tokens(was.slot) : this.#removed.takeBucket(d.id, performance.now());
        if (held !== undefined) table.setTokens(slot, held);
      });
    }
    for (const t of index.tenants) {
      const d = t.decl;
      const b = slotOf.get(t.id);
      const before = prev?.byId.get(t.id);
      const now = this.#clock.now();
      const budget = d.budget === undefined ? null : new Budget(d.budget, now);
      // A tenant that comes back takes back the counters it left this period (removed-tenants.ts), and
      // so does a budget whose period a reload changed and the next one changed back.
      if (budget !== null) {
        const kept = before?.budget;
        const from = kept != null && kept.decl.period === budget.decl.period ? kept : this.#removed.takeBudget(t.id, budget.decl.period);
        if (from !== undefined) budget.adopt(from, now);
      }
      const indexBudgets = new Map<string, Budget>();
      for (const [name, decl] of d.indexBudgets) {
        const ib = new Budget(decl, now);
        const kept = before?.indexBudgets.get(name);
        const was = kept !== undefined && kept.decl.period === decl.period ? kept : this.#removed.takeIndexBudget(t.id, name, decl.period);
        if (was !== undefined) ib.adopt(was, now);
        indexBudgets.set(name, ib);
      }
      const rt: TenantRuntime = {
        tenant: t,
        id: t.id,
        bucket: b?.table ?? null,
        slot: b?.slot ?? 0,
        shared: sharedOf.get(t.id) ?? null,
        budget,
        indexBudgets,
        indexes: d.indexes,
        series: this.#o.metrics?.series(t.id) ?? null,
        // Audited once per process: a tenant re-added after a removal had its first admission.
        admitted: before?.admitted ?? this.#admittedRemoved.has(t.id),
      };
      snap.byOrd.push(rt);
      snap.byId.set(t.id, rt);
    }
    return snap;
  }

  #arm(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    const tables = this.#snap.tables;
    if (tables.length === 0) return;
    const every = Math.min(...tables.map((t) => t.sweepIntervalMs));
    this.#timer = setInterval(() => {
      for (const t of tables) t.sweep();
    }, every);
    this.#timer.unref();
  }

  /**
   * Step 4, declared tenants first: the runtime of the principal's declared
   * tenant, or null (route as before declared tenants existed). Throws 403
   * SIGLAKE_TENANT_AMBIGUOUS, or header_mismatch when X-Scope-OrgID names
   * another tenant (a tenant is derived, never presented).
   */
  resolve(claims: Readonly<Record<string, unknown>> | undefined, orgId: string | undefined, orgIdCount: number, note?: AuditNote): TenantRuntime | null {
    const snap = this.#snap;
    const r = snap.index.resolve(claims);
    if (r === null) return null;
    if (r === AMBIGUOUS) {
      this.#o.metrics?.ambiguous.inc();
      noteRefusal(note, null, 'tenant_ambiguous');
      throw this.#ambiguous;
    }
    const rt = snap.byOrd[r.ord]!;
    // Raw header faults stay a 400 in every mode (ingest-contract.md §5), declared tenants included.
    if (orgIdCount > 1) throw this.#twoOrgIds;
    if (orgId !== undefined && orgId !== rt.id) {
      if (orgId === '') throw this.#emptyOrgId;
      for (let i = 0; i < orgId.length; i++) {
        const ch = orgId.charCodeAt(i);
        if (ch < 0x20 || ch === 0x7f) throw this.#controlOrgId;
        // A comma list is two headers folded into one (a proxy's, or Node's HTTP/2 layer's): a 400
        // as in every mode, not a mismatch (tenant-resolver.ts rawProblem).
        if (ch === 0x2c) throw this.#twoOrgIds;
      }
      noteRefusal(note, rt.id, 'header_mismatch');
      throw this.#headerMismatch;
    }
    return rt;
  }

  /** The declared tenant with this id, or null: one that a principal of no declared tenant was routed to (by claim, header or default). */
  runtimeOf(id: string): TenantRuntime | null {
    return this.#snap.byId.get(id) ?? null;
  }

  /** Whether the tenant has a bucket of its own (else the generic per-tenant bucket applies). */
  hasBucket(rt: TenantRuntime): boolean {
    return rt.bucket !== null || rt.shared !== null;
  }

  /**
   * Step 6 for a declared tenant with its own bucket, then the principal's:
   * 0, or seconds for Retry-After (a Promise while a shared lease is on its
   * way). The principal's bucket is read before the tenant's is spent and
   * spent after: neither is spent by the other's refusal. With Redis-shared
   * principal buckets the read sees what this replica knows (its lease, a
   * refusal Redis announced): a principal whose bucket another replica
   * emptied since may spend one token of its tenant's before its first
   * refusal here; from then on this replica refuses it from the read.
   */
  takeRate(rt: TenantRuntime, claims: Readonly<Record<string, unknown>> | undefined, note?: AuditNote): number | Promise<number> {
    const bucket = rt.bucket;
    if (bucket !== null && bucket.tokens(rt.slot) < 1) return this.#tenantLimited(rt, note, Math.max(1, bucket.take(rt.slot)));
    const p = this.#principals;
    const sub = claims?.['sub'];
    const pslot = p !== null && typeof sub === 'string' ? p.slotOf(sub) : -1;
    if (pslot >= 0) {
      const w = p!.peek(pslot);
      if (w > 0) return this.#principalLimited(rt, note, w);
    }
    const sp = this.#sharedPrincipals;
    if (sp !== null && typeof sub === 'string') {
      // Shared: only a refusal this replica already knows of (Redis said the bucket is empty) is seen before the tenant's take.
      const w = sp.peekTenant(sub);
      if (w > 0) return this.#principalLimited(rt, note, w);
    }
    if (rt.shared !== null) {
      const w = rt.shared.takeTenant(rt.id);
      if (typeof w !== 'number') return w.then((x) => this.#afterTenantTake(rt, claims, pslot, x, note));
      return this.#afterTenantTake(rt, claims, pslot, w, note);
    }
    return this.#afterTenantTake(rt, claims, pslot, bucket === null ? 0 : bucket.take(rt.slot), note);
  }

  #afterTenantTake(rt: TenantRuntime, claims: Readonly<Record<string, unknown>> | undefined, pslot: number, w: number, note: AuditNote | undefined): number | Promise<number> {
    if (w > 0) return this.#tenantLimited(rt, note, w);
    if (pslot >= 0) {
      const pw = this.#principals!.take(pslot);
      if (pw > 0) return this.#principalLimited(rt, note, pw);
      return 0;
    }
    const sp = this.#sharedPrincipals;
    const sub = claims?.['sub'];
    if (sp === null || typeof sub !== 'string') return 0;
    const pw = sp.takeTenant(sub);
    if (typeof pw !== 'number') return pw.then((x) => (x > 0 ? this.#principalLimited(rt, note, x) : 0));
    return pw > 0 ? this.#principalLimited(rt, note, pw) : 0;
  }

  #tenantLimited(rt: TenantRuntime, note: AuditNote | undefined, w: number): number {
    noteRefusal(note, rt.id, 'tenant_rate_limited');
    return w;
  }

  #principalLimited(rt: TenantRuntime, note: AuditNote | undefined, w: number): number {
    noteRefusal(note, rt.id, 'principal_rate_limited');
    return w;
  }

  /**
   * The principal's own bucket (`perPrincipalPerSec`, keyed by the verified
   * `sub`), after the generic tenant bucket: 0 or seconds (a Promise while a
   * shared lease is on its way).
   */
  takePrincipal(claims: Readonly<Record<string, unknown>> | undefined, tenant: string | null, note?: AuditNote): number | Promise<number> {
    if (claims === undefined) return 0;
    const sub = claims['sub'];
    if (typeof sub !== 'string') return 0;
    const sp = this.#sharedPrincipals;
    if (sp !== null) {
      const w = sp.takeTenant(sub);
      if (typeof w !== 'number') return w.then((x) => this.#principalTaken(tenant, x, note));
      return this.#principalTaken(tenant, w, note);
    }
    const p = this.#principals;
    if (p === null) return 0;
    return this.#principalTaken(tenant, p.take(p.slotOf(sub)), note);
  }

  /**
   * The principal's own bucket read, not spent: 0 while it holds a token, else
   * seconds for Retry-After (the refusal audited). Read before the generic
   * tenant bucket is spent, as a declared tenant's bucket is (takeRate): a
   * request its principal's bucket refuses spends nothing of its tenant's.
   * Shared buckets: only a refusal this replica already knows of is seen.
   */
  peekPrincipal(claims: Readonly<Record<string, unknown>> | undefined, tenant: string | null, note?: AuditNote): number {
    if (claims === undefined) return 0;
    const sub = claims['sub'];
    if (typeof sub !== 'string') return 0;
    const p = this.#principals;
    const sp = this.#sharedPrincipals;
    const w = p !== null ? p.peek(p.slotOf(sub)) : sp !== null ? sp.peekTenant(sub) : 0;
    return w > 0 ? this.#principalTaken(tenant, w, note) : 0;
  }

  #principalTaken(tenant: string | null, w: number, note: AuditNote | undefined): number {
    if (w > 0) noteRefusal(note, tenant, 'principal_rate_limited');
    return w;
  }

  /** Step 7: an index outside the tenant's declared subset is refused (403) before any budget. */
  checkIndex(rt: TenantRuntime, index: string | undefined, note?: AuditNote): void {
    if (index === undefined || rt.indexes === undefined || rt.indexes.has(index)) return;
    noteRefusal(note, rt.id, 'index_not_in_tenant');
    throw this.#indexRefused(index);
  }

  #indexRefused(index: string): IngestError {
    const key = `i\0${index}`;
    let e = this.#retry.get(key);
    if (e === undefined) {
      e = new IngestError('SIGLAKE_INDEX_NOT_IN_TENANT', `index not in tenant: this tenant cannot write index "${index}"`);
      if (this.#retry.size < 4096) this.#retry.set(key, e);
    }
    return e;
  }

  /**
   * Step 12, looked at during admission: index, tenant, then server budget of
   * the tenant the request writes to. Returns undefined while all have
   * something left; else the refusal of the first exhausted one (429 +
   * Retry-After to its period's end), which is not sent yet: step 11 (the
   * body) comes first, so the request goes on to its worker flagged to be
   * validated and refused (frames.ts FLAG_BUDGET_EXHAUSTED), and a bad body
   * still gets its 400. Charges, counts and audits nothing: budgetRefused()
   * does once the worker found the body valid. Allocates only when a budget
   * is exhausted.
   */
  checkBudgets(tenant: string, index: string | undefined, claims: Readonly<Record<string, unknown>> | undefined, note?: AuditNote): BudgetRefusal | undefined {
    const rt = this.#snap.byId.get(tenant);
    if (rt === undefined && this.#server === null) return undefined;
    const now = this.#clock.now();
    // The narrowest exhausted budget refuses (and names the refusal); Retry-After is the latest end
    // among every exhausted one, since a retry before it is refused again by a wider one (an index's
    // day budget and its tenant's month budget both spent: the month's end, not tonight).
    let own = 0;
    let wait = 0;
    let scope = '';
    // (Three checks written out: this runs for every request of a tenant with a budget, and allocates nothing.)
    const ib = rt === undefined || index === undefined ? undefined : rt.indexBudgets.get(index);
    if (ib !== undefined) {
      const w = ib.exhausted(now);
      if (w > 0) {
        scope = 'index';
        own = wait = w;
      }
    }
    if (rt !== undefined && rt.budget !== null) {
      const w = rt.budget.exhausted(now);
      if (w > 0) {
        if (scope === '') {
          scope = 'tenant';
          own = w;
        }
        if (w > wait) wait = w;
      }
    }
    if (this.#server !== null) {
      const w = this.#server.exhausted(now);
      if (w > 0) {
        if (scope === '') {
          scope = 'server';
          own = w;
        }
        if (w > wait) wait = w;
      }
    }
    if (wait === 0) return undefined;
    return { error: this.#budgetError(scope, own, wait), scope, rt, claims, note };
  }

  /**
   * A request whose budget was exhausted at admission had a valid body (or,
   * at admission, a caller without a BudgetSink): count it and note the
   * refusal's reason for its audit event; returns the 429 to send.
   */
  budgetRefused(d: BudgetRefusal): IngestError {
    noteRefusal(d.note, d.rt?.id ?? null, `budget_exhausted_${d.scope}`);
    return d.error;
  }

  #budgetError(scope: string, own: number, seconds: number): IngestError {
    const key = `${scope}\0${own}\0${seconds}`;
    let e = this.#retry.get(key);
    if (e === undefined) {
      const wider = seconds > own ? `; a wider budget is spent too, until ${seconds} s from now` : '';
      e = new IngestError('SIGLAKE_BUDGET_EXHAUSTED', `budget exhausted: the ${scope} budget is spent until its UTC period ends in ${own} s${wider}`, {
        retryAfterSecs: seconds,
      });
      if (this.#retry.size < 4096) this.#retry.set(key, e);
    }
    return e;
  }

  /**
   * A request to `tenant` was answered: a 200 charges every budget (narrowest
   * first) and counts, and the tenant's first (audited once per tenant per
   * process, with the subject and peer of `note`, the request's audit note).
   */
  completed(tenant: string, index: string | undefined, code: ErrorCode | undefined, records: number, bytes: number, note?: AuditNote): void {
    // A refusal is counted and audited where it is answered (Admission.refused), with its subject and peer.
    if (code !== undefined) return;
    const rt = this.#snap.byId.get(tenant);
    const now = this.#clock.now();
    if (rt === undefined && this.#removed.size > 0) {
      // A request that resolved a tenant a reload removed since: charged to what the tenant left,
      // which it takes back if it comes back this period (and which is pushed, with Redis).
      const left = this.#removed.get(tenant);
      if (left !== undefined) {
        if (index !== undefined) left.indexBudgets?.get(index)?.charge(records, bytes, now);
        left.budget?.charge(records, bytes, now);
      }
    }
    if (rt !== undefined) {
      // First admission: the first stored request (written at admission, before the body, it named
      // a request then refused, a 400 or a 413, and the tenant's first stored request was never audited).
      // An empty export request (nothing written) is not one.
      if (!rt.admitted && bytes > 0) {
        rt.admitted = true;
        this.#o.audit?.write({ event: 'tenant_first_admission', tenant: rt.id, subject: note?.subject ?? null, reason: null, remote: note?.remote ?? null });
      }
      if (index !== undefined) rt.indexBudgets.get(index)?.charge(records, bytes, now);
      rt.budget?.charge(records, bytes, now);
      const s = rt.series;
      if (s !== null) {
        s.outcome[ACCEPTED]!.inc();
        s.records.inc(records);
        s.bytes.inc(bytes);
      }
    }
    this.#server?.charge(records, bytes, now);
  }

  /**
   * A request of `tenant` was refused (Admission.refused: every refusal, once,
   * where it is answered): counted in siglake_tenant_requests_total under the
   * outcome of its code, when the tenant is declared. (Counted by the steps
   * that refused, most refusals were missing: a 413, a 415, an unknown index,
   * a lane-step refusal.)
   */
  countRefusal(tenant: string, code: ErrorCode): void {
    const s = this.#snap.byId.get(tenant)?.series;
    if (s === undefined || s === null) return;
    const outcome =
      code === 'SIGLAKE_RATE_LIMITED' ? RATE_LIMITED : code === 'SIGLAKE_BUDGET_EXHAUSTED' ? BUDGET_EXHAUSTED : code === 'SIGLAKE_INDEX_NOT_IN_TENANT' ? INDEX_REFUSED : REFUSED;
    s.outcome[outcome]!.inc();
  }

  /** Budget gauges: what is left of every declared tenant's budget. */
  remaining(): { tenant: string; unit: 'records' | 'bytes'; value: number }[] {
    const out: { tenant: string; unit: 'records' | 'bytes'; value: number }[] = [];
    const now = this.#clock.now();
    for (const rt of this.#snap.byOrd) {
      const b = rt.budget;
      if (b === null) continue;
      if (b.decl.records !== undefined) out.push({ tenant: rt.id, unit: 'records', value: b.remaining('records', now) });
      if (b.decl.bytes !== undefined) out.push({ tenant: rt.id, unit: 'bytes', value: b.remaining('bytes', now) });
    }
    return out;
  }

  async close(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    if (this.#removedTimer !== undefined) clearInterval(this.#removedTimer);
    this.#removedTimer = undefined;
    this.#principals?.close();
    // The budgets a recent reload replaced too, before their shared connection goes.
    for (const timer of this.#retired.values()) clearTimeout(timer);
    const retired = [...this.#retired.keys()];
    this.#retired.clear();
    await Promise.all([...this.#snap.redis, ...retired].map((rb) => rb.close()));
    this.#redisClient?.disconnect();
    await this.#sharedPrincipals?.close();
    await this.#sync?.close();
  }
}
