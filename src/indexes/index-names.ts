// The index names in the catalog without the registry's metadata reads: one
// query over iceberg_tables. Kept apart from registry.ts so that the ingester's
// IngestIndexSet can read them without loading the registry.

import type { SqlCatalog } from '../iceberg/sql-catalog.js';

/** The tables every namespace has that are not indexes. */
export const BASE_TABLES: ReadonlySet<string> = new Set(['logs', 'traces']);

/** Every index of every namespace: `namespace` → index names (one catalog query). */
export async function indexNamesByNamespace(catalog: SqlCatalog): Promise<Map<string, Set<string>>> {
  await catalog.ready();
  const rows = await catalog.driver.all('SELECT table_namespace AS ns, table_name AS t FROM iceberg_tables WHERE catalog_name = $1', [
    catalog.catalogName,
  ]);
  const out = new Map<string, Set<string>>();
  for (const r of rows) {
    const t = String(r['t']);
    if (BASE_TABLES.has(t)) continue;
    const ns = String(r['ns']);
    let s = out.get(ns);
    if (s === undefined) out.set(ns, (s = new Set()));
    s.add(t);
  }
  return out;
}

/**
 * The namespace property an index's delete leaves: Unix ms of the delete
 * (the last one, when deleted more than once). WAL records of the index
 * written (ingest time) at or before it are dropped by the compactor, and all
 * of them while no table of that name exists.
 */
export function deletedIndexProperty(name: string): string {
  return `siglake.index.deleted.${name}`;
}
