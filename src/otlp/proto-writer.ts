// A small protobuf writer for the JSON decoder: one buffer sized up front
// (grown by doubling only if the estimate was short), varints, fixed-width
// values, and nested messages whose length prefix is patched when they close.
//
// Output is canonical: minimal varints and lengths, and each message's fields in
// field-number order. Callers mark where each field's bytes start (`mark`); a
// message whose fields arrived out of order is rearranged when it closes.

export class ProtoWriter {
  #buf: Uint8Array;
  #pos = 0;
  /** Open messages: [content start, first chunk index] pairs. */
  readonly #frames: number[] = [];
  #frameTop = 0;
  /** Field chunks of the open messages: [field number, start offset] pairs. */
  readonly #chunks: number[] = [];
  #chunkTop = 0;
  readonly #order: number[] = [];
  #f64: Float64Array | undefined;
  #f64Bytes: Uint8Array | undefined;

  constructor(initialCapacity: number) {
    this.#buf = newBuffer(Math.max(64, initialCapacity));
  }

  get length(): number {
    return this.#pos;
  }

  /**
   * Make room for `n` more bytes and return the offset to write them at; the
   * caller writes into `buffer` (read it after this call: it may have moved).
   */
  reserve(n: number): number {
    const at = this.#pos;
    if (at + n > this.#buf.length) this.#grow(at + n);
    this.#pos = at + n;
    return at;
  }

  get buffer(): Uint8Array {
    return this.#buf;
  }

  /** Give back the unused tail of the last `reserve` (when fewer bytes were written). */
  unreserve(n: number): void {
    this.#pos -= n;
  }

  #grow(need: number): void {
    const next = newBuffer(Math.max(need, this.#buf.length * 2));
    next.set(this.#buf.subarray(0, this.#pos));
    this.#buf = next;
  }

  /** Record that the bytes of field `fieldNo` of the innermost open message start here. */
  mark(fieldNo: number): void {
    this.#chunks[this.#chunkTop++] = fieldNo;
    this.#chunks[this.#chunkTop++] = this.#pos;
  }

  tag(fieldNo: number, wireType: number): void {
    this.varint32(fieldNo * 8 + wireType);
  }

  /** An unsigned value below 2^32. */
  varint32(v: number): void {
    if (this.#pos + 5 > this.#buf.length) this.#grow(this.#pos + 5);
    const buf = this.#buf;
    let pos = this.#pos;
    while (v > 0x7f) {
      buf[pos++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    buf[pos++] = v;
    this.#pos = pos;
  }

  /** A 64-bit value given as its unsigned 32-bit halves. */
  varint64(lo: number, hi: number): void {
    if (hi === 0) {
      this.varint32(lo);
      return;
    }
    if (this.#pos + 10 > this.#buf.length) this.#grow(this.#pos + 10);
    const buf = this.#buf;
    let pos = this.#pos;
    // 64 bits in 7-bit groups: the low 28 bits first, then the bits straddling the halves.
    for (let i = 0; i < 4; i++) {
      buf[pos++] = (lo & 0x7f) | 0x80;
      lo >>>= 7;
    }
    // lo has 4 bits left; take 3 bits of hi with it.
    let v = (lo | ((hi & 0x7) << 4)) >>> 0;
    hi >>>= 3;
    while (hi !== 0) {
      buf[pos++] = v | 0x80;
      v = hi & 0x7f;
      hi >>>= 7;
    }
    buf[pos++] = v;
    this.#pos = pos;
  }

  fixed32(v: number): void {
    const at = this.reserve(4);
    const buf = this.#buf;
    buf[at] = v & 0xff;
    buf[at + 1] = (v >>> 8) & 0xff;
    buf[at + 2] = (v >>> 16) & 0xff;
    buf[at + 3] = (v >>> 24) & 0xff;
  }

  fixed64(lo: number, hi: number): void {
    this.fixed32(lo);
    this.fixed32(hi);
  }

  double(v: number): void {
    if (this.#f64 === undefined) {
      this.#f64 = new Float64Array(1);
      this.#f64Bytes = new Uint8Array(this.#f64.buffer);
    }
    this.#f64[0] = v;
    const at = this.reserve(8);
    const buf = this.#buf;
    const src = this.#f64Bytes as Uint8Array;
    for (let i = 0; i < 8; i++) buf[at + i] = src[i];
  }

  /** Copy `src[start, end)` as raw bytes. */
  copy(src: Uint8Array, start: number, end: number): void {
    const n = end - start;
    const at = this.reserve(n);
    const buf = this.#buf;
    if (n <= 32) {
      for (let i = 0; i < n; i++) buf[at + i] = src[start + i];
    } else {
      buf.set(src.subarray(start, end), at);
    }
  }

  /** Write the tag of a length-delimited field and open a nested message. */
  openMessage(fieldNo: number): void {
    this.varint32(fieldNo * 8 + 2);
    // One byte for the length; closeMessage makes room if it needs more.
    const at = this.reserve(1);
    this.#frames[this.#frameTop++] = at + 1;
    this.#frames[this.#frameTop++] = this.#chunkTop;
  }

  closeMessage(): void {
    const chunkBase = this.#frames[--this.#frameTop];
    const start = this.#frames[--this.#frameTop];
    this.#sortChunks(start, chunkBase);
    const len = this.#pos - start;
    if (len < 0x80) {
      this.#buf[start - 1] = len;
      return;
    }
    const extra = len < 0x4000 ? 1 : len < 0x200000 ? 2 : len < 0x10000000 ? 3 : 4;
    this.reserve(extra);
    const buf = this.#buf;
    buf.copyWithin(start + extra, start, start + len);
    let pos = start - 1;
    let v = len;
    while (v > 0x7f) {
      buf[pos++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    buf[pos] = v;
  }

  /** The encoded bytes (a view of the writer's buffer): sorts the top-level fields first. */
  finish(): Uint8Array {
    this.#sortChunks(0, 0);
    return this.#buf.subarray(0, this.#pos);
  }

  /**
   * Put the chunks recorded since `chunkBase` (the fields of the message whose
   * content starts at `start`) into field-number order, then drop them.
   */
  #sortChunks(start: number, chunkBase: number): void {
    const chunks = this.#chunks;
    const top = this.#chunkTop;
    this.#chunkTop = chunkBase;
    let sorted = true;
    for (let i = chunkBase + 2; i < top; i += 2) {
      if (chunks[i] < chunks[i - 2]) {
        sorted = false;
        break;
      }
    }
    if (sorted) return;
    const end = this.#pos;
    const len = end - start;
    // Park the message's bytes past its end, then copy the chunks back in order:
    // memmoves within the one buffer, no views or temporary arrays.
    this.reserve(len);
    this.#pos = end;
    const buf = this.#buf;
    buf.copyWithin(end, start, end);
    // Stable insertion sort of chunk indexes by field number (a message has at most 16 fields).
    const order = this.#order;
    const n = (top - chunkBase) >> 1;
    for (let i = 0; i < n; i++) {
      const c = chunkBase + 2 * i;
      let j = i;
      while (j > 0 && chunks[order[j - 1]] > chunks[c]) {
        order[j] = order[j - 1];
        j--;
      }
      order[j] = c;
    }
    const shift = end - start;
    let out = start;
    for (let i = 0; i < n; i++) {
      const c = order[i];
      const from = chunks[c + 1];
      const to = c + 2 < top ? chunks[c + 3] : end;
      buf.copyWithin(out, from + shift, to + shift);
      out += to - from;
    }
  }
}

/** A buffer of its own (never a slice of Node's shared pool), so it is safe to transfer. */
function newBuffer(size: number): Uint8Array {
  return new Uint8Array(size);
}
