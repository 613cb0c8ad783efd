// The compactor's decoder: one WAL record's payload (an OTLP
// Export*ServiceRequest, protobuf) straight from the wire into table rows, in
// the column order of TableSchema.LOGS / TableSchema.TRACES, by the mapping
// rules of otlp-row-decoder.ts (the protobufjs decoder, kept as the reference:
// test/unit/compactor-wire-rows.test.ts checks that both give the same rows).
//
// Why: protobufjs builds an object per message (an AnyValue's oneof setter
// deletes the members not set, which leaves each one a dictionary-mode
// object), and the rows were then made from those objects. Here the only
// allocations are the rows' own values; nothing is built that a row does not
// keep.
//
// Protobuf rules followed (the same as protobufjs' generated decoders, which
// otlp-row-decoder.ts relies on):
// - a singular scalar field that occurs more than once: the last one wins; a
//   singular message field that does is merged, i.e. read as the
//   concatenation of its occurrences (kept here as a list of ranges);
// - a repeated field's elements are taken in wire order, wherever they occur;
// - an AnyValue's value is the last of its oneof members on the wire (the
//   same message member again merges, as above);
// - unknown fields are skipped by wire type (groups, and wire types 6 and 7,
//   are refused: the ingest validator never lets them into the WAL).
// Malformed input (a length past its message's end, a varint past 10 bytes, a
// wrong wire type for a known field) throws; the compactor reports the
// segment as it does for any payload it cannot decode.

import {
  INT32_MAX,
  INT64_MAX,
  JsonList,
  doubleBody,
  doubleJson,
  doubleText,
  eventText,
  hasDigitKey,
  linkText,
  objectText,
  putEntry,
  setJsonKey,
  startsWithDigit,
  type MapValue,
  type Row,
} from './otlp-row-decoder.js';

const EMPTY_MAP: MapValue = Object.freeze([]) as unknown as MapValue;

const VARINT = 0;
const I64 = 1;
const LEN = 2;
const I32 = 5;

/** Buffer's slice-to-string methods without toString's argument handling. */
interface SliceBuffer extends Buffer {
  utf8Slice(start: number, end: number): string;
  hexSlice(start: number, end: number): string;
  base64Slice(start: number, end: number): string;
}

const EMPTY = Buffer.alloc(0) as SliceBuffer;

export class OtlpWireError extends Error {
  constructor(what: string, at: number) {
    super(`malformed OTLP protobuf: ${what} at offset ${at}`);
    this.name = 'OtlpWireError';
  }
}

/** What a Resource contributes to every row under it. */
interface ResourceParts {
  attributes: MapValue;
  serviceName: string | null;
  serviceNamespace: string | null;
  environment: string | null;
  dropped: number;
  schemaUrl: string | null;
}

/** What an InstrumentationScope contributes to every row under it. */
interface ScopeParts {
  name: string | null;
  version: string | null;
  attributes: MapValue;
  schemaUrl: string | null;
}

/**
 * The most characters of one value's text in a row: a string (a body, an
 * attribute key or value, a span name, ...) is decoded from at most this many
 * of its UTF-8 bytes, bytes are base64 of at most three quarters of it, and an
 * array or key-value list's JSON stops at it. A value that does not fit is cut
 * there and counted (siglake_compactor_truncated_values_total). Without it, a
 * request past --max-request-bytes' default (it goes to 512 MiB) could hold a
 * value the compactor cannot hold: a key-value list body of 100 MB of control
 * characters is 600 million characters of JSON, past V8's longest string,
 * and its lane failed every round (in the ingester, the compactor died of
 * it every round, and no tenant landed). 128 Mi characters is more than any
 * value of a 16 MiB request makes (6 characters a byte at most), so nothing
 * at the default cap is cut.
 */
export const MAX_VALUE_CHARS = 128 * 1024 * 1024;
/** Characters of a string escaped by one JSON.stringify call when a long value's JSON is written in pieces. */
const JSON_PIECE = 1 << 20;

export class OtlpWireRows {
  /** Values cut to #maxChars since this decoder was made (the caller reads the difference). */
  truncated = 0;
  readonly #maxChars: number;
  constructor(maxValueChars = MAX_VALUE_CHARS) {
    this.#maxChars = maxValueChars;
  }

  #b: SliceBuffer = EMPTY;
  #dv = new DataView(EMPTY.buffer, EMPTY.byteOffset, 0);
  #pos = 0;
  /** Records still to be skipped by the running `rows` generator. */
  #skipRows = 0;
  /**
   * The work of the last span decoded, in rows: 1 + its events + its links (every one sent,
   * kept or dropped). A compaction round charges a span this against its row budget: one
   * span of 60,000 events costs about what 60,000 log records do. (Log records: always 1.)
   */
  spanWeight = 1;

  /** Calls `emit` with one logs-table row per log record of the payload; returns the count. */
  logs(payload: Uint8Array, ingestMs: number, emit: (row: Row) => void): number {
    return this.#each(this.rows(payload, ingestMs, false), emit);
  }

  /** Calls `emit` with one traces-table row per span of the payload; returns the count. */
  traces(payload: Uint8Array, ingestMs: number, emit: (row: Row) => void): number {
    return this.#each(this.rows(payload, ingestMs, true), emit);
  }

  #each(rows: Generator<Row, number>, emit: (row: Row) => void): number {
    for (let r = rows.next(); ; r = rows.next()) {
      if (r.done === true) return r.value;
      emit(r.value);
    }
  }

  /**
   * The rows of a payload one at a time (spans: traces rows, else logs rows),
   * so that a caller can write them as it goes: one request of millions of
   * tiny records makes gigabytes of rows, more than the compactor's heap.
   * The decoder is busy until the generator ends: use one decoder per
   * generator that is suspended across an await.
   *
   * Export{Logs,Trace}ServiceRequest → Resource{Logs,Spans} (field 1) →
   * Scope{Logs,Spans} (field 2) → LogRecord or Span (field 2): the two signals
   * nest the same way, and differ only in the record.
   *
   * `skip`: the first that many records are counted but not decoded into
   * rows (a record landed in part by an earlier round goes on from there).
   */
  *rows(payload: Uint8Array, ingestMs: number, spans: boolean, skip = 0): Generator<Row, number> {
    this.#load(payload);
    this.#skipRows = skip;
    const ingestMicros = BigInt(ingestMs) * 1000n;
    let n = 0;
    const end = payload.length;
    while (this.#pos < end) {
      const tag = this.#tag(end);
      if (tag === ((1 << 3) | LEN)) {
        const s = this.#range(end);
        const e = this.#rangeEnd;
        n += yield* this.#resourceRecords(s, e, ingestMicros, spans);
        this.#pos = e;
      } else this.#skipField(tag, end, REQUEST_FIELDS);
    }
    return n;
  }

  *#resourceRecords(start: number, end: number, ingestMicros: bigint, spans: boolean): Generator<Row, number> {
    const res = this.#resourceOf(start, end);
    let n = 0;
    this.#pos = start;
    while (this.#pos < end) {
      const tag = this.#tag(end);
      if (tag === ((2 << 3) | LEN)) {
        const s = this.#range(end);
        const e = this.#rangeEnd;
        n += yield* this.#scopeRecords(s, e, res, ingestMicros, spans);
        this.#pos = e;
      } else this.#skipField(tag, end, HOLDER_FIELDS);
    }
    return n;
  }

  *#scopeRecords(start: number, end: number, res: ResourceParts, ingestMicros: bigint, spans: boolean): Generator<Row, number> {
    const scope = this.#scopeOf(start, end);
    let n = 0;
    this.#pos = start;
    while (this.#pos < end) {
      const tag = this.#tag(end);
      if (tag === ((2 << 3) | LEN)) {
        const s = this.#range(end);
        const e = this.#rangeEnd;
        if (this.#skipRows > 0) {
          this.#skipRows--;
          n++;
          this.#pos = e;
          continue;
        }
        const row = spans ? this.#span(s, e, res, scope, ingestMicros) : this.#logRecord(s, e, res, scope, ingestMicros);
        yield row;
        n++;
        this.#pos = e;
      } else this.#skipField(tag, end, HOLDER_FIELDS);
    }
    return n;
  }

  #load(payload: Uint8Array): void {
    this.#b = (Buffer.isBuffer(payload) ? payload : Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength)) as SliceBuffer;
    this.#dv = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
    this.#pos = 0;
  }

  // ---- records ---------------------------------------------------------------



  #logRecord(start: number, end: number, res: ResourceParts, scope: ScopeParts, ingestMicros: bigint): Row {
    let t = 0n;
    let o = 0n;
    let severity = 0;
    let severityText: string | null = null;
    let body: number[] | null = null;
    let attrs: MapValue = EMPTY_MAP;
    let dropped = 0;
    let flags = 0;
    let traceId: string | null = null;
    let spanId: string | null = null;
    let eventName: string | null = null;
    this.#pos = start;
    while (this.#pos < end) {
      const tag = this.#tag(end);
      switch (tag) {
        case (1 << 3) | I64:
          t = this.#nanos(end);
          break;
        case (11 << 3) | I64:
          o = this.#nanos(end);
          break;
        case (2 << 3) | VARINT:
          severity = this.#varint32(end) | 0;
          break;
        case (3 << 3) | LEN:
          severityText = this.#string(end);
          break;
        case (5 << 3) | LEN:
          body = this.#occurrence(body, end);
          break;
        case (6 << 3) | LEN:
          attrs = this.#keyValueInto(attrs, end);
          break;
        case (7 << 3) | VARINT:
          dropped = this.#count(end);
          break;
        case (8 << 3) | I32:
          flags = this.#fixed32(end);
          break;
        case (9 << 3) | LEN:
          traceId = this.#hex(end);
          break;
        case (10 << 3) | LEN:
          spanId = this.#hex(end);
          break;
        case (12 << 3) | LEN:
          eventName = this.#string(end);
          break;
        default:
          this.#skipField(tag, end, LOG_RECORD_FIELDS);
      }
    }
    let bodyText: string | null = null;
    let bodyType: string | null = null;
    if (body !== null) {
      const member = this.#anyValueMember(body);
      if (member !== 0) {
        bodyType = KIND_NAMES[member]!;
        bodyText =
          member === 1
            ? this.#memberString()
            : member === 3
              ? String(this.#memberInt64())
              : member === 4
                ? doubleBody(this.#dv.getFloat64(this.#member[0]!, true))
                : this.#jsonText(member);
      }
    }
    return [
      t !== 0n ? t / 1000n : o !== 0n ? o / 1000n : ingestMicros,
      t === 0n ? null : t,
      o === 0n ? null : o,
      ingestMicros,
      severity,
      severityText === '' ? null : severityText,
      bodyText,
      bodyType,
      traceId,
      spanId,
      BigInt(flags),
      eventName === '' ? null : eventName,
      res.serviceName,
      res.attributes,
      res.dropped,
      res.schemaUrl,
      scope.name,
      scope.version,
      scope.attributes,
      scope.schemaUrl,
      attrs,
      dropped,
      res.serviceNamespace,
      res.environment,
    ];
  }



  #span(start: number, end: number, res: ResourceParts, scope: ScopeParts, ingestMicros: bigint): Row {
    let traceId: string | null = null;
    let spanId: string | null = null;
    let parentSpanId: string | null = null;
    let traceState: string | null = null;
    let flags = 0;
    let name: string | null = null;
    let kind = 0;
    let startNs = 0n;
    let endNs = 0n;
    let attrs: MapValue = EMPTY_MAP;
    let dropped = 0;
    let events: JsonList | null = null; // made for the first event: most spans have none
    let droppedEvents = 0;
    let links: JsonList | null = null;
    let droppedLinks = 0;
    let status: number[] | null = null;
    let items = 0; // events and links: spanWeight
    this.#pos = start;
    while (this.#pos < end) {
      const tag = this.#tag(end);
      switch (tag) {
        case (1 << 3) | LEN:
          traceId = this.#hex(end);
          break;
        case (2 << 3) | LEN:
          spanId = this.#hex(end);
          break;
        case (3 << 3) | LEN:
          traceState = this.#string(end);
          break;
        case (4 << 3) | LEN:
          parentSpanId = this.#hex(end);
          break;
        case (16 << 3) | I32:
          flags = this.#fixed32(end);
          break;
        case (5 << 3) | LEN:
          name = this.#string(end);
          break;
        case (6 << 3) | VARINT:
          kind = this.#varint32(end) | 0;
          break;
        case (7 << 3) | I64:
          startNs = this.#nanos(end);
          break;
        case (8 << 3) | I64:
          endNs = this.#nanos(end);
          break;
        case (9 << 3) | LEN:
          attrs = this.#keyValueInto(attrs, end);
          break;
        case (10 << 3) | VARINT:
          dropped = this.#count(end);
          break;
        case (11 << 3) | LEN: {
          const s = this.#range(end);
          const e = this.#rangeEnd;
          items++;
          if (events?.full === true) events.drop();
          else (events ??= new JsonList()).add(this.#event(s, e));
          this.#pos = e;
          break;
        }
        case (12 << 3) | VARINT:
          droppedEvents = this.#count(end);
          break;
        case (13 << 3) | LEN: {
          const s = this.#range(end);
          const e = this.#rangeEnd;
          items++;
          if (links?.full === true) links.drop();
          else (links ??= new JsonList()).add(this.#link(s, e));
          this.#pos = e;
          break;
        }
        case (14 << 3) | VARINT:
          droppedLinks = this.#count(end);
          break;
        case (15 << 3) | LEN:
          status = this.#occurrence(status, end);
          break;
        default:
          this.#skipField(tag, end, SPAN_FIELDS);
      }
    }
    let statusCode = 0;
    let statusMessage: string | null = null;
    if (status !== null) {
      statusMessage = '';
      for (let k = 0; k < status.length; k += 2) {
        const se = status[k + 1]!;
        this.#pos = status[k]!;
        while (this.#pos < se) {
          const tag = this.#tag(se);
          if (tag === ((2 << 3) | LEN)) statusMessage = this.#string(se);
          else if (tag === ((3 << 3) | VARINT)) statusCode = this.#varint32(se) | 0;
          else this.#skipField(tag, se, STATUS_FIELDS);
        }
      }
      this.#pos = end;
    }
    this.spanWeight = 1 + items;
    return [
      startNs !== 0n ? startNs / 1000n : ingestMicros,
      startNs === 0n ? null : startNs,
      endNs === 0n ? null : endNs,
      startNs !== 0n && endNs !== 0n ? endNs - startNs : null,
      ingestMicros,
      traceId,
      spanId,
      parentSpanId,
      traceState === '' ? null : traceState,
      BigInt(flags),
      name === '' ? null : name,
      kind,
      statusCode,
      statusMessage === '' ? null : statusMessage,
      res.serviceName,
      res.attributes,
      res.dropped,
      res.schemaUrl,
      scope.name,
      scope.version,
      scope.attributes,
      scope.schemaUrl,
      attrs,
      dropped,
      events === null ? null : events.json(),
      events === null ? droppedEvents : events.droppedPlus(droppedEvents),
      links === null ? null : links.json(),
      links === null ? droppedLinks : links.droppedPlus(droppedLinks),
      res.serviceNamespace,
      res.environment,
    ];
  }

  /** A span event as its JSON object, or its text where an attribute key starts with a digit (otlp-row-decoder.ts eventJson). */
  #event(start: number, end: number): Record<string, unknown> | string {
    let time = 0n;
    let name = '';
    let attrs: MapValue = EMPTY_MAP;
    let dropped = 0;
    this.#pos = start;
    while (this.#pos < end) {
      const tag = this.#tag(end);
      switch (tag) {
        case (1 << 3) | I64:
          time = this.#fixed64(end);
          break;
        case (2 << 3) | LEN:
          name = this.#string(end);
          break;
        case (3 << 3) | LEN:
          attrs = this.#keyValueInto(attrs, end);
          break;
        case (4 << 3) | VARINT:
          dropped = this.#varint32(end);
          break;
        default:
          this.#skipField(tag, end, EVENT_FIELDS);
      }
    }
    if (hasDigitKey(attrs)) return eventText(String(time), name, attrs, dropped);
    return { time_unix_nano: String(time), name, attributes: Object.fromEntries(attrs), dropped_attributes_count: dropped };
  }

  /** A span link as its JSON object, or its text where an attribute key starts with a digit (otlp-row-decoder.ts linkJson). */
  #link(start: number, end: number): Record<string, unknown> | string {
    let traceId: string | null = null;
    let spanId: string | null = null;
    let traceState: string | null = null;
    let flags = 0;
    let attrs: MapValue = EMPTY_MAP;
    let dropped = 0;
    this.#pos = start;
    while (this.#pos < end) {
      const tag = this.#tag(end);
      switch (tag) {
        case (1 << 3) | LEN:
          traceId = this.#hex(end);
          break;
        case (2 << 3) | LEN:
          spanId = this.#hex(end);
          break;
        case (3 << 3) | LEN:
          traceState = this.#string(end);
          break;
        case (4 << 3) | LEN:
          attrs = this.#keyValueInto(attrs, end);
          break;
        case (5 << 3) | VARINT:
          dropped = this.#varint32(end);
          break;
        case (6 << 3) | I32:
          flags = this.#fixed32(end);
          break;
        default:
          this.#skipField(tag, end, LINK_FIELDS);
      }
    }
    if (hasDigitKey(attrs)) return linkText(traceId, spanId, traceState === '' ? null : traceState, flags, attrs, dropped);
    return {
      trace_id: traceId,
      span_id: spanId,
      trace_state: traceState === '' ? null : traceState,
      flags,
      attributes: Object.fromEntries(attrs),
      dropped_attributes_count: dropped,
    };
  }

  // ---- resource and scope ----------------------------------------------------

  /** The Resource (field 1, merged) and schema_url (field 3) of a ResourceLogs/ResourceSpans. */
  #resourceOf(start: number, end: number): ResourceParts {
    let resource: number[] | null = null;
    let schemaUrl: string | null = null;
    this.#pos = start;
    while (this.#pos < end) {
      const tag = this.#tag(end);
      if (tag === ((1 << 3) | LEN)) resource = this.#occurrence(resource, end);
      else if (tag === ((3 << 3) | LEN)) schemaUrl = this.#string(end);
      else this.#skipField(tag, end, HOLDER_FIELDS);
    }
    let attrs: MapValue = EMPTY_MAP;
    let dropped = 0;
    if (resource !== null) {
      for (let k = 0; k < resource.length; k += 2) {
        const re = resource[k + 1]!;
        this.#pos = resource[k]!;
        while (this.#pos < re) {
          const tag = this.#tag(re);
          if (tag === ((1 << 3) | LEN)) attrs = this.#keyValueInto(attrs, re);
          else if (tag === ((2 << 3) | VARINT)) dropped = this.#count(re);
          else this.#skipField(tag, re, RESOURCE_FIELDS);
        }
      }
    }
    let serviceName: string | null = null;
    let serviceNamespace: string | null = null;
    let environment: string | null = null;
    for (const [k, v] of attrs) {
      if (k === 'service.name') serviceName = v;
      else if (k === 'service.namespace') serviceNamespace = v;
      else if (k === 'deployment.environment.name') environment = v;
    }
    return { attributes: attrs, serviceName, serviceNamespace, environment, dropped, schemaUrl: schemaUrl === '' ? null : schemaUrl };
  }

  /** The InstrumentationScope (field 1, merged) and schema_url (field 3) of a ScopeLogs/ScopeSpans. */
  #scopeOf(start: number, end: number): ScopeParts {
    let scope: number[] | null = null;
    let schemaUrl: string | null = null;
    this.#pos = start;
    while (this.#pos < end) {
      const tag = this.#tag(end);
      if (tag === ((1 << 3) | LEN)) scope = this.#occurrence(scope, end);
      else if (tag === ((3 << 3) | LEN)) schemaUrl = this.#string(end);
      else this.#skipField(tag, end, HOLDER_FIELDS);
    }
    let name: string | null = null;
    let version: string | null = null;
    let attrs: MapValue = EMPTY_MAP;
    if (scope !== null) {
      name = '';
      version = '';
      for (let k = 0; k < scope.length; k += 2) {
        const se = scope[k + 1]!;
        this.#pos = scope[k]!;
        while (this.#pos < se) {
          const tag = this.#tag(se);
          if (tag === ((1 << 3) | LEN)) name = this.#string(se);
          else if (tag === ((2 << 3) | LEN)) version = this.#string(se);
          else if (tag === ((3 << 3) | LEN)) attrs = this.#keyValueInto(attrs, se);
          else this.#skipField(tag, se, SCOPE_FIELDS);
        }
      }
    }
    return { name: name === '' ? null : name, version: version === '' ? null : version, attributes: attrs, schemaUrl: schemaUrl === '' ? null : schemaUrl };
  }

  /**
   * Adds the occurrence of a singular message field at #pos (length-delimited)
   * to the ranges read so far (null: none yet), and moves past it.
   */
  #occurrence(ranges: number[] | null, end: number): number[] {
    const s = this.#range(end);
    const e = this.#rangeEnd;
    this.#pos = e;
    if (ranges === null) return [s, e];
    ranges.push(s, e);
    return ranges;
  }

  // ---- attributes and AnyValue -----------------------------------------------

  /**
   * Reads one KeyValue (length-delimited, at #pos): its key (the last one)
   * and the ranges of its value (an AnyValue, merged). #pos ends past it.
   */
  #keyValue(end: number): { key: string; value: number[] | null } {
    const s = this.#range(end);
    const e = this.#rangeEnd;
    let ks = -1;
    let ke = -1;
    let value: number[] | null = null;
    this.#pos = s;
    while (this.#pos < e) {
      const tag = this.#tag(e);
      if (tag === ((1 << 3) | LEN)) {
        ks = this.#range(e);
        ke = this.#rangeEnd;
        this.#pos = ke;
      } else if (tag === ((2 << 3) | LEN)) value = this.#occurrence(value, e);
      else this.#skipField(tag, e, KEY_VALUE_FIELDS);
    }
    this.#pos = e;
    return { key: ks < 0 ? '' : this.#utf8(ks, ke), value };
  }

  /**
   * Reads one KeyValue (at #pos) into `map` with its value as text; a repeated
   * key keeps its last value, in its first place (otlp-row-decoder.ts mapOf).
   * Returns the map (a new one for EMPTY_MAP).
   */
  #keyValueInto(map: MapValue, end: number): MapValue {
    const { key, value } = this.#keyValue(end);
    const after = this.#pos;
    const text = value === null ? null : this.#text(value);
    this.#pos = after;
    const out = map === EMPTY_MAP ? [] : map;
    putEntry(out, key, text);
    return out;
  }

  /** Where the member #anyValueMember found lies: one value range for a scalar, the merged ranges of a message. */
  #member: number[] = [];

  /** Set by #json when a key-value list has a key that starts with a digit: #jsonText then writes the value with #orderedJson. */
  #digitKeys = false;

  /**
   * The oneof member of the AnyValue whose occurrences are `ranges`: its field
   * number (1-7), or 0 when none is set. The last member on the wire wins; the
   * same message member again is merged. Its ranges are left in #member.
   */
  #anyValueMember(ranges: readonly number[]): number {
    let member = 0;
    let where: number[] = [];
    for (let k = 0; k < ranges.length; k += 2) {
      const end = ranges[k + 1]!;
      this.#pos = ranges[k]!;
      while (this.#pos < end) {
        const tag = this.#tag(end);
        const no = tag >>> 3;
        const wt = tag & 7;
        if (no < 1 || no > 7) {
          this.#skip(tag, end);
          continue;
        }
        if (wt !== ANY_VALUE_WIRE[no]) throw new OtlpWireError(`AnyValue field ${no} with wire type ${wt}`, this.#pos);
        const merge = no === member && (no === 5 || no === 6);
        member = no;
        if (wt === LEN) {
          const s = this.#range(end);
          const e = this.#rangeEnd;
          this.#pos = e;
          if (merge) where.push(s, e);
          else where = [s, e];
        } else {
          const s = this.#pos;
          this.#skip(tag, end);
          where = [s, this.#pos];
        }
      }
    }
    this.#member = where;
    return member;
  }

  #memberString(): string {
    return this.#utf8(this.#member[0]!, this.#member[1]!);
  }

  /** The UTF-8 bytes s..e as a string of at most #maxChars characters: past it, cut at the last whole character that fits. */
  #utf8(s: number, e: number): string {
    const most = Math.min(this.#maxChars, this.#leafBudget);
    if (this.#leafBudget !== Infinity) this.#leafBudget = Math.max(0, this.#leafBudget - (e - s));
    if (e - s <= most) return this.#b.utf8Slice(s, e);
    let cut = s + most;
    while (cut > s && (this.#b[cut]! & 0xc0) === 0x80) cut--;
    this.truncated++;
    return this.#b.utf8Slice(s, cut);
  }

  /**
   * UTF-8 bytes the strings of a long list value (#jsonText) may still take;
   * Infinity otherwise. It bounds the value held while its JSON is written,
   * so a list of several strings near the cap is not held whole.
   */
  #leafBudget = Infinity;

  /** Bytes s..e as base64 of at most #maxChars characters (whole 3-byte groups). */
  #base64(s: number, e: number): string {
    const most = Math.floor(Math.min(this.#maxChars, this.#leafBudget) / 4) * 3;
    if (this.#leafBudget !== Infinity) this.#leafBudget = Math.max(0, this.#leafBudget - Math.ceil((e - s) / 3) * 4);
    if (e - s <= most) return this.#b.base64Slice(s, e);
    this.truncated++;
    return this.#b.base64Slice(s, s + most);
  }

  /** An AnyValue as map text: scalars as text, bytes as base64, arrays and key-value lists as JSON. */
  #text(ranges: readonly number[]): string | null {
    const member = this.#anyValueMember(ranges);
    switch (member) {
      case 1:
        return this.#memberString();
      case 2:
        return this.#memberVarint32() !== 0 ? 'true' : 'false';
      case 3:
        return String(this.#memberInt64());
      case 4:
        return doubleText(this.#dv.getFloat64(this.#member[0]!, true));
      case 7:
        return this.#base64(this.#member[0]!, this.#member[1]!);
      case 5:
      case 6:
        return this.#jsonText(member);
      default:
        return null;
    }
  }

  /**
   * The JSON text of the member #anyValueMember just found: JSON.stringify
   * of its JSON value (#json), or, where a key-value list in it has a key
   * that starts with a digit, the text #orderedJson writes, which keeps every
   * key where it was sent (otlp-row-decoder.ts jsonText).
   */
  #jsonText(member: number): string {
    const where = this.#member;
    this.#digitKeys = false;
    // JSON writes at most 6 characters per wire byte (a string's `\u0001`; an
    // empty list item or key is 2 bytes and at most 8 characters): a value
    // whose bytes cannot make more than #maxChars is written whole, as ever.
    let wire = 0;
    for (let k = 0; k < where.length; k += 2) wire += where[k + 1]! - where[k]!;
    if (wire * 6 + 16 > this.#maxChars) {
      const before = this.truncated;
      this.#leafBudget = this.#maxChars;
      let value: unknown;
      try {
        value = this.#json(member);
      } finally {
        this.#leafBudget = Infinity;
      }
      const { text, cut } = boundedJson(value, this.#maxChars);
      const whole = !cut && this.truncated === before;
      this.truncated = before + (whole ? 0 : 1);
      if (!whole || !this.#digitKeys) return text;
      // It fits whole: the same text as a short value's, keys where they were sent.
      this.#member = where;
      return this.#orderedJson(member);
    }
    const value = this.#json(member);
    if (!this.#digitKeys) return JSON.stringify(value);
    this.#member = where;
    return this.#orderedJson(member);
  }

  /** #json's value as JSON text written directly, every key-value list's keys in the order sent (otlp-row-decoder.ts orderedJson). */
  #orderedJson(member: number): string {
    const where = this.#member;
    if (member !== 5 && member !== 6) return JSON.stringify(this.#json(member));
    const out: MapValue = [];
    const items: string[] = [];
    for (let k = 0; k < where.length; k += 2) {
      const e = where[k + 1]!;
      this.#pos = where[k]!;
      while (this.#pos < e) {
        const tag = this.#tag(e);
        if (tag !== ((1 << 3) | LEN)) this.#skipField(tag, e, LIST_FIELDS);
        else if (member === 5) {
          const vs = this.#range(e);
          const ve = this.#rangeEnd;
          items.push(this.#orderedJson(this.#anyValueMember([vs, ve])));
          this.#pos = ve;
        } else {
          const { key, value } = this.#keyValue(e);
          const after = this.#pos;
          putEntry(out, key, value === null ? null : this.#orderedJson(this.#anyValueMember(value)));
          this.#pos = after;
        }
      }
    }
    return member === 5 ? `[${items.join(',')}]` : objectText(out, false);
  }

  /**
   * The JSON value of the member #anyValueMember just found: int64 beyond
   * ±2^53 as a string, non-finite doubles and -0 as strings, bytes as base64
   * (otlp-row-decoder.ts jsonOf).
   */
  #json(member: number): unknown {
    const where = this.#member;
    switch (member) {
      case 1:
        return this.#memberString();
      case 2:
        return this.#memberVarint32() !== 0;
      case 3: {
        const n = this.#memberInt64();
        return n >= MIN_SAFE && n <= MAX_SAFE ? Number(n) : String(n);
      }
      case 4:
        return doubleJson(this.#dv.getFloat64(where[0]!, true));
      case 7:
        return this.#base64(where[0]!, where[1]!);
      case 5: {
        // ArrayValue: repeated AnyValue values = 1 (each element its own AnyValue).
        const out: unknown[] = [];
        for (let k = 0; k < where.length; k += 2) {
          const e = where[k + 1]!;
          this.#pos = where[k]!;
          while (this.#pos < e) {
            const tag = this.#tag(e);
            if (tag === ((1 << 3) | LEN)) {
              const vs = this.#range(e);
              const ve = this.#rangeEnd;
              out.push(this.#json(this.#anyValueMember([vs, ve])));
              this.#pos = ve;
            } else this.#skipField(tag, e, LIST_FIELDS);
          }
        }
        return out;
      }
      case 6: {
        // KeyValueList: repeated KeyValue values = 1; a repeated key keeps its first place and its last value.
        const out: Record<string, unknown> = {};
        for (let k = 0; k < where.length; k += 2) {
          const e = where[k + 1]!;
          this.#pos = where[k]!;
          while (this.#pos < e) {
            const tag = this.#tag(e);
            if (tag === ((1 << 3) | LEN)) {
              const { key, value } = this.#keyValue(e);
              const after = this.#pos;
              if (startsWithDigit(key)) this.#digitKeys = true;
              setJsonKey(out, key, value === null ? null : this.#json(this.#anyValueMember(value)));
              this.#pos = after;
            } else this.#skipField(tag, e, LIST_FIELDS);
          }
        }
        return out;
      }
      default:
        return null;
    }
  }

  // ---- wire primitives -------------------------------------------------------

  /** A field's tag; field number 0 is malformed. */
  #tag(end: number): number {
    const at = this.#pos;
    const tag = this.#varint32(end);
    if (tag >>> 3 === 0) throw new OtlpWireError('field number 0', at);
    return tag;
  }

  /** A varint's low 32 bits, unsigned (protobufjs' uint32; `| 0` gives its int32 and enums). */
  #varint32(end: number): number {
    const b = this.#b;
    let pos = this.#pos;
    let v = 0;
    for (let i = 0; i < 10; i++) {
      if (pos >= end) throw new OtlpWireError('truncated varint', pos);
      const x = b[pos++]!;
      if (i < 5) v |= (x & 0x7f) << (7 * i);
      if (x < 0x80) {
        this.#pos = pos;
        return v >>> 0;
      }
    }
    throw new OtlpWireError('varint longer than 10 bytes', this.#pos);
  }

  /** The member's varint (bool_value) as #varint32 reads it. */
  #memberVarint32(): number {
    this.#pos = this.#member[0]!;
    return this.#varint32(this.#member[1]!);
  }

  /** The member's varint (int_value) as a signed 64-bit integer. */
  #memberInt64(): bigint {
    const b = this.#b;
    let lo = 0;
    let hi = 0;
    let pos = this.#member[0]!;
    for (let i = 0; i < 10; i++) {
      const x = b[pos++]!;
      const bits = x & 0x7f;
      if (i < 4) lo |= bits << (7 * i);
      else if (i === 4) {
        lo |= bits << 28;
        hi |= bits >>> 4;
      } else hi |= bits << (7 * i - 32);
      if (x < 0x80) break;
    }
    return BigInt.asIntN(64, (BigInt(hi >>> 0) << 32n) | BigInt(lo >>> 0));
  }

  /**
   * A fixed64 timestamp (ns) for a signed 64-bit column: one past 2^63 − 1
   * (after the year 2262) is unknown, as 0 is (valid OTLP, but the Parquet
   * writer threw on it for the whole table, round after round).
   */
  #nanos(end: number): bigint {
    const v = this.#fixed64(end);
    return v > INT64_MAX ? 0n : v;
  }

  /** A uint32 count for a signed 32-bit column: capped at 2^31 − 1. */
  #count(end: number): number {
    return Math.min(this.#varint32(end), INT32_MAX);
  }

  #fixed64(end: number): bigint {
    const at = this.#pos;
    if (at + 8 > end) throw new OtlpWireError('truncated fixed64', at);
    this.#pos = at + 8;
    return this.#dv.getBigUint64(at, true);
  }

  #fixed32(end: number): number {
    const at = this.#pos;
    if (at + 4 > end) throw new OtlpWireError('truncated fixed32', at);
    this.#pos = at + 4;
    return this.#dv.getUint32(at, true);
  }

  /** The end of the contents #range found last. */
  #rangeEnd = 0;

  /**
   * A length-delimited value's contents: returns where they start and leaves
   * their end in #rangeEnd (no array per field); #pos is left at the start.
   */
  #range(end: number): number {
    const at = this.#pos;
    const len = this.#varint32(end);
    const s = this.#pos;
    if (len > end - s) throw new OtlpWireError('length past the end of its message', at);
    this.#rangeEnd = s + len;
    return s;
  }

  #string(end: number): string {
    const s = this.#range(end);
    const e = this.#rangeEnd;
    this.#pos = e;
    return this.#utf8(s, e);
  }

  /** Bytes as lower-case hex; null when empty (trace and span ids). */
  #hex(end: number): string | null {
    const s = this.#range(end);
    const e = this.#rangeEnd;
    this.#pos = e;
    return s === e ? null : this.#b.hexSlice(s, e);
  }

  /**
   * Skips a field the caller does not read: an unknown one, or a known one
   * with its own wire type (read in another pass). A known field with another
   * wire type is malformed.
   */
  #skipField(tag: number, end: number, wires: readonly number[]): void {
    const no = tag >>> 3;
    const want = no < wires.length ? wires[no]! : -1;
    if (want >= 0 && want !== (tag & 7)) throw new OtlpWireError(`field ${no} with wire type ${tag & 7}`, this.#pos);
    this.#skip(tag, end);
  }

  #skip(tag: number, end: number): void {
    const at = this.#pos;
    switch (tag & 7) {
      case VARINT:
        this.#varint32(end);
        return;
      case I64:
        if (at + 8 > end) throw new OtlpWireError('truncated fixed64', at);
        this.#pos = at + 8;
        return;
      case LEN:
        this.#range(end);
        this.#pos = this.#rangeEnd;
        return;
      case I32:
        if (at + 4 > end) throw new OtlpWireError('truncated fixed32', at);
        this.#pos = at + 4;
        return;
      default:
        throw new OtlpWireError(`wire type ${tag & 7}`, at);
    }
  }
}

const MIN_SAFE = BigInt(Number.MIN_SAFE_INTEGER);
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** Field numbers 1-7 of AnyValue and the wire type each must have. */
const ANY_VALUE_WIRE = [-1, LEN, VARINT, VARINT, I64, LEN, LEN, LEN];

/** AnyValue field numbers as body_type names them. */
const KIND_NAMES: readonly (string | undefined)[] = [undefined, 'string', 'bool', 'int', 'double', 'array', 'kvlist', 'bytes'];

/** Each message's known fields and their wire types, by field number (-1: unknown). */
const wires = (fields: Record<number, number>): readonly number[] => {
  const out = new Array<number>(Math.max(...Object.keys(fields).map(Number)) + 1).fill(-1);
  for (const [no, wt] of Object.entries(fields)) out[Number(no)] = wt;
  return out;
};
const REQUEST_FIELDS = wires({ 1: LEN });
/** ResourceLogs, ScopeLogs, ResourceSpans, ScopeSpans: a message, a repeated message, schema_url. */
const HOLDER_FIELDS = wires({ 1: LEN, 2: LEN, 3: LEN });
const LOG_RECORD_FIELDS = wires({ 1: I64, 2: VARINT, 3: LEN, 5: LEN, 6: LEN, 7: VARINT, 8: I32, 9: LEN, 10: LEN, 11: I64, 12: LEN });
const SPAN_FIELDS = wires({ 1: LEN, 2: LEN, 3: LEN, 4: LEN, 5: LEN, 6: VARINT, 7: I64, 8: I64, 9: LEN, 10: VARINT, 11: LEN, 12: VARINT, 13: LEN, 14: VARINT, 15: LEN, 16: I32 });
const STATUS_FIELDS = wires({ 2: LEN, 3: VARINT });
const EVENT_FIELDS = wires({ 1: I64, 2: LEN, 3: LEN, 4: VARINT });
const LINK_FIELDS = wires({ 1: LEN, 2: LEN, 3: LEN, 4: LEN, 5: VARINT, 6: I32 });
const RESOURCE_FIELDS = wires({ 1: LEN, 2: VARINT, 3: LEN });
const SCOPE_FIELDS = wires({ 1: LEN, 2: LEN, 3: LEN, 4: VARINT });
const KEY_VALUE_FIELDS = wires({ 1: LEN, 2: LEN });
const LIST_FIELDS = wires({ 1: LEN });

/**
 * JSON.stringify(value) cut to its first `max` characters (and no lone high
 * surrogate at the cut), written in pieces so that no piece, nor the whole,
 * passes V8's longest string: a value past `max` ends mid-text, not valid JSON.
 */
export function boundedJson(value: unknown, max: number): { text: string; cut: boolean } {
  const parts: string[] = [];
  let left = max;
  const put = (t: string): boolean => {
    if (t.length <= left) {
      parts.push(t);
      left -= t.length;
      return true;
    }
    let head = t.slice(0, left);
    const last = head.charCodeAt(head.length - 1);
    if (last >= 0xd800 && last <= 0xdbff) head = head.slice(0, -1);
    parts.push(head);
    left = 0;
    return false;
  };
  const str = (t: string): boolean => {
    if (!put('"')) return false;
    for (let i = 0; i < t.length; ) {
      let j = Math.min(t.length, i + JSON_PIECE);
      const c = t.charCodeAt(j - 1);
      if (j < t.length && c >= 0xd800 && c <= 0xdbff) j++; // a pair stays whole
      if (!put(JSON.stringify(t.slice(i, j)).slice(1, -1))) return false;
      i = j;
    }
    return put('"');
  };
  const walk = (v: unknown): boolean => {
    if (typeof v === 'string') return str(v);
    if (Array.isArray(v)) {
      if (!put('[')) return false;
      for (let i = 0; i < v.length; i++) if ((i > 0 && !put(',')) || !walk(v[i])) return false;
      return put(']');
    }
    if (v !== null && typeof v === 'object') {
      if (!put('{')) return false;
      let first = true;
      for (const [k, x] of Object.entries(v)) {
        if ((!first && !put(',')) || !str(k) || !put(':') || !walk(x)) return false;
        first = false;
      }
      return put('}');
    }
    return put(JSON.stringify(v));
  };
  const whole = walk(value);
  return { text: parts.join(''), cut: !whole };
}
