// The Iceberg SQL catalog: the two tables that Iceberg Java's JdbcCatalog and
// pyiceberg's SqlCatalog share, so that either (and Trino, Spark, DuckDB
// through them) opens what Siglake writes.
//
//   iceberg_tables(catalog_name, table_namespace, table_name,
//                  metadata_location, previous_metadata_location)
//   iceberg_namespace_properties(catalog_name, namespace, property_key, property_value)
//
// A namespace exists when it has a property row; Siglake writes the minimal
// `exists = true` one, as both implementations do. A table's current metadata
// file is its row's metadata_location; a commit is a compare-and-swap of that
// column. When the JDBC catalog's V1 schema is in use (an `iceberg_type`
// column, added by Iceberg Java with jdbc.schema-version=V1), rows are written
// as TABLE and commits only match tables.

import { existsSync } from 'node:fs';
import { IcebergError } from './iceberg-error.js';
import { PostgresDriver } from './postgres-driver.js';
import type { SqlDriver } from './sql-driver.js';
import { SqliteDriver } from './sqlite-driver.js';

const CREATE_TABLES = `CREATE TABLE IF NOT EXISTS iceberg_tables (
  catalog_name VARCHAR(255) NOT NULL,
  table_namespace VARCHAR(255) NOT NULL,
  table_name VARCHAR(255) NOT NULL,
  metadata_location VARCHAR(1000),
  previous_metadata_location VARCHAR(1000),
  PRIMARY KEY (catalog_name, table_namespace, table_name)
)`;

const CREATE_NAMESPACE_PROPERTIES = `CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
  catalog_name VARCHAR(255) NOT NULL,
  namespace VARCHAR(255) NOT NULL,
  property_key VARCHAR(255) NOT NULL,
  property_value VARCHAR(1000),
  PRIMARY KEY (catalog_name, namespace, property_key)
)`;

/**
 * For a command that only reads or changes what a catalog holds (`index
 * list`, `migrate`): the message when `url` is an SQLite catalog whose file
 * does not exist, else null. Opening it would make an empty catalog there
 * and answer "nothing" from it: in the wrong directory, a wrong answer.
 */
export function missingSqliteCatalog(url: string): string | null {
  if (!url.startsWith('sqlite:')) return null;
  const path = url.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
  return existsSync(path) ? null : `catalog.url ${url}: no catalog there (nothing is made by this command; check the working directory or --catalog-url)`;
}

export class SqlCatalog {
  readonly catalogName: string;
  readonly driver: SqlDriver;
  #v1 = false;
  #ready: Promise<void> | null = null;

  constructor(driver: SqlDriver, catalogName: string) {
    this.driver = driver;
    this.catalogName = catalogName;
  }

  /** `sqlite:<path>` (relative to the working directory) or `postgres://…`. */
  static open(url: string, catalogName: string): SqlCatalog {
    if (url.startsWith('sqlite:')) {
      const path = url.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
      return new SqlCatalog(new SqliteDriver(path), catalogName);
    }
    if (url.startsWith('postgres://') || url.startsWith('postgresql://')) return new SqlCatalog(new PostgresDriver(url), catalogName);
    throw new IcebergError('SIGLAKE_ICEBERG_ARGUMENT', 'catalog URL must be sqlite:<path> or postgres://…');
  }

  /** Creates the catalog tables when missing. Idempotent; run by every method first. */
  ready(): Promise<void> {
    this.#ready ??= this.#init().catch((e: unknown) => {
      this.#ready = null;
      throw e;
    });
    return this.#ready;
  }

  async #init(): Promise<void> {
    for (const sql of [CREATE_TABLES, CREATE_NAMESPACE_PROPERTIES]) {
      try {
        await this.driver.run(sql);
      } catch (e) {
        // Two processes creating the tables at once on PostgreSQL: the loser sees a duplicate; the table is there.
        if (!/duplicate key|already exists|\(23505\)|\(42P07\)/.test((e as Error).message)) throw e;
      }
    }
    this.#v1 = await this.driver.hasColumn('iceberg_tables', 'iceberg_type');
  }

  async namespaceExists(namespace: string): Promise<boolean> {
    await this.ready();
    const rows = await this.driver.all(
      'SELECT 1 AS x FROM iceberg_namespace_properties WHERE catalog_name = $1 AND namespace = $2 LIMIT 1',
      [this.catalogName, namespace],
    );
    if (rows.length > 0) return true;
    const tables = await this.driver.all('SELECT 1 AS x FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2 LIMIT 1', [
      this.catalogName,
      namespace,
    ]);
    return tables.length > 0;
  }

  /** Creates the namespace unless it exists (by its `exists = true` property row). */
  async ensureNamespace(namespace: string): Promise<void> {
    await this.ready();
    await this.driver.run(
      `INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value)
       VALUES ($1, $2, 'exists', 'true') ON CONFLICT DO NOTHING`,
      [this.catalogName, namespace],
    );
  }

  /** Sets one namespace property (the namespace exists from then on). */
  async setNamespaceProperty(namespace: string, key: string, value: string): Promise<void> {
    await this.ready();
    await this.driver.run(
      `INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value)
       VALUES ($1, $2, $3, $4) ON CONFLICT (catalog_name, namespace, property_key) DO UPDATE SET property_value = excluded.property_value`,
      [this.catalogName, namespace, key, value],
    );
  }

  /** One namespace property, or null when it is not set. */
  async namespaceProperty(namespace: string, key: string): Promise<string | null> {
    await this.ready();
    const rows = await this.driver.all(
      'SELECT property_value AS v FROM iceberg_namespace_properties WHERE catalog_name = $1 AND namespace = $2 AND property_key = $3',
      [this.catalogName, namespace, key],
    );
    return rows.length === 0 || rows[0]!['v'] === null ? null : String(rows[0]!['v']);
  }

  async namespaces(): Promise<string[]> {
    await this.ready();
    const rows = await this.driver.all(
      `SELECT namespace AS ns FROM iceberg_namespace_properties WHERE catalog_name = $1
       UNION SELECT table_namespace AS ns FROM iceberg_tables WHERE catalog_name = $1 ORDER BY 1`,
      [this.catalogName],
    );
    return rows.map((r) => String(r['ns']));
  }

  async tables(namespace: string): Promise<string[]> {
    await this.ready();
    const rows = await this.driver.all(
      `SELECT table_name FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2${this.#typeFilter()} ORDER BY table_name`,
      [this.catalogName, namespace],
    );
    return rows.map((r) => String(r['table_name']));
  }

  /**
   * Every table of the namespace with its current metadata file, in one
   * statement (by name): what a query server compares on each request.
   */
  async tableLocations(namespace: string): Promise<{ name: string; metadataLocation: string }[]> {
    await this.ready();
    const rows = await this.driver.all(
      `SELECT table_name, metadata_location FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2${this.#typeFilter()} ORDER BY table_name`,
      [this.catalogName, namespace],
    );
    return rows.map((r) => {
      const name = String(r['table_name']);
      const loc = r['metadata_location'];
      if (typeof loc !== 'string' || loc === '') {
        throw new IcebergError('SIGLAKE_ICEBERG_CATALOG', `${namespace}.${name} has no metadata_location`);
      }
      return { name, metadataLocation: loc };
    });
  }

  /** The table's current metadata file, or null when the table does not exist. */
  async metadataLocation(namespace: string, table: string): Promise<string | null> {
    await this.ready();
    const rows = await this.driver.all(
      `SELECT metadata_location FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3${this.#typeFilter()}`,
      [this.catalogName, namespace, table],
    );
    if (rows.length === 0) return null;
    const loc = rows[0]!['metadata_location'];
    if (typeof loc !== 'string' || loc === '') {
      throw new IcebergError('SIGLAKE_ICEBERG_CATALOG', `${namespace}.${table} has no metadata_location`);
    }
    return loc;
  }

  /** Registers a new table at its first metadata file; false when a table of that name exists already. */
  async createTable(namespace: string, table: string, metadataLocation: string): Promise<boolean> {
    await this.ready();
    const sql = this.#v1
      ? `INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location, iceberg_type)
         VALUES ($1, $2, $3, $4, NULL, 'TABLE') ON CONFLICT DO NOTHING`
      : `INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location)
         VALUES ($1, $2, $3, $4, NULL) ON CONFLICT DO NOTHING`;
    return (await this.driver.run(sql, [this.catalogName, namespace, table, metadataLocation])) === 1;
  }

  /**
   * The commit: points the table at `next` if and only if it still points at
   * `expected`. False when another writer committed first.
   */
  async swapMetadataLocation(namespace: string, table: string, expected: string, next: string): Promise<boolean> {
    await this.ready();
    const n = await this.driver.run(
      `UPDATE iceberg_tables SET metadata_location = $1, previous_metadata_location = $2
       WHERE catalog_name = $3 AND table_namespace = $4 AND table_name = $5 AND metadata_location = $2${this.#typeFilter()}`,
      [next, expected, this.catalogName, namespace, table],
    );
    return n === 1;
  }

  async close(): Promise<void> {
    await this.driver.close();
  }

  #typeFilter(): string {
    return this.#v1 ? " AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)" : '';
  }
}
