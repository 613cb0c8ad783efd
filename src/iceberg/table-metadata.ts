// An Iceberg table metadata file (format v2, spec "Table Metadata"), kept as
// the JSON tree it was read from so that fields this writer does not know
// (written by another engine) survive an append unchanged. Numbers that do
// not fit a double stay bigint (LosslessJson).

import { randomUUID } from 'node:crypto';
import { IcebergError } from './iceberg-error.js';
import { LosslessJson, type JsonValue } from './lossless-json.js';
import { SCHEMA_VERSION, type TableSchema } from './table-schema.js';

type JsonObject = { [key: string]: JsonValue };

/** Iceberg Java's default for write.metadata.previous-versions-max. */
const METADATA_LOG_MAX = 100;

export interface SnapshotView {
  readonly snapshotId: bigint;
  readonly parentSnapshotId: bigint | null;
  readonly sequenceNumber: bigint;
  readonly timestampMs: number;
  readonly manifestList: string;
  readonly summary: Readonly<Record<string, string>>;
}

export class TableMetadata {
  readonly #doc: JsonObject;

  private constructor(doc: JsonObject) {
    this.#doc = doc;
  }

  static parse(text: string, where = 'table metadata'): TableMetadata {
    const doc = LosslessJson.parse(text);
    if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) {
      throw new IcebergError('SIGLAKE_ICEBERG_METADATA', `${where}: not a JSON object`);
    }
    const m = new TableMetadata(doc);
    const v = Number(doc['format-version']);
    if (v !== 2) throw new IcebergError('SIGLAKE_ICEBERG_METADATA', `${where}: format-version ${String(doc['format-version'])}, this writer handles 2`);
    if (typeof doc['location'] !== 'string') throw new IcebergError('SIGLAKE_ICEBERG_METADATA', `${where}: no location`);
    return m;
  }

  /** A new table's metadata, with no snapshot yet (append() adds the first). */
  static create(location: string, schema: TableSchema, nowMs: number): TableMetadata {
    return new TableMetadata({
      'format-version': 2,
      'table-uuid': randomUUID(),
      location,
      'last-sequence-number': 0,
      'last-updated-ms': nowMs,
      'last-column-id': schema.lastColumnId,
      'current-schema-id': schema.schemaId,
      schemas: [schema.icebergSchema() as JsonObject],
      'default-spec-id': schema.specId,
      'partition-specs': [schema.partitionSpec() as JsonObject],
      'last-partition-id': schema.partitionFieldId,
      'default-sort-order-id': 0,
      'sort-orders': [{ 'order-id': 0, fields: [] }],
      properties: {
        'write.format.default': 'parquet',
        'write.parquet.compression-codec': 'zstd',
        'siglake.table-kind': schema.kind,
        'siglake.schema-version': String(SCHEMA_VERSION),
      },
      'current-snapshot-id': -1,
      refs: {},
      snapshots: [],
      'snapshot-log': [],
      'metadata-log': [],
    });
  }

  toJson(): string {
    return LosslessJson.stringify(this.#doc);
  }

  get location(): string {
    return this.#doc['location'] as string;
  }

  /** One table property as text, or undefined when the table has none of that name. */
  property(key: string): string | undefined {
    const props = this.#doc['properties'] as JsonObject | undefined;
    const v = props?.[key];
    return v === undefined || v === null ? undefined : String(v);
  }

  /** Every table property as text. */
  properties(): Record<string, string> {
    const out: Record<string, string> = {};
    const props = this.#doc['properties'] as JsonObject | undefined;
    for (const [k, v] of Object.entries(props ?? {})) if (v !== null && v !== undefined) out[k] = String(v);
    return out;
  }

  get tableUuid(): string {
    return String(this.#doc['table-uuid']);
  }

  get lastSequenceNumber(): bigint {
    return BigInt((this.#doc['last-sequence-number'] as number | bigint | undefined) ?? 0);
  }

  get lastUpdatedMs(): number {
    return Number(this.#doc['last-updated-ms'] ?? 0);
  }

  get currentSnapshotId(): bigint | null {
    const v = this.#doc['current-snapshot-id'];
    if (v === null || v === undefined) return null;
    const id = BigInt(v as number | bigint);
    return id === -1n ? null : id;
  }

  get snapshots(): SnapshotView[] {
    const list = (this.#doc['snapshots'] as JsonObject[] | undefined) ?? [];
    return list.map(viewOf);
  }

  snapshot(id: bigint): SnapshotView | undefined {
    return this.snapshots.find((s) => s.snapshotId === id);
  }

  currentSnapshot(): SnapshotView | null {
    const id = this.currentSnapshotId;
    return id === null ? null : (this.snapshot(id) ?? null);
  }

  /** The current snapshot and its ancestors still in the metadata, newest first. */
  ancestry(): SnapshotView[] {
    const byId = new Map(this.snapshots.map((s) => [s.snapshotId, s]));
    const out: SnapshotView[] = [];
    let cur = this.currentSnapshotId;
    while (cur !== null) {
      const s = byId.get(cur);
      if (s === undefined) break;
      out.push(s);
      cur = s.parentSnapshotId;
    }
    return out;
  }

  /**
   * `ms`, or the latest commit time the metadata records when that is later
   * (last-updated-ms, the snapshot log's last entry): the time to stamp a
   * commit with, so that the logs stay sorted whatever the writers' clocks.
   */
  commitFloorMs(ms: number): number {
    return commitTimeMs(this.#doc, ms);
  }

  /** Whether the table's current schema has every column of `schema` with the same type (ids are what matter). */
  checkSchema(schema: TableSchema): void {
    const schemas = (this.#doc['schemas'] as JsonObject[] | undefined) ?? [];
    const current = schemas.find((s) => Number(s['schema-id']) === Number(this.#doc['current-schema-id']));
    const fields = (current?.['fields'] as JsonObject[] | undefined) ?? [];
    const byId = new Map(fields.map((f) => [Number(f['id']), f]));
    for (const c of schema.columns) {
      const f = byId.get(c.id);
      const t = f?.['type'];
      const type = typeof t === 'string' ? t : (t as JsonObject | undefined)?.['type'];
      if (f === undefined || type !== c.type) {
        throw new IcebergError('SIGLAKE_ICEBERG_METADATA', `table at ${this.location}: column ${c.id} (${c.name}) missing or not ${c.type}`);
      }
    }
    const specs = (this.#doc['partition-specs'] as JsonObject[] | undefined) ?? [];
    const spec = specs.find((s) => Number(s['spec-id']) === Number(this.#doc['default-spec-id']));
    const pf = (spec?.['fields'] as JsonObject[] | undefined)?.[0];
    if (Number(this.#doc['default-spec-id']) !== schema.specId || pf?.['transform'] !== 'day' || Number(pf?.['source-id']) !== schema.timeColumn.id) {
      throw new IcebergError('SIGLAKE_ICEBERG_METADATA', `table at ${this.location}: partition spec is not day(${schema.timeColumn.name})`);
    }
  }

  /**
   * The metadata after an append snapshot, whose file will be `newLocation`
   * (`previousLocation` is the file this one was read from, or null for a new table);
   * `properties` are set over the table's own.
   */
  withAppend(snap: SnapshotView, previousLocation: string | null, nowMs: number, properties?: Readonly<Record<string, string>>): TableMetadata {
    const doc: JsonObject = { ...this.#doc };
    // Commit times never go back: a writer whose clock is behind the last commit's (another host's)
    // stamps its snapshot with that commit's time instead. Iceberg Java refuses to load metadata
    // whose snapshot log or metadata log goes back by more than a minute ("[BUG] Expected sorted
    // snapshot log entries"), so one such commit made the table unreadable to Spark and Trino.
    const at = this.commitFloorMs(snap.timestampMs);
    nowMs = Math.max(nowMs, at);
    snap = { ...snap, timestampMs: at };
    if (properties !== undefined && Object.keys(properties).length > 0) {
      doc['properties'] = { ...((doc['properties'] as JsonObject | undefined) ?? {}), ...properties };
    }
    const snapJson: JsonObject = {
      'snapshot-id': snap.snapshotId,
      'sequence-number': snap.sequenceNumber,
      'timestamp-ms': snap.timestampMs,
      'manifest-list': snap.manifestList,
      summary: { ...snap.summary },
      'schema-id': Number(doc['current-schema-id'] ?? 0),
    };
    if (snap.parentSnapshotId !== null) snapJson['parent-snapshot-id'] = snap.parentSnapshotId;
    doc['snapshots'] = [...((doc['snapshots'] as JsonValue[] | undefined) ?? []), snapJson];
    doc['last-sequence-number'] = snap.sequenceNumber;
    doc['last-updated-ms'] = nowMs;
    doc['current-snapshot-id'] = snap.snapshotId;
    // The main branch moves; its retention settings (min-snapshots-to-keep, max-snapshot-age-ms,
    // max-ref-age-ms), set by another engine, stay.
    const refs = (doc['refs'] as JsonObject | undefined) ?? {};
    const main = refs['main'] !== null && typeof refs['main'] === 'object' && !Array.isArray(refs['main']) ? (refs['main'] as JsonObject) : {};
    doc['refs'] = { ...refs, main: { ...main, 'snapshot-id': snap.snapshotId, type: 'branch' } };
    doc['snapshot-log'] = [...((doc['snapshot-log'] as JsonValue[] | undefined) ?? []), { 'timestamp-ms': snap.timestampMs, 'snapshot-id': snap.snapshotId }];
    if (previousLocation !== null) {
      const log = [...((doc['metadata-log'] as JsonValue[] | undefined) ?? []), { 'timestamp-ms': this.lastUpdatedMs, 'metadata-file': previousLocation }];
      doc['metadata-log'] = log.slice(Math.max(0, log.length - METADATA_LOG_MAX));
    }
    return new TableMetadata(doc);
  }

  /** The file name of the next metadata version: `<n>-<uuid>.metadata.json`, n one past `previousLocation`'s. */
  static nextFileName(previousLocation: string | null): string {
    let n = 0;
    if (previousLocation !== null) {
      const m = /\/(\d+)-[^/]*\.metadata\.json$/.exec(previousLocation);
      n = m === null ? 1 : Number(m[1]) + 1;
    }
    return `${String(n).padStart(5, '0')}-${randomUUID()}.metadata.json`;
  }
}

/**
 * The time to stamp a commit over metadata `doc` with: `ms` (the writer's
 * clock), or the latest commit time `doc` records (last-updated-ms, the
 * snapshot log's last entry) when that is later. Iceberg Java refuses to load
 * metadata whose snapshot log or metadata log goes back by over a minute.
 */
export function commitTimeMs(doc: { readonly [key: string]: JsonValue }, ms: number): number {
  let floor = Number(doc['last-updated-ms'] ?? 0) || 0;
  const log = doc['snapshot-log'];
  if (Array.isArray(log) && log.length > 0) {
    const last = log[log.length - 1] as JsonObject | null;
    floor = Math.max(floor, Number(last?.['timestamp-ms'] ?? 0) || 0);
  }
  return Math.max(ms, floor);
}

function viewOf(s: JsonObject): SnapshotView {
  const parent = s['parent-snapshot-id'];
  const summary: Record<string, string> = {};
  for (const [k, v] of Object.entries((s['summary'] as JsonObject | undefined) ?? {})) summary[k] = String(v);
  return {
    snapshotId: BigInt(s['snapshot-id'] as number | bigint),
    parentSnapshotId: parent === null || parent === undefined ? null : BigInt(parent as number | bigint),
    sequenceNumber: BigInt((s['sequence-number'] as number | bigint | undefined) ?? 0),
    timestampMs: Number(s['timestamp-ms'] ?? 0),
    manifestList: String(s['manifest-list'] ?? ''),
    summary,
  };
}
