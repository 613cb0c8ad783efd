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
//   Bounds on the statement's size, each a 400 before anything is
//   prepared (the engine's cost for these grows far faster than the text,
//   and its parser and planner heed the interrupt late or not at all):
//   before step 1, on the text, at most MAX_BOOLEAN_OPERATORS words AND/OR
//   and MAX_GROUP_COMMAS commas in GROUP BY lists; from step 1, a tree
//   of at most MAX_TREE_BYTES, MAX_SELECT_BLOCKS SELECT blocks, MAX_JOINS
//   joins and MAX_GROUPING_SETS grouping sets.
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
// Counts from the metadata. A statement that is exactly a count of all the
// rows of one table of the context (`SELECT count(*) FROM logs`, with any
// alias for the column or the table, and nothing else: no WHERE, GROUP BY,
// HAVING, QUALIFY, sample, time travel, DISTINCT, FILTER, ORDER BY, LIMIT or
// OFFSET, no CTE, one select item, one table) is answered from the Iceberg
// metadata the context was built from: the sum of the live data files'
// `record_count`, the same snapshot as the files the context reads (the
// count-aggregate push-down of Iceberg readers such as Spark's). The
// prepared statement is then `SELECT CAST(<count> AS BIGINT) AS "<column>"`,
// used, as a replaced text is, only when its result columns are the user's
// statement's (names and types). A table whose metadata has delete files is
// never in a context (table-files.ts refuses it), so the sum is exact. An
// EXPLAIN is never answered this way: it shows the plan of the scan.
//
// A statement that passed steps 1 to 3 is remembered by its text in its
// tenant context (TenantEngine.checked): the check is a pure function of the
// text, and a repeated query then skips a round trip to the engine. Kept per
// tenant context, never shared between tenants (no tenant can time whether
// another sent the same text).
//
// Table references. The same parse tree says where the text names a table of
// the context by its bare name (a BASE_TABLE with no schema or catalog, and
// no CTE of that name anywhere in the statement). What is prepared is the
// text with each such name replaced by the table's own source, as if the user
// had written `read_parquet([...]) AS "logs"` there: the engine then plans
// the scan directly, where through the view it keeps a constant projection
// between the scan and a count(*) (one per vector; a tenth of a count(*)'s
// time). Only those characters change, so column names, errors elsewhere and
// the statement's meaning stay the user's; the source reads exactly the
// view's files, under the same locked configuration. Both texts are
// prepared (once per connection: the statement is kept): the user's own
// first, so a refusal or a binding error is always about what was sent; the
// replaced one is used only when it prepares with the same result columns
// (names and types: an unaliased subquery is named after its text, which
// would show the files). Nothing is replaced when the statement names a
// column the direct source has and the view does not (read_parquet's
// virtual `filename`, `file_index`, `file_row_number`, which would capture
// an outer or a NATURAL join's column of that name), has a NATURAL join, or
// holds a character the parser reads as a space (it rewrites those before
// parsing, so its places would not be the text's); nor when the text at a
// reported place is not the reported name. An error while running a
// replaced statement is the engine's message without its excerpt of the
// text (which would be the replaced text).

import { StatementType, type DuckDBConnection, type DuckDBPreparedStatement } from '@duckdb/node-api';
import { engineError } from './engine-errors.js';
import { QueryError } from './query-error.js';
import { sqlIdent, type CheckedText, type EngineConnection, type TableRefAt, type TenantEngine } from './tenant-engine.js';

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
  let found = checked.get(sql);
  if (found === undefined) {
    checkBooleanOperators(sql);
    checkGroupByItems(sql);
    const tree = await checkParseTree(conn.conn, inner ?? sql);
    found = {
      // An EXPLAIN's inner statement starts after the keyword: its places are shifted by the keyword's length.
      refs: tableRefs(tree, inner ?? sql, sql.length - (inner ?? sql).length),
      counts: inner === undefined ? countedTable(tree) : undefined,
    } satisfies CheckedText;
    if (sql.length <= CHECKED_MAX_CHARS) {
      checked.set(sql, found);
      if (checked.size > CHECKED_ENTRIES) checked.delete(checked.keys().next().value as string);
    }
  }
  for (const r of found.refs) {
    if (engine.broken.has(r.name)) {
      throw new QueryError('SIGLAKE_QUERY_ENGINE', `table ${r.name} cannot be read now: its metadata or one of its data files is missing or unreadable; the tenant's other tables answer`);
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
  const count = found.counts === undefined ? undefined : engine.rowCounts.get(found.counts);
  const direct =
    count !== undefined && prepared.columnCount === 1
      ? `SELECT CAST(${count} AS BIGINT) AS ${sqlIdent(prepared.columnName(0))}`
      : withSources(sql, found.refs, engine.sources);
  if (direct !== undefined) {
    const bound = await conn.conn.prepare(direct).catch(() => undefined);
    if (bound !== undefined && bound.statementType === expected && sameColumns(prepared, bound)) {
      prepared.destroySync();
      prepared = bound;
      REPLACED.add(bound);
    } else {
      bound?.destroySync();
    }
  }
  return { prepared, kept: conn.keep(sql, prepared) };
}

/** Statements prepared from a text with table names replaced by their sources. */
const REPLACED = new WeakSet<DuckDBPreparedStatement>();

/** The same result columns, by name and type. */
function sameColumns(a: DuckDBPreparedStatement, b: DuckDBPreparedStatement): boolean {
  if (a.columnCount !== b.columnCount) return false;
  for (let i = 0; i < a.columnCount; i++) {
    if (a.columnName(i) !== b.columnName(i) || a.columnType(i).toString() !== b.columnType(i).toString()) return false;
  }
  return true;
}

/**
 * An error while running `prepared`, as the answer: for a statement whose
 * table names were replaced, without the engine's excerpt of the text it ran.
 */
export function executionError(e: unknown, prepared: DuckDBPreparedStatement | undefined): QueryError {
  if (prepared !== undefined && REPLACED.has(prepared) && e instanceof Error) {
    return engineError(new Error(e.message.replace(/\n*LINE \d+:[\s\S]*$/, '')));
  }
  return engineError(e);
}

export interface SerializedSql {
  error?: boolean;
  error_type?: string;
  error_message?: string;
  statements?: unknown[];
}

/** Steps 1 to 3: the request's parse tree, from the engine's parser (returned once checked). */
async function checkParseTree(conn: DuckDBConnection, sql: string): Promise<SerializedSql> {
  let tree: SerializedSql;
  let text: unknown;
  let bytes: unknown;
  try {
    const reader = await conn.runAndReadAll(SERIALIZE, [sql]);
    [text, bytes] = reader.getRows()[0]!;
  } catch (e) {
    throw engineError(e);
  }
  if (text === null) {
    const mib = (Number(bytes) / (1024 * 1024)).toFixed(1);
    throw new QueryError(
      'SIGLAKE_SQL_REFUSED',
      `the statement's parse tree is ${mib} MiB; at most ${MAX_TREE_BYTES / (1024 * 1024)} MiB is allowed (about 50,000 values in IN (…) lists and select items): split the query`,
    );
  }
  try {
    tree = JSON.parse(String(text)) as SerializedSql;
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
  const { blocks, joins, groupingSets } = treeCounts(tree.statements);
  if (blocks > MAX_SELECT_BLOCKS) {
    throw new QueryError(
      'SIGLAKE_SQL_REFUSED',
      `the statement has ${blocks} SELECT blocks (UNION branches, subqueries, CTEs); at most ${MAX_SELECT_BLOCKS} are allowed: split the query`,
    );
  }
  if (groupingSets > MAX_GROUPING_SETS) {
    throw new QueryError(
      'SIGLAKE_SQL_REFUSED',
      `the statement has ${groupingSets} grouping sets (CUBE of n expressions makes 2^n, ROLLUP n + 1); at most ${MAX_GROUPING_SETS} are allowed: group by fewer sets`,
    );
  }
  if (joins > MAX_JOINS) {
    throw new QueryError('SIGLAKE_SQL_REFUSED', `the statement has ${joins} joins (JOIN, or a comma between FROM items); at most ${MAX_JOINS} are allowed: split the query`);
  }
  return tree;
}

/**
 * The most bytes of a statement's serialised parse tree handed to the
 * JavaScript side. The tree takes about 160 bytes a value of an `IN (…)`
 * list or a select item, so the 1 MiB body held up to 78 MB of it: its
 * JSON.parse took 1.6 to 3.2 s on the one event loop every tenant shares
 * (and its walks more), and 180 MB of heap, outside query.memoryLimitMib.
 * 8 MiB: about 50,000 such values, parsed in about 0.2 s. The engine
 * measures the tree and hands over nothing past the bound.
 */
const MAX_TREE_BYTES = 8 * 1024 * 1024;
/** The parse tree of $1 when it is within MAX_TREE_BYTES (else null), and its size; serialised once (MATERIALIZED). */
const SERIALIZE = `WITH s AS MATERIALIZED (SELECT json_serialize_sql($1::VARCHAR) AS t) SELECT CASE WHEN strlen(t) <= ${MAX_TREE_BYTES} THEN t END AS tree, strlen(t) AS bytes FROM s`;

/**
 * SELECT blocks a statement may have. The engine's max_expression_depth
 * (1000) bounds nested expressions and subqueries, but not a chain of set
 * operations: `SELECT 1 UNION ALL SELECT 1 …` costs the engine time and
 * memory that grow with the square of its branches while it builds the plan
 * to run, outside query.memoryLimitMib and deaf to the interrupt (30,000
 * branches, a 570 KB request, kept the process working for minutes after its
 * 504 and took it past 10 GiB). 1,000 branches take about 0.35 s and 30 MiB.
 */
const MAX_SELECT_BLOCKS = 1000;

/**
 * AND/OR operators a statement may have. The engine's parser and planner
 * flatten a chain of them into one conjunction (so max_expression_depth does
 * not see it) in time growing with the square of its terms, the parse deaf
 * to the interrupt: 20,000 `OR` terms (350 KB) took about 2.7 s to parse and
 * over 30 s to plan, 100,000 `AND` terms over a minute to parse alone, each
 * a core held and the tenant's slot with it past query.timeoutSecs. 1,000
 * take about 0.25 s in all. `IN (…)` lists cost the engine linear time and
 * are not bounded here (the body's 1 MiB bounds them).
 */
const MAX_BOOLEAN_OPERATORS = 1000;

/**
 * The words AND and OR (any case) in the text: counted before the engine
 * parses anything, so a chain past MAX_BOOLEAN_OPERATORS costs the engine
 * nothing. On the whole text, literals, quoted names and comments included:
 * a count of the tokens alone would need a lexer that reads every literal
 * exactly as the engine's does (escape strings, dollar quoting, nested
 * comments), and one that read a quote differently could hide a chain from
 * the count. A word is a run of letters, digits, `_` and `$` (and any
 * character past ASCII); one after a digit is counted (the engine reads
 * `1OR` as `1 OR`), so the count is never below the engine's.
 */
function checkBooleanOperators(sql: string): void {
  BOOLEAN_OPERATOR.lastIndex = 0;
  let n = 0;
  while (BOOLEAN_OPERATOR.exec(sql) !== null) n++;
  if (n > MAX_BOOLEAN_OPERATORS) {
    throw new QueryError(
      'SIGLAKE_SQL_REFUSED',
      `the statement has ${n} AND/OR operators; at most ${MAX_BOOLEAN_OPERATORS} are allowed (the words AND and OR are counted anywhere in the text, literals and comments included): use IN (…) for a list of values, or split the query`,
    );
  }
}

const BOOLEAN_OPERATOR = /(?<![A-Za-z_$\u0080-\uffff])(?:or|and)(?![A-Za-z0-9_$\u0080-\uffff])/gi;

/**
 * Commas a statement's GROUP BY lists may hold. The engine's parser
 * compares each expression of a GROUP BY list with the ones before it (to
 * drop repeats) in time growing with the square of the list, deaf to the
 * interrupt: 5,000 distinct items (34 KB) took 1.7 s to parse and 2 s to
 * plan, 15,000 (230 KB) 17 s to parse and 16 s to plan, and the 1 MiB body
 * holds about 150,000. 1,000 take about 0.1 s. Counted on the text before
 * the engine parses anything (groupByCommas): every item of a list but its
 * first follows a comma counted, so the count is never below the items.
 */
const MAX_GROUP_COMMAS = 1000;

function checkGroupByItems(sql: string): void {
  const n = groupByCommas(sql);
  if (n > MAX_GROUP_COMMAS) {
    throw new QueryError(
      'SIGLAKE_SQL_REFUSED',
      `the statement has ${n} commas in its GROUP BY lists (from a list holding a quote or a comment, every comma to the end of the text); at most ${MAX_GROUP_COMMAS} are allowed (a GROUP BY list costs the engine's parser time growing with the square of its items): group by fewer expressions`,
    );
  }
}

/**
 * The commas of the text's GROUP BY lists, each counted once, without a
 * lexer. A list starts at the word GROUP followed by the word BY (or by
 * `-` or `/`, which may open a comment between them), and ends where the
 * engine surely ends it: at a `)` closing a parenthesis opened before it,
 * or at one of LIST_END at its own depth of parentheses (all reserved
 * words, so none is an expression's name there; one after a `.` is a
 * column's, and does not end it). A comma inside a list, at any depth, is
 * counted. A quote (`'`, `"`, `$`) or a comment mark (`--`, `/*`, `* /`)
 * inside a list could hide a `)` or a word from this reading, so from the
 * first one every comma to the end of the text is counted (the bound's
 * first form, stop 55: every comma after the first GROUP). In stop 55
 * that was the only form: the commas after a list had ended (an outer
 * `IN (…)` list after a grouped CTE, a HAVING `IN (…)` list, anything after
 * the word group in a literal) were counted, and such queries refused.
 */
export function groupByCommas(sql: string): number {
  const open: number[] = []; // the parenthesis depth of each list still open, innermost last
  let depth = 0;
  let n = 0;
  for (let i = 0; i < sql.length; i++) {
    const c = sql.charCodeAt(i);
    if (c === 0x2c /* , */) {
      if (open.length > 0) n++;
    } else if (c === 0x28 /* ( */) {
      depth++;
    } else if (c === 0x29 /* ) */) {
      depth--;
      while (open.length > 0 && open[open.length - 1]! > depth) open.pop();
    } else if (open.length > 0 && (c === 0x27 || c === 0x22 || c === 0x24 || (c === 0x2d && sql.charCodeAt(i + 1) === 0x2d) || (c === 0x2f && sql.charCodeAt(i + 1) === 0x2a) || (c === 0x2a && sql.charCodeAt(i + 1) === 0x2f))) {
      // ' " $ -- /* */: the rest of the text is counted as it was read before stop 56.
      for (let j = sql.indexOf(',', i); j >= 0; j = sql.indexOf(',', j + 1)) n++;
      return n;
    } else if (isWordStart(c) && (i === 0 || !isWordStart(sql.charCodeAt(i - 1)))) {
      let e = i + 1;
      while (e < sql.length && isWordChar(sql.charCodeAt(e))) e++;
      const word = sql.slice(i, e).toLowerCase();
      if (word === 'group' && opensList(sql, e)) open.push(depth);
      else if (open.length > 0 && open[open.length - 1] === depth && LIST_END.has(word) && !afterDot(sql, i)) open.pop();
      i = e - 1;
    }
  }
  return n;
}

/** Reserved words (duckdb_keywords()) that end a GROUP BY list found at its own depth. */
const LIST_END: ReadonlySet<string> = new Set(['having', 'window', 'qualify', 'order', 'limit', 'offset', 'fetch', 'union', 'except', 'intersect', 'from', 'where', 'select']);

/** A word's first character: a letter, `_`, or any character past ASCII. A word starts after any other (after a digit too: the engine reads `1GROUP BY` as `1 GROUP BY`); a digit or `$` inside a word continues it. */
function isWordStart(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || c === 0x5f || c >= 0x80;
}

function isWordChar(c: number): boolean {
  return isWordStart(c) || (c >= 0x30 && c <= 0x39) || c === 0x24;
}

/** Whether the word GROUP ending at `at` opens a list: BY follows (after white space), or `-` or `/`, which may start a comment before it. */
function opensList(sql: string, at: number): boolean {
  let i = at;
  while (i < sql.length && /\s/.test(sql[i]!)) i++;
  const c = sql.charCodeAt(i);
  if (c === 0x2d || c === 0x2f) return true;
  return (c === 0x62 || c === 0x42) && (sql.charCodeAt(i + 1) | 0x20) === 0x79 && !isWordChar(sql.charCodeAt(i + 2));
}

/** Whether the word at `at` follows a `.` (white space between): a column or field name then, whatever the word. */
function afterDot(sql: string, at: number): boolean {
  let i = at - 1;
  while (i >= 0 && /\s/.test(sql[i]!)) i--;
  return i >= 0 && sql.charCodeAt(i) === 0x2e;
}

/**
 * Joins a statement may have, in all its blocks together (the engine merges
 * the joins of subqueries into one join tree). The engine's join order
 * optimizer takes time growing far faster than the joins, and heeds the
 * interrupt late or not at all: 48 joins of one table to the next took
 * 1 s to plan, 200 were interrupted 30 s after the interrupt, 64 joined to
 * one table were not interrupted within a minute. 32: at most about 0.2 s,
 * a table joined to each of 31 others included.
 */
const MAX_JOINS = 32;

/**
 * Grouping sets a statement may have, in all its blocks together (Trino
 * bounds them too, at 2048). The engine aggregates each set apart and heeds
 * the interrupt late: `CUBE` of 10 expressions (1,024 sets) stopped 3.7 s
 * after the interrupt, of 14 (16,384 sets, 200 bytes of SQL) ran 83 s
 * without heeding it. 256 sets (`CUBE` of 8) of one table of 1,000 rows:
 * under a second in all.
 */
const MAX_GROUPING_SETS = 256;

/** How many SELECT blocks (SELECT_NODE), joins (a JOIN table reference, `,` between FROM items included) and grouping sets a serialised parse tree holds. */
function treeCounts(node: unknown): { blocks: number; joins: number; groupingSets: number } {
  let blocks = 0;
  let joins = 0;
  let groupingSets = 0;
  const stack: unknown[] = [node];
  while (stack.length > 0) {
    const v = stack.pop();
    if (Array.isArray(v)) {
      for (const x of v) stack.push(x);
    } else if (v !== null && typeof v === 'object') {
      const o = v as Record<string, unknown>;
      if (o['type'] === 'SELECT_NODE') {
        blocks++;
        // The parser spells CUBE, ROLLUP and GROUPING SETS out into the list of sets.
        if (Array.isArray(o['group_sets'])) groupingSets += o['group_sets'].length;
      } else if (o['type'] === 'JOIN') joins++;
      for (const x of Object.values(o)) stack.push(x);
    }
  }
  return { blocks, joins, groupingSets };
}

/** A bare table name as the scanner reads it at `at`: an identifier or a double-quoted one. */
const PLAIN_NAME = /[A-Za-z_\u0080-\uffff][A-Za-z0-9_$\u0080-\uffff]*/y;

/** The name written at `at` in `sql` and the characters it takes, or undefined when no name starts there. */
function nameAt(sql: string, at: number): { name: string; length: number } | undefined {
  if (sql[at] === '"') {
    let name = '';
    for (let i = at + 1; i < sql.length; i++) {
      if (sql[i] !== '"') name += sql[i];
      else if (sql[i + 1] === '"') {
        name += '"';
        i++;
      } else return { name, length: i + 1 - at };
    }
    return undefined;
  }
  PLAIN_NAME.lastIndex = at;
  const m = PLAIN_NAME.exec(sql);
  return m === null ? undefined : { name: m[0], length: m[0].length };
}

/** read_parquet's virtual columns: a direct source has them, the view does not. */
const VIRTUAL_COLUMNS: ReadonlySet<string> = new Set(['filename', 'file_index', 'file_row_number']);
/** Characters the parser turns into a space before parsing (its places then count the spaces' bytes). */
const PARSER_SPACES = /[\u0085\u00a0\u1680\u180e\u2000-\u200f\u2028-\u202f\u205f-\u2064\u3000\ufeff]/;

/**
 * The parser's places are byte offsets into the UTF-8 text: `offsets`
 * (ascending) as indexes into the JavaScript string, in one pass.
 */
function charIndexes(text: string, offsets: readonly number[]): number[] {
  const out: number[] = [];
  let bytes = 0;
  let i = 0;
  for (const want of offsets) {
    while (bytes < want && i < text.length) {
      const c = text.charCodeAt(i);
      if (c < 0x80) bytes += 1;
      else if (c < 0x800) bytes += 2;
      else if (c >= 0xd800 && c < 0xdc00 && i + 1 < text.length) {
        bytes += 4; // a surrogate pair: one code point of four bytes
        i++;
      } else bytes += 3;
      i++;
    }
    out.push(bytes === want ? i : -1);
  }
  return out;
}

/**
 * Where the request names a table by its bare name (see the header), from
 * the checked parse tree of `text`, which starts `shift` characters into the
 * request. Empty when any reported place does not hold the reported name.
 */
export function tableRefs(tree: SerializedSql, text: string, shift: number): readonly TableRefAt[] {
  if (PARSER_SPACES.test(text)) return [];
  const ctes = new Set<string>();
  const found: { at: number; name: string; aliased: boolean }[] = [];
  let unsafe = false;
  const walk = (node: unknown): void => {
    if (unsafe) return;
    if (typeof node === 'string') {
      if (VIRTUAL_COLUMNS.has(node.toLowerCase())) unsafe = true;
      return;
    }
    if (Array.isArray(node)) {
      for (const n of node) walk(n);
      return;
    }
    if (node === null || typeof node !== 'object') return;
    const o = node as Record<string, unknown>;
    if (o['ref_type'] === 'NATURAL' || o['join_type'] === 'NATURAL') {
      unsafe = true;
      return;
    }
    // DESCRIBE / SHOW / SUMMARIZE of a table name describe the table itself: left to the view.
    if (o['type'] === 'SHOW_REF') return;
    const map = (o['cte_map'] as { map?: { key?: unknown }[] } | undefined)?.map;
    if (Array.isArray(map)) for (const e of map) ctes.add(String(e.key).toLowerCase());
    if (o['type'] === 'BASE_TABLE' && o['schema_name'] === '' && o['catalog_name'] === '' && typeof o['query_location'] === 'number') {
      found.push({ at: o['query_location'], name: String(o['table_name']), aliased: o['alias'] !== '' });
    }
    for (const v of Object.values(o)) walk(v);
  };
  walk(tree.statements);
  if (unsafe) return [];
  found.sort((a, b) => a.at - b.at);
  const places = charIndexes(
    text,
    found.map((f) => f.at),
  );
  const refs: TableRefAt[] = [];
  for (let k = 0; k < found.length; k++) {
    const f = found[k]!;
    if (ctes.has(f.name.toLowerCase())) continue;
    const at = places[k]!;
    if (at < 0) return [];
    const written = nameAt(text, at);
    if (written === undefined || written.name !== f.name) return [];
    refs.push({ at: at + shift, length: written.length, name: f.name.toLowerCase(), aliased: f.aliased });
  }
  return refs;
}

/** Every key each part of a plain count's tree may have: one more (a newer engine's clause) is not a plain count. */
const STATEMENT_KEYS: ReadonlySet<string> = new Set(['node', 'named_param_map']);
const NODE_KEYS: ReadonlySet<string> = new Set([
  'type',
  'modifiers',
  'cte_map',
  'select_list',
  'from_table',
  'where_clause',
  'group_expressions',
  'group_sets',
  'aggregate_handling',
  'having',
  'sample',
  'qualify',
]);
const COUNT_KEYS: ReadonlySet<string> = new Set([
  'class',
  'type',
  'alias',
  'query_location',
  'function_name',
  'schema',
  'children',
  'filter',
  'order_bys',
  'distinct',
  'is_operator',
  'export_state',
  'catalog',
]);
const TABLE_KEYS: ReadonlySet<string> = new Set(['type', 'alias', 'sample', 'query_location', 'schema_name', 'table_name', 'column_name_alias', 'catalog_name', 'at_clause']);

/** Keys of a SELECT node that must hold exactly these (empty) values for a plain count. */
const PLAIN_NODE: readonly [string, unknown][] = [
  ['type', 'SELECT_NODE'],
  ['where_clause', null],
  ['having', null],
  ['qualify', null],
  ['sample', null],
  ['aggregate_handling', 'STANDARD_HANDLING'],
];

/**
 * The table (lower case) when the checked tree is exactly `SELECT count(*)
 * FROM <bare table name>` (see the header, "Counts from the metadata"), else
 * undefined. Anything not recognised, or any key this does not know to be
 * harmless, is not a plain count.
 */
export function countedTable(tree: SerializedSql): string | undefined {
  const statements = tree.statements;
  if (!Array.isArray(statements) || statements.length !== 1) return undefined;
  const stmt = statements[0] as Record<string, unknown> | null;
  if (!onlyKeys(stmt, STATEMENT_KEYS)) return undefined;
  const params = stmt['named_param_map'];
  if (!Array.isArray(params) || params.length !== 0) return undefined;
  const node = stmt['node'];
  if (!onlyKeys(node, NODE_KEYS)) return undefined;
  for (const [k, v] of PLAIN_NODE) if (node[k] !== v) return undefined;
  if (!isEmptyList(node['modifiers']) || !isEmptyList(node['group_expressions']) || !isEmptyList(node['group_sets'])) return undefined;
  if (!isEmptyList((node['cte_map'] as { map?: unknown } | undefined)?.map)) return undefined;
  const items = node['select_list'];
  if (!Array.isArray(items) || items.length !== 1) return undefined;
  const item: unknown = items[0];
  if (!onlyKeys(item, COUNT_KEYS)) return undefined;
  if (item['class'] !== 'FUNCTION' || item['type'] !== 'FUNCTION' || item['function_name'] !== 'count_star') return undefined;
  if (item['schema'] !== '' || item['catalog'] !== '' || item['distinct'] !== false || item['is_operator'] !== false || item['filter'] !== null || item['export_state'] !== false) return undefined;
  if (!isEmptyList(item['children']) || !isEmptyList((item['order_bys'] as { orders?: unknown } | undefined)?.orders)) return undefined;
  const from = node['from_table'];
  if (!onlyKeys(from, TABLE_KEYS) || from['type'] !== 'BASE_TABLE') return undefined;
  if (from['schema_name'] !== '' || from['catalog_name'] !== '' || from['sample'] !== null || from['at_clause'] !== null) return undefined;
  if (!isEmptyList(from['column_name_alias']) || typeof from['table_name'] !== 'string') return undefined;
  return from['table_name'].toLowerCase();
}

/** `o` is an object whose keys are all in `keys`. */
function onlyKeys(o: unknown, keys: ReadonlySet<string>): o is Record<string, unknown> {
  if (o === null || typeof o !== 'object' || Array.isArray(o)) return false;
  for (const k of Object.keys(o)) if (!keys.has(k)) return false;
  return true;
}

function isEmptyList(v: unknown): boolean {
  return Array.isArray(v) && v.length === 0;
}

/** `sql` with each reference to a table of the context replaced by its source; undefined when none is. */
function withSources(sql: string, refs: readonly TableRefAt[], sources: ReadonlyMap<string, string>): string | undefined {
  let out = '';
  let from = 0;
  let replaced = 0;
  for (const r of refs) {
    const source = sources.get(r.name);
    if (source === undefined || r.at < from) continue;
    // Unaliased, the source takes the name as written, so `logs.body` and `SELECT logs` still mean the table.
    const written = sql.slice(r.at, r.at + r.length);
    out += sql.slice(from, r.at) + source + (r.aliased ? '' : ` AS ${written}`);
    from = r.at + r.length;
    replaced++;
  }
  return replaced === 0 ? undefined : out + sql.slice(from);
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
