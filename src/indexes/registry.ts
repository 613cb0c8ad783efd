// The index registry of every tenant, kept in the catalog itself (contract
// §6, docs/indexes.md): an index is an Iceberg table of the tenant's
// namespace, and its definition is that table's properties. No second
// database: what `siglake index list` shows is what every engine sees.
//
//   siglake.table-kind            logs
//   siglake.index                 true          (created through the registry)
//   siglake.index.retention-days  30
//   siglake.index.mapping         [{"column","from","type","id"}, ...]  (current columns, with their field ids)
//
// Create writes the table's first metadata file (no snapshot) and inserts
// the catalog row: a crash before the insert leaves an unreferenced file and
// no index; after it, the whole index. Update and delete are compare-and-set
// on the row's metadata_location, retried on a conflict, so they race safely
// with the compactor's appends. Mapped columns get field ids after the
// table's last column id and keep them: an update adds columns (a new
// Iceberg schema), never retypes, re-sources or renames one; a column left
// out of the new mapping leaves the current schema only, and a column of the
// same name added later gets a new id.

import { IcebergError } from '../iceberg/iceberg-error.js';
import { LosslessJson, type JsonValue } from '../iceberg/lossless-json.js';
import type { SqlCatalog } from '../iceberg/sql-catalog.js';
import type { ObjectStorage } from '../iceberg/storage.js';
import { commitTimeMs, TableMetadata } from '../iceberg/table-metadata.js';
import { TableSchema } from '../iceberg/table-schema.js';
import { isValidIdentifier, namespaceOf } from '../tenancy/identifier.js';
import { IndexError } from './index-error.js';
import { BASE_TABLES, deletedIndexProperty, indexNamesByNamespace } from './index-names.js';
import { icebergTypeOf, isValidIndexName, MAPPED_TYPES, type IndexSpec, type MappedType, type MappingEntry } from './index-spec.js';

type JsonObject = { [key: string]: JsonValue };

export const PROP_KIND = 'siglake.table-kind';
export const PROP_INDEX = 'siglake.index';
export const PROP_RETENTION_DAYS = 'siglake.index.retention-days';
export const PROP_MAPPING = 'siglake.index.mapping';

/** A mapped column as the table holds it: the definition plus its permanent field id. */
export interface MappedColumn extends MappingEntry {
  readonly id: number;
}

export interface IndexInfo {
  readonly name: string;
  readonly namespace: string;
  readonly retentionDays: number;
  readonly mapping: readonly MappedColumn[];
  /** False for a table the compactor created from data sent before the registry knew the index. */
  readonly registered: boolean;
  readonly metadataLocation: string;
}

export interface IndexRegistryOptions {
  readonly catalog: SqlCatalog;
  readonly storage: ObjectStorage;
  readonly now?: () => number;
  /** Compare-and-set attempts before giving up. Default 50. */
  readonly maxAttempts?: number;
  /** Test hook: runs after a create wrote the metadata file, before the catalog row exists. */
  readonly afterCreateMetadata?: () => void;
  /**
   * Indexes a tenant may have (query.maxIndexesPerTenant on the index API):
   * every index name becomes a label value of the compactor's and retention's
   * per-table series, so a tenant must not make them without bound. Checked
   * against the tables of the namespace at create time, one create of a
   * namespace at a time in this process (creates at once on several processes
   * sharing the catalog may pass it, by one each). Unset: no limit (the
   * operator's CLI).
   */
  readonly maxPerTenant?: number;
}

const METADATA_LOG_MAX = 100;

export class IndexRegistry {
  readonly #catalog: SqlCatalog;
  readonly #storage: ObjectStorage;
  readonly #now: () => number;
  readonly #maxAttempts: number;
  readonly #afterCreateMetadata: () => void;
  readonly #maxPerTenant: number;
  /** Namespace → the end of its last create: creates of one namespace run one at a time. */
  readonly #creating = new Map<string, Promise<void>>();

  constructor(o: IndexRegistryOptions) {
    this.#catalog = o.catalog;
    this.#storage = o.storage;
    this.#now = o.now ?? Date.now;
    this.#maxAttempts = o.maxAttempts ?? 50;
    this.#afterCreateMetadata = o.afterCreateMetadata ?? (() => undefined);
    this.#maxPerTenant = o.maxPerTenant ?? Infinity;
  }

  /** The names of the tenant's indexes (one catalog query, no file read): what ingest accepts. */
  async names(tenant: string): Promise<string[]> {
    const ns = namespaceOf(checkTenant(tenant));
    return (await this.#catalog.tables(ns)).filter((t) => !BASE_TABLES.has(t));
  }

  /** Every index of every namespace: `namespace` → index names (one catalog query). */
  allNames(): Promise<Map<string, Set<string>>> {
    return indexNamesByNamespace(this.#catalog);
  }

  async list(tenant: string): Promise<IndexInfo[]> {
    const ns = namespaceOf(checkTenant(tenant));
    const out: IndexInfo[] = [];
    for (const name of await this.names(tenant)) {
      const loaded = await this.#load(ns, name);
      if (loaded === null) continue; // dropped meanwhile
      const info = infoOf(name, ns, loaded.location, loaded.doc);
      if (info !== null) out.push(info);
    }
    return out;
  }

  async show(tenant: string, name: string): Promise<IndexInfo> {
    const ns = namespaceOf(checkTenant(tenant));
    checkName(name);
    const loaded = await this.#load(ns, name);
    if (loaded === null) throw unknownIndex(name);
    const info = infoOf(name, ns, loaded.location, loaded.doc);
    if (info === null) throw notManaged(name);
    return info;
  }

  /** Creates the index (and the tenant's namespace when needed); SIGLAKE_INDEX_EXISTS when the tenant has it. */
  async create(tenant: string, spec: IndexSpec): Promise<IndexInfo> {
    const ns = namespaceOf(checkTenant(tenant));
    checkName(spec.name);
    // One at a time per namespace: the checks below (the name, its twin in another case, the
    // tenant's count) and the catalog insert are not one transaction, so creates at once all passed
    // them: six PUTs of new names at once against a limit of 3 made six indexes, and `Pay` and
    // `pay` at once made both (two tables no query could tell apart).
    const before = this.#creating.get(ns) ?? Promise.resolve();
    const run = before.then(() => this.#create(ns, spec));
    const done = run.then(
      () => undefined,
      () => undefined,
    );
    this.#creating.set(ns, done);
    void done.then(() => {
      if (this.#creating.get(ns) === done) this.#creating.delete(ns);
    });
    return run;
  }

  async #create(ns: string, spec: IndexSpec): Promise<IndexInfo> {
    if ((await this.#catalog.metadataLocation(ns, spec.name)) !== null) throw exists(spec.name);
    // SQL names are compared without case: `Payments` beside `payments` would be two tables
    // that no query could tell apart (the query engine's views of a namespace would collide).
    const lower = spec.name.toLowerCase();
    const tables = await this.#catalog.tables(ns);
    const twin = tables.find((t) => t.toLowerCase() === lower);
    if (twin !== undefined) throw existsAs(spec.name, twin);
    const indexes = tables.filter((t) => t !== 'logs' && t !== 'traces').length;
    if (indexes >= this.#maxPerTenant) {
      throw new IndexError('SIGLAKE_INDEX_LIMIT', `the tenant has ${indexes} indexes, the most query.maxIndexesPerTenant (${this.#maxPerTenant}) allows: delete one first`);
    }
    const now = this.#now();
    const location = this.#storage.locationOf(ns, spec.name);
    const doc = docOf(TableMetadata.create(location, TableSchema.LOGS, now));
    const props = doc['properties'] as JsonObject;
    props[PROP_INDEX] = 'true';
    applySpec(doc, spec, []);
    const metadataLocation = `${location}/metadata/${TableMetadata.nextFileName(null)}`;
    await this.#storage.putNew(metadataLocation, Buffer.from(LosslessJson.stringify(doc), 'utf8'));
    this.#afterCreateMetadata();
    await this.#catalog.ensureNamespace(ns);
    if (!(await this.#catalog.createTable(ns, spec.name, metadataLocation))) {
      await this.#storage.delete(metadataLocation).catch(() => undefined);
      throw exists(spec.name);
    }
    return infoOf(spec.name, ns, metadataLocation, doc)!;
  }

  /**
   * Replaces the definition of an existing index (schema evolution: add
   * only). A definition equal to the one in force commits nothing
   * (`changed` false): a reconciler that applies its indexes again and again
   * added a metadata file (and rebuilt the tenant's query context) each time.
   */
  async update(tenant: string, spec: IndexSpec): Promise<IndexInfo & { readonly changed: boolean }> {
    const ns = namespaceOf(checkTenant(tenant));
    checkName(spec.name);
    for (let attempt = 1; attempt <= this.#maxAttempts; attempt++) {
      const loaded = await this.#load(ns, spec.name);
      if (loaded === null) throw unknownIndex(spec.name);
      const before = infoOf(spec.name, ns, loaded.location, loaded.doc);
      if (before === null) throw notManaged(spec.name);
      const doc = LosslessJson.parse(LosslessJson.stringify(loaded.doc)) as JsonObject;
      (doc['properties'] as JsonObject)[PROP_INDEX] = 'true';
      applySpec(doc, spec, before.mapping);
      if (LosslessJson.stringify(doc) === LosslessJson.stringify(loaded.doc)) return { ...before, changed: false };
      const next = await this.#commit(ns, spec.name, loaded.location, loaded.doc, doc);
      if (next !== null) return { ...infoOf(spec.name, ns, next, doc)!, changed: true };
      await backoff(attempt);
    }
    throw new IcebergError('SIGLAKE_ICEBERG_COMMIT_RETRIES', `${ns}.${spec.name}: index update still conflicting after ${this.#maxAttempts} attempts`);
  }

  /** Creates or updates (the index API's PUT). */
  async put(tenant: string, spec: IndexSpec): Promise<{ created: boolean; changed: boolean; info: IndexInfo }> {
    for (let attempt = 1; ; attempt++) {
      try {
        const info = await this.update(tenant, spec);
        return { created: false, changed: info.changed, info };
      } catch (e) {
        if (!(e instanceof IndexError) || e.code !== 'SIGLAKE_UNKNOWN_INDEX') throw e;
      }
      try {
        return { created: true, changed: true, info: await this.create(tenant, spec) };
      } catch (e) {
        // Created by someone else between the two: update it. Only that: an index of the same
        // name in another case is the 409 it is (looping on it held the query server's only
        // thread for good, every tenant's queries with it), and a race lost over and over ends.
        if (!(e instanceof IndexError) || e.code !== 'SIGLAKE_INDEX_EXISTS' || isTwinError(e) || attempt >= this.#maxAttempts) throw e;
        await backoff(attempt);
      }
    }
  }

  /**
   * Drops the index from the catalog (compare-and-set on its current
   * metadata file). Its files stay in the warehouse: readers holding the
   * old metadata keep working; docs/indexes.md says how to remove them.
   */
  async delete(tenant: string, name: string): Promise<void> {
    const ns = namespaceOf(checkTenant(tenant));
    checkName(name);
    for (let attempt = 1; attempt <= this.#maxAttempts; attempt++) {
      const loaded = await this.#load(ns, name);
      if (loaded === null) throw unknownIndex(name);
      if (infoOf(name, ns, loaded.location, loaded.doc) === null) throw notManaged(name);
      const n = await this.#catalog.driver.run(
        'DELETE FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3 AND metadata_location = $4',
        [this.#catalog.catalogName, ns, name, loaded.location],
      );
      if (n === 1) {
        // After the row is gone (a kill in between leaves the index deleted, without the mark): the
        // compactor drops what the WAL still holds for the index from before this time, rather than
        // making the table again (compactor.ts, "deleted indexes").
        await this.#catalog.setNamespaceProperty(ns, deletedIndexProperty(name), String(this.#now()));
        return;
      }
      await backoff(attempt);
    }
    throw new IcebergError('SIGLAKE_ICEBERG_COMMIT_RETRIES', `${ns}.${name}: index delete still conflicting after ${this.#maxAttempts} attempts`);
  }

  async #load(ns: string, table: string): Promise<{ location: string; doc: JsonObject } | null> {
    const location = await this.#catalog.metadataLocation(ns, table);
    if (location === null) return null;
    const text = Buffer.from(await this.#storage.get(location)).toString('utf8');
    TableMetadata.parse(text, location); // the same checks every writer applies
    return { location, doc: LosslessJson.parse(text) as JsonObject };
  }

  /** Writes `doc` as the next metadata file and swaps it in; null when another writer won. */
  async #commit(ns: string, table: string, currentLocation: string, current: JsonObject, doc: JsonObject): Promise<string | null> {
    // Never before the last commit's time (a host whose clock is behind: commitTimeMs).
    const now = commitTimeMs(current, this.#now());
    doc['last-updated-ms'] = now;
    const log = [...((doc['metadata-log'] as JsonValue[] | undefined) ?? []), { 'timestamp-ms': Number(current['last-updated-ms'] ?? 0), 'metadata-file': currentLocation }];
    doc['metadata-log'] = log.slice(Math.max(0, log.length - METADATA_LOG_MAX));
    const location = String(doc['location']);
    const next = `${location}/metadata/${TableMetadata.nextFileName(currentLocation)}`;
    await this.#storage.putNew(next, Buffer.from(LosslessJson.stringify(doc), 'utf8'));
    if (await this.#catalog.swapMetadataLocation(ns, table, currentLocation, next)) return next;
    await this.#storage.delete(next).catch(() => undefined);
    return null;
  }
}

/** The metadata document of a TableMetadata, as a mutable JSON tree. */
function docOf(m: TableMetadata): JsonObject {
  return LosslessJson.parse(m.toJson()) as JsonObject;
}

function currentSchema(doc: JsonObject): JsonObject {
  const schemas = (doc['schemas'] as JsonObject[] | undefined) ?? [];
  const cur = schemas.find((s) => Number(s['schema-id']) === Number(doc['current-schema-id']));
  if (cur === undefined) throw new IcebergError('SIGLAKE_ICEBERG_METADATA', `table at ${String(doc['location'])}: no current schema`);
  return cur;
}

/**
 * Applies a definition to a metadata document: retention and mapping
 * properties, and a new current schema when the set of mapped columns
 * changes. `before` is the mapping the table holds now (with ids).
 */
function applySpec(doc: JsonObject, spec: IndexSpec, before: readonly MappedColumn[]): void {
  const props = doc['properties'] as JsonObject;
  props[PROP_RETENTION_DAYS] = String(spec.retentionDays);
  const beforeByName = new Map(before.map((c) => [c.column.toLowerCase(), c]));
  const schema = currentSchema(doc);
  const fields = (schema['fields'] as JsonObject[]).slice();
  const fieldNames = new Set(fields.map((f) => String(f['name']).toLowerCase()));
  let lastId = Number(doc['last-column-id'] ?? 0);
  const mapping: MappedColumn[] = [];
  const added: JsonObject[] = [];
  for (const m of spec.mapping) {
    const old = beforeByName.get(m.column.toLowerCase());
    if (old !== undefined) {
      if (old.column !== m.column || old.type !== m.type || old.from !== m.from) {
        throw new IndexError(
          'SIGLAKE_INDEX_MAPPING_CONFLICT',
          `mapped column "${old.column}" is ${old.type} from ${old.from}; a column is never renamed, retyped or re-sourced: map to a new column name`,
        );
      }
      mapping.push(old);
      continue;
    }
    if (fieldNames.has(m.column.toLowerCase())) {
      throw new IndexError('SIGLAKE_INDEX_MAPPING_CONFLICT', `column "${m.column}" already exists in the table`);
    }
    const id = ++lastId;
    mapping.push({ ...m, id });
    added.push({ id, name: m.column, required: false, type: icebergTypeOf(m.type), doc: `${m.type} from ${m.from} (siglake index mapping)` });
  }
  const keep = new Set(mapping.map((c) => c.id));
  const removed = before.filter((c) => !keep.has(c.id)).map((c) => c.id);
  props[PROP_MAPPING] = JSON.stringify(mapping.map((c) => ({ column: c.column, from: c.from, type: c.type, id: c.id })));
  if (added.length === 0 && removed.length === 0) return;
  const gone = new Set(removed);
  const nextFields = [...fields.filter((f) => !gone.has(Number(f['id']))), ...added];
  const schemas = (doc['schemas'] as JsonObject[]).slice();
  const schemaId = Math.max(...schemas.map((s) => Number(s['schema-id']))) + 1;
  schemas.push({ ...schema, 'schema-id': schemaId, fields: nextFields });
  doc['schemas'] = schemas;
  doc['current-schema-id'] = schemaId;
  doc['last-column-id'] = lastId;
}

/** The index a table's metadata describes; null when the table is not a Siglake log table. */
function infoOf(name: string, namespace: string, metadataLocation: string, doc: JsonObject): IndexInfo | null {
  const props = (doc['properties'] as JsonObject | undefined) ?? {};
  if (props[PROP_KIND] !== 'logs') return null;
  return {
    name,
    namespace,
    retentionDays: Number(props[PROP_RETENTION_DAYS] ?? 0) || 0,
    mapping: mappingOf(props),
    registered: props[PROP_INDEX] === 'true',
    metadataLocation,
  };
}

/** The mapped columns a table's properties record (empty when none, or unreadable). */
export function mappingOf(props: Readonly<Record<string, JsonValue>>): MappedColumn[] {
  const raw = props[PROP_MAPPING];
  if (typeof raw !== 'string') return [];
  try {
    const list = JSON.parse(raw) as unknown;
    if (!Array.isArray(list)) return [];
    return list.filter(
      (c): c is MappedColumn =>
        c !== null &&
        typeof c === 'object' &&
        typeof c.column === 'string' &&
        typeof c.from === 'string' &&
        (MAPPED_TYPES as readonly string[]).includes(c.type as MappedType) &&
        Number.isInteger(c.id),
    );
  } catch {
    return [];
  }
}

function checkTenant(tenant: string): string {
  if (!isValidIdentifier(tenant)) throw new IndexError('SIGLAKE_BAD_INDEX', 'tenant is not a valid tenant identifier (1-128 of A-Z a-z 0-9 _ -, not a reserved name)');
  return tenant;
}

function checkName(name: string): void {
  if (!isValidIndexName(name)) throw unknownIndex(name);
}

/** The refusal of an index the tenant does not have (also of one outside its declared subset: http-handlers.ts). */
export function unknownIndex(name: string): IndexError {
  return new IndexError('SIGLAKE_UNKNOWN_INDEX', `no index "${safeName(name)}" in this tenant`);
}

function exists(name: string): IndexError {
  return new IndexError('SIGLAKE_INDEX_EXISTS', `index "${name}" exists already (update it instead)`);
}

const twinError = Symbol('siglake.indexTwin');

function existsAs(name: string, twin: string): IndexError {
  const e = new IndexError('SIGLAKE_INDEX_EXISTS', `index "${name}" exists already as "${twin}" (names are compared without case, as SQL does)`);
  (e as IndexError & { [twinError]?: true })[twinError] = true;
  return e;
}

/** The 409 of a name whose twin in another case exists: not a race, nothing to retry. */
function isTwinError(e: IndexError): boolean {
  return (e as IndexError & { [twinError]?: true })[twinError] === true;
}

function notManaged(name: string): IndexError {
  return new IndexError('SIGLAKE_INDEX_NOT_MANAGED', `table "${name}" is not a Siglake log index`);
}

/** A name as a message may quote it: printable ASCII, bounded. */
function safeName(name: string): string {
  const s = name.slice(0, 128).replace(/[^\x20-\x7e]/g, '?');
  return s.replace(/"/g, "'");
}

async function backoff(attempt: number): Promise<void> {
  await new Promise((r) => setTimeout(r, Math.min(1000, 5 * 2 ** Math.min(attempt, 8)) * (0.5 + Math.random())));
}
