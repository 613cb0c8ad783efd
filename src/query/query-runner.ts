// Runs one statement in a tenant context: guard, execute, read at most
// maxRows + 1 rows (to know whether the answer is truncated) and at most
// maxBytes of them (the rows are held in the one JavaScript heap every tenant
// shares: ten thousand rows of 100 KB each, four at a time, ended the whole
// process with a heap out of memory), all within
// timeoutMs; past it the connection is interrupted (the engine stops working
// on it) and the answer is 504. Values are DuckDB's JSON forms: BIGINT,
// DECIMAL, HUGEINT and timestamps as strings, MAPs as [{key, value}] arrays.

import { JsonDuckDBValueConverter, type Json } from '@duckdb/node-api';
import { QueryError } from './query-error.js';
import { executionError, prepareReadOnly, type ReadOnlyStatement } from './statement-guard.js';
import type { TenantEngine } from './tenant-engine.js';

export interface QueryColumn {
  readonly name: string;
  readonly type: string;
}

export interface QueryResult {
  readonly columns: readonly QueryColumn[];
  readonly rows: (Json | null)[][];
  readonly truncated: boolean;
}

export interface RunOptions {
  readonly maxRows: number;
  /** Bytes of rows (their JSON text, estimated) held at most; past it the answer is truncated. Default: no bound. */
  readonly maxBytes?: number;
  readonly timeoutMs: number;
  /** The whole bound named in the timeout's message (default timeoutMs): the caller may have spent some of it already. */
  readonly limitSecs?: number;
  /** Aborted by the server on shutdown, or when the caller hung up: interrupt now. */
  readonly signal?: AbortSignal;
}

export async function runQuery(engine: TenantEngine, sql: string, opts: RunOptions): Promise<QueryResult> {
  const conn = await engine.borrow();
  let timedOut = false;
  // DuckDB drops an interrupt that arrives while the statement is parsed or prepared (nothing
  // runs yet), so a stop is sent again every 20 ms until the query settles, and checked once the
  // statement is prepared. (Once only, a hang-up or the timeout during the prepare was lost: the
  // query ran on, to query.timeoutSecs or for good.)
  let again: NodeJS.Timeout | undefined;
  const stop = (): void => {
    conn.conn.interrupt();
    again ??= setInterval(() => conn.conn.interrupt(), 20);
  };
  const timer = setTimeout(() => {
    timedOut = true;
    stop();
  }, opts.timeoutMs);
  const onAbort = stop;
  opts.signal?.addEventListener('abort', onAbort);
  // A caller that hung up while the tables were being read (before this listener existed) stops
  // the query before it starts: the abort event has fired already and would never reach it.
  if (aborted(opts.signal)) {
    clearTimeout(timer);
    opts.signal?.removeEventListener('abort', onAbort);
    engine.giveBack(conn, true);
    throw cancelledError();
  }
  let statement: ReadOnlyStatement | undefined;
  let finished = false;
  let executed = false;
  try {
    statement = await prepareReadOnly(engine, conn, sql);
    executed = true;
    if (timedOut) throw timeoutError(opts.limitSecs ?? opts.timeoutMs / 1000);
    if (aborted(opts.signal)) throw cancelledError();
    const result = await statement.prepared.stream();
    const names = result.columnNames();
    const types = result.columnTypes();
    const columns = names.map((name, i) => ({ name, type: types[i]!.toString() }));
    const rows: (Json | null)[][] = [];
    let truncated = false;
    const maxBytes = opts.maxBytes ?? Infinity;
    let bytes = 0;
    for (;;) {
      const chunk = await result.fetchChunk();
      if (chunk === null || chunk.rowCount === 0) break;
      // Row by row, so that no more than the bounds is ever converted into the heap.
      for (let i = 0; i < chunk.rowCount; i++) {
        if (rows.length === opts.maxRows) {
          truncated = true;
          break;
        }
        const row = chunk.convertRowValues(i, JsonDuckDBValueConverter);
        bytes += sizeOf(row);
        if (bytes > maxBytes) {
          truncated = true;
          break;
        }
        rows.push(row);
      }
      if (truncated) break;
    }
    finished = !truncated;
    return { columns, rows, truncated };
  } catch (e) {
    if (timedOut) throw timeoutError(opts.limitSecs ?? opts.timeoutMs / 1000);
    if (aborted(opts.signal)) throw cancelledError();
    throw executionError(e, statement?.prepared);
  } finally {
    clearTimeout(timer);
    clearInterval(again);
    opts.signal?.removeEventListener('abort', onAbort);
    // A truncated or failed query may still have work queued: stop it, and do not reuse its connection.
    // A kept statement stays with its connection (closed with it when the connection is not reused).
    // A statement refused or failing to prepare ran nothing: its connection is
    // as clean as before, unless an interrupt was sent to it meanwhile.
    if (executed && !finished) conn.conn.interrupt();
    if (statement !== undefined && !statement.kept) statement.prepared.destroySync();
    const clean = finished || (!executed && !aborted(opts.signal));
    engine.giveBack(conn, clean && !timedOut);
  }
}

/** About how many bytes a row takes as JSON: strings by their length, other scalars a few, nested values as their text. */
function sizeOf(row: readonly (Json | null)[]): number {
  let n = 2;
  for (const v of row) {
    if (typeof v === 'string') n += v.length + 3;
    else if (v === null || typeof v !== 'object') n += 8;
    else n += JSON.stringify(v).length + 1;
  }
  return n;
}

/** 504 SIGLAKE_QUERY_TIMEOUT: the query (or the reading of its tables before it) ran past query.timeoutSecs. */
export function timeoutError(limitSecs: number): QueryError {
  return new QueryError('SIGLAKE_QUERY_TIMEOUT', `query cancelled after query.timeoutSecs (${limitSecs} s)`);
}

function cancelledError(): QueryError {
  return new QueryError('SIGLAKE_UNAVAILABLE', 'query cancelled: the server is stopping or the caller hung up', { retryAfterSecs: 1 });
}

/** Read through a call, so that a check made earlier does not narrow it: the signal changes under the query. */
function aborted(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true;
}
