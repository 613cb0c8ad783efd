// A bounded map from tenant id to a slot number in [0, capacity), with an
// intrusive least-recently-used list on typed arrays: a lookup that hits moves
// the slot to the front and allocates nothing. When every slot is taken, a novel
// tenant may reuse one of the least recently used slots, but only one that its
// owner reports idle; otherwise it gets no slot and the owner falls back. A
// slot its owner removes (its tenant gone for good) is reused first.

import { LimitsError } from './limits-error.js';

/** How many of the least recently used slots a novel tenant inspects for an idle one. */
export const EVICTION_PROBES = 8;

const NONE = -1;

export class TenantSlots {
  readonly #capacity: number = 0;
  readonly #index = new Map<string, number>();
  readonly #names: (string | undefined)[];
  /** Towards the front (more recently used); NONE at the front. */
  readonly #prev: Int32Array;
  /** Towards the back (less recently used); NONE at the back. */
  readonly #next: Int32Array;
  #front = NONE;
  #back = NONE;
  #used = 0;
  /** Slots remove() freed, reused before any other. */
  readonly #free: number[] = [];
  #evicted: string | undefined = undefined;

  constructor(capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1 || capacity > 2 ** 24) {
      throw new LimitsError('SIGLAKE_LIMITS_BAD_PARAM', `maxTenantBuckets must be an integer in [1, 2^24], got ${String(capacity)}`, 'maxTenantBuckets');
    }
    this.#capacity = capacity;
    this.#names = new Array<string | undefined>(capacity).fill(undefined);
    this.#prev = new Int32Array(capacity).fill(NONE);
    this.#next = new Int32Array(capacity).fill(NONE);
  }

  get capacity(): number {
    return this.#capacity;
  }

  /** Tenants holding a slot now. */
  get size(): number {
    return this.#used - this.#free.length;
  }

  /** The tenant whose slot the last successful assign() took over, if it evicted one. */
  get lastEvicted(): string | undefined {
    return this.#evicted;
  }

  /** The tenant holding `slot`, if any. */
  tenantAt(slot: number): string | undefined {
    return this.#names[slot];
  }

  /** The slot of a known tenant, leaving the order as it is, or -1. */
  peek(tenant: string): number {
    return this.#index.get(tenant) ?? NONE;
  }

  /** The slot of a known tenant (now the most recently used), or -1. */
  lookup(tenant: string): number {
    const slot = this.#index.get(tenant);
    if (slot === undefined) return NONE;
    if (slot !== this.#front) {
      this.#unlink(slot);
      this.#pushFront(slot);
    }
    return slot;
  }

  /**
   * Give a novel tenant a slot: a never used one while any is left, else one of the
   * EVICTION_PROBES least recently used slots for which `isIdle(slot)` is true
   * (its tenant is forgotten; see lastEvicted). Returns -1 when none is idle.
   */
  assign(tenant: string, isIdle: (slot: number) => boolean): number {
    this.#evicted = undefined;
    let slot: number;
    if (this.#free.length > 0) {
      slot = this.#free.pop()!;
    } else if (this.#used < this.#capacity) {
      slot = this.#used++;
    } else {
      slot = NONE;
      for (let s = this.#back, probes = 0; s !== NONE && probes < EVICTION_PROBES; s = this.#prev[s], probes++) {
        if (isIdle(s)) {
          slot = s;
          break;
        }
      }
      if (slot === NONE) return NONE;
      const old = this.#names[slot] as string;
      this.#index.delete(old);
      this.#evicted = old;
      this.#unlink(slot);
    }
    this.#names[slot] = tenant;
    this.#index.set(tenant, slot);
    this.#pushFront(slot);
    return slot;
  }

  /**
   * Forget `tenant` and free its slot for the next novel tenant (before any
   * never used one). Returns the slot it held, or -1.
   */
  remove(tenant: string): number {
    const slot = this.#index.get(tenant);
    if (slot === undefined) return NONE;
    this.#index.delete(tenant);
    this.#names[slot] = undefined;
    this.#unlink(slot);
    this.#free.push(slot);
    return slot;
  }

  #unlink(slot: number): void {
    const p = this.#prev[slot];
    const n = this.#next[slot];
    if (p === NONE) this.#front = n;
    else this.#next[p] = n;
    if (n === NONE) this.#back = p;
    else this.#prev[n] = p;
    this.#prev[slot] = NONE;
    this.#next[slot] = NONE;
  }

  #pushFront(slot: number): void {
    this.#prev[slot] = NONE;
    this.#next[slot] = this.#front;
    if (this.#front !== NONE) this.#prev[this.#front] = slot;
    this.#front = slot;
    if (this.#back === NONE) this.#back = slot;
  }
}
