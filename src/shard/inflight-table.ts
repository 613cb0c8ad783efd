// The dispatcher's requests in flight, by request id: a slot table that keeps
// its arrays for life, not a Map.
//
// Why not a Map: every request enters and leaves it, and at 16,000 requests a
// second a Map<number, InFlight> made the acceptor's scavenges copy and promote
// every request's objects (about 2 MB a scavenge, each one pausing the thread
// 5-7 ms: P4's tail, docs/performance.md, stop 50). V8 copies a Map's table
// whenever it grows or shrinks and links the old table to its successor (for
// live iterators); once an old table is promoted and dies, the scavenger still
// follows its recorded pointer to the next one, so each table, and every
// request in it, survives and is promoted in turn. With this table the same
// run's scavenges kept 11 KB and paused about 1 ms.
//
// A request's id picks its slot (id & mask); ids go up, skipping any whose slot
// is still taken, and the table doubles when half full, so a slot is found in a
// step or two and an id is unique among the requests in flight.

/** Largest request id; the next one after it is 1 (0 is never an id). */
export const MAX_REQUEST_ID = 0x7ffffffe;

export class InflightTable<R, L> {
  #ids!: Int32Array;
  #reqs!: (R | undefined)[];
  #lanes!: (L | undefined)[];
  #shards!: Int32Array;
  #bytes!: Float64Array;
  /** The order requests were sent in (a worker's dead requests are refused in that order). */
  #sent!: Float64Array;
  #mask!: number;
  #size = 0;
  #nextId = 1;
  #sendCount = 0;

  /** `firstId`: the first id handed out (1; another value lets a test reach the wrap). */
  constructor(capacity = 1024, firstId = 1) {
    if (!(Number.isInteger(firstId) && firstId >= 1 && firstId <= MAX_REQUEST_ID)) throw new RangeError(`firstId ${firstId} is not in 1..${MAX_REQUEST_ID}`);
    this.#nextId = firstId;
    this.#allocate(2 ** Math.ceil(Math.log2(Math.max(2, capacity))));
  }

  /** Empty arrays of `cap` slots (the constructor's, and each growth's). */
  #allocate(cap: number): void {
    this.#ids = new Int32Array(cap);
    this.#reqs = new Array<R | undefined>(cap).fill(undefined);
    this.#lanes = new Array<L | undefined>(cap).fill(undefined);
    this.#shards = new Int32Array(cap);
    this.#bytes = new Float64Array(cap);
    this.#sent = new Float64Array(cap);
    this.#mask = cap - 1;
  }

  get size(): number {
    return this.#size;
  }

  /** Slots the table has now (it doubles when half of them are taken). */
  get capacity(): number {
    return this.#mask + 1;
  }

  /** Adds a request; returns its id. */
  add(req: R, lane: L, shard: number, bytes: number): number {
    if ((this.#size + 1) * 2 > this.#mask + 1) this.#grow();
    let id = this.#nextId;
    while (this.#ids[id & this.#mask] !== 0) id = id >= MAX_REQUEST_ID ? 1 : id + 1;
    this.#nextId = id >= MAX_REQUEST_ID ? 1 : id + 1;
    const slot = id & this.#mask;
    this.#ids[slot] = id;
    this.#reqs[slot] = req;
    this.#lanes[slot] = lane;
    this.#shards[slot] = shard;
    this.#bytes[slot] = bytes;
    this.#sent[slot] = this.#sendCount++;
    this.#size++;
    return id;
  }

  /** The slot of request `id`, or -1 when it is not in flight (answered already). */
  find(id: number): number {
    if (!(id > 0 && id <= MAX_REQUEST_ID)) return -1;
    const slot = id & this.#mask;
    return this.#ids[slot] === id ? slot : -1;
  }

  req(slot: number): R {
    return this.#reqs[slot]!;
  }

  lane(slot: number): L {
    return this.#lanes[slot]!;
  }

  bytes(slot: number): number {
    return this.#bytes[slot]!;
  }

  /** Frees a slot `find` returned: the table drops its references to the request. */
  remove(slot: number): void {
    this.#ids[slot] = 0;
    this.#reqs[slot] = undefined;
    this.#lanes[slot] = undefined;
    this.#size--;
  }

  /** The ids of the requests in flight to one shard, in the order they were sent. */
  idsOfShard(shard: number): number[] {
    const slots: number[] = [];
    for (let s = 0; s <= this.#mask; s++) if (this.#ids[s] !== 0 && this.#shards[s] === shard) slots.push(s);
    slots.sort((a, b) => this.#sent[a]! - this.#sent[b]!);
    return slots.map((s) => this.#ids[s]!);
  }

  #grow(): void {
    const old = { ids: this.#ids, reqs: this.#reqs, lanes: this.#lanes, shards: this.#shards, bytes: this.#bytes, sent: this.#sent };
    this.#allocate((this.#mask + 1) * 2);
    // Two ids in different slots under the old mask differ in those bits, so also under the wider one.
    for (let s = 0; s < old.ids.length; s++) {
      const id = old.ids[s]!;
      if (id === 0) continue;
      const t = id & this.#mask;
      this.#ids[t] = id;
      this.#reqs[t] = old.reqs[s];
      this.#lanes[t] = old.lanes[s];
      this.#shards[t] = old.shards[s]!;
      this.#bytes[t] = old.bytes[s]!;
      this.#sent[t] = old.sent[s]!;
    }
  }
}
