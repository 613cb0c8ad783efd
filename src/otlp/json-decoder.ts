// OTLP/JSON (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding)
// to canonical protobuf, in one pass over the body bytes: a strict JSON reader
// driven by the schema writes protobuf as it goes. No JSON.parse, no object
// tree, no per-field strings; 64-bit integers are exact.
//
// The mapping (proto3 JSON, with OTLP's exceptions):
// - keys are the lowerCamelCase JSON names or the proto snake_case names; the
//   same field twice (in either spelling) is refused;
// - an unknown key is ignored, value and all, as the specification requires
//   ("OTLP/JSON receivers MUST ignore message fields with unknown names"): it
//   keeps senders on newer OTLP versions, whose messages have fields this
//   schema lacks, working. The value is still checked to be well-formed JSON
//   and may nest at most MAX_UNKNOWN_VALUE_DEPTH arrays and objects; anything
//   else about known keys (types, ranges, duplicates, oneofs) stays strict;
// - trace_id / span_id / parent_span_id are hex (either case), 32 or 16 digits, or "";
// - bytes_value is base64 (standard or URL-safe alphabet, padding optional);
// - enums are integers (any int32: proto3 enums are open) or the value names;
// - integers are JSON numbers or strings holding a JSON number, exactly integral
//   (1e3 and 5.0 are integers, 1.5 is not) and within the field's range;
// - doubles are numbers, numeric strings, "NaN", "Infinity" or "-Infinity";
// - null for any field means absent; null inside an array is refused;
// - AnyValue sets at most one of its value keys and nests at most
//   MAX_ANY_VALUE_DEPTH levels, as on the protobuf path.
// The output omits proto3 defaults (0, "", false) except inside AnyValue's
// oneof, uses minimal varints, and orders each message's fields by number.
//
// The reader is recursive descent, but its depth is bounded by the schema, not
// by the body: the only cycle in the schema goes through AnyValue, and AnyValue
// depth is capped, so at most about 3 * (5 + 3 * MAX_ANY_VALUE_DEPTH) frames are
// ever live. The value of an unknown key is skipped by a loop with a fixed-size
// stack of open brackets, not by recursion, and each of its bytes is looked at
// a bounded number of times, so no body can overflow the call stack or make the
// skip quadratic.
//
// Errors lead with the cause, then the place: "invalid OTLP/JSON: <cause> at
// <JSON path>" or "invalid JSON: <cause> at byte <offset> in <JSON path>".
// The middle of a long path is elided ("$.resourceLogs[0].scopeLogs[0]…values[0].arrayValue")
// so a message stays within MAX_MESSAGE_BYTES: the acceptor forwards a worker's
// message through a fixed slot and cuts what does not fit.

import { isUtf8 } from 'node:buffer';
import { BodyError } from '../errors.js';
import { ProtoWriter } from './proto-writer.js';
import { unknownSignal } from './wire-validator.js';
import {
  ENUMS,
  Kind,
  MAX_ANY_VALUE_DEPTH,
  MESSAGES,
  Msg,
  ROOT_MSG,
  WireType,
  type FieldDesc,
  type MsgId,
  type Signal,
} from './schema.js';

/** How deeply the value of an unknown key may nest arrays and objects. */
export const MAX_UNKNOWN_VALUE_DEPTH = 64;

/** The most UTF-8 bytes of an error message (the completion slot holds 240). */
export const MAX_MESSAGE_BYTES = 192;

/** Path segments kept before and after the elision of a long JSON path ('$' counts as one). */
const PATH_HEAD = 3;
const PATH_TAIL = 2;

export interface JsonConversion {
  /** The request as protobuf: a view of the converter's buffer, which may be larger. */
  payload: Uint8Array;
  /** Log records or spans in the request. */
  records: number;
}

/**
 * Convert an OTLP/JSON Export*ServiceRequest body into protobuf and count its
 * records. Throws BodyError SIGLAKE_BAD_BODY naming the JSON path or byte offset.
 */
export function otlpJsonToProtobuf(signal: Signal, body: Uint8Array): JsonConversion {
  return new OtlpJsonDecoder(body).convert(signal);
}

const ASCII = (s: string): Uint8Array => Uint8Array.from(s, (c) => c.charCodeAt(0));

interface KeyEntry {
  readonly bytes: Uint8Array;
  readonly field: number;
}

/**
 * Per message, per key length: the accepted spellings of its fields' keys
 * (lowerCamelCase JSON name and proto name), so a lookup compares bytes
 * against one or two candidates.
 */
const KEYS_BY_LENGTH: readonly (readonly (readonly KeyEntry[])[])[] = MESSAGES.map((m) => {
  const entries = m.fields.flatMap((f, i) =>
    f.jsonName === f.name
      ? [{ bytes: ASCII(f.name), field: i }]
      : [
          { bytes: ASCII(f.jsonName), field: i },
          { bytes: ASCII(f.name), field: i },
        ],
  );
  const longest = entries.reduce((mx, e) => Math.max(mx, e.bytes.length), 0);
  return Array.from({ length: longest + 1 }, (_, n) => entries.filter((e) => e.bytes.length === n));
});

const ENUM_NAMES: readonly (readonly Uint8Array[])[] = ENUMS.map((e) => e.values.map(ASCII));

const LIT_NULL = ASCII('null');
const LIT_TRUE = ASCII('true');
const LIT_FALSE = ASCII('false');
const LIT_NAN = ASCII('NaN');
const LIT_INF = ASCII('Infinity');
const LIT_NEG_INF = ASCII('-Infinity');

/** Base64 (both alphabets) → 6-bit value, -1 for anything else. */
const BASE64: Int8Array = (() => {
  const t = new Int8Array(256).fill(-1);
  const std = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  for (let i = 0; i < 62; i++) t[std.charCodeAt(i)] = i;
  t[0x2b] = 62; // +
  t[0x2f] = 63; // /
  t[0x2d] = 62; // -
  t[0x5f] = 63; // _
  return t;
})();

/** Hex digit → value, -1 for anything else. */
const HEX: Int8Array = (() => {
  const t = new Int8Array(256).fill(-1);
  for (let i = 0; i < 10; i++) t[0x30 + i] = i;
  for (let i = 0; i < 6; i++) {
    t[0x41 + i] = 10 + i;
    t[0x61 + i] = 10 + i;
  }
  return t;
})();

const TWO32 = 0x100000000;
const ANY_VALUE: number = Msg.AnyValue;

const C_QUOTE = 0x22;
const C_BACKSLASH = 0x5c;
const C_COMMA = 0x2c;
const C_COLON = 0x3a;
const C_LBRACE = 0x7b;
const C_RBRACE = 0x7d;
const C_LBRACKET = 0x5b;
const C_RBRACKET = 0x5d;
const C_MINUS = 0x2d;
const C_PLUS = 0x2b;
const C_DOT = 0x2e;
const C_0 = 0x30;
const C_9 = 0x39;

const INTEGER_TYPE_NAME: Readonly<Partial<Record<Kind, string>>> = {
  [Kind.UINT32]: 'uint32',
  [Kind.FIXED32]: 'fixed32',
  [Kind.ENUM]: 'int32 enum',
  [Kind.INT64]: 'int64',
  [Kind.FIXED64]: 'fixed64',
};

export class OtlpJsonDecoder {
  readonly #src: Uint8Array;
  readonly #w: ProtoWriter;
  #pos = 0;
  #records = 0;
  #anyDepth = 0;

  // JSON path of the value being read, for error messages.
  readonly #pathMsg: number[] = [];
  readonly #pathField: number[] = [];
  readonly #pathIdx: number[] = [];
  #depth = 0;

  // Open brackets of the unknown value being skipped (allocated on first use).
  #skipStack: Uint8Array | undefined;

  // Result of #scanString: closing quote position, escapes seen, decoded byte length.
  #strEnd = 0;
  #strEsc = false;
  #strLen = 0;

  // Result of #token: a string's content without escapes, in the body or in #scratch.
  #tBuf: Uint8Array;
  #tStart = 0;
  #tEnd = 0;
  #scratch: Uint8Array | undefined;

  // Result of #numberEnd: the parts of a JSON number.
  #nNeg = false;
  #nIntStart = 0;
  #nIntEnd = 0;
  #nFracStart = 0;
  #nFracEnd = 0;
  #nExp = 0;

  // Result of #integer: magnitude as 32-bit halves, and sign.
  #lo = 0;
  #hi = 0;
  #neg = false;

  constructor(body: Uint8Array) {
    this.#src = body;
    this.#tBuf = body;
    // Protobuf is smaller than its OTLP/JSON form for all but pathological
    // bodies, so one buffer of the body's size almost never grows.
    this.#w = new ProtoWriter(body.length + 16);
  }

  convert(signal: Signal): JsonConversion {
    const rootMsg = ROOT_MSG[signal];
    if (rootMsg === undefined) throw unknownSignal(signal);
    const src = this.#src;
    if (!isUtf8(src)) throw new BodyError('SIGLAKE_BAD_BODY', 'invalid JSON: body is not valid UTF-8');
    this.#ws();
    if (this.#pos >= src.length) this.#syntax('empty body');
    if (src[this.#pos] !== C_LBRACE) this.#syntax('the top level must be an object');
    this.#object(rootMsg);
    this.#ws();
    if (this.#pos !== src.length) this.#syntax('unexpected data after the top-level object');
    return { payload: this.#w.finish(), records: this.#records };
  }

  // ---- structure -----------------------------------------------------------

  /** Read an object (at '{') as the content of message `msg`. */
  #object(msg: MsgId): void {
    const src = this.#src;
    const fields = MESSAGES[msg].fields;
    let seen = 0;
    let oneofSet = false;
    this.#pos++;
    this.#ws();
    if (src[this.#pos] === C_RBRACE) {
      this.#pos++;
      return;
    }
    const d = this.#depth++;
    this.#pathMsg[d] = msg;
    this.#pathIdx[d] = -1;
    for (;;) {
      this.#pathField[d] = -1;
      if (src[this.#pos] !== C_QUOTE) this.#syntax('expected a key');
      const fi = this.#key(msg);
      this.#ws();
      if (src[this.#pos] !== C_COLON) this.#syntax("expected ':'");
      this.#pos++;
      this.#ws();
      if (fi < 0) {
        // Unknown: ignored, as if absent (the path stays at this message).
        this.#skipValue();
      } else {
        this.#pathField[d] = fi;
        const f = fields[fi];
        if ((seen & (1 << fi)) !== 0) this.#invalid(`duplicate key (${f.jsonName} / ${f.name})`);
        seen |= 1 << fi;
        this.#w.mark(f.number);
        if (this.#value(f) && f.oneof) {
          if (oneofSet) this.#invalid(`${MESSAGES[msg].name} sets more than one of its value keys`);
          oneofSet = true;
        }
      }
      this.#ws();
      const c = src[this.#pos];
      if (c === C_COMMA) {
        this.#pos++;
        this.#ws();
        continue;
      }
      if (c === C_RBRACE) {
        this.#pos++;
        break;
      }
      this.#syntax("expected ',' or '}'");
    }
    this.#depth = d;
  }

  /** Read a nested message's object, opening and closing it in the writer. */
  #message(f: FieldDesc): void {
    const child = f.message as MsgId;
    if (child === ANY_VALUE && ++this.#anyDepth > MAX_ANY_VALUE_DEPTH) {
      this.#invalid(`AnyValue nested deeper than ${MAX_ANY_VALUE_DEPTH} levels`);
    }
    this.#w.openMessage(f.number);
    this.#object(child);
    this.#w.closeMessage();
    if (child === ANY_VALUE) this.#anyDepth--;
  }

  /** Read the value of field `f`; false when it was null (absent). */
  #value(f: FieldDesc): boolean {
    const src = this.#src;
    const c = src[this.#pos];
    if (c === 0x6e /* n */) {
      this.#literal(LIT_NULL);
      return false;
    }
    if (f.repeated) {
      if (c !== C_LBRACKET) this.#expected('an array');
      this.#array(f);
      return true;
    }
    switch (f.kind) {
      case Kind.MESSAGE:
        if (c !== C_LBRACE) this.#expected('an object');
        this.#message(f);
        return true;
      case Kind.STRING:
        if (c !== C_QUOTE) this.#expected('a string');
        this.#string(f.number, f.oneof);
        return true;
      case Kind.BYTES:
        if (c !== C_QUOTE) this.#expected(f.idLength !== 0 ? 'a hex string' : 'a base64 string');
        if (f.idLength !== 0) this.#hexId(f);
        else this.#base64(f);
        return true;
      case Kind.BOOL: {
        let v: boolean;
        if (c === 0x74 /* t */) {
          this.#literal(LIT_TRUE);
          v = true;
        } else if (c === 0x66 /* f */) {
          this.#literal(LIT_FALSE);
          v = false;
        } else {
          return this.#expected('true or false');
        }
        if (v || f.oneof) {
          this.#w.tag(f.number, WireType.VARINT);
          this.#w.varint32(v ? 1 : 0);
        }
        return true;
      }
      case Kind.DOUBLE: {
        const v = this.#double();
        if (f.oneof || v !== 0 || Object.is(v, -0)) {
          this.#w.tag(f.number, WireType.I64);
          this.#w.double(v);
        }
        return true;
      }
      default:
        this.#integer(f);
        this.#writeInteger(f);
        return true;
    }
  }

  /** Read an array (at '[') of the repeated field `f`: messages or strings. */
  #array(f: FieldDesc): void {
    const src = this.#src;
    const d = this.#depth - 1;
    this.#pos++;
    this.#ws();
    if (src[this.#pos] === C_RBRACKET) {
      this.#pos++;
      return;
    }
    const isMessage = f.kind === Kind.MESSAGE;
    for (let idx = 0; ; idx++) {
      this.#pathIdx[d] = idx;
      const c = src[this.#pos];
      if (isMessage) {
        if (c !== C_LBRACE) this.#expected('an object');
        this.#message(f);
        if (f.countsRecords) this.#records++;
      } else {
        if (c !== C_QUOTE) this.#expected('a string');
        this.#string(f.number, true);
      }
      this.#ws();
      const n = src[this.#pos];
      if (n === C_COMMA) {
        this.#pos++;
        this.#ws();
        continue;
      }
      if (n === C_RBRACKET) {
        this.#pos++;
        break;
      }
      this.#syntax("expected ',' or ']'");
    }
    this.#pathIdx[d] = -1;
  }

  /** Read a key (at '"') of message `msg` and return its field index, or -1 when it is unknown. */
  #key(msg: MsgId): number {
    this.#token();
    const buf = this.#tBuf;
    const start = this.#tStart;
    const n = this.#tEnd - start;
    const byLength = KEYS_BY_LENGTH[msg];
    if (n < byLength.length) {
      const keys = byLength[n];
      outer: for (let k = 0; k < keys.length; k++) {
        const name = keys[k].bytes;
        for (let i = 0; i < n; i++) if (name[i] !== buf[start + i]) continue outer;
        return keys[k].field;
      }
    }
    return -1;
  }

  /**
   * Skip the JSON value at #pos (the value of an unknown key), checking that it
   * is well-formed. Iterative: open arrays and objects are kept on a stack of
   * at most MAX_UNKNOWN_VALUE_DEPTH entries, and deeper nesting is refused.
   */
  #skipValue(): void {
    const src = this.#src;
    const stack = (this.#skipStack ??= new Uint8Array(MAX_UNKNOWN_VALUE_DEPTH));
    let depth = 0;
    for (;;) {
      // A value starts at #pos (whitespace already skipped).
      const c = src[this.#pos];
      if (c === C_LBRACE || c === C_LBRACKET) {
        if (depth === MAX_UNKNOWN_VALUE_DEPTH) {
          this.#invalid(`unknown key's value nested deeper than ${MAX_UNKNOWN_VALUE_DEPTH} levels`);
        }
        const close = c === C_LBRACE ? C_RBRACE : C_RBRACKET;
        this.#pos++;
        this.#ws();
        if (src[this.#pos] !== close) {
          stack[depth++] = c;
          if (c === C_LBRACE) this.#skipKey();
          continue;
        }
        this.#pos++;
      } else if (c === C_QUOTE) {
        this.#scanString();
        this.#pos = this.#strEnd + 1;
      } else if (c === 0x74 /* t */) {
        this.#literal(LIT_TRUE);
      } else if (c === 0x66 /* f */) {
        this.#literal(LIT_FALSE);
      } else if (c === 0x6e /* n */) {
        this.#literal(LIT_NULL);
      } else if (c === C_MINUS || (c >= C_0 && c <= C_9)) {
        this.#numberLiteral();
      } else {
        this.#syntax('expected a value');
      }
      // After a value: close what ends here, up to the next value or the end.
      for (;;) {
        if (depth === 0) return;
        this.#ws();
        const inObject = stack[depth - 1] === C_LBRACE;
        const n = src[this.#pos];
        if (n === C_COMMA) {
          this.#pos++;
          this.#ws();
          if (inObject) this.#skipKey();
          break;
        }
        if (n !== (inObject ? C_RBRACE : C_RBRACKET)) this.#syntax(inObject ? "expected ',' or '}'" : "expected ',' or ']'");
        this.#pos++;
        depth--;
      }
    }
  }

  /** Skip a key and its colon inside a skipped object, up to the start of its value. */
  #skipKey(): void {
    if (this.#src[this.#pos] !== C_QUOTE) this.#syntax('expected a key');
    this.#scanString();
    this.#pos = this.#strEnd + 1;
    this.#ws();
    if (this.#src[this.#pos] !== C_COLON) this.#syntax("expected ':'");
    this.#pos++;
    this.#ws();
  }

  // ---- strings ---------------------------------------------------------------

  /**
   * Scan the string at #pos (at '"') up to its closing quote: checks escapes and
   * control characters and computes the decoded UTF-8 length. Leaves #pos alone.
   */
  #scanString(): void {
    const src = this.#src;
    const len = src.length;
    let i = this.#pos + 1;
    let saved = 0;
    let esc = false;
    for (;;) {
      let b = src[i];
      while (i < len && b !== C_QUOTE && b !== C_BACKSLASH && b >= 0x20) b = src[++i];
      if (i >= len) this.#syntaxAt(this.#pos, 'unterminated string');
      if (b === C_QUOTE) break;
      if (b !== C_BACKSLASH) this.#syntaxAt(i, 'control character in a string');
      esc = true;
      const e = src[i + 1];
      if (e === 0x75 /* u */) {
        const cu = this.#hex4(i + 2);
        if (cu >= 0xd800 && cu <= 0xdbff) {
          if (src[i + 6] !== C_BACKSLASH || src[i + 7] !== 0x75) this.#syntaxAt(i, 'unpaired surrogate escape');
          const lo = this.#hex4(i + 8);
          if (lo < 0xdc00 || lo > 0xdfff) this.#syntaxAt(i, 'unpaired surrogate escape');
          saved += 12 - 4;
          i += 12;
        } else if (cu >= 0xdc00 && cu <= 0xdfff) {
          this.#syntaxAt(i, 'unpaired surrogate escape');
        } else {
          saved += 6 - (cu < 0x80 ? 1 : cu < 0x800 ? 2 : 3);
          i += 6;
        }
      } else if (
        e === C_QUOTE ||
        e === C_BACKSLASH ||
        e === 0x2f /* / */ ||
        e === 0x62 /* b */ ||
        e === 0x66 /* f */ ||
        e === 0x6e /* n */ ||
        e === 0x72 /* r */ ||
        e === 0x74 /* t */
      ) {
        saved += 1;
        i += 2;
      } else {
        this.#syntaxAt(i, 'invalid escape in a string');
      }
    }
    this.#strEnd = i;
    this.#strEsc = esc;
    this.#strLen = i - this.#pos - 1 - saved;
  }

  #hex4(at: number): number {
    const src = this.#src;
    let v = 0;
    for (let k = 0; k < 4; k++) {
      const h = at + k < src.length ? HEX[src[at + k]] : -1;
      if (h < 0) this.#syntaxAt(at - 2, 'invalid \\u escape');
      v = (v << 4) | h;
    }
    return v;
  }

  /** Decode the scanned string's escapes into `dst` at `at` (#strLen bytes). */
  #unescapeInto(dst: Uint8Array, at: number): void {
    const src = this.#src;
    const end = this.#strEnd;
    let i = this.#pos + 1;
    while (i < end) {
      const b = src[i];
      if (b !== C_BACKSLASH) {
        dst[at++] = b;
        i++;
        continue;
      }
      const e = src[i + 1];
      if (e !== 0x75) {
        dst[at++] =
          e === 0x62 ? 0x08 : e === 0x66 ? 0x0c : e === 0x6e ? 0x0a : e === 0x72 ? 0x0d : e === 0x74 ? 0x09 : e;
        i += 2;
        continue;
      }
      let cp = this.#hex4(i + 2);
      i += 6;
      if (cp >= 0xd800 && cp <= 0xdbff) {
        cp = 0x10000 + ((cp - 0xd800) << 10) + (this.#hex4(i + 2) - 0xdc00);
        i += 6;
      }
      if (cp < 0x80) {
        dst[at++] = cp;
      } else if (cp < 0x800) {
        dst[at++] = 0xc0 | (cp >> 6);
        dst[at++] = 0x80 | (cp & 0x3f);
      } else if (cp < 0x10000) {
        dst[at++] = 0xe0 | (cp >> 12);
        dst[at++] = 0x80 | ((cp >> 6) & 0x3f);
        dst[at++] = 0x80 | (cp & 0x3f);
      } else {
        dst[at++] = 0xf0 | (cp >> 18);
        dst[at++] = 0x80 | ((cp >> 12) & 0x3f);
        dst[at++] = 0x80 | ((cp >> 6) & 0x3f);
        dst[at++] = 0x80 | (cp & 0x3f);
      }
    }
  }

  /** Write the string at #pos as field `fieldNo` (an empty one only when `always`). */
  #string(fieldNo: number, always: boolean): void {
    this.#scanString();
    const n = this.#strLen;
    if (n !== 0 || always) {
      const w = this.#w;
      w.tag(fieldNo, WireType.LEN);
      w.varint32(n);
      if (!this.#strEsc) {
        w.copy(this.#src, this.#pos + 1, this.#strEnd);
      } else {
        const at = w.reserve(n);
        this.#unescapeInto(w.buffer, at);
      }
    }
    this.#pos = this.#strEnd + 1;
  }

  /**
   * Read the string at #pos as a token (a key, id, enum name, number...): its
   * decoded content is #tBuf[#tStart, #tEnd), in the body when it has no escapes.
   */
  #token(): void {
    this.#scanString();
    if (!this.#strEsc) {
      this.#tBuf = this.#src;
      this.#tStart = this.#pos + 1;
      this.#tEnd = this.#strEnd;
    } else {
      const n = this.#strLen;
      let scratch = this.#scratch;
      if (scratch === undefined || scratch.length < n) {
        scratch = this.#scratch = new Uint8Array(Math.max(64, n, 2 * (scratch?.length ?? 0)));
      }
      this.#unescapeInto(scratch, 0);
      this.#tBuf = scratch;
      this.#tStart = 0;
      this.#tEnd = n;
    }
    this.#pos = this.#strEnd + 1;
  }

  #tokenIs(lit: Uint8Array): boolean {
    const buf = this.#tBuf;
    const start = this.#tStart;
    if (this.#tEnd - start !== lit.length) return false;
    for (let i = 0; i < lit.length; i++) if (buf[start + i] !== lit[i]) return false;
    return true;
  }

  #hexId(f: FieldDesc): void {
    this.#token();
    const buf = this.#tBuf;
    const start = this.#tStart;
    const n = this.#tEnd - start;
    if (n === 0) return;
    const bytes = f.idLength;
    if (n !== bytes * 2) this.#invalid(`must be ${bytes * 2} hex digits or empty, not ${n} characters`);
    const w = this.#w;
    w.tag(f.number, WireType.LEN);
    w.varint32(bytes);
    const at = w.reserve(bytes);
    const out = w.buffer;
    for (let i = 0; i < bytes; i++) {
      const h = HEX[buf[start + 2 * i]];
      const l = HEX[buf[start + 2 * i + 1]];
      if (h < 0 || l < 0) this.#invalid('not a hex string');
      out[at + i] = (h << 4) | l;
    }
  }

  #base64(f: FieldDesc): void {
    this.#token();
    const buf = this.#tBuf;
    const start = this.#tStart;
    let end = this.#tEnd;
    const total = end - start;
    let pad = 0;
    while (pad < 2 && end > start && buf[end - 1] === 0x3d /* = */) {
      end--;
      pad++;
    }
    const n = end - start;
    if ((pad !== 0 && total % 4 !== 0) || n % 4 === 1) this.#invalid('not valid base64 (bad length or padding)');
    const outLen = (n >> 2) * 3 + (n % 4 === 0 ? 0 : (n % 4) - 1);
    if (outLen === 0 && !f.oneof) return;
    const w = this.#w;
    w.tag(f.number, WireType.LEN);
    w.varint32(outLen);
    const at = w.reserve(outLen);
    const out = w.buffer;
    let o = at;
    let acc = 0;
    let bits = 0;
    for (let i = start; i < end; i++) {
      const v = BASE64[buf[i]];
      if (v < 0) this.#invalid('not valid base64');
      acc = ((acc << 6) | v) & 0xffffff;
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        out[o++] = (acc >> bits) & 0xff;
      }
    }
  }

  // ---- numbers ---------------------------------------------------------------

  /**
   * Match the JSON number grammar in buf[i, limit): return where it ends (or -1
   * when it does not start a valid number) and record its parts.
   */
  #numberEnd(buf: Uint8Array, i: number, limit: number): number {
    let b = buf[i];
    this.#nNeg = false;
    if (b === C_MINUS) {
      this.#nNeg = true;
      b = buf[++i];
    }
    if (i >= limit || b < C_0 || b > C_9) return -1;
    this.#nIntStart = i;
    if (b === C_0) i++;
    else while (i < limit && buf[i] >= C_0 && buf[i] <= C_9) i++;
    this.#nIntEnd = i;
    this.#nFracStart = this.#nFracEnd = i;
    this.#nExp = 0;
    if (i < limit && buf[i] === C_DOT) {
      i++;
      this.#nFracStart = i;
      while (i < limit && buf[i] >= C_0 && buf[i] <= C_9) i++;
      if (i === this.#nFracStart) return -1;
      this.#nFracEnd = i;
    }
    if (i < limit && (buf[i] === 0x65 || buf[i] === 0x45)) {
      i++;
      let expNeg = false;
      if (i < limit && (buf[i] === C_PLUS || buf[i] === C_MINUS)) expNeg = buf[i++] === C_MINUS;
      const s = i;
      let exp = 0;
      while (i < limit && buf[i] >= C_0 && buf[i] <= C_9) {
        // Saturate: anything past 1e6 is out of every range anyway.
        if (exp < 1_000_000) exp = exp * 10 + (buf[i] - C_0);
        i++;
      }
      if (i === s) return -1;
      this.#nExp = expNeg ? -exp : exp;
    }
    return i;
  }

  /** Read a number literal at #pos into the number parts, as #numberEnd does. */
  #numberLiteral(): number {
    const start = this.#pos;
    const end = this.#numberEnd(this.#src, start, this.#src.length);
    if (end < 0) this.#syntaxAt(start, 'invalid number');
    this.#pos = end;
    return start;
  }

  /** Read an integer (number or numeric string) for field `f` into #lo/#hi/#neg, range-checked. */
  #integer(f: FieldDesc): void {
    const src = this.#src;
    const c = src[this.#pos];
    let buf: Uint8Array;
    if (c === C_QUOTE) {
      this.#token();
      buf = this.#tBuf;
      if (f.kind === Kind.ENUM) {
        this.#enumName(f);
        return;
      }
      if (this.#numberEnd(buf, this.#tStart, this.#tEnd) !== this.#tEnd) this.#invalid('expected an integer, got a non-numeric string');
    } else if (c === C_MINUS || (c >= C_0 && c <= C_9)) {
      buf = src;
      this.#numberLiteral();
    } else {
      this.#expected('an integer');
      return;
    }
    this.#integralValue(buf, f);
  }

  #enumName(f: FieldDesc): void {
    const names = ENUM_NAMES[f.enumType];
    for (let v = 0; v < names.length; v++) {
      if (this.#tokenIs(names[v])) {
        this.#lo = v;
        this.#hi = 0;
        this.#neg = false;
        return;
      }
    }
    this.#invalid(`unknown ${ENUMS[f.enumType].name} name`);
  }

  /** The exact integer value of the number parts just matched in `buf`, checked against `f`'s range. */
  #integralValue(buf: Uint8Array, f: FieldDesc): void {
    const intStart = this.#nIntStart;
    const intLen = this.#nIntEnd - intStart;
    const fracStart = this.#nFracStart;
    const total = intLen + (this.#nFracEnd - fracStart);
    const shift = this.#nExp - (total - intLen);
    // Digits [0, keep) form the integer; any digit after them must be 0.
    let keep = total;
    if (shift < 0) {
      keep = total + shift;
      for (let k = Math.max(keep, 0); k < total; k++) {
        const digit = k < intLen ? buf[intStart + k] : buf[fracStart + k - intLen];
        if (digit !== C_0) this.#invalid('expected an integer, got a fraction');
      }
      if (keep < 0) keep = 0;
    }
    let lo = 0;
    let hi = 0;
    for (let k = 0; k < keep; k++) {
      const digit = (k < intLen ? buf[intStart + k] : buf[fracStart + k - intLen]) - C_0;
      lo = lo * 10 + digit;
      const carry = Math.floor(lo / TWO32);
      lo -= carry * TWO32;
      hi = hi * 10 + carry;
      if (hi >= TWO32) this.#outOfRange(f);
    }
    if (shift > 0 && (lo !== 0 || hi !== 0)) {
      if (shift > 20) this.#outOfRange(f);
      for (let k = 0; k < shift; k++) {
        lo = lo * 10;
        const carry = Math.floor(lo / TWO32);
        lo -= carry * TWO32;
        hi = hi * 10 + carry;
        if (hi >= TWO32) this.#outOfRange(f);
      }
    }
    const neg = this.#nNeg && (lo !== 0 || hi !== 0);
    let ok: boolean;
    switch (f.kind) {
      case Kind.UINT32:
      case Kind.FIXED32:
        ok = !neg && hi === 0;
        break;
      case Kind.ENUM:
        ok = hi === 0 && lo <= (neg ? 0x80000000 : 0x7fffffff);
        break;
      case Kind.INT64:
        ok = hi < 0x80000000 || (neg && hi === 0x80000000 && lo === 0);
        break;
      default: // FIXED64
        ok = !neg;
    }
    if (!ok) this.#outOfRange(f);
    this.#lo = lo;
    this.#hi = hi;
    this.#neg = neg;
  }

  #writeInteger(f: FieldDesc): void {
    let lo = this.#lo;
    let hi = this.#hi;
    if (lo === 0 && hi === 0 && !f.oneof) return;
    if (this.#neg) {
      // Two's complement of the magnitude, as 64 bits (int32 enums sign-extend too).
      lo = (~lo + 1) >>> 0;
      hi = (~hi + (lo === 0 ? 1 : 0)) >>> 0;
    }
    const w = this.#w;
    switch (f.kind) {
      case Kind.FIXED32:
        w.tag(f.number, WireType.I32);
        w.fixed32(lo);
        break;
      case Kind.FIXED64:
        w.tag(f.number, WireType.I64);
        w.fixed64(lo, hi);
        break;
      default:
        w.tag(f.number, WireType.VARINT);
        w.varint64(lo, hi);
    }
  }

  /** Read a double: a number, a numeric string, "NaN", "Infinity" or "-Infinity". */
  #double(): number {
    const src = this.#src;
    const c = src[this.#pos];
    let buf: Uint8Array;
    let start: number;
    let end: number;
    if (c === C_QUOTE) {
      this.#token();
      if (this.#tokenIs(LIT_NAN)) return NaN;
      if (this.#tokenIs(LIT_INF)) return Infinity;
      if (this.#tokenIs(LIT_NEG_INF)) return -Infinity;
      buf = this.#tBuf;
      start = this.#tStart;
      end = this.#tEnd;
      if (this.#numberEnd(buf, start, end) !== end) this.#invalid('expected a number, got a non-numeric string');
    } else if (c === C_MINUS || (c >= C_0 && c <= C_9)) {
      buf = src;
      start = this.#numberLiteral();
      end = this.#pos;
    } else {
      return this.#expected('a number');
    }
    let v: number;
    const intDigits = this.#nIntEnd - this.#nIntStart;
    if (this.#nFracEnd === this.#nFracStart && this.#nExp === 0 && this.#nIntEnd === end && intDigits <= 15) {
      // A plain integer below 10^15: exact without going through a string.
      v = 0;
      for (let i = this.#nIntStart; i < end; i++) v = v * 10 + (buf[i] - C_0);
      if (this.#nNeg) v = -v;
    } else {
      let text = '';
      for (let i = start; i < end; i++) text += String.fromCharCode(buf[i]);
      v = Number(text);
    }
    if (!Number.isFinite(v)) this.#invalid('number out of range for a double');
    return v;
  }

  // ---- lexical helpers -------------------------------------------------------

  #ws(): void {
    const src = this.#src;
    let i = this.#pos;
    let b = src[i];
    while (b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09) b = src[++i];
    this.#pos = i;
  }

  #literal(lit: Uint8Array): void {
    const src = this.#src;
    const at = this.#pos;
    for (let i = 0; i < lit.length; i++) {
      if (src[at + i] !== lit[i]) this.#syntaxAt(at, 'invalid literal');
    }
    this.#pos = at + lit.length;
  }

  // ---- errors ----------------------------------------------------------------

  /** Path segment d+1 (segment 0 is '$'): `.name` or `.name[i]`. */
  #segment(d: number): string {
    const s = `.${MESSAGES[this.#pathMsg[d]].fields[this.#pathField[d]].jsonName}`;
    return this.#pathIdx[d] >= 0 ? `${s}[${this.#pathIdx[d]}]` : s;
  }

  /**
   * The JSON path of the value being read; when it has more than head + tail
   * segments, the first `head` ('$' included) and the last `tail` with '…' between.
   */
  #path(head: number, tail: number): string {
    let n = 0;
    while (n < this.#depth && this.#pathField[n] >= 0) n++;
    let s = '$';
    if (n + 1 <= head + tail) {
      for (let d = 0; d < n; d++) s += this.#segment(d);
      return s;
    }
    for (let d = 0; d < head - 1; d++) s += this.#segment(d);
    s += '…';
    for (let d = n - tail; d < n; d++) s += d === n - tail ? this.#segment(d).slice(1) : this.#segment(d);
    return s;
  }

  /** Throw `prefix + what + place(path)`, eliding more of the path until it fits MAX_MESSAGE_BYTES. */
  #fail(prefix: string, what: string, place: (path: string) => string): never {
    let message = '';
    for (const [head, tail] of [
      [PATH_HEAD, PATH_TAIL],
      [2, 1],
      [1, 1],
    ]) {
      message = `${prefix}${what}${place(this.#path(head, tail))}`;
      if (Buffer.byteLength(message) <= MAX_MESSAGE_BYTES) break;
    }
    throw new BodyError('SIGLAKE_BAD_BODY', message);
  }

  #syntax(what: string): never {
    return this.#syntaxAt(this.#pos, this.#pos >= this.#src.length ? `unexpected end of body (${what})` : what);
  }

  #syntaxAt(at: number, what: string): never {
    return this.#fail('invalid JSON: ', what, (path) => ` at byte ${at} in ${path}`);
  }

  #invalid(what: string): never {
    return this.#fail('invalid OTLP/JSON: ', what, (path) => ` at ${path}`);
  }

  #expected(what: string): never {
    const c = this.#src[this.#pos];
    const got =
      c === C_QUOTE
        ? 'a string'
        : c === C_LBRACE
          ? 'an object'
          : c === C_LBRACKET
            ? 'an array'
            : c === 0x74 || c === 0x66
              ? 'a boolean'
              : c === C_MINUS || (c >= C_0 && c <= C_9)
                ? 'a number'
                : c === 0x6e
                  ? 'null'
                  : undefined;
    if (got === undefined) return this.#syntax('expected a value');
    return this.#invalid(`expected ${what}, got ${got}`);
  }

  #outOfRange(f: FieldDesc): never {
    return this.#invalid(`integer out of range for ${INTEGER_TYPE_NAME[f.kind] ?? 'the field'}`);
  }
}
