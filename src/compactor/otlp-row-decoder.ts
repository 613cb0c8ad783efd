// Turns one WAL record's payload (an OTLP Export*ServiceRequest, protobuf)
// into table rows, one per log record or span, in the column order of
// TableSchema.LOGS / TableSchema.TRACES (docs/iceberg.md "Table schemas").
//
// Mapping rules, the same for every table:
// - 64-bit nanosecond timestamps stay exact in *_unix_nano longs; `time` is
//   the event time truncated to µs (Iceberg timestamptz), and picks the first
//   set of: the record's time, its observed time (logs), the WAL ingest time.
// - trace/span ids are lower-case hex; empty bytes are null.
// - attributes become map<string,string>: strings as they are, bool/int/double
//   as their text, bytes as base64, arrays and key-value lists as JSON. A
//   repeated key keeps its last value (a Parquet map has unique keys). A
//   double's text keeps the sign of -0.
// - a log body: a string as it is, an int as its exact decimal, a finite
//   double as its text, anything else as JSON (int64 beyond ±2^53, -0 and
//   non-finite doubles as JSON strings inside arrays and key-value lists).
// - a key-value list's JSON object (and a span event's or link's
//   `attributes`) keeps the keys in the order sent: a JavaScript object puts
//   keys that look like array indexes ("0", "12") first, so a value with a
//   key that starts with a digit is written as text (orderedJson).
// - empty strings are null where the schema says so (proto3 cannot tell them apart).

import type protobuf from 'protobufjs';
import { ProtoRoot } from '../otlp/proto-root.js';

export type Row = unknown[];
export type MapValue = [string, string | null][];

interface LongLike {
  low: number;
  high: number;
  unsigned?: boolean;
}

type Msg = Record<string, unknown>;

const EMPTY_MAP: MapValue = Object.freeze([]) as unknown as MapValue;

export class OtlpRowDecoder {
  readonly #logs: protobuf.Type;
  readonly #traces: protobuf.Type;

  constructor(root: ProtoRoot = ProtoRoot.load()) {
    this.#logs = root.requestType('logs');
    this.#traces = root.requestType('traces');
  }

  /** Calls `emit` with one logs-table row per log record of the payload; returns the count. */
  logs(payload: Uint8Array, ingestMs: number, emit: (row: Row) => void): number {
    const req = this.#logs.decode(payload) as unknown as Msg;
    const ingestMicros = BigInt(ingestMs) * 1000n;
    let n = 0;
    for (const rl of (req['resourceLogs'] as Msg[]) ?? []) {
      const res = resourceParts(rl);
      for (const sl of (rl['scopeLogs'] as Msg[]) ?? []) {
        const scope = scopeParts(sl);
        for (const lr of (sl['logRecords'] as Msg[]) ?? []) {
          const t = nanos(lr['timeUnixNano']);
          const o = nanos(lr['observedTimeUnixNano']);
          const body = lr['body'] as Msg | null | undefined;
          const kind = body == null ? undefined : (body['value'] as string | undefined);
          emit([
            t !== 0n ? t / 1000n : o !== 0n ? o / 1000n : ingestMicros,
            t === 0n ? null : t,
            o === 0n ? null : o,
            ingestMicros,
            (lr['severityNumber'] as number) | 0,
            nonEmpty(lr['severityText']),
            kind === undefined ? null : bodyText(body!),
            kind === undefined ? null : KIND_NAMES[kind] ?? null,
            hex(lr['traceId']),
            hex(lr['spanId']),
            BigInt((lr['flags'] as number) >>> 0),
            nonEmpty(lr['eventName']),
            res.serviceName,
            res.attributes,
            res.dropped,
            res.schemaUrl,
            scope.name,
            scope.version,
            scope.attributes,
            scope.schemaUrl,
            mapOf(lr['attributes'] as Msg[]),
            count(lr['droppedAttributesCount']),
            res.serviceNamespace,
            res.environment,
          ]);
          n++;
        }
      }
    }
    return n;
  }

  /** Calls `emit` with one traces-table row per span of the payload; returns the count. */
  traces(payload: Uint8Array, ingestMs: number, emit: (row: Row) => void): number {
    const req = this.#traces.decode(payload) as unknown as Msg;
    const ingestMicros = BigInt(ingestMs) * 1000n;
    let n = 0;
    for (const rs of (req['resourceSpans'] as Msg[]) ?? []) {
      const res = resourceParts(rs);
      for (const ss of (rs['scopeSpans'] as Msg[]) ?? []) {
        const scope = scopeParts(ss);
        for (const sp of (ss['spans'] as Msg[]) ?? []) {
          const start = nanos(sp['startTimeUnixNano']);
          const end = nanos(sp['endTimeUnixNano']);
          const status = sp['status'] as Msg | null | undefined;
          const events = listJson((sp['events'] as Msg[]) ?? [], eventJson);
          const links = listJson((sp['links'] as Msg[]) ?? [], linkJson);
          emit([
            start !== 0n ? start / 1000n : ingestMicros,
            start === 0n ? null : start,
            end === 0n ? null : end,
            start !== 0n && end !== 0n ? end - start : null,
            ingestMicros,
            hex(sp['traceId']),
            hex(sp['spanId']),
            hex(sp['parentSpanId']),
            nonEmpty(sp['traceState']),
            BigInt((sp['flags'] as number) >>> 0),
            nonEmpty(sp['name']),
            (sp['kind'] as number) | 0,
            status == null ? 0 : (status['code'] as number) | 0,
            status == null ? null : nonEmpty(status['message']),
            res.serviceName,
            res.attributes,
            res.dropped,
            res.schemaUrl,
            scope.name,
            scope.version,
            scope.attributes,
            scope.schemaUrl,
            mapOf(sp['attributes'] as Msg[]),
            count(sp['droppedAttributesCount']),
            events.json,
            Math.min(count(sp['droppedEventsCount']) + events.dropped, INT32_MAX),
            links.json,
            Math.min(count(sp['droppedLinksCount']) + links.dropped, INT32_MAX),
            res.serviceNamespace,
            res.environment,
          ]);
          n++;
        }
      }
    }
    return n;
  }
}

const KIND_NAMES: Readonly<Record<string, string>> = {
  stringValue: 'string',
  boolValue: 'bool',
  intValue: 'int',
  doubleValue: 'double',
  bytesValue: 'bytes',
  arrayValue: 'array',
  kvlistValue: 'kvlist',
};

function resourceParts(r: Msg): {
  attributes: MapValue;
  serviceName: string | null;
  serviceNamespace: string | null;
  environment: string | null;
  dropped: number;
  schemaUrl: string | null;
} {
  const resource = r['resource'] as Msg | null | undefined;
  const attrs = resource == null ? EMPTY_MAP : mapOf(resource['attributes'] as Msg[]);
  let serviceName: string | null = null;
  let serviceNamespace: string | null = null;
  let environment: string | null = null;
  for (const [k, v] of attrs) {
    if (k === 'service.name') serviceName = v;
    else if (k === 'service.namespace') serviceNamespace = v;
    else if (k === 'deployment.environment.name') environment = v;
  }
  return {
    attributes: attrs,
    serviceName,
    serviceNamespace,
    environment,
    dropped: resource == null ? 0 : count(resource['droppedAttributesCount']),
    schemaUrl: nonEmpty(r['schemaUrl']),
  };
}

function scopeParts(s: Msg): { name: string | null; version: string | null; attributes: MapValue; schemaUrl: string | null } {
  const scope = s['scope'] as Msg | null | undefined;
  return {
    name: scope == null ? null : nonEmpty(scope['name']),
    version: scope == null ? null : nonEmpty(scope['version']),
    attributes: scope == null ? EMPTY_MAP : mapOf(scope['attributes'] as Msg[]),
    schemaUrl: nonEmpty(s['schemaUrl']),
  };
}

/** A span event as its JSON object, or its text where an attribute key starts with a digit (JsonList takes either). */
function eventJson(e: Msg): Record<string, unknown> | string {
  const time = String(u64(e['timeUnixNano']));
  const name = e['name'] as string;
  const attrs = mapOf(e['attributes'] as Msg[]);
  const dropped = (e['droppedAttributesCount'] as number) >>> 0;
  if (hasDigitKey(attrs)) return eventText(time, name, attrs, dropped);
  return { time_unix_nano: time, name, attributes: Object.fromEntries(attrs), dropped_attributes_count: dropped };
}

/** A span link as its JSON object, or its text where an attribute key starts with a digit (JsonList takes either). */
function linkJson(l: Msg): Record<string, unknown> | string {
  const traceId = hex(l['traceId']);
  const spanId = hex(l['spanId']);
  const traceState = nonEmpty(l['traceState']);
  const flags = (l['flags'] as number) >>> 0;
  const attrs = mapOf(l['attributes'] as Msg[]);
  const dropped = (l['droppedAttributesCount'] as number) >>> 0;
  if (hasDigitKey(attrs)) return linkText(traceId, spanId, traceState, flags, attrs, dropped);
  return { trace_id: traceId, span_id: spanId, trace_state: traceState, flags, attributes: Object.fromEntries(attrs), dropped_attributes_count: dropped };
}

/**
 * Whether `key` may be an array index ("0", "12"): a JavaScript object lists
 * those first, in ascending order, whatever their place. (Any key that starts
 * with a digit: rare, and the text writer is right for every key.)
 */
export function startsWithDigit(key: string): boolean {
  const c = key.charCodeAt(0);
  return c >= 48 && c <= 57;
}

/** Whether an attribute map has a key Object.fromEntries would move (startsWithDigit). */
export function hasDigitKey(attrs: MapValue): boolean {
  for (let i = 0; i < attrs.length; i++) if (startsWithDigit(attrs[i]![0])) return true;
  return false;
}

/** A span event's JSON object as text, its attributes in the order sent. */
export function eventText(time: string, name: string, attrs: MapValue, dropped: number): string {
  return `{"time_unix_nano":"${time}","name":${JSON.stringify(name)},"attributes":${objectText(attrs, true)},"dropped_attributes_count":${dropped}}`;
}

/** A span link's JSON object as text, its attributes in the order sent. */
export function linkText(traceId: string | null, spanId: string | null, traceState: string | null, flags: number, attrs: MapValue, dropped: number): string {
  const id = (h: string | null) => (h === null ? 'null' : `"${h}"`);
  return `{"trace_id":${id(traceId)},"span_id":${id(spanId)},"trace_state":${traceState === null ? 'null' : JSON.stringify(traceState)},"flags":${flags},"attributes":${objectText(attrs, true)},"dropped_attributes_count":${dropped}}`;
}

/**
 * Entries (in the order sent, a repeated key in its first place: putEntry)
 * as a JSON object's text: string values quoted (`quote`: an attribute map's
 * text) or already JSON text (a key-value list's values); null as null.
 */
export function objectText(entries: MapValue, quote: boolean): string {
  let out = '{';
  for (let i = 0; i < entries.length; i++) {
    const [k, v] = entries[i]!;
    out += `${i === 0 ? '' : ','}${JSON.stringify(k)}:${v === null ? 'null' : quote ? JSON.stringify(v) : v}`;
  }
  return out + '}';
}

/** KeyValue list → map entries with text values; the last of a repeated key wins. */
function mapOf(kvs: Msg[] | undefined): MapValue {
  if (kvs === undefined || kvs.length === 0) return EMPTY_MAP;
  const out: MapValue = [];
  for (const kv of kvs) {
    const v = kv['value'] as Msg | null | undefined;
    putEntry(out, kv['key'] as string, v == null ? null : textOf(v));
  }
  return out;
}

/**
 * A list of at least this many entries has a key index (KEY_INDEX), so that a
 * list of n attributes is deduplicated in O(n) steps, not O(n²): one request
 * of a million attribute keys (a 10 MB body) took the compactor hours of
 * comparisons, during which no tenant's data landed. Shorter lists, nearly
 * all of them, are scanned.
 */
const INDEX_FROM = 16;
const KEY_INDEX = new WeakMap<MapValue, Map<string, number>>();

/**
 * Sets `key` of the attribute list `out` to `text`: a repeated key keeps its
 * first place and its last value (both decoders build their maps with it).
 */
export function putEntry(out: MapValue, key: string, text: string | null): void {
  const n = out.length;
  if (n < INDEX_FROM) {
    for (let i = 0; i < n; i++) {
      if (out[i]![0] === key) {
        out[i]![1] = text;
        return;
      }
    }
    out.push([key, text]);
    if (n + 1 === INDEX_FROM) KEY_INDEX.set(out, new Map(out.map((e, i) => [e[0], i])));
    return;
  }
  let index = KEY_INDEX.get(out);
  if (index === undefined) KEY_INDEX.set(out, (index = new Map(out.map((e, i) => [e[0], i]))));
  const at = index.get(key);
  if (at !== undefined) out[at]![1] = text;
  else {
    index.set(key, n);
    out.push([key, text]);
  }
}

/** An AnyValue as map text: scalars as text, bytes as base64, arrays and key-value lists as JSON. */
function textOf(v: Msg): string | null {
  switch (v['value'] as string | undefined) {
    case 'stringValue':
      return v['stringValue'] as string;
    case 'boolValue':
      return v['boolValue'] ? 'true' : 'false';
    case 'intValue':
      return String(i64(v['intValue']));
    case 'doubleValue':
      return doubleText(v['doubleValue'] as number);
    case 'bytesValue':
      return Buffer.from(v['bytesValue'] as Uint8Array).toString('base64');
    case 'arrayValue':
    case 'kvlistValue':
      return jsonText(v);
    default:
      return null;
  }
}

/**
 * A log body (an AnyValue with a member set) as the body column holds it: a
 * string as it is, an int as its exact decimal and a finite double as its
 * text (both JSON numbers), anything else as JSON.
 */
function bodyText(v: Msg): string {
  switch (v['value'] as string) {
    case 'stringValue':
      return v['stringValue'] as string;
    case 'intValue':
      return String(i64(v['intValue']));
    case 'doubleValue':
      return doubleBody(v['doubleValue'] as number);
    default:
      return jsonText(v);
  }
}

/**
 * A double as text: as JavaScript writes it, except that -0 keeps its sign
 * (the OpenTelemetry Collector writes "-0" too); NaN and ±Infinity are
 * `NaN`, `Infinity`, `-Infinity`.
 */
export function doubleText(d: number): string {
  return d === 0 && 1 / d < 0 ? '-0' : String(d);
}

/** A double body: a finite one as its text (a JSON number, -0 included), a non-finite one as a JSON string. */
export function doubleBody(d: number): string {
  return Number.isFinite(d) ? doubleText(d) : `"${String(d)}"`;
}

/** A double inside a JSON array or key-value list: a number, but -0 and non-finite ones as their text (JSON.stringify writes -0 as 0). */
export function doubleJson(d: number): number | string {
  return Number.isFinite(d) && !(d === 0 && 1 / d < 0) ? d : doubleText(d);
}

/** Set by jsonOf when a key-value list has a key that starts with a digit: jsonText then writes the value with orderedJson. */
let digitKeys = false;

/**
 * An AnyValue as JSON text: JSON.stringify of its JSON value (jsonOf), or,
 * where a key-value list in it has a key that starts with a digit, the text
 * orderedJson writes, which keeps every key where it was sent.
 */
function jsonText(v: Msg): string {
  digitKeys = false;
  const value = jsonOf(v);
  return digitKeys ? orderedJson(v) : JSON.stringify(value);
}

/** jsonOf's value as JSON text written directly, every key-value list's keys in the order sent (a repeated key in its first place with its last value). */
function orderedJson(v: Msg): string {
  switch (v['value'] as string | undefined) {
    case 'arrayValue':
      return `[${(((v['arrayValue'] as Msg)['values'] as Msg[]) ?? []).map(orderedJson).join(',')}]`;
    case 'kvlistValue': {
      const out: MapValue = [];
      for (const kv of ((v['kvlistValue'] as Msg)['values'] as Msg[]) ?? []) {
        const inner = kv['value'] as Msg | null | undefined;
        putEntry(out, kv['key'] as string, inner == null ? null : orderedJson(inner));
      }
      return objectText(out, false);
    }
    default:
      return JSON.stringify(jsonOf(v));
  }
}

/** An AnyValue as a JSON value: int64 beyond ±2^53 as a string, non-finite doubles and -0 as strings, bytes as base64. */
function jsonOf(v: Msg): unknown {
  switch (v['value'] as string | undefined) {
    case 'stringValue':
      return v['stringValue'];
    case 'boolValue':
      return v['boolValue'] === true;
    case 'intValue': {
      const n = i64(v['intValue']);
      return n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : String(n);
    }
    case 'doubleValue':
      return doubleJson(v['doubleValue'] as number);
    case 'bytesValue':
      return Buffer.from(v['bytesValue'] as Uint8Array).toString('base64');
    case 'arrayValue':
      return (((v['arrayValue'] as Msg)['values'] as Msg[]) ?? []).map(jsonOf);
    case 'kvlistValue': {
      const out: Record<string, unknown> = {};
      for (const kv of ((v['kvlistValue'] as Msg)['values'] as Msg[]) ?? []) {
        const inner = kv['value'] as Msg | null | undefined;
        const key = kv['key'] as string;
        if (startsWithDigit(key)) digitKeys = true;
        setJsonKey(out, key, inner == null ? null : jsonOf(inner));
      }
      return out;
    }
    default:
      return null;
  }
}

/**
 * Sets `key` of a kvlist's JSON object, `__proto__` included: a plain
 * assignment of that key would set the object's prototype and drop the key.
 * A repeated key keeps its first place and its last value.
 */
export function setJsonKey(out: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
  else out[key] = value;
}

/**
 * The most characters of a span's `events` or `links` JSON. Each event or
 * link costs a few wire bytes (an empty one two) but about 80 characters of
 * JSON, so one valid 8 MB request of 4 million empty events made a 300 MB
 * string that the Parquet writer could not write, and one of 16 MiB a string
 * past V8's longest: the table (or the lane) failed every round from then on.
 * Events and links past this bound are dropped in wire order, whole, and
 * counted in dropped_events_count / dropped_links_count, as OTLP counts the
 * ones an SDK drops. Nothing else amplifies that much (a JSON string escape
 * writes at most 6 characters per byte), so no other value is bounded.
 */
export const MAX_LIST_JSON_CHARS = 16 * 1024 * 1024;

const NO_LIST = Object.freeze({ json: null, dropped: 0 });
/**
 * Up to this many items a list is held as values and written by one
 * JSON.stringify, which cannot pass V8's longest string (the items' JSON is
 * bounded by the body's bytes): nearly every span's events and links. Past
 * it, each item is written as it comes and the list stops at the bound.
 */
const WHOLE_LIST_ITEMS = 65_536;

/** A span's events or links as the row holds them: listJson of the decoded messages. */
function listJson(items: readonly Msg[], json: (m: Msg) => unknown): { json: string | null; dropped: number } {
  if (items.length === 0) return NO_LIST;
  const list = new JsonList();
  for (const m of items) {
    if (list.full) list.drop();
    else list.add(json(m));
  }
  return { json: list.json(), dropped: list.droppedPlus(0) };
}

/**
 * A span's events or links as one JSON array of at most MAX_LIST_JSON_CHARS
 * characters, and the count of those that did not fit. A list of up to
 * WHOLE_LIST_ITEMS items is held as values and written in one go, as any
 * list was before the bound (the bound costs nothing there unless it is
 * passed); a longer one, or one given an item as its text, is written item
 * by item, and once an item does not fit it and every later one are dropped. Call json() before droppedPlus().
 */
export class JsonList {
  #items: unknown[] | null = [];
  #parts: string[] = [];
  #chars = 2;
  #dropped = 0;
  /** Set once an item did not fit: every later one is dropped too (drop() it without decoding it). */
  full = false;

  /** `item`: a value to write, or (a string) its JSON text already (an event or link whose attributes keep their order). */
  add(item: unknown): void {
    const items = this.#items;
    if (items !== null) {
      if (items.length < WHOLE_LIST_ITEMS && typeof item !== 'string') {
        items.push(item);
        return;
      }
      this.#itemByItem(items);
    }
    this.#addText(item);
  }

  drop(): void {
    this.#dropped++;
  }

  /** The JSON array, or null when no item was kept. */
  json(): string | null {
    const items = this.#items;
    if (items !== null) {
      if (items.length === 0) return null;
      const whole = JSON.stringify(items);
      if (whole.length <= MAX_LIST_JSON_CHARS) return whole;
      this.#itemByItem(items);
    }
    return this.#parts.length === 0 ? null : `[${this.#parts.join(',')}]`;
  }

  /** The span's own dropped count plus the items dropped here, capped at 2^31 − 1. */
  droppedPlus(dropped: number): number {
    return Math.min(dropped + this.#dropped, INT32_MAX);
  }

  #itemByItem(items: unknown[]): void {
    this.#items = null;
    for (const item of items) this.#addText(item);
  }

  #addText(item: unknown): void {
    if (this.full) {
      this.#dropped++;
      return;
    }
    const text = typeof item === 'string' ? item : JSON.stringify(item);
    const chars = this.#chars + (this.#parts.length === 0 ? 0 : 1) + text.length;
    if (chars > MAX_LIST_JSON_CHARS) {
      this.full = true;
      this.#dropped++;
      return;
    }
    this.#parts.push(text);
    this.#chars = chars;
  }
}

/** The largest values of the signed Iceberg columns (long, int) OTLP's unsigned fields land in. */
export const INT64_MAX = 2n ** 63n - 1n;
export const INT32_MAX = 2 ** 31 - 1;

/** A fixed64 timestamp (ns) for a `long` column: past 2^63 − 1 it is unknown, as 0 is. */
function nanos(v: unknown): bigint {
  const n = u64(v);
  return n > INT64_MAX ? 0n : n;
}

/** A uint32 count for an `int` column, capped at 2^31 − 1. */
function count(v: unknown): number {
  return Math.min((v as number) >>> 0, INT32_MAX);
}

function u64(v: unknown): bigint {
  if (typeof v === 'number') return BigInt(v);
  if (v === null || v === undefined) return 0n;
  const l = v as LongLike;
  return (BigInt(l.high >>> 0) << 32n) | BigInt(l.low >>> 0);
}

function i64(v: unknown): bigint {
  return BigInt.asIntN(64, u64(v));
}

function hex(b: unknown): string | null {
  const bytes = b as Uint8Array | undefined;
  if (bytes === undefined || bytes === null || bytes.length === 0) return null;
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}

function nonEmpty(s: unknown): string | null {
  return typeof s === 'string' && s !== '' ? s : null;
}
