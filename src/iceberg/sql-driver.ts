// The little a SQL catalog needs from a database: run a statement and get the
// number of rows it changed, or run a query and get its rows. Statements are
// written with PostgreSQL's `$1, $2, …` placeholders; the SQLite driver
// rewrites them.

export interface SqlDriver {
  readonly kind: 'sqlite' | 'postgres';
  /** Runs a statement; resolves with the number of rows it changed. */
  run(sql: string, params?: readonly unknown[]): Promise<number>;
  /** Runs a query; resolves with its rows. */
  all(sql: string, params?: readonly unknown[]): Promise<Record<string, unknown>[]>;
  /** Whether a table has a column (for the optional `iceberg_type` of the JDBC catalog's V1 schema). */
  hasColumn(table: string, column: string): Promise<boolean>;
  close(): Promise<void>;
}
