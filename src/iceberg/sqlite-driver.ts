// The embedded catalog database: SQLite through better-sqlite3, in WAL mode
// with a busy timeout so that two processes (an ingester's compactor and a
// `siglake compact`, or a reader such as pyiceberg) can share the file.
// better-sqlite3 is synchronous; the compactor runs off the acceptor thread,
// so a wait on the file lock never stalls ingest.

import { makeDirsSync } from '../make-dirs.js';
import { dirname, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { IcebergError } from './iceberg-error.js';
import type { SqlDriver } from './sql-driver.js';

const BUSY_TIMEOUT_MS = 15_000;

export class SqliteDriver implements SqlDriver {
  readonly kind = 'sqlite' as const;
  readonly path: string;
  #db: Database.Database | null = null;
  readonly #cache = new Map<string, { stmt: Database.Statement; order: number[] }>();

  /** Nothing is opened (or created) until the first statement. */
  constructor(path: string) {
    this.path = resolve(path);
  }

  #open(): Database.Database {
    if (this.#db !== null) return this.#db;
    try {
      makeDirsSync(dirname(this.path));
      const db = new Database(this.path);
      db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = FULL');
      this.#db = db;
      return db;
    } catch (e) {
      throw new IcebergError('SIGLAKE_ICEBERG_CATALOG', `cannot open SQLite catalog ${this.path}: ${(e as Error).message}`, { cause: e });
    }
  }

  async run(sql: string, params: readonly unknown[] = []): Promise<number> {
    const { stmt, order } = this.#prepare(sql);
    return this.#guard(sql, () => stmt.run(...order.map((i) => params[i])).changes);
  }

  async all(sql: string, params: readonly unknown[] = []): Promise<Record<string, unknown>[]> {
    const { stmt, order } = this.#prepare(sql);
    return this.#guard(sql, () => stmt.all(...order.map((i) => params[i])) as Record<string, unknown>[]);
  }

  async hasColumn(table: string, column: string): Promise<boolean> {
    const rows = this.#open().prepare(`PRAGMA table_info(${table})`).all() as { name: string }[];
    return rows.some((r) => r.name === column);
  }

  async close(): Promise<void> {
    this.#cache.clear();
    this.#db?.close();
    this.#db = null;
  }

  #prepare(sql: string): { stmt: Database.Statement; order: number[] } {
    let p = this.#cache.get(sql);
    if (p === undefined) {
      const order: number[] = [];
      const text = sql.replace(/\$(\d+)/g, (_m, n: string) => {
        order.push(Number(n) - 1);
        return '?';
      });
      p = { stmt: this.#guard(sql, () => this.#open().prepare(text)), order };
      this.#cache.set(sql, p);
    }
    return p;
  }

  #guard<T>(sql: string, f: () => T): T {
    try {
      return f();
    } catch (e) {
      throw new IcebergError('SIGLAKE_ICEBERG_CATALOG', `SQLite catalog: ${(e as Error).message} (in: ${sql.split('\n')[0]})`, { cause: e });
    }
  }
}
