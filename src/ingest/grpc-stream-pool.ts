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
//
// Every call enters and leaves this pool, so it keeps its calls in a table
// kept for life, not in a Set per tenant: a Set's table is copied as it grows
// and empties, and a promoted, dead copy keeps its successor and the calls in
// it alive through the acceptor's scavenges (docs/performance.md, "Stop 51").
// A tenant's calls are a list threaded through the table by index, oldest
// first (typed arrays: no object points at another call); the table and the
// tenants' arrays double when full and never shrink.

/** One call's slot (GrpcAcceptor owns it). */
export interface StreamSlot {
  /** Whether it holds a slot of the pool now. */
  counted: boolean;
  /** Its tenant once admission resolved it; undefined before (nobody's, and never taken). */
  tenant: string | undefined;
  /** Its whole message arrived: no longer taken for another tenant. */
  received: boolean;
  /** The pool's: its place in the pool's table while it holds an attributed slot, else -1. */
  seat: number;
  /**
   * Refuses the call (the pool's refusal); called after its slot was given up.
   * False: the call was over already (answered, or its stream gone, its end
   * not yet reported to the pool): nothing was taken from it, and no
   * preemption is counted.
   */
  preempt(): boolean;
}

const NONE = -1;
/** Tenants with no slot are forgotten (their index reused) once this many are known. */
const FORGET_AT = 1024;

export class StreamPool {
  #open = 0;
  // The calls holding attributed slots: one place each, threaded per tenant.
  #slots: (StreamSlot | undefined)[];
  #tenantOf: Int32Array;
  #next: Int32Array;
  #prev: Int32Array;
  #freeSeats: Int32Array;
  #freeSeatCount: number;
  // Tenants by index: how many places each holds, its list, and when it last began holding.
  readonly #index = new Map<string, number>();
  #count: Int32Array;
  #head: Int32Array;
  #tail: Int32Array;
  #since: Float64Array;
  #freeTenants: number[] = [];
  #tenantsEver = 0;
  #holders = 0;
  #began = 0;
  #forgetAt = FORGET_AT;

  constructor(
    readonly max: number,
    capacity = 64,
  ) {
    const cap = Math.max(2, capacity);
    this.#slots = new Array<StreamSlot | undefined>(cap).fill(undefined);
    this.#tenantOf = new Int32Array(cap);
    this.#next = new Int32Array(cap);
    this.#prev = new Int32Array(cap);
    this.#freeSeats = new Int32Array(cap);
    for (let i = 0; i < cap; i++) this.#freeSeats[i] = cap - 1 - i;
    this.#freeSeatCount = cap;
    const tcap = 8;
    this.#count = new Int32Array(tcap);
    this.#head = new Int32Array(tcap).fill(NONE);
    this.#tail = new Int32Array(tcap).fill(NONE);
    this.#since = new Float64Array(tcap);
  }

  /** Calls holding a slot. */
  get open(): number {
    return this.#open;
  }

  /** Places the table has now (it doubles when full and never shrinks). */
  get capacity(): number {
    return this.#slots.length;
  }

  /** Tenants the pool knows by index now, those holding no slot included (bounded: see FORGET_AT). */
  get tenantsKnown(): number {
    return this.#index.size;
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
    if (slot.seat !== NONE) this.#unseat(slot);
    slot.tenant = tenant;
    if (!slot.counted) return;
    const t = this.#tenant(tenant);
    if (this.#freeSeatCount === 0) this.#grow();
    const s = this.#freeSeats[--this.#freeSeatCount]!;
    this.#slots[s] = slot;
    this.#tenantOf[s] = t;
    this.#next[s] = NONE;
    const tail = this.#tail[t]!;
    this.#prev[s] = tail;
    if (tail === NONE) this.#head[t] = s;
    else this.#next[tail] = s;
    this.#tail[t] = s;
    if (this.#count[t]++ === 0) {
      this.#holders++;
      this.#since[t] = this.#began++;
    }
    slot.seat = s;
  }

  /** Gives the call's slot back (idempotent). */
  release(slot: StreamSlot): void {
    if (!slot.counted) return;
    slot.counted = false;
    this.#open--;
    if (slot.seat !== NONE) this.#unseat(slot);
  }

  /**
   * A call of `tenant` found the pool full when it started: gives it a slot,
   * freed by then or taken from the largest holder when `tenant` holds less
   * than its fair share. False: it stays refused. The call taken from is
   * refused (its preempt()) after the slot moved; returns that it happened
   * through `preempted` (not when that call was over already: its slot was
   * free to give, and nobody was taken).
   */
  admitLate(slot: StreamSlot, tenant: string, preempted: () => void): boolean {
    if (this.take(slot)) {
      this.attribute(slot, tenant);
      return true;
    }
    const mine = this.#index.get(tenant);
    const held = mine === undefined ? 0 : this.#count[mine]!;
    const holders = this.#holders + (held === 0 ? 1 : 0);
    const share = Math.floor(this.max / holders);
    if (held >= share) return false;
    // The oldest call still waiting for its message, of the largest holder above its share that has
    // one (of equals, the one holding slots the longest).
    let victim = NONE;
    let from = 0;
    let fromSince = 0;
    for (let t = 0; t < this.#tenantsEver; t++) {
      const n = this.#count[t]!;
      if (t === mine || n <= share || n < from || (n === from && this.#since[t]! > fromSince)) continue;
      for (let s = this.#head[t]!; s !== NONE; s = this.#next[s]!) {
        if (!this.#slots[s]!.received) {
          victim = s;
          from = n;
          fromSince = this.#since[t]!;
          break;
        }
      }
    }
    if (victim === NONE) return false;
    const taken = this.#slots[victim]!;
    this.release(taken);
    this.take(slot);
    this.attribute(slot, tenant);
    if (taken.preempt()) preempted();
    return true;
  }

  /** Takes `slot` out of its tenant's list and frees its place (the table forgets the call). */
  #unseat(slot: StreamSlot): void {
    const s = slot.seat;
    slot.seat = NONE;
    const t = this.#tenantOf[s]!;
    const prev = this.#prev[s]!;
    const next = this.#next[s]!;
    if (prev === NONE) this.#head[t] = next;
    else this.#next[prev] = next;
    if (next === NONE) this.#tail[t] = prev;
    else this.#prev[next] = prev;
    this.#slots[s] = undefined;
    this.#freeSeats[this.#freeSeatCount++] = s;
    if (--this.#count[t]! === 0) this.#holders--;
  }

  /** The index of `tenant`, given one when new (tenants holding nothing are forgotten in bulk past #forgetAt). */
  #tenant(tenant: string): number {
    const known = this.#index.get(tenant);
    if (known !== undefined) return known;
    if (this.#index.size >= this.#forgetAt) this.#forgetIdle();
    let t = this.#freeTenants.pop();
    if (t === undefined) {
      t = this.#tenantsEver++;
      if (t === this.#count.length) this.#growTenants();
    }
    this.#index.set(tenant, t);
    return t;
  }

  #forgetIdle(): void {
    for (const [name, t] of this.#index) {
      if (this.#count[t] !== 0) continue;
      this.#index.delete(name);
      this.#freeTenants.push(t);
    }
    this.#forgetAt = Math.max(FORGET_AT, 2 * this.#index.size);
  }

  #grow(): void {
    const old = this.#slots.length;
    const cap = old * 2;
    const slots = new Array<StreamSlot | undefined>(cap).fill(undefined);
    for (let s = 0; s < old; s++) slots[s] = this.#slots[s];
    this.#slots = slots;
    this.#tenantOf = widen(this.#tenantOf, cap);
    this.#next = widen(this.#next, cap);
    this.#prev = widen(this.#prev, cap);
    this.#freeSeats = new Int32Array(cap);
    for (let i = 0; i < cap - old; i++) this.#freeSeats[i] = cap - 1 - i;
    this.#freeSeatCount = cap - old;
  }

  #growTenants(): void {
    const cap = this.#count.length * 2;
    const old = this.#count.length;
    this.#count = widen(this.#count, cap);
    this.#head = widen(this.#head, cap);
    this.#head.fill(NONE, old);
    this.#tail = widen(this.#tail, cap);
    this.#tail.fill(NONE, old);
    const since = new Float64Array(cap);
    since.set(this.#since);
    this.#since = since;
  }
}

function widen(a: Int32Array, cap: number): Int32Array {
  const b = new Int32Array(cap);
  b.set(a);
  return b;
}
