// An HPACK (RFC 7541) header-block decoder for the gRPC port's header tap
// (grpc-header-tap.ts), which must follow every header block of a connection
// to keep its dynamic table in step with the client's encoder, and needs the
// values of the routing headers only.
//
// It does the least that keeps the table right: an indexed field or a literal
// whose name is not a routing header costs a table lookup, and a value that
// is neither a routing header's nor entered in the table is skipped without
// Huffman decoding. Strings are the octets as latin1 (what nghttp2 checks).
// hpack.js's decompressor, used before, went through a readable stream and
// an object per field: about a tenth of the gRPC port's throughput
// (docs/performance.md, "The gRPC port's header tap"). Its tables (the static
// table of Appendix A, the Huffman code of Appendix B) are still read from
// it, once, here.
//
// Malformed input throws; the tap then cuts the connection (nghttp2 would
// end it with COMPRESSION_ERROR too).

import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const STATIC = (require('hpack.js/lib/hpack/static-table.js') as { table: { name: string; value: string }[] }).table;
const HUFFMAN = (require('hpack.js/lib/hpack/huffman.js') as { encode: [number, number][] }).encode;

/** RFC 7541 §4.1: an entry's size is its name's and value's octets plus 32. */
const ENTRY_OVERHEAD = 32;
const EOS = 256;
/** Longest prefixed integer accepted (nghttp2 refuses larger ones too). */
const MAX_INT = 1 << 28;

// ---- the Huffman code (canonical: decoded by code length)

const MAX_CODE_BITS = 30;
/** Per code length: the first code, how many codes, where its symbols start in SORTED. */
const FIRST = new Float64Array(MAX_CODE_BITS + 1);
const COUNT = new Int32Array(MAX_CODE_BITS + 1);
const START = new Int32Array(MAX_CODE_BITS + 1);
const SORTED = new Int32Array(HUFFMAN.length);
/** For any 8 bits: the symbol of a code of at most 8 bits they start with, and its length (sym | len << 16); 0: longer. */
const SHORT = new Int32Array(256);
{
  const syms = [...HUFFMAN.keys()].sort((a, b) => HUFFMAN[a]![0] - HUFFMAN[b]![0] || a - b);
  syms.forEach((s, i) => {
    const [len, code] = HUFFMAN[s]!;
    SORTED[i] = s;
    if (COUNT[len] === 0) {
      FIRST[len] = code;
      START[len] = i;
    }
    COUNT[len]!++;
    if (len <= 8) for (let k = code << (8 - len), n = 0; n < 1 << (8 - len); n++) SHORT[k + n] = s | (len << 16);
  });
}

export class HpackError extends Error {}

/**
 * Calls `onRouting(name, value)` for every field whose name, lower-cased, is
 * in the routing set (`name` as sent, so a caller can see upper case).
 */
export type RoutingField = (name: string, value: string) => void;

export class HpackDecoder {
  readonly #routing: ReadonlySet<string>;
  /** Longest routing name: a longer name is never lower-cased to be looked up. */
  readonly #routingMax: number;
  /** What SETTINGS_HEADER_TABLE_SIZE allows the encoder (the most a size update may ask for). */
  readonly #limit: number;
  #max: number;
  #size = 0;
  /** The dynamic table, oldest first; a value is kept only for a routing name. */
  readonly #names: string[] = [];
  readonly #values: string[] = [];
  readonly #sizes: number[] = [];
  /** Decoding position in the block. */
  #p = 0;
  /** The last string's octet length (what the table counts). */
  #len = 0;

  constructor(tableBytes: number, routing: ReadonlySet<string>) {
    this.#limit = tableBytes;
    this.#max = tableBytes;
    this.#routing = routing;
    this.#routingMax = Math.max(...[...routing].map((n) => n.length));
  }

  /** Entries in the dynamic table (for tests). */
  get entries(): number {
    return this.#names.length;
  }

  /** Decodes one whole header block. */
  decode(b: Uint8Array, onRouting: RoutingField): void {
    this.#p = 0;
    while (this.#p < b.length) {
      const first = b[this.#p]!;
      if (first & 0x80) {
        // Indexed field (§6.1).
        const i = this.#int(b, 7);
        if (i === 0) throw new HpackError('indexed field 0');
        const name = this.#name(i);
        if (this.#isRouting(name)) onRouting(name, this.#value(i));
      } else if ((first & 0xe0) === 0x20) {
        // Dynamic table size update (§6.3).
        const size = this.#int(b, 5);
        if (size > this.#limit) throw new HpackError(`table size update to ${size} past ${this.#limit}`);
        this.#max = size;
        this.#evict(0);
      } else {
        // Literal (§6.2): with incremental indexing (01), without (0000) or never indexed (0001).
        const indexing = (first & 0xc0) === 0x40;
        const i = this.#int(b, indexing ? 6 : 4);
        let name: string;
        let nameLen: number;
        if (i === 0) {
          name = this.#string(b, true) as string;
          nameLen = this.#len;
        } else {
          name = this.#name(i);
          nameLen = name.length;
        }
        const routing = this.#isRouting(name);
        const value = this.#string(b, routing, !(routing || indexing));
        if (routing) onRouting(name, value as string);
        if (indexing) this.#insert(name, routing ? (value as string) : '', nameLen + this.#len + ENTRY_OVERHEAD);
      }
    }
  }

  #isRouting(name: string): boolean {
    const n = name.length;
    return n <= this.#routingMax && this.#routing.has(name.toLowerCase());
  }

  #name(i: number): string {
    if (i <= STATIC.length) return STATIC[i - 1]!.name;
    const k = this.#names.length - (i - STATIC.length);
    if (k < 0) throw new HpackError(`index ${i} past the table`);
    return this.#names[k]!;
  }

  #value(i: number): string {
    if (i <= STATIC.length) return STATIC[i - 1]!.value;
    return this.#values[this.#names.length - (i - STATIC.length)]!;
  }

  #insert(name: string, value: string, size: number): void {
    this.#evict(size);
    if (size > this.#max) return; // larger than the whole table: it empties it (§4.4)
    this.#names.push(name);
    this.#values.push(value);
    this.#sizes.push(size);
    this.#size += size;
  }

  /** Drops the oldest entries until `incoming` more octets fit. */
  #evict(incoming: number): void {
    let drop = 0;
    while (drop < this.#sizes.length && this.#size + incoming > this.#max) this.#size -= this.#sizes[drop++]!;
    if (drop === 0) return;
    this.#names.splice(0, drop);
    this.#values.splice(0, drop);
    this.#sizes.splice(0, drop);
  }

  /** A prefixed integer (§5.1) whose prefix is the low `bits` of the current octet. */
  #int(b: Uint8Array, bits: number): number {
    const mask = (1 << bits) - 1;
    let v = b[this.#p++]! & mask;
    if (v < mask) return v;
    let shift = 0;
    for (;;) {
      if (this.#p >= b.length) throw new HpackError('integer cut short');
      const o = b[this.#p++]!;
      v += (o & 0x7f) * 2 ** shift;
      if (v > MAX_INT) throw new HpackError('integer too large');
      if ((o & 0x80) === 0) return v;
      shift += 7;
    }
  }

  /**
   * A string literal (§5.2): its text when `text`, else its octet length
   * only; `skip`: not even that (the bytes are stepped over). Leaves the octet
   * length in #len.
   */
  #string(b: Uint8Array, text: boolean, skip = false): string | number {
    if (this.#p >= b.length) throw new HpackError('string cut short');
    const huffman = (b[this.#p]! & 0x80) !== 0;
    const n = this.#int(b, 7);
    const from = this.#p;
    const to = from + n;
    if (to > b.length) throw new HpackError('string past the block');
    this.#p = to;
    if (!huffman) {
      this.#len = n;
      return text ? latin1(b, from, to) : n;
    }
    if (skip) {
      this.#len = 0;
      return 0;
    }
    return this.#huffman(b, from, to, text);
  }

  /** Huffman-decodes b[from, to) (Appendix B): the text, or the octet count. */
  #huffman(b: Uint8Array, from: number, to: number, text: boolean): string | number {
    const out: number[] | null = text ? [] : null;
    let count = 0;
    const end = to * 8;
    let bp = from * 8;
    while (bp < end) {
      const left = end - bp;
      const k = bp >> 3;
      // The 8 bits from bp on (ones past the end, as EOS's prefix pads a string).
      const peek = ((((b[k]! << 8) | (k + 1 < to ? b[k + 1]! : 0xff)) >> (8 - (bp & 7))) & 0xff) >>> 0;
      const short = SHORT[peek]!;
      let sym: number;
      let len: number;
      if (short !== 0 && short >>> 16 <= left) {
        sym = short & 0xffff;
        len = short >>> 16;
      } else if (left <= 7) {
        // What is left must be padding: fewer than 8 bits, all ones (§5.2).
        if (peek !== 0xff) throw new HpackError('bad Huffman padding');
        break;
      } else {
        // A code longer than 8 bits: one bit more at a time.
        let code = peek;
        sym = -1;
        for (len = 9; len <= MAX_CODE_BITS && len <= left; len++) {
          const at = bp + len - 1;
          code = code * 2 + ((b[at >> 3]! >> (7 - (at & 7))) & 1);
          const d = code - FIRST[len]!;
          if (d >= 0 && d < COUNT[len]!) {
            sym = SORTED[START[len]! + d]!;
            break;
          }
        }
        if (sym < 0) throw new HpackError('bad Huffman code');
      }
      if (sym === EOS) throw new HpackError('EOS in a Huffman string');
      bp += len;
      count++;
      if (out !== null) out.push(sym);
    }
    this.#len = count;
    return out !== null ? fromCodes(out) : count;
  }
}

/** The string of these char codes (in slices: a long header value would pass the argument limit in one call). */
function fromCodes(codes: number[]): string {
  if (codes.length <= 4096) return String.fromCharCode(...codes);
  let s = '';
  for (let i = 0; i < codes.length; i += 4096) s += String.fromCharCode(...codes.slice(i, i + 4096));
  return s;
}

function latin1(b: Uint8Array, from: number, to: number): string {
  if (to - from > 16) return Buffer.from(b.buffer, b.byteOffset + from, to - from).toString('latin1');
  let s = '';
  for (let i = from; i < to; i++) s += String.fromCharCode(b[i]!);
  return s;
}
