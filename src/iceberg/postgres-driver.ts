// A shared catalog on PostgreSQL (node-postgres pool). The commit's
// compare-and-swap is one UPDATE … WHERE metadata_location = $expected, which
// PostgreSQL makes atomic under its default isolation: of two writers racing
// from the same expected location, exactly one sees a changed row.

import pg from 'pg';
import { IcebergError } from './iceberg-error.js';
import type { SqlDriver } from './sql-driver.js';

/**
 * A statement without an answer after this long fails, and its connection is
 * closed rather than given back to the pool: a connection whose packets a
 * network partition dropped never answers again, and node-postgres would queue
 * every later statement behind the lost one. (Without it, a one-second
 * partition left both pooled connections waiting forever: every commit and
 * every query of every tenant after it failed or hung.) The catalog's
 * statements are single-row reads and writes; none comes near it.
 */
export const STATEMENT_TIMEOUT_MS = 10_000;

export class PostgresDriver implements SqlDriver {
  readonly kind = 'postgres' as const;
  readonly #pool: pg.Pool;
  readonly #timeoutMs: number;

  constructor(url: string, timeoutMs = STATEMENT_TIMEOUT_MS) {
    this.#timeoutMs = timeoutMs;
    this.#pool = new pg.Pool({
      connectionString: url,
      max: 2,
      connectionTimeoutMillis: timeoutMs,
      // The kernel notices a dead idle connection (the server or the path went away) and the pool drops it.
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
    });
    // An idle client's error (the server went away) must not crash the process; the next query reports it.
    this.#pool.on('error', () => undefined);
    // Nor a checked-out client's: the pool listens only while a client is idle, and a connection
    // that ends or is reset without a message from PostgreSQL (a proxy, NAT or load balancer
    // reset, a failover) mid-statement emitted an unhandled 'error' that ended the process.
    // The statement itself is still rejected, and #query drops the client.
    this.#pool.on('connect', (client) => client.on('error', () => undefined));
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
    let client: pg.PoolClient;
    try {
      client = await this.#pool.connect();
    } catch (e) {
      throw catalogError(e);
    }
    let timer: NodeJS.Timeout | undefined;
    let timedOut = false;
    try {
      const r = await Promise.race([
        client.query(sql, params as unknown[]),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => {
            timedOut = true;
            reject(new Error(`no answer within ${this.#timeoutMs} ms (the connection is closed)`));
          }, this.#timeoutMs);
        }),
      ]);
      client.release();
      return r;
    } catch (e) {
      // A statement that timed out, any failure but the server's own answer (a DatabaseError), or
      // an answer that ends the session (FATAL: the server is shutting down, the backend was
      // terminated, the connection failed): the connection goes, not back to the pool.
      const broken = timedOut || !(e instanceof pg.DatabaseError) || endsSession(e);
      client.release(broken ? (e as Error) : undefined);
      throw catalogError(e);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** A server answer after which the connection is of no use: FATAL/PANIC, operator intervention (57), connection exception (08). */
function endsSession(e: pg.DatabaseError): boolean {
  const code = e.code ?? '';
  return e.severity === 'FATAL' || e.severity === 'PANIC' || code.startsWith('57') || code.startsWith('08');
}

function catalogError(e: unknown): IcebergError {
  const code = (e as { code?: string }).code;
  return new IcebergError('SIGLAKE_ICEBERG_CATALOG', `PostgreSQL catalog: ${(e as Error).message}${code ? ` (${code})` : ''}`, { cause: e });
}
