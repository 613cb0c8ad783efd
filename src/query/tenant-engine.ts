// One tenant context: an embedded DuckDB instance that sees exactly one
// tenant's tables at one set of snapshots, and nothing else.
//
// Built only after the tenant passed authentication and routing. Each table
// is a view by its bare name over read_parquet of its live data files. Then
// the engine's own controls close every way out, in this order:
//   allowed_paths = exactly those data files (the only files it may open)
//   enable_external_access = false (no other file, URL, ATTACH, COPY TO,
//                                   extension install or load)
//   lock_configuration = true (no SET/RESET/PRAGMA can undo the above)
// Extensions are never auto-installed or auto-loaded. Statement types are
// checked separately (statement-guard.ts). A commit makes a new context; the
// old one is closed when its last query ends (engine-pool.ts).
//
// A connection serves one query at a time (borrowed, given back). It keeps
// the statements it prepared, by their text: the context never changes (same
// views over the same files, configuration locked), so a statement prepared
// and vetted once is executed again as it is, without parsing, binding and
// planning it again. A connection whose query failed, was interrupted or cut
// at maxRows is closed with its statements.

import { DuckDBInstance, type DuckDBConnection, type DuckDBPreparedStatement } from '@duckdb/node-api';
import type { EngineColumn } from './table-files.js';

const MAX_IDLE_CONNECTIONS = 4;
/** Prepared statements one connection keeps, least recently used dropped first. */
const PREPARED_PER_CONNECTION = 32;
/** Longer statement texts are prepared for one execution only (a bound on what is kept). */
export const KEPT_STATEMENT_MAX_CHARS = 16 * 1024;

/** One engine connection and the statements it prepared. */
export class EngineConnection {
  readonly conn: DuckDBConnection;
  readonly #prepared = new Map<string, DuckDBPreparedStatement>();

  constructor(conn: DuckDBConnection) {
    this.conn = conn;
  }

  /** The statement prepared earlier from exactly this text, if kept. */
  prepared(sql: string): DuckDBPreparedStatement | undefined {
    const p = this.#prepared.get(sql);
    if (p !== undefined) {
      this.#prepared.delete(sql);
      this.#prepared.set(sql, p);
    }
    return p;
  }

  /** Keeps `p` for the next execution of `sql`; false when the text is too long to keep (the caller destroys it after use). */
  keep(sql: string, p: DuckDBPreparedStatement): boolean {
    if (sql.length > KEPT_STATEMENT_MAX_CHARS) return false;
    this.#prepared.set(sql, p);
    for (const [k, old] of this.#prepared) {
      if (this.#prepared.size <= PREPARED_PER_CONNECTION) break;
      this.#prepared.delete(k);
      old.destroySync();
    }
    return true;
  }

  close(): void {
    for (const p of this.#prepared.values()) p.destroySync();
    this.#prepared.clear();
    this.conn.closeSync();
  }
}

export interface ContextTable {
  readonly name: string;
  readonly files: readonly string[];
  /**
   * The rows of those files, from the Iceberg metadata (the live entries'
   * `record_count`); when given, `SELECT count(*) FROM <table>` is answered
   * from it (statement-guard.ts, "Counts from the metadata").
   */
  readonly rowCount?: number;
  /** The current schema's columns by field id (table-files.ts); absent or null: the files are read by column name. */
  readonly columns?: readonly EngineColumn[] | null;
  /** Its metadata could not be read: no view, and a query naming it is refused (broken). */
  readonly unreadable?: boolean;
}

export interface TenantEngineOptions {
  readonly memoryLimitMib: number;
  /** The statement texts the tenant's previous context had checked, with their table references (carried over: both depend on the text only). */
  readonly checked?: Map<string, CheckedText> | undefined;
}

/** A SQL string literal. */
export function sqlString(s: string): string {
  return `'${s.replace(/'/g, "''")}'`;
}

/** A quoted SQL identifier. */
export function sqlIdent(s: string): string {
  return `"${s.replace(/"/g, '""')}"`;
}

/**
 * Where a statement's text names one of the context's tables by its bare
 * name (from the engine's parser: statement-guard.ts): `length` characters
 * at `at`; `aliased` when the reference has an alias of its own.
 */
export interface TableRefAt {
  readonly at: number;
  readonly length: number;
  /** The table's name, lower case. */
  readonly name: string;
  readonly aliased: boolean;
}

/** What the parse-tree check of one statement text found (statement-guard.ts); a function of the text only. */
export interface CheckedText {
  /** Where the text names a table of the context by its bare name. */
  readonly refs: readonly TableRefAt[];
  /** The table (lower case) when the statement is a plain count of all its rows, else undefined. */
  readonly counts: string | undefined;
}

export class TenantEngine {
  readonly #db: DuckDBInstance;
  readonly tables: readonly string[];
  /** Each table's source, `read_parquet([...])` over its data files, by its name in lower case. */
  readonly sources: ReadonlyMap<string, string>;
  /** Each table's row count from the Iceberg metadata, by its name in lower case (tables opened with one). */
  readonly rowCounts: ReadonlyMap<string, number>;
  /** Tables (lower case) whose view could not be made: a data file is missing or unreadable. */
  readonly broken: ReadonlySet<string>;
  /** Connections whose last query ended normally, ready for the next one. */
  readonly #idle: EngineConnection[] = [];
  /** Statement texts of this tenant that passed the parse-tree check (statement-guard.ts), with their table references; this tenant's only. */
  readonly checked: Map<string, CheckedText>;
  #closed = false;

  private constructor(
    db: DuckDBInstance,
    sources: ReadonlyMap<string, string>,
    rowCounts: ReadonlyMap<string, number>,
    checked: Map<string, CheckedText>,
    broken: ReadonlySet<string>,
  ) {
    this.broken = broken;
    this.#db = db;
    this.tables = [...sources.keys()];
    this.sources = sources;
    this.rowCounts = rowCounts;
    this.checked = checked;
  }

  static async open(tables: readonly ContextTable[], opts: TenantEngineOptions): Promise<TenantEngine> {
    const db = await DuckDBInstance.create(':memory:', {
      autoinstall_known_extensions: 'false',
      autoload_known_extensions: 'false',
      allow_community_extensions: 'false',
      memory_limit: `${opts.memoryLimitMib}MiB`,
      // Nothing spills to disk: an in-memory instance's default spill directory is `.tmp` under
      // the process's working directory, one for every tenant's instance, with fixed file names.
      // Turning external access off then adds it to allowed_directories, so a tenant could read
      // (glob, read_blob) what another tenant's query spilled there, and two tenants spilling at
      // once overwrote each other's blocks (wrong answers, or the process killed by SIGSEGV).
      // A query that needs more than memory_limit fails instead (docs/query.md).
      temp_directory: '',
    });
    const setup = await db.connect();
    try {
      const allowed: string[] = [];
      const sources = new Map<string, string>();
      const rowCounts = new Map<string, number>();
      const broken = new Set<string>();
      for (const t of tables) {
        const lower = t.name.toLowerCase();
        // Two tables whose names differ only in case (made outside Siglake, or before it refused
        // them) are one name to SQL: the first keeps it, rather than no query of the tenant running.
        if (sources.has(lower) || broken.has(lower)) continue;
        if (t.unreadable === true) {
          broken.add(lower); // its metadata could not be read (engine-pool.ts): it answers 500 when named
          continue;
        }
        // A table without data files (an index nothing landed in yet, every file expired) is an empty
        // view of its current schema; only one whose schema is not known is left out.
        const source = t.files.length > 0 ? parquetSource(t) : emptySource(t.columns);
        if (source === undefined) continue;
        try {
          await setup.run(`CREATE VIEW ${sqlIdent(t.name)} AS SELECT * FROM ${source}`);
        } catch {
          // A data file gone or unreadable: that table answers 500 (statement-guard.ts), the others as ever.
          broken.add(lower);
          continue;
        }
        allowed.push(...t.files);
        sources.set(t.name.toLowerCase(), source);
        if (t.rowCount !== undefined && Number.isSafeInteger(t.rowCount) && t.rowCount >= 0) rowCounts.set(t.name.toLowerCase(), t.rowCount);
      }
      // Parquet footers are read once per context, not once per query (the files never change).
      // GLOBAL: a plain SET of this option holds for the setting-up connection only, and the
      // queries run on connections of their own.
      await setup.run('SET GLOBAL parquet_metadata_cache = true');
      await setup.run(`SET allowed_paths = [${allowed.map(sqlString).join(', ')}]::VARCHAR[]`);
      await setup.run('SET allowed_directories = []::VARCHAR[]');
      await setup.run('SET enable_external_access = false');
      await setup.run('SET lock_configuration = true');
      setup.closeSync();
      return new TenantEngine(db, sources, rowCounts, opts.checked ?? new Map(), broken);
    } catch (e) {
      setup.closeSync();
      db.closeSync();
      throw e;
    }
  }

  /** A connection for one query (interruptible on its own): an idle one, or a new one. */
  async borrow(): Promise<EngineConnection> {
    return this.#idle.pop() ?? new EngineConnection(await this.#db.connect());
  }

  /**
   * Ends a query's use of `conn`: kept for the next query when `reusable`
   * (the query ended normally), else closed (it was interrupted or failed).
   */
  giveBack(conn: EngineConnection, reusable: boolean): void {
    if (reusable && !this.#closed && this.#idle.length < MAX_IDLE_CONNECTIONS) this.#idle.push(conn);
    else conn.close();
  }

  get closed(): boolean {
    return this.#closed;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const c of this.#idle.splice(0)) c.close();
    this.#db.closeSync();
  }
}

/**
 * The table function reading a table's files. By Iceberg field id against the
 * current schema: a column added since a file was written reads as null there,
 * a dropped one is not seen, and a name reused for a new column never picks up
 * the old one's values (files written before `index update` or `siglake
 * migrate` hold fewer or other columns). Without a schema, by name over the
 * union of the files' columns.
 */
function parquetSource(t: ContextTable): string {
  const files = `[${t.files.map(sqlString).join(', ')}]`;
  const cols = t.columns;
  if (cols === undefined || cols === null || cols.length === 0) return `read_parquet(${files}, union_by_name = true)`;
  const schema = cols.map((c) => `${c.id}: {name: ${sqlString(c.name)}, type: ${sqlString(c.type)}, default_value: NULL}`).join(', ');
  return `read_parquet(${files}, schema = MAP {${schema}})`;
}

/** An empty table of the current schema (no data file yet, or none left), or undefined when the schema is not known. */
function emptySource(cols: readonly EngineColumn[] | null | undefined): string | undefined {
  if (cols === undefined || cols === null || cols.length === 0) return undefined;
  return `(SELECT ${cols.map((c) => `CAST(NULL AS ${c.type}) AS ${sqlIdent(c.name)}`).join(', ')} WHERE false)`;
}
