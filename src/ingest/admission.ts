// The admission checks of contract §4, in order, transport-agnostic. The
// synchronous path allocates nothing: refusals are prebuilt errors, lane
// lookup is two map reads, depth is one Atomics add. Only a JWT that missed
// the verified-token cache makes admit() return a Promise.
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

import type { IndexLookup } from '../indexes/ingest-index-set.js';
import type { Authenticator, AuthResult } from '../auth/authenticator.js';
import { IngestError } from '../errors.js';
import type { Lane, LaneTable } from '../lanes/lane-table.js';
import type { RateBudget } from '../limits/rate-budget.js';
import type { IngestMetrics } from '../metrics/ingest-metrics.js';
import type { AllowList } from '../tenancy/allow-list.js';
import type { TenantResolver } from '../tenancy/tenant-resolver.js';

export interface Breaker {
  isOpen(): boolean;
}

/** The request facts admission needs, read from HTTP headers or gRPC metadata. */
export interface IngestHeaders {
  authorization: string | undefined;
  orgId: string | undefined;
  orgIdCount: number;
  index: string | undefined;
  indexCount: number;
  /** A routing header the transport could not pass on faithfully (refused at step 4). */
  headerError?: IngestError | undefined;
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
  /** The index registry as ingest knows it (src/indexes/ingest-index-set.ts); absent: every valid index is taken. */
  indexes?: IndexLookup;
}

export class Admission {
  readonly #o: AdmissionOptions;
  readonly #memBreaker = new IngestError('SIGLAKE_MEM_BREAKER', 'memory breaker open: the ingester is shedding load, retry later');
  readonly #queueFull = new IngestError('SIGLAKE_QUEUE_FULL', 'lane queue full: retry later');
  readonly #laneCap: IngestError;
  readonly #atCapacity: IngestError;
  readonly #rateLimited = new Map<number, IngestError>();
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
   * throws the refusal (or returns a Promise for a JWT cache miss). Every
   * admitted request must end with finish().
   */
  admit(signal: 'logs' | 'traces', h: IngestHeaders): Lane | Promise<Lane> {
    const o = this.#o;
    if (o.breaker.isOpen()) {
      o.metrics.memBreakerRejected();
      o.metrics.rejected('mem_breaker');
      throw this.#memBreaker;
    }
    const wait = o.rateBudget.takeGlobal();
    if (typeof wait !== 'number') {
      return wait.then((w) => {
        if (w > 0) throw this.#limited(w);
        return this.#authenticate(signal, h);
      });
    }
    if (wait > 0) throw this.#limited(wait);
    return this.#authenticate(signal, h);
  }

  #authenticate(signal: 'logs' | 'traces', h: IngestHeaders): Lane | Promise<Lane> {
    const auth = this.#o.auth.authenticate(h.authorization);
    if (auth instanceof Promise) {
      return auth.then((r) => this.#afterAuth(signal, h, r));
    }
    return this.#afterAuth(signal, h, auth);
  }

  #afterAuth(signal: 'logs' | 'traces', h: IngestHeaders, auth: AuthResult): Lane | Promise<Lane> {
    const o = this.#o;
    let tenant: string;
    let index: string | undefined;
    if (h.headerError !== undefined) throw h.headerError;
    try {
      tenant = o.resolver.resolve(h.orgId, h.orgIdCount, auth.claims);
      index = o.resolver.resolveIndex(h.index, h.indexCount);
      o.allowList.check(tenant);
    } catch (e) {
      this.#countDenial(e);
      throw e;
    }
    // A managed index must exist in the tenant's registry before any lane or WAL directory does.
    if (index !== undefined && o.indexes !== undefined) {
      const known = o.indexes.has(tenant, index);
      if (known === false) {
        o.metrics.rejected('unknown_index');
        throw this.#unknownIndex;
      }
      if (known === undefined) throw this.#indexesUnknown;
    }
    // Rate limits check widest first; the tenant bucket needs the resolved tenant.
    const wait = o.rateBudget.takeTenant(tenant);
    if (typeof wait !== 'number') {
      return wait.then((w) => {
        if (w > 0) throw this.#limited(w);
        return this.#reserveLane(signal, tenant, index);
      });
    }
    if (wait > 0) throw this.#limited(wait);
    return this.#reserveLane(signal, tenant, index);
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
   * (and its tenant). Returns true when the lane was released.
   */
  finish(lane: Lane, status: number): boolean {
    const lanes = this.#o.lanes;
    Atomics.sub(lanes.depth, lane.slot, 1);
    if (status === 200) {
      lane.committed = true;
      return false;
    }
    return !lane.committed && lanes.releaseIfUnused(lane);
  }
}
