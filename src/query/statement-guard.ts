// One read-only statement per request (contract query §4), decided by the
// engine's own parser, never by matching the text:
//
//   1. DuckDB's parser serialises the request (json_serialize_sql: parse
//      only, nothing bound or run); a syntax error is a 400 with its message.
//   2. Exactly one statement, and one that serialises: only SELECT-shaped
//      statements do: SELECT, WITH,
//      VALUES, DESCRIBE, SHOW TABLES, SUMMARIZE. COPY, ATTACH, INSTALL, LOAD,
//      SET, RESET, PRAGMA, CALL, CREATE, INSERT, DROP, EXPORT, BEGIN, … are refused.
//   3. Every table function in the parse tree must be on READ_ONLY_TABLE_FUNCTIONS:
//      some built-in ones change the engine's state from inside a SELECT
//      (enable_logging, checkpoint, …), run a SQL string that step 2 never
//      saw (query, json_execute_serialized_sql) or take raw pointers (arrow_scan).
//   4. The statement is prepared (bound inside the locked tenant context,
//      which refuses any file outside the tenant's tables) and its type must
//      be SELECT.
//
// EXPLAIN: the serialiser cannot show an EXPLAIN's inner statement, so a
// request `EXPLAIN <statement>` has its inner statement (the text after the
// keyword) put through steps 1 to 3 exactly as a query of its own; the whole
// request is then prepared and its type must be EXPLAIN. The engine parses
// the same tokens after the keyword, so what it plans is what was checked;
// anything that makes the text after EXPLAIN something else (ANALYZE,
// VERBOSE, an option list, a comment before the keyword) fails step 1 or 2
// and is refused. EXPLAIN ANALYZE is refused: it runs the statement (and
// returns the engine's profile); a plain EXPLAIN plans it and runs nothing.
// Each refusal is a 400 before anything runs.
//
// A statement that passed steps 1 to 3 is remembered by its text in its
// tenant context (TenantEngine.checked): the check is a pure function of the
// text, and a repeated query then skips a round trip to the engine. Kept per
// tenant context, never shared between tenants (no tenant can time whether
// another sent the same text).

import { StatementType, type DuckDBConnection, type DuckDBPreparedStatement } from '@duckdb/node-api';
import { engineError } from './engine-errors.js';
import { QueryError } from './query-error.js';
import type { EngineConnection, TenantEngine } from './tenant-engine.js';

/**
 * Table functions a query may call. The file readers are here on purpose:
 * the engine's access controls, not this list, decide which files they open
 * (only the tenant's own data files).
 */
const READ_ONLY_TABLE_FUNCTIONS: ReadonlySet<string> = new Set([
  'range',
  'generate_series',
  'unnest',
  'repeat',
  'repeat_row',
  'read_parquet',
  'parquet_scan',
  'parquet_metadata',
  'parquet_schema',
  'parquet_file_metadata',
  'parquet_kv_metadata',
  'read_csv',
  'read_csv_auto',
  'read_json',
  'read_json_auto',
  'read_ndjson',
  'read_ndjson_auto',
  'read_json_objects',
  'read_text',
  'read_blob',
  'glob',
  'sniff_csv',
  'json_each',
  'json_tree',
  'duckdb_columns',
  'duckdb_tables',
  'duckdb_views',
  'duckdb_functions',
  'duckdb_types',
  'duckdb_keywords',
  'duckdb_settings',
  'pragma_table_info',
  'pragma_version',
  'summary',
]);

const ONE_READ_ONLY = 'only one read-only statement is allowed (SELECT, WITH, VALUES, DESCRIBE, SHOW TABLES, SUMMARIZE, or EXPLAIN of one of them)';

/** SQL whitespace (the engine's scanner's set, not JavaScript's wider \s). */
const EXPLAIN_KEYWORD = /^[ \t\n\r\f\v]*explain[ \t\n\r\f\v]+/i;
const ANALYZE_KEYWORD = /^analy[sz]e([ \t\n\r\f\v(]|$)/i;

/** Statement texts kept per tenant context as having passed steps 1 to 3. */
const CHECKED_ENTRIES = 512;
/** Longer texts are checked every time (a bound on what the memo holds). */
const CHECKED_MAX_CHARS = 16 * 1024;

/** The statement an `EXPLAIN <statement>` request explains, or undefined when `sql` is no EXPLAIN. */
export function explainedStatement(sql: string): string | undefined {
  const m = EXPLAIN_KEYWORD.exec(sql);
  return m === null ? undefined : sql.slice(m[0].length);
}

/** A statement ready to execute; `kept`: the connection keeps it (do not destroy it). */
export interface ReadOnlyStatement {
  readonly prepared: DuckDBPreparedStatement;
  readonly kept: boolean;
}

/** The one statement of `sql`, prepared on `conn` of `engine` (or kept from an earlier request), or throws the 400. */
export async function prepareReadOnly(engine: TenantEngine, conn: EngineConnection, sql: string): Promise<ReadOnlyStatement> {
  // Prepared, vetted and typed by an earlier request on this connection of this context.
  const kept = conn.prepared(sql);
  if (kept !== undefined) return { prepared: kept, kept: true };
  const inner = explainedStatement(sql);
  if (inner !== undefined && ANALYZE_KEYWORD.test(inner)) {
    throw new QueryError('SIGLAKE_SQL_REFUSED', `EXPLAIN ANALYZE runs the statement and is not allowed (send EXPLAIN without ANALYZE): ${ONE_READ_ONLY}`);
  }
  const checked = engine.checked;
  if (!checked.has(sql)) {
    await checkParseTree(conn.conn, inner ?? sql);
    if (sql.length <= CHECKED_MAX_CHARS) {
      checked.add(sql);
      if (checked.size > CHECKED_ENTRIES) checked.delete(checked.values().next().value as string);
    }
  }
  let prepared: DuckDBPreparedStatement;
  try {
    prepared = await conn.conn.prepare(sql);
  } catch (e) {
    throw engineError(e);
  }
  const expected = inner === undefined ? StatementType.SELECT : StatementType.EXPLAIN;
  if (prepared.statementType !== expected) {
    const name = (StatementType as unknown as Record<number, string>)[prepared.statementType] ?? String(prepared.statementType);
    prepared.destroySync();
    throw new QueryError('SIGLAKE_SQL_REFUSED', `statement type ${name} is not allowed: ${ONE_READ_ONLY}`);
  }
  if (prepared.parameterCount > 0) {
    prepared.destroySync();
    throw new QueryError('SIGLAKE_BAD_SQL', 'the statement has parameters; send it with literal values');
  }
  return { prepared, kept: conn.keep(sql, prepared) };
}

interface SerializedSql {
  error?: boolean;
  error_type?: string;
  error_message?: string;
  statements?: unknown[];
}

/** Steps 1 to 3: the request's parse tree, from the engine's parser. */
async function checkParseTree(conn: DuckDBConnection, sql: string): Promise<void> {
  let tree: SerializedSql;
  try {
    const reader = await conn.runAndReadAll('SELECT json_serialize_sql($1::VARCHAR) AS tree', [sql]);
    tree = JSON.parse(String(reader.getRows()[0]![0])) as SerializedSql;
  } catch (e) {
    throw engineError(e);
  }
  if (tree.error === true) {
    if (tree.error_type === 'parser') throw new QueryError('SIGLAKE_BAD_SQL', `Parser Error: ${tree.error_message ?? 'syntax error'}`);
    throw new QueryError('SIGLAKE_SQL_REFUSED', ONE_READ_ONLY);
  }
  const n = tree.statements?.length ?? 0;
  if (n === 0) throw new QueryError('SIGLAKE_BAD_SQL', 'no SQL statement in the request');
  if (n > 1) throw new QueryError('SIGLAKE_SQL_REFUSED', `one statement per request, got ${n}: ${ONE_READ_ONLY}`);
  for (const name of tableFunctions(tree)) {
    if (!READ_ONLY_TABLE_FUNCTIONS.has(name)) throw new QueryError('SIGLAKE_SQL_REFUSED', `table function ${name} is not allowed in a query`);
  }
}

/** The names of every table function called anywhere in a serialised parse tree. */
function tableFunctions(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) {
    for (const n of node) tableFunctions(n, out);
  } else if (node !== null && typeof node === 'object') {
    const o = node as Record<string, unknown>;
    if (o['type'] === 'TABLE_FUNCTION') {
      const fn = o['function'] as Record<string, unknown> | undefined;
      const name = String(fn?.['function_name'] ?? '').toLowerCase();
      const schema = String(fn?.['schema'] ?? '');
      out.push(schema === '' ? name : `${schema}.${name}`.toLowerCase());
    }
    for (const v of Object.values(o)) tableFunctions(v, out);
  }
  return out;
}
