// Schema migration (contract §8, docs/iceberg.md "Migration"): tables carry
// their base-schema version in the property `siglake.schema-version` (absent:
// 1). `siglake migrate` adds the base columns a table lacks (same ids in every
// table, below 100, so they never meet mapped columns) as a new Iceberg schema
// and sets the version, in one compare-and-set commit per table, retried on a
// conflict with the compactor or another migrate: idempotent and safe while
// ingest runs. Until then the compactor writes the table with the columns it
// has (behindSchemaOf) and counts siglake_compactor_schema_behind_total.

import { LosslessJson, type JsonValue } from '../iceberg/lossless-json.js';
import type { SqlCatalog } from '../iceberg/sql-catalog.js';
import type { ObjectStorage } from '../iceberg/storage.js';
import { TableAppender } from '../iceberg/table-appender.js';
import { TableMetadata } from '../iceberg/table-metadata.js';
import { SCHEMA_VERSION, TableSchema } from '../iceberg/table-schema.js';

type JsonObject = { [key: string]: JsonValue };

export const PROP_SCHEMA_VERSION = 'siglake.schema-version';

export interface TableMigration {
  readonly namespace: string;
  readonly table: string;
  readonly from: number;
  readonly to: number;
  readonly added: readonly string[];
  /** 'migrated', 'would-migrate' (dry run), or why the table was left alone ('failed': it could not be read or committed; from and to are 0 when unknown). */
  readonly outcome: 'migrated' | 'would-migrate' | 'current' | 'refused' | 'failed';
  readonly reason?: string;
}

function docOf(m: TableMetadata): JsonObject {
  return LosslessJson.parse(m.toJson()) as JsonObject;
}

function currentFields(doc: JsonObject): JsonObject[] {
  const schemas = (doc['schemas'] as JsonObject[] | undefined) ?? [];
  const cur = schemas.find((s) => Number(s['schema-id']) === Number(doc['current-schema-id']));
  return (cur?.['fields'] as JsonObject[] | undefined) ?? [];
}

/** The top-level fields of every schema the table has had. */
function everyField(doc: JsonObject): JsonObject[] {
  return ((doc['schemas'] as JsonObject[] | undefined) ?? []).flatMap((s) => (s['fields'] as JsonObject[] | undefined) ?? []);
}

/**
 * The base schema restricted to the columns the table has, when it lacks some
 * (an unmigrated table); null when the table has them all.
 */
export function behindSchemaOf(metadata: TableMetadata, base: TableSchema): TableSchema | null {
  const doc = docOf(metadata);
  const ids = new Set(currentFields(doc).map((f) => Number(f['id'])));
  if (base.columns.every((c) => ids.has(c.id))) return null;
  return base.restrictTo(ids, Number(doc['current-schema-id'] ?? 0));
}

export class Migrator {
  readonly #catalog: SqlCatalog;
  readonly #storage: ObjectStorage;
  readonly #appender: TableAppender;

  constructor(o: { catalog: SqlCatalog; storage: ObjectStorage }) {
    this.#catalog = o.catalog;
    this.#storage = o.storage;
    this.#appender = new TableAppender({ catalog: o.catalog, storage: o.storage });
  }

  /** The namespaces a run covers: `main`, plus every `tenant_*` with allNamespaces. */
  async namespaces(allNamespaces: boolean): Promise<string[]> {
    const all = await this.#catalog.namespaces();
    return all.filter((ns) => ns === 'main' || (allNamespaces && ns.startsWith('tenant_')));
  }

  async run(opts: { allNamespaces: boolean; dryRun: boolean; onTable?: (t: TableMigration) => void }): Promise<TableMigration[]> {
    const out: TableMigration[] = [];
    for (const ns of await this.namespaces(opts.allNamespaces)) {
      for (const table of await this.#catalog.tables(ns)) {
        // One table that cannot be read or committed is reported and the run goes on: before stop
        // 47 it ended the run with a message naming no table, and every table after it was never
        // migrated, run after run.
        let r: TableMigration | null;
        try {
          r = await this.table(ns, table, opts.dryRun);
        } catch (e) {
          r = { namespace: ns, table, from: 0, to: 0, added: [], outcome: 'failed', reason: (e as Error).message };
        }
        if (r === null) continue;
        out.push(r);
        opts.onTable?.(r);
      }
    }
    return out;
  }

  /** Migrates one table (null: not a Siglake table). */
  async table(ns: string, table: string, dryRun: boolean): Promise<TableMigration | null> {
    for (let attempt = 1; attempt <= 50; attempt++) {
      const cur = await this.#appender.load(ns, table);
      if (cur === null) return null;
      const doc = docOf(cur.metadata);
      const props = (doc['properties'] as JsonObject | undefined) ?? {};
      const kind = props['siglake.table-kind'];
      if (kind !== 'logs' && kind !== 'traces') return null;
      const base = kind === 'logs' ? TableSchema.LOGS : TableSchema.TRACES;
      const from = Number(props[PROP_SCHEMA_VERSION] ?? 1) || 1;
      const fields = currentFields(doc);
      const ids = new Set(fields.map((f) => Number(f['id'])));
      const names = new Set(fields.map((f) => String(f['name']).toLowerCase()));
      const missing = base.columns.filter((c) => !ids.has(c.id));
      if (from >= SCHEMA_VERSION && missing.length === 0) return { namespace: ns, table, from, to: from, added: [], outcome: 'current' };
      const clash = missing.find((c) => names.has(c.name.toLowerCase()));
      if (clash !== undefined) {
        return { namespace: ns, table, from, to: from, added: [], outcome: 'refused', reason: `the table has a column named ${clash.name} with another id; rename it first` };
      }
      // A field id is never reused (Iceberg): one that an earlier schema had was dropped, and its
      // old files still hold its values, which adding it back would bring back.
      const dropped = missing.find((c) => everyField(doc).some((f) => Number(f['id']) === c.id));
      if (dropped !== undefined) {
        return {
          namespace: ns,
          table,
          from,
          to: from,
          added: [],
          outcome: 'refused',
          reason: `column ${dropped.name} (id ${dropped.id}) was dropped from this table by another engine; Siglake writes it under that id and cannot add it back`,
        };
      }
      const added = missing.map((c) => c.name);
      if (dryRun) return { namespace: ns, table, from, to: SCHEMA_VERSION, added, outcome: 'would-migrate' };
      if (missing.length > 0) {
        const full = base.icebergSchema()['fields'] as JsonObject[];
        const newFields = [...fields, ...full.filter((f) => missing.some((c) => c.id === Number(f['id'])))];
        const schemas = (doc['schemas'] as JsonObject[]).slice();
        const schemaId = Math.max(...schemas.map((s) => Number(s['schema-id']))) + 1;
        // The current schema with the columns added: its other keys (identifier-field-ids) stay.
        const cur = schemas.find((s) => Number(s['schema-id']) === Number(doc['current-schema-id'])) ?? {};
        schemas.push({ ...cur, type: 'struct', 'schema-id': schemaId, fields: newFields });
        doc['schemas'] = schemas;
        doc['current-schema-id'] = schemaId;
        doc['last-column-id'] = Math.max(Number(doc['last-column-id'] ?? 0), ...missing.map((c) => c.id));
      }
      doc['properties'] = { ...props, [PROP_SCHEMA_VERSION]: String(SCHEMA_VERSION) };
      // Never before the last commit's time (a host whose clock is behind: commitTimeMs).
      const now = cur.metadata.commitFloorMs(Date.now());
      doc['last-updated-ms'] = now;
      const log = [...((doc['metadata-log'] as JsonValue[] | undefined) ?? []), { 'timestamp-ms': cur.metadata.lastUpdatedMs, 'metadata-file': cur.metadataLocation }];
      doc['metadata-log'] = log.slice(Math.max(0, log.length - 100));
      const next = `${cur.metadata.location}/metadata/${TableMetadata.nextFileName(cur.metadataLocation)}`;
      await this.#storage.putNew(next, Buffer.from(LosslessJson.stringify(doc), 'utf8'));
      if (await this.#catalog.swapMetadataLocation(ns, table, cur.metadataLocation, next)) {
        return { namespace: ns, table, from, to: SCHEMA_VERSION, added, outcome: 'migrated' };
      }
      await this.#storage.delete(next).catch(() => undefined);
      await new Promise((r) => setTimeout(r, Math.min(1000, 5 * 2 ** Math.min(attempt, 8)) * (0.5 + Math.random())));
    }
    throw new Error(`${ns}.${table}: migration still conflicting after 50 attempts`);
  }
}
