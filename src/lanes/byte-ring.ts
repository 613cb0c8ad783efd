// A single-producer single-consumer ring of variable-length frames on a
// SharedArrayBuffer. The acceptor produces request frames; the owning worker
// consumes them. Frames are never split: a frame that does not fit before the
// end of the buffer is placed at offset 0 after a wrap marker, so the consumer
// always sees one contiguous view. The ring is sized for the largest frame.
//
// Layout: a 128-byte control block of Int32 words (head and tail on separate
// cache lines), then `capacity` data bytes. Each frame is an 8-byte header
// (u32 length, u32 tag) and the payload, padded to 8 bytes.
//
//   head  written only by the consumer: offset of the next frame to read
//   tail  written only by the producer: offset where the next frame goes
//   seq   bumped by the producer after each publish; the consumer waits on it
//   sleep 1 while the consumer is (about to be) waiting, so the producer knows
//         a notify is needed; 0 otherwise
//
// Empty is head === tail; the producer never lets tail catch up with head, so
// at most capacity - 8 bytes are in use.
//
// The ring is sized for the largest frame (twice the request cap: 32 MiB by
// default), but a producer given a soft size (`create(capacity, softBytes)`)
// goes back to offset 0 once its tail is past that size and the consumer has
// released enough room there, instead of running on to the end. A ring
// that cycled through its whole buffer would keep every page of it resident
// (32 MiB a worker); one that wraps early keeps about the soft size plus twice
// the most that was ever in flight at once. Only the producer decides where a
// frame goes: the consumer follows the wrap marker wherever it finds one.
//
// "Enough room" is the frame and more than the most the consumer has ever held
// at once (its peak): after an early wrap the producer has only [0, head)
// until the consumer reaches the marker, and a worker holds a whole round's
// frames until it has written them, so a wrap into less room than that
// leaves the producer short while most of the buffer lies unused. Wrapping as
// soon as the frame alone fitted sent most 256 KiB bodies to the dispatcher's
// backlog, a second copy each (docs/performance.md, "The request ring's early
// wrap").
// After an early wrap, then, the producer runs short of room before head only
// when more is in flight than ever before. The peak is never forgotten. After
// a burst or a stall that filled the ring, it cycles through all it touched;
// those pages stay resident anyway, and a ring cycled whole measured no
// slower than one kept to the front (P1, docs/performance.md "Memory that grew
// with the worker count"). A peak halved after each lap that held less than
// half of it sent 39 of 640 bodies to the backlog in the 256 KiB test of
// test/integration/request-ring-backlog.test.ts, where this sent none in
// three runs.

const CONTROL_BYTES = 128;
const HEAD = 0; // Int32 index (byte 0)
const TAIL = 16; // byte 64: its own cache line
const SEQ = 24; // byte 96
const SLEEP = 25;
const WRAP = 0xffffffff;
export const FRAME_HEADER_BYTES = 8;

function align8(n: number): number {
  return (n + 7) & ~7;
}

export interface Frame {
  /** Offset of the payload in `bytes`. */
  offset: number;
  length: number;
  tag: number;
}

export class ByteRing {
  readonly sab: SharedArrayBuffer;
  readonly capacity: number;
  readonly bytes: Uint8Array;
  readonly #ctl: Int32Array;
  readonly #view: DataView;
  /** Consumer's private read cursor (published to HEAD by release()). */
  #readPos = 0;

  /** Producer side: past this offset, wrap to 0 once the room before head holds a frame and the peak in flight. */
  #soft: number;
  /** Producer side: the most bytes ever seen in flight (published, not released). */
  #peak = 0;
  /** Producer side: where the last lap ended (its wrap marker, or the end of the buffer). */
  #wrappedAt = 0;

  /** Bytes of ring needed so that a frame of `maxPayload` bytes always fits eventually. */
  static capacityFor(maxPayload: number): number {
    // Worst case the free space is split in two halves around the wrap point.
    return align8(2 * (FRAME_HEADER_BYTES + align8(maxPayload)) + 16);
  }

  /**
   * A new ring of `capacity` data bytes. `softBytes` (producer side): the size
   * the ring keeps to while the consumer keeps up (see the header); the whole
   * capacity when not given.
   */
  static create(capacity: number, softBytes?: number): ByteRing {
    const cap = align8(capacity);
    const ring = new ByteRing(new SharedArrayBuffer(CONTROL_BYTES + cap));
    if (softBytes !== undefined) ring.#soft = Math.max(FRAME_HEADER_BYTES, Math.min(ring.capacity, softBytes));
    return ring;
  }

  constructor(sab: SharedArrayBuffer) {
    this.sab = sab;
    this.capacity = sab.byteLength - CONTROL_BYTES;
    if (this.capacity <= 16 || this.capacity % 8 !== 0) throw new RangeError('ring capacity must be a multiple of 8 above 16');
    this.#ctl = new Int32Array(sab, 0, CONTROL_BYTES / 4);
    this.bytes = new Uint8Array(sab, CONTROL_BYTES, this.capacity);
    this.#view = new DataView(sab, CONTROL_BYTES, this.capacity);
    this.#readPos = Atomics.load(this.#ctl, HEAD);
    this.#soft = this.capacity;
  }

  /** Largest payload that can ever be pushed. */
  get maxPayload(): number {
    return ((this.capacity - 16) >> 1) - FRAME_HEADER_BYTES - 8;
  }

  // ---- producer side ----

  /**
   * Reserves space for a frame of `length` payload bytes and returns the
   * payload offset in `bytes`, or -1 when the ring has no room right now.
   * Nothing is visible to the consumer until publish().
   */
  reserve(length: number): number {
    const need = FRAME_HEADER_BYTES + align8(length);
    const cap = this.capacity;
    const head = Atomics.load(this.#ctl, HEAD);
    const tail = this.#ctl[TAIL]!;
    if (tail >= head) {
      // Free: [tail, cap) and [0, head). Past the soft size, back to the start
      // when the room before head holds the frame and more than the most
      // ever in flight (see the header). It must end before head, where the
      // consumer may be about to read the wrap marker left at tail.
      const inFlight = tail - head;
      if (inFlight > this.#peak) this.#peak = inFlight;
      if (tail >= this.#soft && need + this.#peak < head) return FRAME_HEADER_BYTES;
      // A frame at tail must not end exactly at cap when head is 0 (tail
      // would become 0 === head: "empty").
      const endRoom = cap - tail;
      if (need < endRoom || (need === endRoom && head !== 0)) return tail + FRAME_HEADER_BYTES;
      if (need < head) return FRAME_HEADER_BYTES; // after a wrap marker at tail
      return -1;
    }
    // Wrapped: in flight are [head, the last wrap) and [0, tail).
    const inFlight = this.#wrappedAt - head + tail;
    if (inFlight > this.#peak) this.#peak = inFlight;
    if (need < head - tail) return tail + FRAME_HEADER_BYTES;
    return -1;
  }

  /** Makes the frame whose payload starts at `payloadOffset` visible to the consumer. */
  publish(payloadOffset: number, length: number, tag: number): void {
    const tail = this.#ctl[TAIL]!;
    const start = payloadOffset - FRAME_HEADER_BYTES;
    if (start !== tail) {
      // The frame went to offset 0: leave a wrap marker where tail was.
      this.#view.setUint32(tail, WRAP, true);
      this.#wrappedAt = tail;
    }
    this.#view.setUint32(start, length, true);
    this.#view.setUint32(start + 4, tag >>> 0, true);
    let next = start + FRAME_HEADER_BYTES + align8(length);
    if (next === this.capacity) {
      next = 0;
      this.#wrappedAt = this.capacity;
    }
    Atomics.store(this.#ctl, TAIL, next);
    Atomics.add(this.#ctl, SEQ, 1);
  }

  /** Copies `payload` into the ring as one frame. False when there is no room now. */
  push(payload: Uint8Array, tag: number): boolean {
    const off = this.reserve(payload.length);
    if (off < 0) return false;
    this.bytes.set(payload, off);
    this.publish(off, payload.length, tag);
    return true;
  }

  /** Wakes the consumer if it said it is going to sleep. Cheap when it is not. */
  wake(): void {
    if (Atomics.load(this.#ctl, SLEEP) === 1) Atomics.notify(this.#ctl, SEQ);
  }

  // ---- consumer side ----

  /**
   * Reads the next frame into `out` without releasing it; returns false when
   * the ring is empty. Frames read stay valid until release().
   */
  read(out: Frame): boolean {
    let pos = this.#readPos;
    const tail = Atomics.load(this.#ctl, TAIL);
    if (pos === tail) return false;
    let len = this.#view.getUint32(pos, true);
    if (len === WRAP) {
      pos = 0;
      if (pos === tail) {
        this.#readPos = 0;
        return false;
      }
      len = this.#view.getUint32(0, true);
    }
    out.offset = pos + FRAME_HEADER_BYTES;
    out.length = len;
    out.tag = this.#view.getUint32(pos + 4, true);
    let next = pos + FRAME_HEADER_BYTES + align8(len);
    if (next === this.capacity) next = 0;
    this.#readPos = next;
    return true;
  }

  /** Gives every frame read so far back to the producer. */
  release(): void {
    Atomics.store(this.#ctl, HEAD, this.#readPos);
  }

  isEmpty(): boolean {
    return this.#readPos === Atomics.load(this.#ctl, TAIL);
  }

  /**
   * Bytes in use (published and not released), counting the end of the
   * buffer skipped by a wrap as in use until the consumer passes it. For tests.
   */
  usedBytes(): number {
    const head = Atomics.load(this.#ctl, HEAD);
    const tail = Atomics.load(this.#ctl, TAIL);
    return tail >= head ? tail - head : this.capacity - head + tail;
  }

  /**
   * Blocks the calling thread until the producer publishes something (or
   * `timeoutMs` passes); returns at once if frames are already waiting. For a
   * consumer thread with nothing else to do: a futex wake is the shortest path
   * from publish to read.
   */
  waitForDataSync(timeoutMs: number): void {
    const seq = Atomics.load(this.#ctl, SEQ);
    Atomics.store(this.#ctl, SLEEP, 1);
    if (this.isEmpty()) Atomics.wait(this.#ctl, SEQ, seq, timeoutMs);
    Atomics.store(this.#ctl, SLEEP, 0);
  }

  /**
   * Waits until the producer publishes something (or `timeoutMs` passes).
   * Returns at once if frames are already waiting.
   */
  async waitForData(timeoutMs: number): Promise<void> {
    const seq = Atomics.load(this.#ctl, SEQ);
    Atomics.store(this.#ctl, SLEEP, 1);
    try {
      if (!this.isEmpty()) return;
      const r = Atomics.waitAsync(this.#ctl, SEQ, seq, timeoutMs);
      if (r.async) await r.value;
    } finally {
      Atomics.store(this.#ctl, SLEEP, 0);
    }
  }
}
