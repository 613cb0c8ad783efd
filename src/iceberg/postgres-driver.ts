// A shared catalog on PostgreSQL (node-postgres pool). The commit's
// compare-and-swap is one UPDATE … WHERE metadata_location = $expected, which
// PostgreSQL makes atomic under its default isolation: of two writers racing
// from the same expected location, exactly one sees a changed row.

import pg from 'pg';
import { IcebergError } from './iceberg-error.js';
import type { SqlDriver } from './sql-driver.js';

export class PostgresDriver implements SqlDriver {
  readonly kind = 'postgres' as const;
  readonly #pool: pg.Pool;

  constructor(url: string) {
    this.#pool = new pg.Pool({ connectionString: url, max: 2, connectionTimeoutMillis: 10_000 });
    // An idle client's error (the server went away) must not crash the process; the next query reports it.
    this.#pool.on('error', () => undefined);
  }

  async run(sql: string, params: readonly unknown[] = []): Promise<number> {
    const r = await this.#query(sql, params);
    return r.rowCount ?? 0;
  }

  async all(sql: string, params: readonly unknown[] = []): Promise<Record<string, unknown>[]> {
    return (await this.#query(sql, params)).rows as Record<string, unknown>[];
  }

  async hasColumn(table: string, column: string): Promise<boolean> {
    const rows = await this.all(
      'SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2',
      [table, column],
    );
    return rows.length > 0;
  }

  async close(): Promise<void> {
    await this.#pool.end();
  }

  async #query(sql: string, params: readonly unknown[]): Promise<pg.QueryResult> {
    try {
      return await this.#pool.query(sql, params as unknown[]);
    } catch (e) {
      const code = (e as { code?: string }).code;
      const err = new IcebergError('SIGLAKE_ICEBERG_CATALOG', `PostgreSQL catalog: ${(e as Error).message}${code ? ` (${code})` : ''}`, { cause: e });
      throw err;
    }
  }
}
