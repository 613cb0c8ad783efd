// The gRPC port's pool of open calls (--grpc-max-streams), shared fairly by
// tenants. A call takes a slot when it starts, before its tenant is known (so
// a flood of calls is bounded before any work); once admission resolved its
// tenant, the slot is that tenant's. When the pool is full, a call of a tenant
// holding fewer slots than its fair share (the pool divided by the tenants
// holding slots, the caller included) takes the slot of the largest holder's
// oldest call still waiting for its message, which is refused as the pool's
// refusal is: one tenant keeping every slot open with stalled calls cannot
// lock the others out until --request-timeout-secs. A call whose whole message
// arrived is never taken: it is being written and ends soon on its own.

/** One call's slot (GrpcAcceptor owns it). */
export interface StreamSlot {
  /** Whether it holds a slot of the pool now. */
  counted: boolean;
  /** Its tenant once admission resolved it; undefined before (nobody's, and never taken). */
  tenant: string | undefined;
  /** Its whole message arrived: no longer taken for another tenant. */
  received: boolean;
  /** Refuses the call (the pool's refusal); called after its slot was given up. */
  preempt(): void;
}

export class StreamPool {
  #open = 0;
  /** Each tenant's calls holding a slot, oldest first (a Set keeps insertion order). */
  readonly #byTenant = new Map<string, Set<StreamSlot>>();

  constructor(readonly max: number) {}

  /** Calls holding a slot. */
  get open(): number {
    return this.#open;
  }

  /** Takes a free slot for a starting call; false when the pool is full. */
  take(slot: StreamSlot): boolean {
    if (this.#open >= this.max) return false;
    this.#open++;
    slot.counted = true;
    return true;
  }

  /** The call's tenant is known: its slot (if it holds one) is now that tenant's. */
  attribute(slot: StreamSlot, tenant: string): void {
    slot.tenant = tenant;
    if (!slot.counted) return;
    let set = this.#byTenant.get(tenant);
    if (set === undefined) this.#byTenant.set(tenant, (set = new Set()));
    set.add(slot);
  }

  /** Gives the call's slot back (idempotent). */
  release(slot: StreamSlot): void {
    if (!slot.counted) return;
    slot.counted = false;
    this.#open--;
    const t = slot.tenant;
    if (t === undefined) return;
    const set = this.#byTenant.get(t);
    if (set === undefined) return;
    set.delete(slot);
    if (set.size === 0) this.#byTenant.delete(t);
  }

  /**
   * A call of `tenant` found the pool full when it started: gives it a slot,
   * freed by then or taken from the largest holder when `tenant` holds less
   * than its fair share. False: it stays refused. The call taken from is
   * refused (its preempt()) after the slot moved; returns that it happened
   * through `preempted`.
   */
  admitLate(slot: StreamSlot, tenant: string, preempted: () => void): boolean {
    if (this.take(slot)) {
      this.attribute(slot, tenant);
      return true;
    }
    const mine = this.#byTenant.get(tenant)?.size ?? 0;
    const holders = this.#byTenant.size + (mine === 0 ? 1 : 0);
    const share = Math.floor(this.max / holders);
    if (mine >= share) return false;
    // The oldest call still waiting for its message, of the largest holder above its share that has one.
    let victim: StreamSlot | undefined;
    let from = 0;
    for (const [t, set] of this.#byTenant) {
      if (t === tenant || set.size <= share || set.size <= from) continue;
      for (const s of set) {
        if (!s.received) {
          victim = s;
          from = set.size;
          break;
        }
      }
    }
    if (victim === undefined) return false;
    this.release(victim);
    this.take(slot);
    this.attribute(slot, tenant);
    preempted();
    victim.preempt();
    return true;
  }
}
