// What a query reads of one table: the data files of its current snapshot,
// resolved from the Iceberg metadata Siglake writes (docs/iceberg.md):
// metadata file → current snapshot → manifest list → data manifests → live
// entries. A metadata file never changes once written, so the answer is
// cached by namespace and metadata_location; a commit makes a new location,
// and the next query resolves that one.
//
// Every data file must lie under its table's location, and the table under
// `<warehouse>/<namespace>/`: the query engine is allowed to open exactly
// these files, so a location outside them is a corrupt table, never a file to
// read. Locations are compared as URIs (`file:///…` or `s3://…`), segment by
// segment: an empty, `.` or `..` segment is refused, so no prefix check can be
// walked out of. Metadata and manifests are read through the ObjectStorage;
// the data files are opened by the engine from local paths (engine-pool.ts:
// the file itself for a local warehouse, a cached copy for S3).

import { AvroFile, type AvroRecord } from '../iceberg/avro-file.js';
import type { ObjectStorage } from '../iceberg/storage.js';
import { LosslessJson } from '../iceberg/lossless-json.js';
import { ManifestList } from '../iceberg/manifest-list.js';
import { TableMetadata } from '../iceberg/table-metadata.js';
import { QueryError } from './query-error.js';

/** The readable state of a table at one metadata file. */
export interface TableFiles {
  readonly metadataLocation: string;
  /** Locations (URIs) of the live Parquet data files. */
  readonly files: readonly string[];
  readonly rowCount: number;
  /** `siglake.table-kind` (`logs`, `traces`) or `index` for a managed index's table. */
  readonly properties: Readonly<Record<string, string>>;
  /**
   * The current schema's columns with their Iceberg field ids and engine
   * types, for reading the files by field id (tenant-engine.ts); null when a
   * column's type has no engine type here (the files are then read by name).
   */
  readonly columns: readonly EngineColumn[] | null;
}

/** One column of a table's current schema, as the query engine reads it. */
export interface EngineColumn {
  readonly id: number;
  readonly name: string;
  /** The engine (DuckDB) type: `BIGINT`, `VARCHAR`, `MAP(VARCHAR, VARCHAR)`, … */
  readonly type: string;
}

const MANIFEST_CONTENT_DATA = 0;
const ENTRY_STATUS_DELETED = 2;
const DATA_FILE_CONTENT_DATA = 0;
/** Metadata files whose resolution is kept; a few per table is the working set. */
const CACHE_ENTRIES = 4096;

export class TableFilesReader {
  readonly #storage: ObjectStorage;
  readonly #cache = new Map<string, Promise<TableFiles>>();

  constructor(storage: ObjectStorage) {
    this.#storage = storage;
  }

  /**
   * The files of the table of `namespace` whose current metadata file is
   * `metadataLocation`. Cached by both: the check that the table lies under
   * its namespace runs on a miss, so a location one namespace resolved is
   * never handed to another without it (a catalog row of one namespace
   * pointing at another's metadata is refused there, whatever the cache holds).
   */
  read(namespace: string, metadataLocation: string): Promise<TableFiles> {
    const key = `${namespace}\n${metadataLocation}`;
    const hit = this.#cache.get(key);
    if (hit !== undefined) {
      this.#cache.delete(key);
      this.#cache.set(key, hit);
      return hit;
    }
    const p = this.#resolve(namespace, metadataLocation);
    this.#cache.set(key, p);
    p.catch(() => this.#cache.delete(key));
    while (this.#cache.size > CACHE_ENTRIES) this.#cache.delete(this.#cache.keys().next().value as string);
    return p;
  }

  async #resolve(namespace: string, metadataLocation: string): Promise<TableFiles> {
    const storage = this.#storage;
    const text = Buffer.from(await storage.get(metadataLocation)).toString('utf8');
    const meta = TableMetadata.parse(text, metadataLocation);
    const tableLoc = meta.location.replace(/\/+$/, '');
    if (!isUnder(tableLoc, storage.locationOf(namespace))) throw corrupt(`${metadataLocation}: table location is not under its namespace's directory`);
    const properties = propertiesOf(text);
    const columns = columnsOf(text);
    const snap = meta.currentSnapshot();
    if (snap === null) return { metadataLocation, files: [], rowCount: 0, properties, columns };
    const files: string[] = [];
    let rows = 0;
    for (const m of await ManifestList.read(storage, snap.manifestList)) {
      if (Number(m['content'] ?? 0) !== MANIFEST_CONTENT_DATA) throw corrupt(`${metadataLocation}: delete manifests are not supported`);
      const manifest = String(m['manifest_path']);
      const { records } = AvroFile.decode(await storage.get(manifest), manifest);
      for (const entry of records) {
        if (Number(entry['status']) === ENTRY_STATUS_DELETED) continue;
        const df = entry['data_file'] as AvroRecord;
        if (Number(df['content'] ?? 0) !== DATA_FILE_CONTENT_DATA) throw corrupt(`${manifest}: delete files are not supported`);
        if (String(df['file_format']).toUpperCase() !== 'PARQUET') throw corrupt(`${manifest}: a data file is not Parquet`);
        const file = String(df['file_path']);
        if (!isUnder(file, tableLoc)) throw corrupt(`${manifest}: a data file lies outside its table's location`);
        files.push(file);
        rows += Number(df['record_count']);
      }
    }
    return { metadataLocation, files, rowCount: rows, properties, columns };
  }
}

/**
 * `location` names something strictly below `parent`, through plain segments
 * only (no empty, `.` or `..` segment, no encoded `/` or `\\`). Also used by
 * retention (src/retention/retention.ts), which deletes only what lies under
 * a table's own location.
 */
export function isUnder(location: string, parent: string): boolean {
  if (!location.startsWith(parent + '/')) return false;
  for (const seg of location.slice(parent.length + 1).split('/')) {
    let plain: string;
    try {
      plain = decodeURIComponent(seg);
    } catch {
      return false;
    }
    if (plain === '' || plain === '.' || plain === '..' || plain.includes('/') || plain.includes('\\')) return false;
  }
  return true;
}

function propertiesOf(text: string): Record<string, string> {
  const doc = LosslessJson.parse(text) as Record<string, unknown>;
  const props = doc['properties'];
  const out: Record<string, string> = {};
  if (props !== null && typeof props === 'object' && !Array.isArray(props)) {
    for (const [k, v] of Object.entries(props as Record<string, unknown>)) out[k] = String(v);
  }
  return out;
}

/** Iceberg primitive types and the engine's. */
const PRIMITIVES: Readonly<Record<string, string>> = {
  boolean: 'BOOLEAN',
  int: 'INTEGER',
  long: 'BIGINT',
  float: 'FLOAT',
  double: 'DOUBLE',
  date: 'DATE',
  time: 'TIME',
  timestamp: 'TIMESTAMP',
  timestamptz: 'TIMESTAMP WITH TIME ZONE',
  string: 'VARCHAR',
  uuid: 'UUID',
  binary: 'BLOB',
};

/**
 * The current schema's top-level columns (metadata JSON `schemas`,
 * `current-schema-id`), or null when one has a type not mapped here. Siglake's
 * own tables have primitives and `map<string,string>`; another engine's
 * writes may bring more, which are then read by name.
 */
function columnsOf(text: string): EngineColumn[] | null {
  const doc = LosslessJson.parse(text) as Record<string, unknown>;
  const schemas = Array.isArray(doc['schemas']) ? (doc['schemas'] as Record<string, unknown>[]) : [];
  const current = schemas.find((x) => Number(x['schema-id']) === Number(doc['current-schema-id']));
  const fields = current?.['fields'];
  if (!Array.isArray(fields)) return null;
  const out: EngineColumn[] = [];
  for (const f of fields as Record<string, unknown>[]) {
    const type = engineTypeOf(f['type']);
    const id = Number(f['id']);
    if (type === null || !Number.isSafeInteger(id) || typeof f['name'] !== 'string') return null;
    out.push({ id, name: f['name'], type });
  }
  return out;
}

function engineTypeOf(t: unknown): string | null {
  if (typeof t === 'string') {
    const p = PRIMITIVES[t];
    if (p !== undefined) return p;
    const dec = /^decimal\((\d+),\s*(\d+)\)$/.exec(t);
    return dec !== null ? `DECIMAL(${dec[1]}, ${dec[2]})` : null;
  }
  if (t !== null && typeof t === 'object' && (t as Record<string, unknown>)['type'] === 'map') {
    const m = t as Record<string, unknown>;
    const k = engineTypeOf(m['key']);
    const v = engineTypeOf(m['value']);
    return k !== null && v !== null ? `MAP(${k}, ${v})` : null;
  }
  return null;
}

function corrupt(message: string): QueryError {
  return new QueryError('SIGLAKE_QUERY_ENGINE', `table metadata unusable: ${message}`);
}
