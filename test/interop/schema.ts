// The table schemas docs/iceberg.md states ("Table schemas"), as pyiceberg
// names the types: what every reader must see.

export interface ExpectedField {
  id: number;
  name: string;
  type: string;
  required: boolean;
  key_id?: number;
  value_id?: number;
}

const f = (id: number, name: string, type: string, required = false): ExpectedField => ({ id, name, type, required });
const map = (id: number, name: string, keyId: number): ExpectedField => ({
  id,
  name,
  type: 'map<string, string>',
  required: true,
  key_id: keyId,
  value_id: keyId + 1,
});

const resourceAndScope = (first: number): ExpectedField[] => [
  map(first, 'resource_attributes', 101),
  f(first + 1, 'resource_dropped_attributes_count', 'int', true),
  f(first + 2, 'resource_schema_url', 'string'),
  f(first + 3, 'scope_name', 'string'),
  f(first + 4, 'scope_version', 'string'),
  map(first + 5, 'scope_attributes', 103),
  f(first + 6, 'scope_schema_url', 'string'),
];

export const LOGS_SCHEMA: ExpectedField[] = [
  f(1, 'time', 'timestamptz', true),
  f(2, 'time_unix_nano', 'long'),
  f(3, 'observed_time_unix_nano', 'long'),
  f(4, 'ingest_time', 'timestamptz', true),
  f(5, 'severity_number', 'int', true),
  f(6, 'severity_text', 'string'),
  f(7, 'body', 'string'),
  f(8, 'body_type', 'string'),
  f(9, 'trace_id', 'string'),
  f(10, 'span_id', 'string'),
  f(11, 'flags', 'long', true),
  f(12, 'event_name', 'string'),
  f(13, 'service_name', 'string'),
  ...resourceAndScope(14),
  map(21, 'attributes', 105),
  f(22, 'dropped_attributes_count', 'int', true),
  // Schema version 2 (docs/iceberg.md "Migration"): promoted from resource attributes.
  f(23, 'service_namespace', 'string'),
  f(24, 'deployment_environment_name', 'string'),
];

export const TRACES_SCHEMA: ExpectedField[] = [
  f(1, 'time', 'timestamptz', true),
  f(2, 'start_time_unix_nano', 'long'),
  f(3, 'end_time_unix_nano', 'long'),
  f(4, 'duration_nanos', 'long'),
  f(5, 'ingest_time', 'timestamptz', true),
  f(6, 'trace_id', 'string'),
  f(7, 'span_id', 'string'),
  f(8, 'parent_span_id', 'string'),
  f(9, 'trace_state', 'string'),
  f(10, 'flags', 'long', true),
  f(11, 'name', 'string'),
  f(12, 'kind', 'int', true),
  f(13, 'status_code', 'int', true),
  f(14, 'status_message', 'string'),
  f(15, 'service_name', 'string'),
  ...resourceAndScope(16),
  map(23, 'attributes', 105),
  f(24, 'dropped_attributes_count', 'int', true),
  f(25, 'events', 'string'),
  f(26, 'dropped_events_count', 'int', true),
  f(27, 'links', 'string'),
  f(28, 'dropped_links_count', 'int', true),
  // Schema version 2 (docs/iceberg.md "Migration"): promoted from resource attributes.
  f(29, 'service_namespace', 'string'),
  f(30, 'deployment_environment_name', 'string'),
];

/** Partitioned by day(time): partition field `time_day`, id 1000. */
export const TIME_DAY_SPEC = [{ source_id: 1, field_id: 1000, transform: 'day', name: 'time_day' }];
