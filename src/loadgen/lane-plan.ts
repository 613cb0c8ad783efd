// Which (tenant, index) lanes the load goes to, and which client thread sends
// to which. Lane l is tenant `l mod tenants` and index `floor(l / tenants)`,
// so consecutive requests visit different tenants first. With at least as
// many lanes as threads, thread t owns the lanes l ≡ t (mod threads), so each
// thread signs only its own tenants' tokens; with fewer, threads share lanes.

import { BodyPool, type PooledBody } from './body-pool.js';
import type { JwtSigner } from './jwt-signer.js';
import type { LoadgenOptions } from './loadgen-options.js';

export interface LaneTarget {
  lane: number;
  /** Undefined when requests name no tenant (tenant mode none). */
  tenant: string | undefined;
  /** The X-Scope-OrgID value (tenant mode header only). */
  orgId: string | undefined;
  index: string | undefined;
  /** The Authorization header value, when any. */
  authorization: string | undefined;
  bodies: PooledBody[];
  /** Round-robin cursor into `bodies`. */
  cursor: number;
}

export class LanePlan {
  readonly #o: LoadgenOptions;
  readonly laneCount: number;

  constructor(opts: LoadgenOptions) {
    this.#o = opts;
    this.laneCount = opts.tenants * Math.max(1, opts.indexes);
  }

  tenantName(lane: number): string {
    return `${this.#o.tenantPrefix}${lane % this.#o.tenants}`;
  }

  indexName(lane: number): string | undefined {
    if (this.#o.indexes === 0) return undefined;
    return `${this.#o.indexPrefix}${Math.floor(lane / this.#o.tenants) % this.#o.indexes}`;
  }

  /** Lanes sent by thread `thread` of `threads`, in the order it visits them. */
  lanesOf(thread: number, threads: number): number[] {
    if (this.laneCount < threads) return [thread % this.laneCount];
    const out: number[] = [];
    for (let l = thread; l < this.laneCount; l += threads) out.push(l);
    return out;
  }

  /** The lane targets of one thread, with tokens signed and bodies made. */
  async targets(thread: number, threads: number, pool: BodyPool, signer: JwtSigner | undefined): Promise<LaneTarget[]> {
    const o = this.#o;
    const lanes = this.lanesOf(thread, threads);
    const pools = BodyPool.poolCount(this.laneCount, o.bodies, o.bodyBytes, o.poolBytes);
    // One token per tenant, even when the tenant has several index lanes.
    const tokens = new Map<string, string>();
    const out: LaneTarget[] = [];
    for (const lane of lanes) {
      const tenant = this.tenantName(lane);
      let authorization: string | undefined;
      if (o.tenantMode === 'jwt') {
        let t = tokens.get(tenant);
        if (t === undefined) {
          t = await signer!.sign(tenant, `loadgen-${lane % o.tenants}`);
          tokens.set(tenant, t);
        }
        authorization = `Bearer ${t}`;
      } else if (o.bearerToken !== undefined) {
        authorization = `Bearer ${o.bearerToken}`;
      }
      out.push({
        lane,
        tenant: o.tenantMode === 'none' ? undefined : tenant,
        orgId: o.tenantMode === 'header' ? tenant : undefined,
        index: this.indexName(lane),
        authorization,
        bodies: pool.pool(lane % pools),
        // Threads sharing a lane start at different bodies.
        cursor: thread,
      });
    }
    return out;
  }
}
