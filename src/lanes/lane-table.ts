// The acceptor's table of (tenant, index) lanes and the tenants they belong to.
// A lane is assigned to one worker shard for the life of the process. Each lane
// has a slot in a SharedArrayBuffer of depth counters (commands admitted and
// not yet answered), so a second acceptor thread could share them.
//
// A lane is provisional until its first request is written; if every request
// of a provisional lane is refused (a bad body, say), the lane and, with it,
// a tenant that has no other lane are removed again, so a refused request
// leaves nothing behind (contract §4). Written lanes are never released.

import type { LaneSpec } from '../shard/frames.js';
import { LaneKey } from '../shard/lane-key.js';

export interface Lane extends LaneSpec {
  /** The lane's name in every form (shard, WAL directory, labels). */
  readonly key: LaneKey;
  readonly slot: number;
  readonly shard: number;
  readonly tenantEntry: TenantEntry;
  /** True once a request on the lane was written. */
  committed: boolean;
  /**
   * The dispatcher's own mark: the epoch of its shard's worker that was told
   * of the lane (0: none). A field, not a set of lane ids, so the check each
   * request makes is no hash lookup among 10,000 lanes.
   */
  announcedEpoch: number;
}

export class TenantEntry {
  logs: Lane | undefined = undefined;
  traces: Lane | undefined = undefined;
  indexes: Map<string, Lane> | undefined = undefined;
  lanes = 0;
  constructor(readonly name: string) {}
}

export class LaneTable {
  readonly maxLanes: number;
  readonly workers: number;
  /** Depth counter per lane slot. */
  readonly depth: Int32Array;
  readonly #tenants = new Map<string, TenantEntry>();
  readonly #freeSlots: number[] = [];
  #nextSlot = 0;
  #nextId = 1;
  #lanes = 0;

  constructor(maxLanes: number, workers: number, depthSab?: SharedArrayBuffer) {
    this.maxLanes = maxLanes;
    this.workers = workers;
    this.depth = new Int32Array(depthSab ?? new SharedArrayBuffer(maxLanes * 4));
  }

  get laneCount(): number {
    return this.#lanes;
  }

  get tenantCount(): number {
    return this.#tenants.size;
  }

  tenant(name: string): TenantEntry | undefined {
    return this.#tenants.get(name);
  }

  /** The lane for a request, or undefined when it would be novel. No allocation. */
  find(entry: TenantEntry | undefined, signal: 'logs' | 'traces', index: string | undefined): Lane | undefined {
    if (entry === undefined) return undefined;
    if (index === undefined) return signal === 'logs' ? entry.logs : entry.traces;
    return entry.indexes?.get(index);
  }

  /** True when a novel lane would pass the cap. */
  isFull(): boolean {
    return this.#lanes >= this.maxLanes;
  }

  /** Creates a lane (and its tenant entry). The caller has checked both caps. */
  create(tenant: string, signal: 'logs' | 'traces', index: string | undefined): Lane {
    if (this.isFull()) throw new Error('lane table is full');
    let entry = this.#tenants.get(tenant);
    if (entry === undefined) {
      entry = new TenantEntry(tenant);
      this.#tenants.set(tenant, entry);
    }
    const slot = this.#freeSlots.length > 0 ? this.#freeSlots.pop()! : this.#nextSlot++;
    Atomics.store(this.depth, slot, 0);
    const key = LaneKey.of(tenant, signal, index);
    const lane: Lane = {
      id: this.#nextId++,
      tenant,
      index,
      signal: index === undefined ? signal : 'logs',
      key,
      slot,
      shard: key.shard(this.workers),
      tenantEntry: entry,
      committed: false,
      announcedEpoch: 0,
    };
    if (index === undefined) {
      if (signal === 'logs') entry.logs = lane;
      else entry.traces = lane;
    } else {
      (entry.indexes ??= new Map()).set(index, lane);
    }
    entry.lanes++;
    this.#lanes++;
    return lane;
  }

  /**
   * Removes a provisional lane that has nothing in flight; removes its tenant
   * too when that was its only lane. Returns false (and does nothing) otherwise.
   */
  releaseIfUnused(lane: Lane): boolean {
    if (lane.committed || Atomics.load(this.depth, lane.slot) !== 0) return false;
    const entry = lane.tenantEntry;
    if (lane.index === undefined) {
      if (entry.logs === lane) entry.logs = undefined;
      else if (entry.traces === lane) entry.traces = undefined;
      else return false;
    } else if (entry.indexes?.get(lane.index) === lane) {
      entry.indexes.delete(lane.index);
    } else {
      return false;
    }
    entry.lanes--;
    this.#lanes--;
    this.#freeSlots.push(lane.slot);
    if (entry.lanes === 0) this.#tenants.delete(entry.name);
    return true;
  }

  /** Every lane of a shard, for a restarted worker. */
  lanesOfShard(shard: number): Lane[] {
    const out: Lane[] = [];
    for (const e of this.#tenants.values()) {
      if (e.logs?.shard === shard) out.push(e.logs);
      if (e.traces?.shard === shard) out.push(e.traces);
      if (e.indexes) for (const l of e.indexes.values()) if (l.shard === shard) out.push(l);
    }
    return out;
  }
}
