// The completion record, and the ring that carries it back.
//
// A single-producer single-consumer ring of fixed-size completions on a
// SharedArrayBuffer: the worker produces [reqId, code, records] triples (code
// ACCEPTED, 0, or the wire number of a SIGLAKE_ code, src/errors.ts) and,
// for a refusal, a short message (up to MESSAGE_BYTES of UTF-8, cut at a
// character boundary), or for a stored request the bytes of OTLP protobuf it
// wrote (the fourth word, which a refusal uses for its message's length);
// the acceptor consumes them. Head and tail are
// free-running 32-bit counters; the slot is counter & (capacity - 1).
//
// Several workers share one doorbell word (a separate SharedArrayBuffer) so
// the acceptor waits on a single Atomics.waitAsync for all of them.

import { codeOfWireId, wireIdOf, type ErrorCode } from '../errors.js';

/** The code of a completion whose request was stored. */
export const ACCEPTED = 0;

/** The completion code of an outcome: ACCEPTED for undefined, else the code's wire number. */
export function completionCode(code: ErrorCode | undefined): number {
  return code === undefined ? ACCEPTED : wireIdOf(code);
}

/**
 * The outcome a completion code names: undefined for ACCEPTED. Both threads
 * run the same build, so an unknown number is a bug; it is reported as a
 * writer failure rather than as success.
 */
export function outcomeOfCompletion(code: number): ErrorCode | undefined {
  if (code === ACCEPTED) return undefined;
  return codeOfWireId(code) ?? 'SIGLAKE_WAL_WRITE';
}

const HEAD = 0; // consumer
const TAIL = 16; // producer (own cache line)
const CONTROL_WORDS = 32;
const SLOT_WORDS = 4;
export const MESSAGE_BYTES = 240;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

export class CompletionRing {
  readonly sab: SharedArrayBuffer;
  readonly capacity: number;
  readonly #ctl: Int32Array;
  readonly #slots: Int32Array;
  readonly #messages: Uint8Array;
  readonly #mask: number;

  static create(capacity: number): CompletionRing {
    if (capacity < 2 || (capacity & (capacity - 1)) !== 0) throw new RangeError('capacity must be a power of two');
    return new CompletionRing(new SharedArrayBuffer((CONTROL_WORDS + capacity * SLOT_WORDS) * 4 + capacity * MESSAGE_BYTES));
  }

  constructor(sab: SharedArrayBuffer) {
    this.sab = sab;
    this.#ctl = new Int32Array(sab, 0, CONTROL_WORDS);
    this.capacity = (sab.byteLength - CONTROL_WORDS * 4) / (SLOT_WORDS * 4 + MESSAGE_BYTES);
    this.#slots = new Int32Array(sab, CONTROL_WORDS * 4, this.capacity * SLOT_WORDS);
    this.#messages = new Uint8Array(sab, (CONTROL_WORDS + this.capacity * SLOT_WORDS) * 4);
    this.#mask = this.capacity - 1;
  }

  /** Producer: false when full (the consumer has not drained yet). */
  push(reqId: number, code: number, records: number, message?: string, bytes = 0): boolean {
    const tail = this.#ctl[TAIL]!;
    const head = Atomics.load(this.#ctl, HEAD);
    if (((tail - head) | 0) >= this.capacity) return false;
    const slot = tail & this.#mask;
    const i = slot * SLOT_WORDS;
    this.#slots[i] = reqId;
    this.#slots[i + 1] = code;
    this.#slots[i + 2] = records;
    let msgLen = 0;
    if (code === ACCEPTED) msgLen = bytes;
    else if (message !== undefined && message !== '') {
      const area = this.#messages.subarray(slot * MESSAGE_BYTES, (slot + 1) * MESSAGE_BYTES);
      msgLen = encoder.encodeInto(message, area).written;
    }
    this.#slots[i + 3] = msgLen;
    Atomics.store(this.#ctl, TAIL, (tail + 1) | 0);
    return true;
  }

  /** Consumer: calls `fn` for every completion waiting, then frees their slots. Returns how many. */
  drain(fn: (reqId: number, code: number, records: number, message: string | undefined, bytes: number) => void): number {
    let head = this.#ctl[HEAD]!;
    const tail = Atomics.load(this.#ctl, TAIL);
    let n = 0;
    while (head !== tail) {
      const slot = head & this.#mask;
      const i = slot * SLOT_WORDS;
      const reqId = this.#slots[i]!;
      const code = this.#slots[i + 1]!;
      const records = this.#slots[i + 2]!;
      const word = this.#slots[i + 3]!;
      const message =
        code === ACCEPTED || word === 0 ? undefined : decoder.decode(this.#messages.slice(slot * MESSAGE_BYTES, slot * MESSAGE_BYTES + word));
      head = (head + 1) | 0;
      n++;
      fn(reqId, code, records, message, code === ACCEPTED ? word : 0);
    }
    if (n > 0) Atomics.store(this.#ctl, HEAD, head);
    return n;
  }

  isFull(): boolean {
    return ((this.#ctl[TAIL]! - Atomics.load(this.#ctl, HEAD)) | 0) >= this.capacity;
  }

  /** Producer: waits until the consumer frees a slot, or `timeoutMs` passes. */
  async waitForRoom(timeoutMs: number): Promise<void> {
    const head = Atomics.load(this.#ctl, HEAD);
    if (((this.#ctl[TAIL]! - head) | 0) < this.capacity) return;
    const r = Atomics.waitAsync(this.#ctl, HEAD, head, timeoutMs);
    if (r.async) await r.value;
  }

  /** Consumer: tells a producer blocked in waitForRoom() that slots were freed. */
  notifyRoom(): void {
    Atomics.notify(this.#ctl, HEAD);
  }
}

/**
 * Two Int32 words shared by all workers and the acceptor: a counter ("some
 * completion is waiting") and a flag the acceptor raises just before it waits.
 * A worker bumps the counter after posting and calls Atomics.notify only when
 * the flag is up, so a busy acceptor costs it one atomic load, not a wake-up.
 */
export class Doorbell {
  readonly sab: SharedArrayBuffer;
  readonly #word: Int32Array;

  constructor(sab: SharedArrayBuffer = new SharedArrayBuffer(64)) {
    this.sab = sab;
    this.#word = new Int32Array(sab, 0, 2);
  }

  ring(): void {
    Atomics.add(this.#word, 0, 1);
    if (Atomics.load(this.#word, 1) === 1) Atomics.notify(this.#word, 0);
  }

  value(): number {
    return Atomics.load(this.#word, 0);
  }

  /** Resolves when the doorbell moves past `seen`, or after `timeoutMs`. */
  async wait(seen: number, timeoutMs: number): Promise<void> {
    // Raise the flag, then look again: a ring between our last look and the
    // flag either moved the counter (seen here) or saw the flag (and notifies).
    Atomics.store(this.#word, 1, 1);
    try {
      if (Atomics.load(this.#word, 0) !== seen) return;
      const r = Atomics.waitAsync(this.#word, 0, seen, timeoutMs);
      if (r.async) await r.value;
    } finally {
      Atomics.store(this.#word, 1, 0);
    }
  }
}
