// The admission checks of contract §4, in order, transport-agnostic. The
// synchronous path allocates nothing: refusals are prebuilt errors, lane
// lookup is two map reads, depth is one Atomics add. admit() returns a Promise
// in two cases only: a JWT that missed the verified-token cache, and the Redis
// rate budget when its local lease is spent and it must ask Redis (global or
// tenant bucket).
//
//   1 memory breaker         503 + Retry-After: 1
//   2 global rate bucket     429 + Retry-After
//   3 authentication         401
//   4 tenant resolution      403 / 400 (and the x-siglake-index rule, 400)
//   5 --allowed-tenants      403 not_allowed
//     tenant rate bucket     429 (keyed by the resolved, allowed tenant: see below)
//   6 lane cap               503, no Retry-After
//   7 tenant cap             403 at_capacity
//   8 lane queue full        503 + Retry-After: 1
//
// The tenant's bucket is spent once the tenant is resolved, after
// authentication, so an unauthenticated flood naming a tenant can only spend
// the global bucket, never the tenant's (the seed's limiter read the raw header
// before authentication); and after the allow-list, so a tenant outside
// --allowed-tenants never occupies a bucket slot.
//
// Declared tenants (src/tenants, --tenants-file; only when configured) hook in
// at the call sites marked [declared tenants]: resolved first at step 4
// (ambiguity 403), the tenant's own bucket then the principal's at step 6,
// the index subset (403) before the lane steps. The budgets are looked at
// there too, but an exhausted one does not refuse yet: step 11 (the body)
// comes before step 12 (budgets), so the request is reserved and sent to its
// worker flagged to validate its body and refuse it (the refusal travels in
// the caller's BudgetSink; see the acceptors and frames.ts
// FLAG_BUDGET_EXHAUSTED). A bad body then gets its 400, a good one the 429;
// either way the refusal gives back its lane and tenant slot as any worker
// refusal does (finish(lane, false)).

import type { IndexLookup } from '../indexes/ingest-index-set.js';
import type { Authenticator, AuthResult } from '../auth/authenticator.js';
import { IngestError } from '../errors.js';
import type { Lane, LaneTable } from '../lanes/lane-table.js';
import type { RateBudget } from '../limits/rate-budget.js';
import type { IngestMetrics } from '../metrics/ingest-metrics.js';
import type { AllowList } from '../tenancy/allow-list.js';
import type { TenantResolver } from '../tenancy/tenant-resolver.js';
import type { AuditLog, AuditNote } from '../tenants/audit-log.js';
import type { BudgetRefusal, DeclaredTenants, TenantRuntime } from '../tenants/declared-tenants.js';

export interface Breaker {
  isOpen(): boolean;
}

/** The request facts admission needs, read from HTTP headers or gRPC metadata. */
export interface IngestHeaders {
  authorization: string | undefined;
  /** Authorization fields the request carried (a comma list counts as two); more than one is a 400. */
  authorizationCount: number;
  orgId: string | undefined;
  orgIdCount: number;
  index: string | undefined;
  indexCount: number;
  /** A routing header the transport could not pass on faithfully (refused at step 4). */
  headerError?: IngestError | undefined;
  /** The request's audit note (its peer address, then what admission learns), only while the audit stream is on (`auditing`). */
  audit?: AuditNote | undefined;
}

/** Where a request that passed the header checks goes. */
export interface Admitted {
  tenant: string;
  index: string | undefined;
  /** [declared tenants] a budget found exhausted (step 12): refused once the worker validated the body. */
  budget?: BudgetRefusal | undefined;
  /** The request's audit note (auditing on): the lane steps' refusals are written with it (the first admissions with the acceptor's, once it stored). */
  audit?: AuditNote | undefined;
}

/**
 * Where admit()/reserve() leave a request's deferred budget refusal (the
 * acceptor's per-request state): undefined, or the 429 to send when the
 * worker finds the body valid. The request must then be dispatched with
 * FLAG_BUDGET_EXHAUSTED.
 */
export interface BudgetSink {
  budget: BudgetRefusal | undefined;
}

export interface AdmissionOptions {
  breaker: Breaker;
  rateBudget: RateBudget;
  auth: Authenticator;
  resolver: TenantResolver;
  allowList: AllowList;
  lanes: LaneTable;
  metrics: IngestMetrics;
  maxTenants: number;
  queueCapacity: number;
  /** Declared tenants (src/tenants; --tenants-file, per-principal buckets, budgets); undefined: none declared. */
  tenants?: DeclaredTenants | undefined;
  /** The audit stream (`audit.file`): one event per refusal, whether or not tenants are declared. */
  audit?: AuditLog | undefined;
  /** The index registry as ingest knows it (src/indexes/ingest-index-set.ts); absent: every valid index is taken. */
  indexes?: IndexLookup;
}

/**
 * The headers as they are now. The HTTP acceptor fills one IngestHeaders
 * object per request and reuses it for the next, so a check that resumes
 * after an await (a JWT cache miss, a Redis lease) must read a copy: the
 * original may by then hold another request's token and X-Scope-OrgID.
 * Only the asynchronous paths pay for the copy.
 */
function copyHeaders(h: IngestHeaders): IngestHeaders {
  return {
    authorization: h.authorization,
    authorizationCount: h.authorizationCount,
    orgId: h.orgId,
    orgIdCount: h.orgIdCount,
    index: h.index,
    indexCount: h.indexCount,
    headerError: h.headerError,
    audit: h.audit,
  };
}

/** Fills `out` (or a fresh object) with where a request goes; one shape for both. */
function answer(
  out: Admitted | null,
  tenant: string,
  index: string | undefined,
  budget: BudgetRefusal | undefined,
  audit: AuditNote | undefined,
): Admitted {
  if (out === null) return { tenant, index, budget, audit };
  out.tenant = tenant;
  out.index = index;
  out.budget = budget;
  out.audit = audit;
  return out;
}

export class Admission {
  readonly #o: AdmissionOptions;
  readonly #memBreaker = new IngestError('SIGLAKE_MEM_BREAKER', 'memory breaker open: the ingester is shedding load, retry later');
  readonly #queueFull = new IngestError('SIGLAKE_QUEUE_FULL', 'lane queue full: retry later');
  readonly #twoAuthorizations = new IngestError('SIGLAKE_BAD_HEADER', 'bad header: Authorization sent more than once');
  readonly #laneCap: IngestError;
  readonly #atCapacity: IngestError;
  readonly #rateLimited = new Map<number, IngestError>();
  /** The synchronous path's answer, reused request after request (see #admitHeaders). */
  readonly #scratch: Admitted = { tenant: '', index: undefined, budget: undefined, audit: undefined };
  readonly #unknownIndex = new IngestError(
    'SIGLAKE_UNKNOWN_INDEX',
    'unknown index: this tenant has no index of the name in x-siglake-index (create it first: siglake index create, or PUT /api/v1/indexes/{name})',
  );
  readonly #indexesUnknown = new IngestError('SIGLAKE_UNAVAILABLE', 'the index registry has not been read yet: retry later');

  constructor(opts: AdmissionOptions) {
    this.#o = opts;
    this.#laneCap = new IngestError(
      'SIGLAKE_LANE_CAP',
      `Service Unavailable: ingester lane limit reached (${opts.lanes.maxLanes} lanes); route this traffic to another ingester or raise --ingest-max-lanes`,
    );
    this.#atCapacity = new IngestError(
      'SIGLAKE_TENANT_DENIED',
      `tenant denied (at_capacity): this ingester admits at most ${opts.maxTenants} tenants (--max-tenants)`,
      { reason: 'at_capacity' },
    );
  }

  /**
   * Runs checks 1-8 and returns the lane with one queue slot reserved, or
   * throws the refusal (or returns a Promise: a JWT cache miss, or a Redis
   * budget lease to fetch). Every
   * admitted request must end with finish(). `sink`: where a deferred budget
   * refusal is left ([declared tenants]; see BudgetSink).
   */
  admit(signal: 'logs' | 'traces', h: IngestHeaders, sink?: BudgetSink): Lane | Promise<Lane> {
    // The synchronous path fills one reused Admitted and reserves at once: no allocation.
    const pre = this.#admitHeaders(h, this.#scratch);
    if (pre instanceof Promise) return pre.then((p) => this.reserve(signal, p, sink));
    return this.reserve(signal, pre, sink);
  }

  /** [declared tenants] the worker found the body of a request with a deferred budget refusal valid: the 429 to send (counted, its reason noted). */
  budgetRefused(d: BudgetRefusal): IngestError {
    return this.#o.tenants!.budgetRefused(d);
  }

  /** Whether refusals are audited: the acceptors then read each request's peer address into its note. */
  get auditing(): boolean {
    return this.#o.audit !== undefined;
  }

  /** Whether the acceptors give each request a note (auditNote): while auditing, or with declared tenants (their counts). */
  get notes(): boolean {
    return this.#o.audit !== undefined || this.#o.tenants !== undefined;
  }

  /**
   * A request was refused (once: a request is refused once): writes its audit
   * event with what its note learned (tenant, subject, the refusing step's
   * reason, else the denial label, else the code; peer), and counts it in its
   * declared tenant's siglake_tenant_requests_total by outcome. Every refusal
   * an acceptor answers comes here (Answers.refuse, and gRPC's own answers).
   */
  refused(e: IngestError, note: AuditNote | undefined): void {
    if (note === undefined || note.done) return;
    note.done = true;
    this.#o.audit?.write({ event: 'refusal', tenant: note.tenant, subject: note.subject, reason: note.reason ?? e.reason ?? e.code, remote: note.remote });
    if (note.tenant !== null) this.#o.tenants?.countRefusal(note.tenant, e.code);
  }

  /**
   * The checks that need only the headers (1-5, the rate buckets, a declared
   * tenant's index subset and budgets): what the gRPC port runs on a call's
   * metadata, before a byte of its message is read (contract §6). Returns
   * where the request goes, or throws the refusal.
   */
  admitHeaders(h: IngestHeaders): Admitted | Promise<Admitted> {
    return this.#admitHeaders(h, null);
  }

  /**
   * `out`: where a synchronous admission writes its answer (the reused
   * #scratch, read by reserve() at once), or null for a fresh object (a caller
   * that keeps it, as the gRPC port does). Every path that resumes after an
   * await answers with a fresh object: another request may use #scratch first.
   */
  #admitHeaders(h: IngestHeaders, out: Admitted | null): Admitted | Promise<Admitted> {
    const o = this.#o;
    if (o.breaker.isOpen()) {
      o.metrics.memBreakerRejected();
      o.metrics.rejected('mem_breaker');
      throw this.#memBreaker;
    }
    const wait = o.rateBudget.takeGlobal();
    if (typeof wait !== 'number') {
      const held = copyHeaders(h); // the acceptor reuses `h` for its next request
      return wait.then((w) => {
        if (w > 0) throw this.#limited(w);
        return this.#authenticate(held, null);
      });
    }
    if (wait > 0) throw this.#limited(wait);
    return this.#authenticate(h, out);
  }

  #authenticate(h: IngestHeaders, out: Admitted | null): Admitted | Promise<Admitted> {
    // Two credentials: HTTP would use one and gRPC the other, so refuse both (contract §5).
    if (h.authorizationCount > 1) throw this.#twoAuthorizations;
    const auth = this.#o.auth.authenticate(h.authorization);
    if (auth instanceof Promise) {
      const held = copyHeaders(h); // the acceptor reuses `h` for its next request
      return auth.then((r) => this.#afterAuth(held, r, null));
    }
    return this.#afterAuth(h, auth, out);
  }

  #afterAuth(h: IngestHeaders, auth: AuthResult, out: Admitted | null): Admitted | Promise<Admitted> {
    const o = this.#o;
    let tenant: string;
    let index: string | undefined;
    const note = h.audit;
    if (note !== undefined) {
      const sub = auth.claims?.['sub'];
      note.subject = typeof sub === 'string' ? sub : null;
    }
    if (h.headerError !== undefined) throw h.headerError;
    let declared: TenantRuntime | null;
    try {
      // [declared tenants] step 4: declared tenants resolve first (403 ambiguous); none matched: as before.
      // Inside the try: its header_mismatch is a tenant denial, counted as every other one.
      declared = o.tenants === undefined ? null : o.tenants.resolve(auth.claims, h.orgId, h.orgIdCount, note);
      tenant = declared !== null ? declared.id : o.resolver.resolve(h.orgId, h.orgIdCount, auth.claims);
      if (note !== undefined) note.tenant = tenant;
      index = o.resolver.resolveIndex(h.index, h.indexCount);
      o.allowList.check(tenant);
    } catch (e) {
      this.#countDenial(e);
      throw e;
    }
    // [declared tenants] A principal of no declared tenant is routed as before
    // (claim, header, default); the tenant it lands in, when that one is
    // declared, still governs it: its bucket, its index subset (which the query
    // side applies to every reader) and its budgets are the tenant's, whoever writes.
    const rt = declared ?? (o.tenants === undefined ? null : o.tenants.runtimeOf(tenant));
    // [declared tenants] step 6 for a tenant with its own bucket: tenant, then principal.
    if (rt !== null && o.tenants!.hasBucket(rt)) {
      const w = o.tenants!.takeRate(rt, auth.claims, note);
      if (typeof w !== 'number') {
        return w.then((x) => {
          if (x > 0) throw this.#limited(x);
          return this.#afterRate(tenant, index, rt, auth, null, note);
        });
      }
      if (w > 0) throw this.#limited(w);
      return this.#afterRate(tenant, index, rt, auth, out, note);
    }
    // Rate limits check widest first; the tenant bucket needs the resolved tenant. The principal's
    // bucket is read before it is spent (and spent after): its refusal spends nothing of the tenant's.
    if (o.tenants !== undefined) {
      const pw = o.tenants.peekPrincipal(auth.claims, rt?.id ?? null, note);
      if (pw > 0) throw this.#limited(pw);
    }
    const wait = o.rateBudget.takeTenant(tenant);
    if (typeof wait !== 'number') {
      return wait.then((w) => {
        if (w > 0) throw this.#limited(w);
        return this.#afterTenantRate(tenant, index, rt, auth, null, note);
      });
    }
    if (wait > 0) throw this.#limited(wait);
    return this.#afterTenantRate(tenant, index, rt, auth, out, note);
  }

  /** [declared tenants] the principal's bucket after the generic tenant bucket (a Promise while a shared lease is on its way). */
  #afterTenantRate(
    tenant: string,
    index: string | undefined,
    declared: TenantRuntime | null,
    auth: AuthResult,
    out: Admitted | null,
    note: AuditNote | undefined,
  ): Admitted | Promise<Admitted> {
    const gate = this.#o.tenants;
    if (gate !== undefined) {
      const w = gate.takePrincipal(auth.claims, declared?.id ?? null, note);
      if (typeof w !== 'number') {
        return w.then((x) => {
          if (x > 0) throw this.#limited(x);
          return this.#afterRate(tenant, index, declared, auth, null, note);
        });
      }
      if (w > 0) throw this.#limited(w);
    }
    return this.#afterRate(tenant, index, declared, auth, out, note);
  }

  /** Step 7 (an unknown index, 400; [declared tenants] outside the tenant's subset, 403) and step 12's check (budgets, 429). */
  #afterRate(tenant: string, index: string | undefined, declared: TenantRuntime | null, auth: AuthResult, out: Admitted | null, note: AuditNote | undefined): Admitted {
    const o = this.#o;
    // Step 7: a managed index must exist in the tenant's registry before any lane or WAL directory does.
    if (index !== undefined && o.indexes !== undefined) {
      const known = o.indexes.has(tenant, index);
      if (known === false) {
        o.metrics.rejected('unknown_index');
        throw this.#unknownIndex;
      }
      if (known === undefined) throw this.#indexesUnknown;
    }
    const gate = o.tenants;
    if (gate === undefined) return answer(out, tenant, index, undefined, note);
    if (declared !== null) gate.checkIndex(declared, index, note);
    // Step 12 looked at now, refused after step 11 (the body) by the worker: see BudgetSink.
    const budget = gate.checkBudgets(tenant, index, auth.claims, note);
    return answer(out, tenant, index, budget, note);
  }

  /**
   * Steps 8-10 for a request that passed admitHeaders(): reserves one queue
   * slot of its lane, and leaves its deferred budget refusal in `sink`.
   */
  reserve(signal: 'logs' | 'traces', a: Admitted, sink?: BudgetSink): Lane {
    // A caller with nowhere to carry the refusal gets it now, before the body (the order of old).
    if (a.budget !== undefined && sink === undefined) throw this.#o.tenants!.budgetRefused(a.budget);
    const lane = this.#reserveLane(signal, a.tenant, a.index);
    if (sink !== undefined) sink.budget = a.budget;
    // [declared tenants] a tenant's first admission is audited once its first request is stored
    // (DeclaredTenants.completed): here, before the body, it named requests then refused (400, 413).
    return lane;
  }

  /** Steps 6-8: lane cap, tenant cap, queue depth; reserves one queue slot. */
  #reserveLane(signal: 'logs' | 'traces', tenant: string, index: string | undefined): Lane {
    const o = this.#o;
    const lanes = o.lanes;
    const entry = lanes.tenant(tenant);
    let lane = lanes.find(entry, signal, index);
    if (lane === undefined) {
      if (lanes.isFull()) {
        o.metrics.rejected('lane_cap');
        throw this.#laneCap;
      }
      if (entry === undefined && o.maxTenants > 0 && lanes.tenantCount >= o.maxTenants) {
        o.metrics.denied('at_capacity');
        throw this.#atCapacity;
      }
      lane = lanes.create(tenant, signal, index);
    }
    const depth = Atomics.load(lanes.depth, lane.slot);
    if (depth >= o.queueCapacity) {
      o.metrics.rejected('queue_full');
      throw this.#queueFull;
    }
    Atomics.add(lanes.depth, lane.slot, 1);
    o.metrics.queueDepth(depth);
    return lane;
  }

  #countDenial(e: unknown): void {
    if (e instanceof IngestError && e.reason !== undefined) this.#o.metrics.denied(e.reason);
  }

  #limited(seconds: number): IngestError {
    this.#o.metrics.rejected('rate_limited');
    let err = this.#rateLimited.get(seconds);
    if (err === undefined) {
      err = new IngestError('SIGLAKE_RATE_LIMITED', `rate limited: retry in ${seconds} s`, { retryAfterSecs: seconds });
      if (this.#rateLimited.size < 4096) this.#rateLimited.set(seconds, err);
    }
    return err;
  }

  /**
   * Ends an admitted request: frees its queue slot; a written request commits
   * its lane, and a refused one on a lane that never wrote releases the lane
   * (and its tenant). Returns true when the lane was released. `note`: the
   * request's audit note (auditing on), for the lane's first admission.
   */
  finish(lane: Lane, stored: boolean, note?: AuditNote): boolean {
    const lanes = this.#o.lanes;
    Atomics.sub(lanes.depth, lane.slot, 1);
    if (stored) {
      if (!lane.committed) {
        lane.committed = true;
        // Audit: a lane's first admission is its first stored request (a lane a refused request
        // opened, then released, was audited as admitted before stop 45), with who stored it.
        // Written whether or not tenants are declared (it was written only through the
        // declared tenants, so an audit file without a tenants file never had one).
        this.#o.audit?.write({
          event: 'lane_first_admission',
          tenant: lane.tenant,
          subject: note?.subject ?? null,
          reason: null,
          remote: note?.remote ?? null,
          signal: lane.signal,
          index: lane.index ?? null,
        });
      }
      return false;
    }
    return !lane.committed && lanes.releaseIfUnused(lane);
  }
}
