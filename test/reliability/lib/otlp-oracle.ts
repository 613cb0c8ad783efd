// An oracle for OTLP request bodies, written apart from the ingester's own
// validator (src/otlp/wire-validator.ts) and JSON decoder: it walks the wire
// format with a schema read from the .proto files by protobufjs' reflection,
// and applies the contract's rules (docs/operations.md, SIGLAKE_BAD_BODY):
//
// - well-formed protobuf: tags of at most 5 bytes below 2^32, field number
//   not 0, no group or undefined wire types (3, 4, 6, 7), varints of at most
//   10 bytes below 2^64, lengths inside the enclosing message;
// - a known field has its declared wire type (no repeated scalar field is
//   reachable from the export requests, so packed encoding never applies);
//   unknown fields are skipped;
// - strings are valid UTF-8;
// - trace ids are 0 or 16 bytes, span ids and parent span ids 0 or 8;
// - AnyValue nests at most 32 levels (the outermost is level 1).
//
// It also counts the log records or spans, and gives the protobufjs view of a
// payload for comparing an OTLP/JSON body with what the WAL stored for it.

import zlib from 'node:zlib';
import type protobuf from 'protobufjs';
import { ProtoRoot } from '../../../src/otlp/proto-root.js';
import { toProtobufjs } from '../../../src/otlp/fixtures.js';
import { Msg } from '../../../src/otlp/schema.js';

export type Signal = 'logs' | 'traces';

export const MAX_ANY_DEPTH = 32;

interface FieldRule {
  name: string;
  wire: number;
  kind: 'message' | 'string' | 'bytes' | 'scalar';
  child?: TypeRules;
  /** 16 or 8 for an id field, else 0. */
  idLength: number;
  isAnyValue: boolean;
  /** A field whose every occurrence is one log record or span. */
  countsRecords: boolean;
}

interface TypeRules {
  name: string;
  fields: Map<number, FieldRule>;
}

const WIRE_OF_SCALAR: Record<string, number> = {
  double: 1,
  fixed64: 1,
  sfixed64: 1,
  float: 5,
  fixed32: 5,
  sfixed32: 5,
  int32: 0,
  int64: 0,
  uint32: 0,
  uint64: 0,
  sint32: 0,
  sint64: 0,
  bool: 0,
  string: 2,
  bytes: 2,
};

const ANY_VALUE = 'opentelemetry.proto.common.v1.AnyValue';

export class Reject extends Error {}

export interface Verdict {
  valid: boolean;
  why?: string;
  records: number;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

export class OtlpOracle {
  readonly proto: ProtoRoot;
  readonly #roots: Record<Signal, TypeRules>;

  constructor(proto: ProtoRoot = ProtoRoot.load()) {
    this.proto = proto;
    const built = new Map<string, TypeRules>();
    const build = (t: protobuf.Type): TypeRules => {
      const have = built.get(t.fullName);
      if (have) return have;
      const rules: TypeRules = { name: t.name, fields: new Map() };
      built.set(t.fullName, rules);
      for (const f of t.fieldsArray) {
        f.resolve();
        const rt = f.resolvedType as protobuf.Type | protobuf.Enum | null;
        const isMessage = rt !== null && 'fieldsArray' in rt;
        const isEnum = rt !== null && !isMessage;
        if (f.map) throw new Error(`map field ${t.name}.${f.name} not handled`);
        if (f.repeated && !isMessage && f.type !== 'string' && f.type !== 'bytes') {
          throw new Error(`repeated scalar ${t.name}.${f.name}: packed encoding not handled`);
        }
        const kind = isMessage ? 'message' : f.type === 'string' ? 'string' : f.type === 'bytes' ? 'bytes' : 'scalar';
        const wire = isMessage ? 2 : isEnum ? 0 : WIRE_OF_SCALAR[f.type];
        if (wire === undefined) throw new Error(`unknown scalar type ${f.type}`);
        const fullName = isMessage ? (rt as protobuf.Type).fullName.replace(/^\./, '') : '';
        rules.fields.set(f.id, {
          name: f.name,
          wire,
          kind,
          idLength: kind === 'bytes' ? (f.name === 'traceId' ? 16 : f.name === 'spanId' || f.name === 'parentSpanId' ? 8 : 0) : 0,
          isAnyValue: fullName === ANY_VALUE,
          countsRecords: (t.name === 'ScopeLogs' && f.name === 'logRecords') || (t.name === 'ScopeSpans' && f.name === 'spans'),
          ...(isMessage ? { child: build(rt as protobuf.Type) } : {}),
        });
      }
      return rules;
    };
    this.#roots = { logs: build(proto.requestType('logs')), traces: build(proto.requestType('traces')) };
  }

  /** Is `bytes` a valid export request of `signal` under the contract's rules? */
  check(signal: Signal, bytes: Uint8Array): Verdict {
    const counter = { records: 0 };
    try {
      walk(this.#roots[signal], bytes, 0, bytes.length, 0, counter);
      return { valid: true, records: counter.records };
    } catch (e) {
      if (e instanceof Reject) return { valid: false, why: e.message, records: 0 };
      throw e;
    }
  }

  /** The schema of a signal's request, for the mutators. */
  rules(signal: Signal): TypeRules {
    return this.#roots[signal];
  }

  /**
   * A canonical text of what a protobuf payload means (protobufjs decode,
   * defaults filled in, 64-bit integers as strings, bytes as base64), so that
   * two encodings of the same request compare equal.
   */
  canonicalOfProtobuf(signal: Signal, payload: Uint8Array): string {
    const t = this.proto.requestType(signal);
    return stableJson(t.toObject(t.decode(payload), { longs: String, enums: Number, bytes: String, defaults: true, arrays: true }));
  }

  /** The same canonical text for an OTLP/JSON request given as the parsed object. */
  canonicalOfJson(signal: Signal, obj: Record<string, unknown>): string {
    const t = this.proto.requestType(signal);
    const root = signal === 'logs' ? Msg.ExportLogsServiceRequest : Msg.ExportTraceServiceRequest;
    const msg = t.fromObject(toProtobufjs(root, obj));
    return this.canonicalOfProtobuf(signal, t.encode(msg).finish());
  }
}

function readVarint(b: Uint8Array, pos: number, end: number, maxBytes: number, what: string): [bigint, number] {
  let v = 0n;
  for (let i = 0; ; i++) {
    if (pos >= end) throw new Reject(`truncated ${what}`);
    if (i >= maxBytes) throw new Reject(`${what} longer than ${maxBytes} bytes`);
    const x = b[pos++]!;
    v |= BigInt(x & 0x7f) << BigInt(7 * i);
    if (x < 0x80) return [v, pos];
  }
}

function walk(t: TypeRules, b: Uint8Array, pos: number, end: number, anyDepth: number, counter: { records: number }): void {
  while (pos < end) {
    let tag: bigint;
    [tag, pos] = readVarint(b, pos, end, 5, 'tag');
    if (tag >= 1n << 32n) throw new Reject(`tag ${tag} does not fit 32 bits`);
    const no = Number(tag >> 3n);
    const wt = Number(tag & 7n);
    if (no === 0) throw new Reject(`field number 0 in ${t.name}`);
    if (wt === 3 || wt === 4 || wt === 6 || wt === 7) throw new Reject(`wire type ${wt} in ${t.name}`);
    const f = t.fields.get(no);
    if (f !== undefined && f.wire !== wt) throw new Reject(`${t.name}.${f.name} has wire type ${wt}, not ${f.wire}`);
    if (wt === 0) {
      let v: bigint;
      [v, pos] = readVarint(b, pos, end, 10, 'varint');
      if (v >= 1n << 64n) throw new Reject('varint overflows 64 bits');
    } else if (wt === 1) {
      if (end - pos < 8) throw new Reject('truncated fixed64');
      pos += 8;
    } else if (wt === 5) {
      if (end - pos < 4) throw new Reject('truncated fixed32');
      pos += 4;
    } else {
      let len: bigint;
      [len, pos] = readVarint(b, pos, end, 10, 'length');
      if (len >= 1n << 64n) throw new Reject('length overflows 64 bits');
      if (len > BigInt(end - pos)) throw new Reject(`length ${len} past the end of ${t.name}`);
      const n = Number(len);
      if (f !== undefined) {
        if (f.kind === 'message') {
          const depth = f.isAnyValue ? anyDepth + 1 : anyDepth;
          if (depth > MAX_ANY_DEPTH) throw new Reject(`AnyValue deeper than ${MAX_ANY_DEPTH}`);
          if (f.countsRecords) counter.records++;
          walk(f.child!, b, pos, pos + n, depth, counter);
        } else if (f.kind === 'string') {
          try {
            utf8.decode(b.subarray(pos, pos + n));
          } catch {
            throw new Reject(`invalid UTF-8 in ${t.name}.${f.name}`);
          }
        } else if (f.idLength !== 0 && n !== 0 && n !== f.idLength) {
          throw new Reject(`${t.name}.${f.name} is ${n} bytes`);
        }
      }
      pos += n;
    }
  }
}

/** JSON with object keys sorted, so equal objects give equal text. */
export function stableJson(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) => {
    if (x === null || typeof x !== 'object' || Array.isArray(x)) return x;
    const o = x as Record<string, unknown>;
    return Object.fromEntries(Object.keys(o).sort().map((k) => [k, o[k]]));
  });
}

export type HttpClass = 200 | 400 | 413 | 415;

/**
 * Inflates a gzip body as the contract says (decompressed size counts against
 * the cap): the bytes, or the class of the refusal.
 */
export function gunzipOracle(body: Uint8Array, cap: number): Uint8Array | 400 | 413 {
  try {
    const out = zlib.gunzipSync(body, { maxOutputLength: Math.max(1, cap) });
    return out.length > cap ? 413 : out;
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === 'ERR_BUFFER_TOO_LARGE') return 413;
    return 400;
  }
}

/** Is `bytes` valid UTF-8 JSON that JSON.parse reads? The parsed value, or undefined. */
export function parseJsonStrict(bytes: Uint8Array): { ok: true; value: unknown } | { ok: false } {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    return { ok: false };
  }
  if (text.charCodeAt(0) === 0xfeff) return { ok: false };
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false };
  }
}
