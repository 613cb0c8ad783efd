// Seeded mutations of OTLP request bodies for the fuzz suite. Protobuf bodies
// are parsed into a field tree (with the oracle's schema) so that structural
// mutations (drop, duplicate, splice, unknown fields, bad strings, odd id
// lengths, deep nesting, wrong wire types, overlong varints) re-encode with
// correct enclosing lengths; byte-level mutations (bit flips, truncation, huge
// declared lengths, garbage) then break the framing itself. OTLP/JSON bodies
// are mutated as objects (wrong types, bad ids, deep nesting, unknown keys)
// and as text (duplicate keys, bit flips, truncation, invalid UTF-8).
// What a mutated body should get is decided by the oracle, never by the kind
// of mutation.

import { BodyError } from '../../../src/errors.js';
import type { OtlpOracle, Signal } from './otlp-oracle.js';
import type { Prng } from './prng.js';
import type { FixtureGenerator } from '../../../src/otlp/fixtures.js';

interface FieldRule {
  name: string;
  wire: number;
  kind: 'message' | 'string' | 'bytes' | 'scalar';
  child?: { name: string; fields: Map<number, FieldRule> };
  idLength: number;
  isAnyValue: boolean;
}

interface Node {
  no: number;
  wt: number;
  /** The value bytes as encoded (wt 0: the varint; 1, 5: the fixed bytes; 2: the payload), unless children. */
  raw?: Uint8Array;
  children?: Node[];
  rule?: FieldRule;
}

function varint(v: bigint | number): number[] {
  let n = BigInt(v);
  const out: number[] = [];
  while (n > 0x7fn) {
    out.push(Number(n & 0x7fn) | 0x80);
    n >>= 7n;
  }
  out.push(Number(n));
  return out;
}

class Unparsable extends Error {}

/** The field tree of a well-formed body; throws Unparsable when the body is not one (an earlier round broke it). */
function parse(fields: Map<number, FieldRule> | undefined, b: Uint8Array, pos: number, end: number): Node[] {
  const out: Node[] = [];
  const byte = (): number => {
    if (pos >= end) throw new Unparsable('past the end');
    return b[pos++]!;
  };
  const readVarint = (): bigint => {
    let v = 0n;
    for (let i = 0; i < 10; i++) {
      const x = byte();
      v |= BigInt(x & 0x7f) << BigInt(7 * i);
      if (x < 0x80) return v;
    }
    throw new Unparsable('varint too long');
  };
  while (pos < end) {
    const tag = readVarint();
    const no = Number(tag >> 3n);
    const wt = Number(tag & 7n);
    const rule = fields?.get(no);
    const start = pos;
    if (wt === 0) {
      readVarint();
      out.push({ no, wt, raw: b.slice(start, pos), ...(rule ? { rule } : {}) });
    } else if (wt === 1 || wt === 5) {
      pos += wt === 1 ? 8 : 4;
      if (pos > end) throw new Unparsable('truncated fixed');
      out.push({ no, wt, raw: b.slice(start, pos), ...(rule ? { rule } : {}) });
    } else if (wt === 2) {
      const len = Number(readVarint());
      if (len > end - pos) throw new Unparsable('length past the end');
      if (rule?.kind === 'message') out.push({ no, wt, children: parse(rule.child!.fields, b, pos, pos + len), rule });
      else out.push({ no, wt, raw: b.slice(pos, pos + len), ...(rule ? { rule } : {}) });
      pos += len;
    } else if (wt === 3 || wt === 4) {
      out.push({ no, wt, raw: new Uint8Array(0) }); // a group marker: kept as it is
    } else {
      throw new Unparsable(`wire type ${wt}`);
    }
  }
  return out;
}

function encode(nodes: Node[], out: number[] = []): number[] {
  for (const n of nodes) {
    out.push(...varint((BigInt(n.no) << 3n) | BigInt(n.wt)));
    if (n.wt === 2) {
      const payload = n.children ? encode(n.children) : [...n.raw!];
      out.push(...varint(payload.length), ...payload);
    } else {
      out.push(...n.raw!);
    }
  }
  return out;
}

/** Every node of the tree with its parent list, depth-first. */
function allNodes(nodes: Node[], acc: { node: Node; parent: Node[]; anyDepth: number }[] = [], anyDepth = 0) {
  for (const n of nodes) {
    const d = n.rule?.isAnyValue ? anyDepth + 1 : anyDepth;
    acc.push({ node: n, parent: nodes, anyDepth: d });
    if (n.children) allNodes(n.children, acc, d);
  }
  return acc;
}

const BAD_UTF8: number[][] = [
  [0xc0, 0x80], // overlong NUL
  [0xed, 0xa0, 0x80], // UTF-16 surrogate
  [0x80], // lone continuation byte
  [0xe2, 0x82], // truncated sequence
  [0xff],
  [0xf5, 0x80, 0x80, 0x80], // past U+10FFFF
  [0xf4, 0x90, 0x80, 0x80], // past U+10FFFF
  [0xe0, 0x80, 0xaf], // overlong
];
const GOOD_UTF8 = ['\u0000', 'é', '日本語', '😀🚀', '\uFEFF', '\u2028', 'a'.repeat(300), 'Ω≈ç√∫'];

/** An AnyValue holding `depth` nested AnyValues (arrays or kvlists), innermost a string; depth ≥ 1. */
function nestedAnyValue(depth: number, prng: Prng): number[] {
  let inner = [0x0a, 0x01, 0x78]; // AnyValue{string_value: "x"}
  for (let d = 1; d < depth; d++) {
    if (prng.chance(0.5)) {
      const arr = [0x0a, ...varint(inner.length), ...inner]; // ArrayValue{values: inner}
      inner = [0x2a, ...varint(arr.length), ...arr]; // AnyValue{array_value}
    } else {
      const kv = [0x0a, 0x01, 0x6b, 0x12, ...varint(inner.length), ...inner]; // KeyValue{key "k", value: inner}
      const list = [0x0a, ...varint(kv.length), ...kv]; // KeyValueList{values}
      inner = [0x32, ...varint(list.length), ...list]; // AnyValue{kvlist_value}
    }
  }
  return inner;
}

export type ProtoMutation =
  | 'none'
  | 'drop'
  | 'duplicate'
  | 'splice'
  | 'unknown-field'
  | 'group-field'
  | 'bad-utf8'
  | 'good-utf8'
  | 'id-length'
  | 'deep-nesting'
  | 'wrong-wire-type'
  | 'long-varint'
  | 'padded-varint'
  | 'field-zero'
  | 'empty-message'
  | 'bit-flip'
  | 'byte-set'
  | 'truncate'
  | 'append-garbage'
  | 'huge-length'
  | 'random-bytes'
  | 'empty-body';

const STRUCTURAL: readonly (readonly [number, ProtoMutation])[] = [
  [3, 'none'],
  [6, 'drop'],
  [5, 'duplicate'],
  [3, 'splice'],
  [5, 'unknown-field'],
  [2, 'group-field'],
  [6, 'bad-utf8'],
  [4, 'good-utf8'],
  [6, 'id-length'],
  [6, 'deep-nesting'],
  [5, 'wrong-wire-type'],
  [4, 'long-varint'],
  [3, 'padded-varint'],
  [2, 'field-zero'],
  [2, 'empty-message'],
];
const BYTE_LEVEL: readonly (readonly [number, ProtoMutation])[] = [
  [6, 'bit-flip'],
  [3, 'byte-set'],
  [5, 'truncate'],
  [2, 'append-garbage'],
  [5, 'huge-length'],
  [1, 'random-bytes'],
  [1, 'empty-body'],
];

export class ProtoMutator {
  constructor(readonly oracle: OtlpOracle) {}

  /** A mutated copy of `base` (a valid request of `signal`) and the names of what was done. */
  mutate(signal: Signal, base: Uint8Array, donor: Uint8Array, prng: Prng): { body: Uint8Array; kinds: ProtoMutation[] } {
    const kinds: ProtoMutation[] = [];
    const fields = this.oracle.rules(signal).fields as unknown as Map<number, FieldRule>;
    let body = base;
    const rounds = prng.weighted([
      [6, 1],
      [3, 2],
      [1, 3],
    ] as const);
    for (let r = 0; r < rounds; r++) {
      const k = prng.weighted(STRUCTURAL);
      let tree: Node[];
      try {
        tree = parse(fields, body, 0, body.length);
      } catch (e) {
        if (e instanceof Unparsable) break; // an earlier round made it unreadable: enough structure
        throw e;
      }
      kinds.push(k);
      this.#structural(k, tree, parse(fields, donor, 0, donor.length), prng);
      body = Uint8Array.from(encode(tree));
    }
    if (prng.chance(0.35)) {
      const k = prng.weighted(BYTE_LEVEL);
      kinds.push(k);
      body = this.#byteLevel(k, body, fields, prng);
    }
    return { body, kinds };
  }

  #structural(k: ProtoMutation, tree: Node[], donor: Node[], prng: Prng): void {
    const nodes = allNodes(tree);
    if (nodes.length === 0 && k !== 'unknown-field' && k !== 'group-field' && k !== 'splice') return;
    const pickWhere = (pred: (n: Node) => boolean) => {
      const c = nodes.filter((x) => pred(x.node));
      return c.length ? prng.pick(c) : undefined;
    };
    switch (k) {
      case 'none':
        return;
      case 'drop': {
        const x = prng.pick(nodes);
        x.parent.splice(x.parent.indexOf(x.node), 1);
        return;
      }
      case 'duplicate': {
        const x = prng.pick(nodes);
        x.parent.splice(x.parent.indexOf(x.node), 0, structuredClone(x.node));
        return;
      }
      case 'splice': {
        const d = allNodes(donor);
        if (d.length === 0) return;
        const from = prng.pick(d).node;
        // Graft where a field of the same number and message lives (or at the top).
        const to = pickWhere((n) => n.no === from.no && n.rule === from.rule);
        if (to) to.parent.splice(to.parent.indexOf(to.node), 1, structuredClone(from));
        else tree.push(structuredClone(donor[0]!));
        return;
      }
      case 'unknown-field': {
        const parent = prng.chance(0.3) ? tree : (pickWhere((n) => n.children !== undefined)?.node.children ?? tree);
        const no = prng.pick([13, 17, 99, 1000, 19000, 536870911]);
        const wt = prng.pick([0, 1, 2, 5]);
        const raw = wt === 0 ? Uint8Array.from(varint(prng.u32())) : wt === 1 ? prng.bytes(8) : wt === 5 ? prng.bytes(4) : prng.bytes(prng.int(40));
        parent.splice(prng.int(parent.length + 1), 0, { no, wt, raw });
        return;
      }
      case 'group-field': {
        const parent = pickWhere((n) => n.children !== undefined)?.node.children ?? tree;
        parent.splice(prng.int(parent.length + 1), 0, { no: prng.pick([50, 77]), wt: prng.pick([3, 4]), raw: new Uint8Array(0) });
        return;
      }
      case 'bad-utf8':
      case 'good-utf8': {
        const x = pickWhere((n) => n.rule?.kind === 'string');
        if (!x) return;
        const raw = [...x.node.raw!];
        const ins = k === 'bad-utf8' ? prng.pick(BAD_UTF8) : [...Buffer.from(prng.pick(GOOD_UTF8))];
        raw.splice(prng.int(raw.length + 1), 0, ...ins);
        x.node.raw = Uint8Array.from(raw);
        return;
      }
      case 'id-length': {
        const x = pickWhere((n) => (n.rule?.idLength ?? 0) !== 0);
        if (!x) return;
        const len = prng.pick([0, 1, 7, 8, 9, 15, 16, 17, 32, x.node.rule!.idLength]);
        x.node.raw = prng.bytes(len);
        return;
      }
      case 'deep-nesting': {
        // Replace an AnyValue (or a log body) with a nest whose total depth is near the limit.
        const x = pickWhere((n) => n.rule?.isAnyValue === true);
        if (!x) return;
        const outer = x.anyDepth - 1; // AnyValues above this one
        const total = prng.range(28, 40);
        const depth = Math.max(1, total - outer);
        const bytes = Uint8Array.from(nestedAnyValue(depth, prng));
        x.node.children = undefined;
        x.node.raw = bytes;
        return;
      }
      case 'wrong-wire-type': {
        const x = prng.pick(nodes);
        const wt = prng.pick([0, 1, 2, 5].filter((w) => w !== x.node.wt));
        x.node.children = undefined;
        x.node.wt = wt;
        x.node.raw = wt === 0 ? Uint8Array.from(varint(prng.int(1000))) : wt === 1 ? prng.bytes(8) : wt === 5 ? prng.bytes(4) : prng.bytes(prng.int(12));
        return;
      }
      case 'long-varint': {
        const x = pickWhere((n) => n.wt === 0);
        if (!x) return;
        // 10 bytes with a too-large last byte, or 11 bytes.
        const ten = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        x.node.raw = Uint8Array.from(prng.chance(0.5) ? [...ten, prng.range(2, 0x7f)] : [...ten, 0x81, 0x00]);
        return;
      }
      case 'padded-varint': {
        const x = pickWhere((n) => n.wt === 0);
        if (!x) return;
        // A non-minimal but valid encoding: continuation bytes of zero, at most 10 bytes in all.
        const v = [...x.node.raw!];
        if (v.length >= 9) return;
        v[v.length - 1]! |= 0x80;
        while (v.length < 9) v.push(0x80);
        v.push(0x00);
        x.node.raw = Uint8Array.from(v);
        return;
      }
      case 'field-zero': {
        const x = prng.pick(nodes);
        x.node.no = 0;
        return;
      }
      case 'empty-message': {
        const x = pickWhere((n) => n.children !== undefined);
        if (x) x.node.children = [];
        return;
      }
      default:
        throw new Error(`not structural: ${k}`);
    }
  }

  #byteLevel(k: ProtoMutation, body: Uint8Array, fields: Map<number, FieldRule>, prng: Prng): Uint8Array {
    const b = Uint8Array.from(body);
    switch (k) {
      case 'bit-flip': {
        if (b.length === 0) return b;
        for (let i = 0; i < 1 + prng.int(4); i++) {
          const at = prng.int(b.length);
          b[at]! ^= 1 << prng.int(8);
        }
        return b;
      }
      case 'byte-set': {
        if (b.length === 0) return b;
        b[prng.int(b.length)] = prng.pick([0x00, 0x7f, 0x80, 0xff, 0x08, 0x0a, 0x12, 0x2a]);
        return b;
      }
      case 'truncate':
        return b.subarray(0, prng.int(b.length + 1));
      case 'append-garbage':
        return Uint8Array.from([...b, ...prng.bytes(1 + prng.int(16))]);
      case 'huge-length': {
        // Rewrite the length prefix of a length-delimited field with a huge value.
        const spots = lengthSpots(fields, b);
        if (spots.length === 0) return b;
        const s = prng.pick(spots);
        const huge = prng.pick([2n ** 31n - 1n, 2n ** 32n - 1n, 2n ** 32n + 5n, 2n ** 53n, 2n ** 63n - 1n, 2n ** 64n - 1n]);
        const enc = prng.chance(0.15) ? [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01] : varint(huge);
        return Uint8Array.from([...b.subarray(0, s.at), ...enc, ...b.subarray(s.at + s.size)]);
      }
      case 'random-bytes':
        return prng.bytes(prng.int(600));
      case 'empty-body':
        return new Uint8Array(0);
      default:
        throw new Error(`not byte-level: ${k}`);
    }
  }
}

/** Offsets and sizes of the length varints of every length-delimited field of a well-formed body. */
function lengthSpots(fields: Map<number, FieldRule>, b: Uint8Array): { at: number; size: number }[] {
  const out: { at: number; size: number }[] = [];
  const walk = (fs: Map<number, FieldRule> | undefined, pos: number, end: number): boolean => {
    while (pos < end) {
      let tag = 0;
      let mul = 1;
      for (let i = 0; ; i++) {
        if (pos >= end || i > 4) return false;
        const x = b[pos++]!;
        tag += (x & 0x7f) * mul;
        mul *= 128;
        if (x < 0x80) break;
      }
      const wt = tag % 8;
      const rule = fs?.get(Math.floor(tag / 8));
      if (wt === 0) {
        while (pos < end && b[pos]! >= 0x80) pos++;
        pos++;
      } else if (wt === 1) pos += 8;
      else if (wt === 5) pos += 4;
      else if (wt === 2) {
        const at = pos;
        let len = 0;
        mul = 1;
        for (;;) {
          if (pos >= end) return false;
          const x = b[pos++]!;
          len += (x & 0x7f) * mul;
          mul *= 128;
          if (x < 0x80) break;
        }
        out.push({ at, size: pos - at });
        if (pos + len > end) return false;
        if (rule?.kind === 'message') walk(rule.child!.fields, pos, pos + len);
        pos += len;
      } else return false;
    }
    return true;
  };
  walk(fields, 0, b.length);
  return out;
}

// ------------------------------------------------------------------ OTLP/JSON

export type JsonMutation =
  | 'none'
  | 'unknown-key'
  | 'int-as-number'
  | 'enum-by-name'
  | 'drop-key'
  | 'upper-hex'
  | 'empty-arrays'
  | 'bad-id'
  | 'deep-nesting-ok'
  | 'deep-nesting-bad'
  | 'wrong-type'
  | 'two-oneof'
  | 'null-in-array'
  | 'not-an-object'
  | 'duplicate-key'
  | 'bit-flip'
  | 'truncate'
  | 'bad-utf8'
  | 'unicode-escape';

/** How a JSON mutation should be answered, when that is certain: 200, 400, or decided by the response (with checks). */
export type JsonExpectation = 200 | 400 | 'either';

const JSON_MUTATIONS: readonly (readonly [number, JsonMutation])[] = [
  [4, 'none'],
  [4, 'unknown-key'],
  [3, 'int-as-number'],
  [3, 'enum-by-name'],
  [4, 'drop-key'],
  [2, 'upper-hex'],
  [2, 'empty-arrays'],
  [4, 'bad-id'],
  [2, 'deep-nesting-ok'],
  [3, 'deep-nesting-bad'],
  [5, 'wrong-type'],
  [2, 'two-oneof'],
  [2, 'null-in-array'],
  [1, 'not-an-object'],
  [2, 'duplicate-key'],
  [4, 'bit-flip'],
  [3, 'truncate'],
  [2, 'bad-utf8'],
  [2, 'unicode-escape'],
];

type Obj = Record<string, unknown>;

function objectsIn(v: unknown, acc: { obj: Obj; path: string[] }[] = [], path: string[] = []): { obj: Obj; path: string[] }[] {
  if (Array.isArray(v)) v.forEach((x, i) => objectsIn(x, acc, [...path, String(i)]));
  else if (v !== null && typeof v === 'object') {
    acc.push({ obj: v as Obj, path });
    for (const [k, x] of Object.entries(v as Obj)) objectsIn(x, acc, [...path, k]);
  }
  return acc;
}

function nestedJsonAny(depth: number): Obj {
  let v: Obj = { stringValue: 'x' };
  for (let d = 1; d < depth; d++) v = d % 2 ? { arrayValue: { values: [v] } } : { kvlistValue: { values: [{ key: 'k', value: v }] } };
  return v;
}

/** Keys whose values are enums, and their names for a small value. */
const ENUM_NAMES: Record<string, Record<number, string>> = {
  severityNumber: { 1: 'SEVERITY_NUMBER_TRACE', 5: 'SEVERITY_NUMBER_DEBUG', 9: 'SEVERITY_NUMBER_INFO', 13: 'SEVERITY_NUMBER_WARN', 17: 'SEVERITY_NUMBER_ERROR', 21: 'SEVERITY_NUMBER_FATAL' },
  kind: { 1: 'SPAN_KIND_INTERNAL', 2: 'SPAN_KIND_SERVER', 3: 'SPAN_KIND_CLIENT', 4: 'SPAN_KIND_PRODUCER', 5: 'SPAN_KIND_CONSUMER' },
};

const ID_KEYS = ['traceId', 'spanId', 'parentSpanId'];

export function mutateJson(obj: Obj, prng: Prng): { body: Uint8Array; kind: JsonMutation; expect: JsonExpectation } {
  const o = structuredClone(obj);
  const kind = prng.weighted(JSON_MUTATIONS);
  const objs = objectsIn(o);
  const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));
  const withKey = (pred: (k: string, v: unknown) => boolean) => {
    const c: { obj: Obj; key: string }[] = [];
    for (const { obj: x } of objs) for (const [k, v] of Object.entries(x)) if (pred(k, v)) c.push({ obj: x, key: k });
    return c.length ? prng.pick(c) : undefined;
  };
  switch (kind) {
    case 'none':
      return { body: enc(o), kind, expect: 200 };
    case 'unknown-key': {
      const x = prng.pick(objs).obj;
      x[prng.pick(['futureField', 'x_vendor', 'someNewThing'])] = prng.pick<unknown>([1, 'two', [3, { four: 4 }], { a: { b: [null, true] } }, null]);
      return { body: enc(o), kind, expect: 200 };
    }
    case 'int-as-number': {
      const x = withKey((k, v) => (k === 'intValue' || k === 'droppedAttributesCount') && typeof v === 'string' && Math.abs(Number(v)) < 2 ** 53);
      if (x) x.obj[x.key] = Number(x.obj[x.key]);
      return { body: enc(o), kind, expect: 200 };
    }
    case 'enum-by-name': {
      const x = withKey((k, v) => k in ENUM_NAMES && typeof v === 'number' && ENUM_NAMES[k]![v] !== undefined);
      if (x) x.obj[x.key] = ENUM_NAMES[x.key]![x.obj[x.key] as number];
      return { body: enc(o), kind, expect: 200 };
    }
    case 'drop-key': {
      const x = withKey(() => true);
      // Dropping an AnyValue's only value key leaves an empty AnyValue: still valid.
      if (x) delete x.obj[x.key];
      return { body: enc(o), kind, expect: 200 };
    }
    case 'upper-hex': {
      const x = withKey((k, v) => ID_KEYS.includes(k) && typeof v === 'string');
      if (x) x.obj[x.key] = (x.obj[x.key] as string).toUpperCase();
      return { body: enc(o), kind, expect: 200 };
    }
    case 'empty-arrays': {
      const x = withKey((k, v) => Array.isArray(v) && k !== 'values');
      if (x) x.obj[x.key] = [];
      return { body: enc(o), kind, expect: 200 };
    }
    case 'bad-id': {
      const x = withKey((k, v) => ID_KEYS.includes(k) && typeof v === 'string');
      if (!x) return { body: enc(o), kind, expect: 200 };
      const good = x.obj[x.key] as string;
      x.obj[x.key] = prng.pick([good.slice(1), `${good}0`, `${good.slice(2)}zz`, `0x${good.slice(2)}`, good.replace(/.$/, 'g'), 12345]);
      return { body: enc(o), kind, expect: 400 };
    }
    case 'deep-nesting-ok':
    case 'deep-nesting-bad': {
      // A log record's body (depth 1 at the top) or a span attribute's value (depth 1 too).
      const x = withKey((k) => k === 'body' || k === 'value');
      if (!x) return { body: enc(o), kind, expect: 200 };
      // Only top-level bodies and attribute values sit at depth 1; deeper ones would mislead the expectation.
      const depthAbove = 0;
      const depth = kind === 'deep-nesting-ok' ? prng.range(1, 32) : prng.range(33, 40);
      x.obj[x.key] = nestedJsonAny(depth - depthAbove);
      const anyAbove = objs.find((e) => e.obj === x.obj)!.path.filter((p) => p === 'value' || p === 'body' || p === 'values').length;
      return { body: enc(o), kind, expect: anyAbove === 0 ? (kind === 'deep-nesting-ok' ? 200 : 400) : kind === 'deep-nesting-ok' ? 'either' : 400 };
    }
    case 'wrong-type': {
      const wrongs: [string, unknown][] = [
        ['resourceLogs', 'x'],
        ['resourceSpans', 7],
        ['scopeLogs', {}],
        ['logRecords', 'none'],
        ['spans', true],
        ['attributes', { key: 'a' }],
        ['timeUnixNano', true],
        ['timeUnixNano', 1.5],
        ['timeUnixNano', '-1'],
        ['startTimeUnixNano', 'abc'],
        ['severityNumber', 'NOT_AN_ENUM'],
        ['severityNumber', 1.25],
        ['droppedAttributesCount', -1],
        ['droppedAttributesCount', 4294967296],
        ['intValue', '12abc'],
        ['intValue', '9223372036854775808'],
        ['boolValue', 'true'],
        ['doubleValue', 'many'],
        ['stringValue', 5],
        ['bytesValue', '***'],
        ['key', 7],
        ['name', { a: 1 }],
        ['flags', -5],
      ];
      const cands = wrongs.filter(([k]) => objs.some(({ obj: x }) => k in x));
      if (cands.length === 0) return { body: enc(o), kind, expect: 200 };
      const [k, v] = prng.pick(cands);
      const holders = objs.filter(({ obj: x }) => k in x);
      prng.pick(holders).obj[k] = v;
      return { body: enc(o), kind, expect: 400 };
    }
    case 'two-oneof': {
      const x = withKey((k) => k === 'stringValue');
      if (!x) return { body: enc(o), kind, expect: 200 };
      x.obj['intValue'] = '5';
      return { body: enc(o), kind, expect: 400 };
    }
    case 'null-in-array': {
      const x = withKey((k, v) => Array.isArray(v) && (v as unknown[]).length > 0);
      if (!x) return { body: enc(o), kind, expect: 200 };
      (x.obj[x.key] as unknown[]).push(null);
      return { body: enc(o), kind, expect: 400 };
    }
    case 'not-an-object':
      return { body: enc(prng.pick<unknown>([[o], 'logs', 42, null, true])), kind, expect: 400 };
    case 'duplicate-key': {
      const text = JSON.stringify(o);
      const top = Object.keys(o)[0];
      if (top === undefined) return { body: enc(o), kind, expect: 200 };
      // The same known key twice at the top: refused (the decoder never merges or picks one).
      return { body: new TextEncoder().encode(`{"${top}":[],${text.slice(1)}`), kind, expect: 400 };
    }
    case 'bit-flip': {
      const b = Uint8Array.from(enc(o));
      for (let i = 0; i < 1 + prng.int(3); i++) b[prng.int(b.length)]! ^= 1 << prng.int(8);
      return { body: b, kind, expect: 'either' };
    }
    case 'truncate': {
      const b = enc(o);
      return { body: b.subarray(0, prng.int(b.length)), kind, expect: 400 };
    }
    case 'bad-utf8': {
      const b = [...enc(o)];
      const q = b.indexOf(0x22, prng.int(b.length)); // inside or next to a string
      b.splice(q < 0 ? b.length : q + 1, 0, ...prng.pick(BAD_UTF8));
      return { body: Uint8Array.from(b), kind, expect: 400 };
    }
    case 'unicode-escape': {
      // Escapes the server must decode (\u00e9, a surrogate pair) or refuse (a lone surrogate).
      const x = withKey((k, v) => (k === 'stringValue' || k === 'name') && typeof v === 'string');
      if (!x) return { body: enc(o), kind, expect: 200 };
      const marker = 'UNICODEESCAPEHERE';
      x.obj[x.key] = `${x.obj[x.key] as string}${marker}`;
      const esc = prng.pick(['\\u00e9', '\\ud83d\\ude00', '\\u0000', '\\ud800', '\\udfff']);
      const text = JSON.stringify(o).replace(marker, esc);
      const lone = esc === '\\ud800' || esc === '\\udfff';
      return { body: new TextEncoder().encode(text), kind, expect: lone ? 'either' : 200 };
    }
  }
}

/**
 * `cases` mutated protobuf bodies, logs and traces taking turns, each made
 * from two of 24 generator requests per signal (the walk tests' corpus: small
 * to 9 KB, one to three resources, every value kind half the time).
 */
export function* mutatedCases(
  mutator: ProtoMutator,
  gen: FixtureGenerator,
  prng: Prng,
  cases: number,
): Generator<{ i: number; signal: Signal; body: Uint8Array; kinds: ProtoMutation[] }> {
  const pool = (signal: Signal) =>
    Array.from({ length: 24 }, () =>
      gen.request(signal, {
        targetBytes: prng.pick([120, 400, 1024, 3000, 9000]),
        resources: prng.range(1, 3),
        allValueKinds: prng.chance(0.5),
        logBodyBytes: prng.pick([16, 160, 600]),
      }).protobuf,
    );
  const pools: Record<Signal, Uint8Array[]> = { logs: pool('logs'), traces: pool('traces') };
  for (let i = 0; i < cases; i++) {
    const signal: Signal = i & 1 ? 'traces' : 'logs';
    const { body, kinds } = mutator.mutate(signal, prng.pick(pools[signal]), prng.pick(pools[signal]), prng);
    yield { i, signal, body, kinds };
  }
}

/** A count, or the message of the BodyError thrown (any other throw fails the test). */
export function walkOutcome(f: (s: Signal, b: Uint8Array) => number, signal: Signal, body: Uint8Array): number | string {
  try {
    return f(signal, body);
  } catch (err) {
    if (err instanceof BodyError && err.code === 'SIGLAKE_BAD_BODY') return err.message;
    throw err;
  }
}
