// The schemas of the tables Siglake lands (docs/iceberg.md "Table schemas"):
// one column list per table kind, from which the Iceberg schema JSON, the
// partition spec and the Parquet schema (with an Iceberg field id on every
// column) are all derived, so they cannot disagree.
//
// Field ids are stable forever: a new column gets a new id, an id is never
// reused. Map key/value ids live in the 100s.

export type ColumnType = 'timestamptz' | 'long' | 'int' | 'string' | 'map' | 'double' | 'boolean';

export interface ColumnDef {
  readonly id: number;
  readonly name: string;
  readonly type: ColumnType;
  readonly required: boolean;
  readonly doc: string;
  /** map<string,string> only: the field ids of the key and the value. */
  readonly keyId?: number;
  readonly valueId?: number;
}

/** A Parquet SchemaElement as hyparquet-writer takes it. */
export interface ParquetSchemaElement {
  name: string;
  type?: 'INT32' | 'INT64' | 'BYTE_ARRAY' | 'DOUBLE' | 'BOOLEAN';
  repetition_type?: 'REQUIRED' | 'OPTIONAL' | 'REPEATED';
  converted_type?: 'UTF8' | 'MAP' | 'MAP_KEY_VALUE';
  logical_type?: { type: 'TIMESTAMP'; isAdjustedToUTC: boolean; unit: 'MICROS' } | { type: 'STRING' } | { type: 'MAP' };
  num_children?: number;
  field_id?: number;
}

export type TableKind = 'logs' | 'traces';

const PARTITION_FIELD_ID = 1000;

/**
 * The version of the base schemas (table property `siglake.schema-version`,
 * docs/iceberg.md "Migration"). 1: the first release; 2: service_namespace and
 * deployment_environment_name promoted from resource attributes. A bump adds
 * columns only, at the end, with ids below 100 (never used by mapped columns,
 * which start after the map ids).
 */
export const SCHEMA_VERSION = 2;

export class TableSchema {
  readonly kind: TableKind;
  readonly columns: readonly ColumnDef[];
  readonly schemaId: number;
  readonly specId = 0;
  /** The event-time column the table is partitioned by (day transform). */
  readonly timeColumn: ColumnDef;
  readonly #byId = new Map<number, ColumnDef>();

  private constructor(kind: TableKind, columns: readonly ColumnDef[], schemaId = 0) {
    this.kind = kind;
    this.schemaId = schemaId;
    this.columns = Object.freeze(columns.map((c) => Object.freeze({ ...c })));
    for (const c of this.columns) this.#byId.set(c.id, c);
    this.timeColumn = this.columns[0]!;
  }

  get lastColumnId(): number {
    let max = 0;
    for (const c of this.columns) max = Math.max(max, c.id, c.keyId ?? 0, c.valueId ?? 0);
    return max;
  }

  get partitionFieldId(): number {
    return PARTITION_FIELD_ID;
  }

  get partitionFieldName(): string {
    return `${this.timeColumn.name}_day`;
  }

  /**
   * This schema plus `extra` columns after the base ones (an index's mapped
   * columns, src/indexes), as the table's schema `schemaId` holds them.
   */
  withColumns(extra: readonly ColumnDef[], schemaId: number): TableSchema {
    return new TableSchema(this.kind, [...this.columns, ...extra], schemaId);
  }

  /**
   * This schema without the columns a table does not have yet (an unmigrated
   * table, docs/iceberg.md "Migration"); only trailing columns may be missing,
   * so rows stay aligned (callers cut rows to `columns.length`).
   */
  restrictTo(present: ReadonlySet<number>, schemaId: number): TableSchema {
    const keep = this.columns.filter((c) => present.has(c.id));
    for (let i = 0; i < keep.length; i++) {
      if (keep[i] !== this.columns[i]) throw new Error(`table lacks base column ${this.columns[i]!.name} (id ${this.columns[i]!.id}) before newer ones`);
    }
    return new TableSchema(this.kind, keep, schemaId);
  }

  column(id: number): ColumnDef | undefined {
    return this.#byId.get(id);
  }

  /** The Iceberg schema (spec Appendix C). */
  icebergSchema(): Record<string, unknown> {
    return {
      type: 'struct',
      'schema-id': this.schemaId,
      fields: this.columns.map((c) => ({
        id: c.id,
        name: c.name,
        required: c.required,
        type:
          c.type === 'map'
            ? { type: 'map', 'key-id': c.keyId, key: 'string', 'value-id': c.valueId, value: 'string', 'value-required': false }
            : c.type,
        doc: c.doc,
      })),
    };
  }

  /** The partition spec: day of the event time. */
  partitionSpec(): Record<string, unknown> {
    return { 'spec-id': this.specId, fields: this.partitionFields() };
  }

  partitionFields(): Record<string, unknown>[] {
    return [
      { name: this.partitionFieldName, transform: 'day', 'source-id': this.timeColumn.id, 'field-id': PARTITION_FIELD_ID },
    ];
  }

  /** The Parquet schema, flattened depth-first, root first. */
  parquetSchema(): ParquetSchemaElement[] {
    const out: ParquetSchemaElement[] = [{ name: 'schema', num_children: this.columns.length }];
    for (const c of this.columns) {
      const repetition_type = c.required ? 'REQUIRED' : 'OPTIONAL';
      switch (c.type) {
        case 'timestamptz':
          out.push({
            name: c.name,
            type: 'INT64',
            repetition_type,
            logical_type: { type: 'TIMESTAMP', isAdjustedToUTC: true, unit: 'MICROS' },
            field_id: c.id,
          });
          break;
        case 'long':
          out.push({ name: c.name, type: 'INT64', repetition_type, field_id: c.id });
          break;
        case 'int':
          out.push({ name: c.name, type: 'INT32', repetition_type, field_id: c.id });
          break;
        case 'double':
          out.push({ name: c.name, type: 'DOUBLE', repetition_type, field_id: c.id });
          break;
        case 'boolean':
          out.push({ name: c.name, type: 'BOOLEAN', repetition_type, field_id: c.id });
          break;
        case 'string':
          out.push({ name: c.name, type: 'BYTE_ARRAY', converted_type: 'UTF8', logical_type: { type: 'STRING' }, repetition_type, field_id: c.id });
          break;
        case 'map':
          out.push(
            { name: c.name, repetition_type, converted_type: 'MAP', logical_type: { type: 'MAP' }, num_children: 1, field_id: c.id },
            { name: 'key_value', repetition_type: 'REPEATED', num_children: 2 },
            { name: 'key', type: 'BYTE_ARRAY', converted_type: 'UTF8', logical_type: { type: 'STRING' }, repetition_type: 'REQUIRED', field_id: c.keyId! },
            { name: 'value', type: 'BYTE_ARRAY', converted_type: 'UTF8', logical_type: { type: 'STRING' }, repetition_type: 'OPTIONAL', field_id: c.valueId! },
          );
          break;
      }
    }
    return out;
  }

  static readonly LOGS = new TableSchema('logs', [
    { id: 1, name: 'time', type: 'timestamptz', required: true, doc: 'Event time in µs: time_unix_nano, else observed_time_unix_nano, else the ingest time' },
    { id: 2, name: 'time_unix_nano', type: 'long', required: false, doc: 'LogRecord.time_unix_nano exactly (ns); null when 0' },
    { id: 3, name: 'observed_time_unix_nano', type: 'long', required: false, doc: 'LogRecord.observed_time_unix_nano (ns); null when 0' },
    { id: 4, name: 'ingest_time', type: 'timestamptz', required: true, doc: 'When Siglake wrote the record to its WAL' },
    { id: 5, name: 'severity_number', type: 'int', required: true, doc: 'SeverityNumber (0 = unspecified)' },
    { id: 6, name: 'severity_text', type: 'string', required: false, doc: 'Severity text; null when empty' },
    { id: 7, name: 'body', type: 'string', required: false, doc: 'A string body as is; any other AnyValue as JSON (see body_type)' },
    { id: 8, name: 'body_type', type: 'string', required: false, doc: 'string, bool, int, double, bytes, array or kvlist; null when the body is unset' },
    { id: 9, name: 'trace_id', type: 'string', required: false, doc: 'Lower-case hex; null when empty' },
    { id: 10, name: 'span_id', type: 'string', required: false, doc: 'Lower-case hex; null when empty' },
    { id: 11, name: 'flags', type: 'long', required: true, doc: 'LogRecord.flags (W3C trace flags in the low byte)' },
    { id: 12, name: 'event_name', type: 'string', required: false, doc: 'LogRecord.event_name; null when empty' },
    { id: 13, name: 'service_name', type: 'string', required: false, doc: 'The resource attribute service.name' },
    { id: 14, name: 'resource_attributes', type: 'map', keyId: 101, valueId: 102, required: true, doc: 'Resource attributes (values as text, see docs/iceberg.md)' },
    { id: 15, name: 'resource_dropped_attributes_count', type: 'int', required: true, doc: 'Resource.dropped_attributes_count' },
    { id: 16, name: 'resource_schema_url', type: 'string', required: false, doc: 'ResourceLogs.schema_url; null when empty' },
    { id: 17, name: 'scope_name', type: 'string', required: false, doc: 'InstrumentationScope.name; null when empty' },
    { id: 18, name: 'scope_version', type: 'string', required: false, doc: 'InstrumentationScope.version; null when empty' },
    { id: 19, name: 'scope_attributes', type: 'map', keyId: 103, valueId: 104, required: true, doc: 'Scope attributes' },
    { id: 20, name: 'scope_schema_url', type: 'string', required: false, doc: 'ScopeLogs.schema_url; null when empty' },
    { id: 21, name: 'attributes', type: 'map', keyId: 105, valueId: 106, required: true, doc: 'Log record attributes' },
    { id: 22, name: 'dropped_attributes_count', type: 'int', required: true, doc: 'LogRecord.dropped_attributes_count' },
    // Schema version 2.
    { id: 23, name: 'service_namespace', type: 'string', required: false, doc: 'The resource attribute service.namespace (schema version 2)' },
    { id: 24, name: 'deployment_environment_name', type: 'string', required: false, doc: 'The resource attribute deployment.environment.name (schema version 2)' },
  ]);

  static readonly TRACES = new TableSchema('traces', [
    { id: 1, name: 'time', type: 'timestamptz', required: true, doc: 'Span start in µs, else the ingest time' },
    { id: 2, name: 'start_time_unix_nano', type: 'long', required: false, doc: 'Span.start_time_unix_nano exactly (ns); null when 0' },
    { id: 3, name: 'end_time_unix_nano', type: 'long', required: false, doc: 'Span.end_time_unix_nano (ns); null when 0' },
    { id: 4, name: 'duration_nanos', type: 'long', required: false, doc: 'end − start in ns, when both are set' },
    { id: 5, name: 'ingest_time', type: 'timestamptz', required: true, doc: 'When Siglake wrote the record to its WAL' },
    { id: 6, name: 'trace_id', type: 'string', required: false, doc: 'Lower-case hex' },
    { id: 7, name: 'span_id', type: 'string', required: false, doc: 'Lower-case hex' },
    { id: 8, name: 'parent_span_id', type: 'string', required: false, doc: 'Lower-case hex; null for a root span' },
    { id: 9, name: 'trace_state', type: 'string', required: false, doc: 'W3C tracestate; null when empty' },
    { id: 10, name: 'flags', type: 'long', required: true, doc: 'Span.flags' },
    { id: 11, name: 'name', type: 'string', required: false, doc: 'Span name' },
    { id: 12, name: 'kind', type: 'int', required: true, doc: 'SpanKind: 0 unspecified, 1 internal, 2 server, 3 client, 4 producer, 5 consumer' },
    { id: 13, name: 'status_code', type: 'int', required: true, doc: 'Status.code: 0 unset, 1 ok, 2 error' },
    { id: 14, name: 'status_message', type: 'string', required: false, doc: 'Status.message; null when empty' },
    { id: 15, name: 'service_name', type: 'string', required: false, doc: 'The resource attribute service.name' },
    { id: 16, name: 'resource_attributes', type: 'map', keyId: 101, valueId: 102, required: true, doc: 'Resource attributes' },
    { id: 17, name: 'resource_dropped_attributes_count', type: 'int', required: true, doc: 'Resource.dropped_attributes_count' },
    { id: 18, name: 'resource_schema_url', type: 'string', required: false, doc: 'ResourceSpans.schema_url; null when empty' },
    { id: 19, name: 'scope_name', type: 'string', required: false, doc: 'InstrumentationScope.name; null when empty' },
    { id: 20, name: 'scope_version', type: 'string', required: false, doc: 'InstrumentationScope.version; null when empty' },
    { id: 21, name: 'scope_attributes', type: 'map', keyId: 103, valueId: 104, required: true, doc: 'Scope attributes' },
    { id: 22, name: 'scope_schema_url', type: 'string', required: false, doc: 'ScopeSpans.schema_url; null when empty' },
    { id: 23, name: 'attributes', type: 'map', keyId: 105, valueId: 106, required: true, doc: 'Span attributes' },
    { id: 24, name: 'dropped_attributes_count', type: 'int', required: true, doc: 'Span.dropped_attributes_count' },
    { id: 25, name: 'events', type: 'string', required: false, doc: 'Span events as a JSON array of {time_unix_nano, name, attributes, dropped_attributes_count}; null when none' },
    { id: 26, name: 'dropped_events_count', type: 'int', required: true, doc: 'Span.dropped_events_count' },
    { id: 27, name: 'links', type: 'string', required: false, doc: 'Span links as a JSON array of {trace_id, span_id, trace_state, flags, attributes, dropped_attributes_count}; null when none' },
    { id: 28, name: 'dropped_links_count', type: 'int', required: true, doc: 'Span.dropped_links_count' },
    // Schema version 2.
    { id: 29, name: 'service_namespace', type: 'string', required: false, doc: 'The resource attribute service.namespace (schema version 2)' },
    { id: 30, name: 'deployment_environment_name', type: 'string', required: false, doc: 'The resource attribute deployment.environment.name (schema version 2)' },
  ]);

  static of(kind: TableKind): TableSchema {
    return kind === 'logs' ? TableSchema.LOGS : TableSchema.TRACES;
  }
}
