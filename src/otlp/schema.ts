// The OTLP messages reachable from ExportLogsServiceRequest and
// ExportTraceServiceRequest, as one constant table that mirrors proto/ field
// for field (test/unit/otlp-schema.test.ts checks it against protobufjs'
// reflection of the .proto files). The wire validator reads the packed form
// (FIELD_CODES), the JSON decoder and the summary read the descriptors.
//
// Only messages and singular or repeated message/string fields are repeated
// here; no repeated scalar (packable) field is reachable, so the walkers never
// meet packed encoding.

export type Signal = 'logs' | 'traces';

/**
 * How deep AnyValue may nest: a log body or attribute value that is an
 * AnyValue holding an array or key-value list holding an AnyValue, and so on.
 * The outermost AnyValue is level 1; level MAX_ANY_VALUE_DEPTH + 1 is refused.
 * The static part of the schema adds at most 5 message levels above it, so a
 * walker never holds more than about 5 + 3 * 32 nested messages.
 */
export const MAX_ANY_VALUE_DEPTH = 32;

/** Protobuf wire types. 3 and 4 (groups) and 6, 7 are never valid here. */
export const WireType = { VARINT: 0, I64: 1, LEN: 2, SGROUP: 3, EGROUP: 4, I32: 5 } as const;

/** What a field holds; decides both its wire type and its JSON mapping. */
export const Kind = {
  UINT32: 1,
  INT64: 2,
  BOOL: 3,
  ENUM: 4, // proto3 open enum: any int32 on the wire
  FIXED32: 5,
  FIXED64: 6,
  DOUBLE: 7,
  STRING: 8,
  BYTES: 9,
  MESSAGE: 10,
} as const;
export type Kind = (typeof Kind)[keyof typeof Kind];

const KIND_WIRE_TYPE: Readonly<Record<Kind, number>> = {
  [Kind.UINT32]: WireType.VARINT,
  [Kind.INT64]: WireType.VARINT,
  [Kind.BOOL]: WireType.VARINT,
  [Kind.ENUM]: WireType.VARINT,
  [Kind.FIXED32]: WireType.I32,
  [Kind.FIXED64]: WireType.I64,
  [Kind.DOUBLE]: WireType.I64,
  [Kind.STRING]: WireType.LEN,
  [Kind.BYTES]: WireType.LEN,
  [Kind.MESSAGE]: WireType.LEN,
};

/** The proto type name of each kind, as protobufjs reflection spells it (except MESSAGE/ENUM). */
export const KIND_PROTO_TYPE: Readonly<Record<Kind, string>> = {
  [Kind.UINT32]: 'uint32',
  [Kind.INT64]: 'int64',
  [Kind.BOOL]: 'bool',
  [Kind.ENUM]: 'enum',
  [Kind.FIXED32]: 'fixed32',
  [Kind.FIXED64]: 'fixed64',
  [Kind.DOUBLE]: 'double',
  [Kind.STRING]: 'string',
  [Kind.BYTES]: 'bytes',
  [Kind.MESSAGE]: 'message',
};

/** Message ids: indexes into MESSAGES. */
export const Msg = {
  ExportLogsServiceRequest: 0,
  ExportTraceServiceRequest: 1,
  ResourceLogs: 2,
  ScopeLogs: 3,
  LogRecord: 4,
  ResourceSpans: 5,
  ScopeSpans: 6,
  Span: 7,
  SpanEvent: 8,
  SpanLink: 9,
  SpanStatus: 10,
  Resource: 11,
  EntityRef: 12,
  InstrumentationScope: 13,
  KeyValue: 14,
  AnyValue: 15,
  ArrayValue: 16,
  KeyValueList: 17,
} as const;
export type MsgId = (typeof Msg)[keyof typeof Msg];

export const ROOT_MSG: Readonly<Record<Signal, MsgId>> = {
  logs: Msg.ExportLogsServiceRequest,
  traces: Msg.ExportTraceServiceRequest,
};

export interface EnumDesc {
  /** Short name, e.g. `SeverityNumber`. */
  readonly name: string;
  readonly fullName: string;
  /** Value names indexed by number; every OTLP enum here is dense from 0. */
  readonly values: readonly string[];
}

export const Enum = { SeverityNumber: 0, SpanKind: 1, StatusCode: 2 } as const;
export type EnumId = (typeof Enum)[keyof typeof Enum];

const SEVERITIES = ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR', 'FATAL'].flatMap((s) =>
  ['', '2', '3', '4'].map((n) => `SEVERITY_NUMBER_${s}${n}`),
);

export const ENUMS: readonly EnumDesc[] = [
  {
    name: 'SeverityNumber',
    fullName: 'opentelemetry.proto.logs.v1.SeverityNumber',
    values: ['SEVERITY_NUMBER_UNSPECIFIED', ...SEVERITIES],
  },
  {
    name: 'SpanKind',
    fullName: 'opentelemetry.proto.trace.v1.Span.SpanKind',
    values: [
      'SPAN_KIND_UNSPECIFIED',
      'SPAN_KIND_INTERNAL',
      'SPAN_KIND_SERVER',
      'SPAN_KIND_CLIENT',
      'SPAN_KIND_PRODUCER',
      'SPAN_KIND_CONSUMER',
    ],
  },
  {
    name: 'StatusCode',
    fullName: 'opentelemetry.proto.trace.v1.Status.StatusCode',
    values: ['STATUS_CODE_UNSET', 'STATUS_CODE_OK', 'STATUS_CODE_ERROR'],
  },
];

export interface FieldDesc {
  readonly number: number;
  /** The proto (snake_case) name. */
  readonly name: string;
  /** The lowerCamelCase JSON name. */
  readonly jsonName: string;
  readonly kind: Kind;
  readonly wireType: number;
  readonly repeated: boolean;
  /** The field's message type for Kind.MESSAGE, else -1. */
  readonly message: MsgId | -1;
  /** The field's enum type for Kind.ENUM, else -1. */
  readonly enumType: EnumId | -1;
  /** 16 for trace ids, 8 for span ids: the only lengths besides 0 allowed; 0 = any length. */
  readonly idLength: 0 | 8 | 16;
  /** Member of a oneof: written even when it holds the default value. */
  readonly oneof: boolean;
  /** Each occurrence is one log record or span (the count the validator returns). */
  readonly countsRecords: boolean;
}

export interface MessageDesc {
  readonly id: MsgId;
  /** Short name used in error messages, e.g. `LogRecord`, `Span.Event`. */
  readonly name: string;
  readonly fullName: string;
  readonly fields: readonly FieldDesc[];
}

// Row: [number, proto name, kind, flags, message or enum type].
const REP = 1;
const ONEOF = 2;
const COUNT = 4;
const ID16 = 8;
const ID8 = 16;
type Row = readonly [number, string, Kind, number, (MsgId | EnumId)?];

const K = Kind;
const M = Msg;
const E = Enum;

const TABLE: readonly (readonly [MsgId, string, string, readonly Row[]])[] = [
  [M.ExportLogsServiceRequest, 'ExportLogsServiceRequest', 'opentelemetry.proto.collector.logs.v1', [
    [1, 'resource_logs', K.MESSAGE, REP, M.ResourceLogs],
  ]],
  [M.ExportTraceServiceRequest, 'ExportTraceServiceRequest', 'opentelemetry.proto.collector.trace.v1', [
    [1, 'resource_spans', K.MESSAGE, REP, M.ResourceSpans],
  ]],
  [M.ResourceLogs, 'ResourceLogs', 'opentelemetry.proto.logs.v1', [
    [1, 'resource', K.MESSAGE, 0, M.Resource],
    [2, 'scope_logs', K.MESSAGE, REP, M.ScopeLogs],
    [3, 'schema_url', K.STRING, 0],
  ]],
  [M.ScopeLogs, 'ScopeLogs', 'opentelemetry.proto.logs.v1', [
    [1, 'scope', K.MESSAGE, 0, M.InstrumentationScope],
    [2, 'log_records', K.MESSAGE, REP | COUNT, M.LogRecord],
    [3, 'schema_url', K.STRING, 0],
  ]],
  [M.LogRecord, 'LogRecord', 'opentelemetry.proto.logs.v1', [
    [1, 'time_unix_nano', K.FIXED64, 0],
    [2, 'severity_number', K.ENUM, 0, E.SeverityNumber],
    [3, 'severity_text', K.STRING, 0],
    [5, 'body', K.MESSAGE, 0, M.AnyValue],
    [6, 'attributes', K.MESSAGE, REP, M.KeyValue],
    [7, 'dropped_attributes_count', K.UINT32, 0],
    [8, 'flags', K.FIXED32, 0],
    [9, 'trace_id', K.BYTES, ID16],
    [10, 'span_id', K.BYTES, ID8],
    [11, 'observed_time_unix_nano', K.FIXED64, 0],
    [12, 'event_name', K.STRING, 0],
  ]],
  [M.ResourceSpans, 'ResourceSpans', 'opentelemetry.proto.trace.v1', [
    [1, 'resource', K.MESSAGE, 0, M.Resource],
    [2, 'scope_spans', K.MESSAGE, REP, M.ScopeSpans],
    [3, 'schema_url', K.STRING, 0],
  ]],
  [M.ScopeSpans, 'ScopeSpans', 'opentelemetry.proto.trace.v1', [
    [1, 'scope', K.MESSAGE, 0, M.InstrumentationScope],
    [2, 'spans', K.MESSAGE, REP | COUNT, M.Span],
    [3, 'schema_url', K.STRING, 0],
  ]],
  [M.Span, 'Span', 'opentelemetry.proto.trace.v1', [
    [1, 'trace_id', K.BYTES, ID16],
    [2, 'span_id', K.BYTES, ID8],
    [3, 'trace_state', K.STRING, 0],
    [4, 'parent_span_id', K.BYTES, ID8],
    [5, 'name', K.STRING, 0],
    [6, 'kind', K.ENUM, 0, E.SpanKind],
    [7, 'start_time_unix_nano', K.FIXED64, 0],
    [8, 'end_time_unix_nano', K.FIXED64, 0],
    [9, 'attributes', K.MESSAGE, REP, M.KeyValue],
    [10, 'dropped_attributes_count', K.UINT32, 0],
    [11, 'events', K.MESSAGE, REP, M.SpanEvent],
    [12, 'dropped_events_count', K.UINT32, 0],
    [13, 'links', K.MESSAGE, REP, M.SpanLink],
    [14, 'dropped_links_count', K.UINT32, 0],
    [15, 'status', K.MESSAGE, 0, M.SpanStatus],
    [16, 'flags', K.FIXED32, 0],
  ]],
  [M.SpanEvent, 'Span.Event', 'opentelemetry.proto.trace.v1', [
    [1, 'time_unix_nano', K.FIXED64, 0],
    [2, 'name', K.STRING, 0],
    [3, 'attributes', K.MESSAGE, REP, M.KeyValue],
    [4, 'dropped_attributes_count', K.UINT32, 0],
  ]],
  [M.SpanLink, 'Span.Link', 'opentelemetry.proto.trace.v1', [
    [1, 'trace_id', K.BYTES, ID16],
    [2, 'span_id', K.BYTES, ID8],
    [3, 'trace_state', K.STRING, 0],
    [4, 'attributes', K.MESSAGE, REP, M.KeyValue],
    [5, 'dropped_attributes_count', K.UINT32, 0],
    [6, 'flags', K.FIXED32, 0],
  ]],
  [M.SpanStatus, 'Status', 'opentelemetry.proto.trace.v1', [
    [2, 'message', K.STRING, 0],
    [3, 'code', K.ENUM, 0, E.StatusCode],
  ]],
  [M.Resource, 'Resource', 'opentelemetry.proto.resource.v1', [
    [1, 'attributes', K.MESSAGE, REP, M.KeyValue],
    [2, 'dropped_attributes_count', K.UINT32, 0],
    [3, 'entity_refs', K.MESSAGE, REP, M.EntityRef],
  ]],
  [M.EntityRef, 'EntityRef', 'opentelemetry.proto.common.v1', [
    [1, 'schema_url', K.STRING, 0],
    [2, 'type', K.STRING, 0],
    [3, 'id_keys', K.STRING, REP],
    [4, 'description_keys', K.STRING, REP],
  ]],
  [M.InstrumentationScope, 'InstrumentationScope', 'opentelemetry.proto.common.v1', [
    [1, 'name', K.STRING, 0],
    [2, 'version', K.STRING, 0],
    [3, 'attributes', K.MESSAGE, REP, M.KeyValue],
    [4, 'dropped_attributes_count', K.UINT32, 0],
  ]],
  [M.KeyValue, 'KeyValue', 'opentelemetry.proto.common.v1', [
    [1, 'key', K.STRING, 0],
    [2, 'value', K.MESSAGE, 0, M.AnyValue],
  ]],
  [M.AnyValue, 'AnyValue', 'opentelemetry.proto.common.v1', [
    [1, 'string_value', K.STRING, ONEOF],
    [2, 'bool_value', K.BOOL, ONEOF],
    [3, 'int_value', K.INT64, ONEOF],
    [4, 'double_value', K.DOUBLE, ONEOF],
    [5, 'array_value', K.MESSAGE, ONEOF, M.ArrayValue],
    [6, 'kvlist_value', K.MESSAGE, ONEOF, M.KeyValueList],
    [7, 'bytes_value', K.BYTES, ONEOF],
  ]],
  [M.ArrayValue, 'ArrayValue', 'opentelemetry.proto.common.v1', [
    [1, 'values', K.MESSAGE, REP, M.AnyValue],
  ]],
  [M.KeyValueList, 'KeyValueList', 'opentelemetry.proto.common.v1', [
    [1, 'values', K.MESSAGE, REP, M.KeyValue],
  ]],
];

function camel(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
}

/** Indexed by MsgId (TABLE lists the messages in id order; the schema test checks it). */
export const MESSAGES: readonly MessageDesc[] = TABLE.map(([id, name, pkg, rows]) => {
  const fields = rows.map(([number, fname, kind, flags, ref]): FieldDesc => ({
    number,
    name: fname,
    jsonName: camel(fname),
    kind,
    wireType: KIND_WIRE_TYPE[kind],
    repeated: (flags & REP) !== 0,
    message: kind === Kind.MESSAGE ? (ref as MsgId) : -1,
    enumType: kind === Kind.ENUM ? (ref as EnumId) : -1,
    idLength: flags & ID16 ? 16 : flags & ID8 ? 8 : 0,
    oneof: (flags & ONEOF) !== 0,
    countsRecords: (flags & COUNT) !== 0,
  }));
  return { id, name, fullName: `${pkg}.${name}`, fields };
});

// ---------------------------------------------------------------------------
// Packed form for the wire walker: FIELD_CODES[MSG_BASE[m] + fieldNumber] is
// 0 for an unknown field, else
//   bits 0-2  wire type
//   bits 3-6  kind
//   bit  7    counts records
//   bits 8-12 id length (0, 8 or 16)
//   bits 16+  message id of a MESSAGE field

export const CODE_WIRE_MASK = 0x7;
export const CODE_KIND_SHIFT = 3;
export const CODE_KIND_MASK = 0xf;
export const CODE_COUNTS = 0x80;
export const CODE_ID_SHIFT = 8;
export const CODE_ID_MASK = 0x1f;
export const CODE_MSG_SHIFT = 16;

export const MSG_MAX_FIELD: Int32Array = Int32Array.from(MESSAGES, (m) =>
  m.fields.reduce((mx, f) => Math.max(mx, f.number), 0),
);

export const MSG_BASE: Int32Array = (() => {
  const base = new Int32Array(MESSAGES.length);
  let at = 0;
  for (let m = 0; m < MESSAGES.length; m++) {
    base[m] = at;
    at += MSG_MAX_FIELD[m] + 1;
  }
  return base;
})();

export const FIELD_CODES: Int32Array = (() => {
  const last = MESSAGES.length - 1;
  const codes = new Int32Array(MSG_BASE[last] + MSG_MAX_FIELD[last] + 1);
  for (const m of MESSAGES) {
    for (const f of m.fields) {
      codes[MSG_BASE[m.id] + f.number] =
        f.wireType |
        (f.kind << CODE_KIND_SHIFT) |
        (f.countsRecords ? CODE_COUNTS : 0) |
        (f.idLength << CODE_ID_SHIFT) |
        ((f.message === -1 ? 0 : f.message) << CODE_MSG_SHIFT);
    }
  }
  return codes;
})();

/** The descriptor of field `number` of message `msg`, or undefined. Not for hot paths. */
export function fieldOf(msg: MsgId, number: number): FieldDesc | undefined {
  return MESSAGES[msg].fields.find((f) => f.number === number);
}

export const WIRE_TYPE_NAMES: readonly string[] = [
  'varint',
  'fixed64',
  'length-delimited',
  'start-group',
  'end-group',
  'fixed32',
  'invalid 6',
  'invalid 7',
];
