// Mapped columns at compaction (contract §6, docs/indexes.md "Mapping"):
// for a logs-kind table whose properties carry a mapping, the compactor
// writes the base columns plus one typed column per mapped column still in
// the table's current schema, with the value taken from the row it already
// decoded:
//
//   attributes.<key>  the log record attribute <key> (its text form)
//   resource.<key>    the resource attribute <key>
//   scope.<key>       the instrumentation scope attribute <key>
//   body              the body (a string as is, any other AnyValue as its JSON)
//
// An absent source is null. A present value that does not convert to the
// column's type is null too, and counted (siglake_compactor_mapping_errors_total).

import { LosslessJson, type JsonValue } from '../iceberg/lossless-json.js';
import type { TableMetadata } from '../iceberg/table-metadata.js';
import { TableSchema, type ColumnDef, type ColumnType } from '../iceberg/table-schema.js';
import type { MappedType } from './index-spec.js';
import { mappingOf, type MappedColumn } from './registry.js';

type Row = unknown[];
type MapValue = [string, string | null][];

/** Where the base logs row keeps each source (indexes into TableSchema.LOGS.columns). */
const BODY = 6;
const RESOURCE_ATTRIBUTES = 13;
const SCOPE_ATTRIBUTES = 18;
const ATTRIBUTES = 20;

const LONG_RE = /^[+-]?\d{1,19}$/;
const DOUBLE_RE = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
const RFC3339_RE = /^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$/;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

interface Extractor {
  readonly slot: number;
  /** null: the whole slot (body); else the attribute key. */
  readonly key: string | null;
  readonly convert: (text: string) => unknown;
}

/** Appends the mapped columns' values to base logs rows; counts values that did not convert. */
export class RowMapper {
  readonly #ex: Extractor[];
  /** Values that did not convert since the last take(). */
  #errors = 0;

  constructor(columns: readonly MappedColumn[]) {
    this.#ex = columns.map((c) => extractorOf(c));
  }

  get width(): number {
    return this.#ex.length;
  }

  apply(row: Row): void {
    for (const ex of this.#ex) {
      const text = ex.key === null ? (row[ex.slot] as string | null) : lookup(row[ex.slot] as MapValue, ex.key);
      if (text === null || text === undefined) {
        row.push(null);
        continue;
      }
      const v = ex.convert(text);
      if (v === undefined) {
        this.#errors++;
        row.push(null);
      } else row.push(v);
    }
  }

  /** The conversion failures counted since the last call. */
  takeErrors(): number {
    const n = this.#errors;
    this.#errors = 0;
    return n;
  }
}

/**
 * The schema the compactor writes a logs-kind table with, and the mapper
 * that fills its mapped columns; null when the table has no mapped column in
 * its current schema (the base schema then).
 */
export function mappedSchemaOf(metadata: TableMetadata, base: TableSchema = TableSchema.LOGS): { schema: TableSchema; mapper: RowMapper } | null {
  const doc = LosslessJson.parse(metadata.toJson()) as { [k: string]: JsonValue };
  const props = (doc['properties'] as { [k: string]: JsonValue } | undefined) ?? {};
  if (props['siglake.table-kind'] !== 'logs') return null;
  const mapping = mappingOf(props);
  if (mapping.length === 0) return null;
  const schemaId = Number(doc['current-schema-id'] ?? 0);
  const schemas = (doc['schemas'] as { [k: string]: JsonValue }[] | undefined) ?? [];
  const current = schemas.find((s) => Number(s['schema-id']) === schemaId);
  const inSchema = new Map(((current?.['fields'] as { [k: string]: JsonValue }[] | undefined) ?? []).map((f) => [Number(f['id']), f]));
  const cols = mapping.filter((c) => inSchema.get(c.id)?.['type'] === icebergType(c.type));
  if (cols.length === 0) return null;
  const extra: ColumnDef[] = cols.map((c) => ({ id: c.id, name: c.column, type: icebergType(c.type), required: false, doc: `${c.type} from ${c.from}` }));
  return { schema: base.withColumns(extra, schemaId), mapper: new RowMapper(cols) };
}

function icebergType(t: MappedType): ColumnType {
  return t === 'timestamp' ? 'timestamptz' : t;
}

function extractorOf(c: MappedColumn): Extractor {
  const convert = CONVERTERS[c.type];
  if (c.from === 'body') return { slot: BODY, key: null, convert };
  const dot = c.from.indexOf('.');
  const prefix = c.from.slice(0, dot);
  const key = c.from.slice(dot + 1);
  const slot = prefix === 'resource' ? RESOURCE_ATTRIBUTES : prefix === 'scope' ? SCOPE_ATTRIBUTES : ATTRIBUTES;
  return { slot, key, convert };
}

function lookup(map: MapValue, key: string): string | null {
  // Keys are unique in a decoded row (a repeated key keeps its last value).
  for (let i = 0; i < map.length; i++) if (map[i]![0] === key) return map[i]![1];
  return null;
}

/** Text → typed value; undefined when it does not convert. */
const CONVERTERS: Readonly<Record<MappedType, (text: string) => unknown>> = {
  string: (t) => t,
  long: (t) => {
    const s = t.trim();
    if (!LONG_RE.test(s)) return undefined;
    const v = BigInt(s);
    return v < INT64_MIN || v > INT64_MAX ? undefined : v;
  },
  double: (t) => {
    const s = t.trim();
    if (!DOUBLE_RE.test(s)) return undefined;
    // -0 is stored as 0: equal in SQL, and the Parquet dictionary would merge the two anyway.
    const v = Number(s) + 0;
    return Number.isFinite(v) ? v : undefined;
  },
  boolean: (t) => {
    const s = t.trim().toLowerCase();
    return s === 'true' ? true : s === 'false' ? false : undefined;
  },
  timestamp: (t) => timestampMicros(t.trim()),
};

/** RFC 3339 text, or an integer of Unix epoch nanoseconds (OTLP's unit) → µs since the epoch. */
export function timestampMicros(s: string): bigint | undefined {
  if (LONG_RE.test(s)) {
    const ns = BigInt(s);
    if (ns < 0n || ns > INT64_MAX) return undefined;
    return ns / 1000n;
  }
  const m = RFC3339_RE.exec(s);
  if (m === null) return undefined;
  const ms = Date.parse(`${m[1]}T${m[2]}${m[4]!.toUpperCase()}`);
  if (Number.isNaN(ms)) return undefined;
  const frac = BigInt((m[3] ?? '').padEnd(6, '0').slice(0, 6) || '0');
  return BigInt(ms) * 1000n + frac;
}
