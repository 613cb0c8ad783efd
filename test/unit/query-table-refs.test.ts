// A query's table names are bound to the tables' own sources in the text the
// engine prepares (statement-guard.ts, "Table references"): the answer must
// be exactly what the same text gives through the views (the oracle: a plain
// DuckDB instance with the views and nothing else), column names included,
// and the plan must be the direct scan's. Real DuckDB on real Parquet files.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance, JsonDuckDBValueConverter, type DuckDBConnection } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runQuery, type QueryResult } from '../../src/query/query-runner.js';
import { countedTable, tableRefs, type SerializedSql } from '../../src/query/statement-guard.js';
import { sqlIdent, sqlString, TenantEngine } from '../../src/query/tenant-engine.js';

let dir: string;
let engine: TenantEngine;
/** The same tables with their true row counts from the metadata. */
let counted: TenantEngine;
/** The same files, opened with a metadata count of logs that is not theirs: shows which path answered. */
let skewed: TenantEngine;
const SKEWED_COUNT = 123_456;
let oracleDb: DuckDBInstance;
let oracle: DuckDBConnection;
const tables: { name: string; files: string[] }[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'siglake-refs-'));
  oracleDb = await DuckDBInstance.create(':memory:');
  oracle = await oracleDb.connect();
  const logs = [join(dir, 'logs-1.parquet'), join(dir, 'logs-2.parquet')];
  await oracle.run(`COPY (SELECT i AS n, 'svc' || (i % 3) AS service_name, CASE WHEN i % 2 = 0 THEN 'INFO' ELSE 'WARN' END AS severity_text FROM range(0, 500) t(i)) TO ${sqlString(logs[0]!)} (FORMAT parquet)`);
  await oracle.run(`COPY (SELECT i AS n, 'svc' || (i % 3) AS service_name, 'ERROR' AS severity_text FROM range(500, 800) t(i)) TO ${sqlString(logs[1]!)} (FORMAT parquet)`);
  const spans = [join(dir, 'spans-1.parquet')];
  await oracle.run(`COPY (SELECT i AS n, 'op' || (i % 4) AS name FROM range(0, 40) t(i)) TO ${sqlString(spans[0]!)} (FORMAT parquet)`);
  tables.push({ name: 'logs', files: logs }, { name: 'spans', files: spans });
  for (const t of tables) await oracle.run(`CREATE VIEW ${sqlIdent(t.name)} AS SELECT * FROM read_parquet([${t.files.map(sqlString).join(', ')}])`);
  engine = await TenantEngine.open(tables, { memoryLimitMib: 256 });
  counted = await TenantEngine.open(
    tables.map((t) => ({ ...t, rowCount: t.name === 'logs' ? 800 : 40 })),
    { memoryLimitMib: 256 },
  );
  skewed = await TenantEngine.open(
    tables.map((t) => ({ ...t, rowCount: t.name === 'logs' ? SKEWED_COUNT : 40 })),
    { memoryLimitMib: 256 },
  );
});

afterAll(() => {
  engine?.close();
  counted?.close();
  skewed?.close();
  oracle?.closeSync();
  oracleDb?.closeSync();
  rmSync(dir, { recursive: true, force: true });
});

async function throughViews(sql: string): Promise<QueryResult> {
  const reader = await oracle.runAndReadAll(sql);
  const types = reader.columnTypes();
  return {
    columns: reader.columnNames().map((name, i) => ({ name, type: types[i]!.toString() })),
    rows: reader.convertRows(JsonDuckDBValueConverter) as QueryResult['rows'],
    truncated: false,
  };
}

const run = (sql: string) => runQuery(engine, sql, { maxRows: 10_000, timeoutMs: 30_000 });

describe('table references bound to their sources', () => {
  const same: [string, string][] = [
    ['count(*) keeps its column name', 'SELECT count(*) FROM logs'],
    ['FROM-first', 'FROM logs SELECT severity_text, count(*) GROUP BY ALL ORDER BY ALL'],
    ['a qualified column through the bare name', 'SELECT logs.service_name, count(*) AS c FROM logs GROUP BY logs.service_name ORDER BY 1'],
    ['the table as a row value keeps its name', 'SELECT logs FROM logs ORDER BY n LIMIT 3'],
    ['upper case and quoted names, each as written', 'SELECT "LOGS".n, "Spans".name FROM LOGS JOIN "Spans" ON LOGS.n = "Spans".n ORDER BY 1'],
    ['aliases, with column aliases', 'SELECT l.a, s.b FROM logs AS l(a) JOIN spans s(b) ON l.a = s.b ORDER BY 1 LIMIT 5'],
    ['a CTE named like a table shadows it', 'WITH logs AS (SELECT 42 AS n) SELECT * FROM logs'],
    ['a CTE shadowing one table, the other still read', 'WITH spans AS (SELECT 7 AS n) SELECT count(*) FROM logs, spans WHERE logs.n = spans.n'],
    ['a table in a subquery, a lateral join and a set operation', 'SELECT (SELECT count(*) FROM spans) AS s, count(*) FROM logs UNION ALL SELECT 1, n FROM logs WHERE n = 3 ORDER BY 1, 2'],
    ['the name inside a string literal and a comment is left alone', "SELECT 'logs' AS logs, count(*) /* FROM logs */ FROM logs"],
    ['non-ASCII text before the table name', "SELECT 'é€😀' AS \"ünï\", count(*) FROM logs WHERE service_name <> 'ö'"],
    ['a sample clause after the name', 'SELECT count(*) FROM logs USING SAMPLE 100 ROWS'],
    // read_parquet's virtual columns must not capture a name the view would not have.
    ['an outer filename in a correlated subquery', "WITH t AS (SELECT 'x' AS filename) SELECT (SELECT count(*) FROM logs WHERE filename = 'x') AS c FROM t"],
    ['an outer file_index in a correlated subquery', 'WITH t AS (SELECT 1 AS file_index) SELECT (SELECT count(*) FROM logs WHERE file_index = 1) AS c FROM t'],
    ['an outer file_row_number in a correlated subquery', 'WITH t AS (SELECT 1 AS file_row_number) SELECT (SELECT count(*) FROM logs WHERE file_row_number = 1) AS c FROM t'],
    ['a NATURAL join with a filename column', "WITH t AS (SELECT 0::BIGINT AS n, 'a' AS filename) SELECT count(*) FROM t NATURAL JOIN logs"],
    // An unaliased subquery is named after its text: the replaced text would name it after the files.
    ['an unaliased scalar subquery', 'SELECT (SELECT count(*) FROM spans)'],
    ['unaliased EXISTS and IN subqueries', 'SELECT EXISTS (SELECT 1 FROM spans), 3 IN (SELECT n FROM logs)'],
    // The parser turns these into spaces before parsing: its places would not be the text's.
    ['no-break spaces before a quoted alias named like the table', 'SELECT' + '\u00a0'.repeat(12) + ' count(*) AS "logs" FROM logs'],
    ['an ideographic space', 'SELECT\u3000count(*) FROM logs'],
    ['emoji and accents before several references', "SELECT '😀é' AS a, (SELECT count(*) FROM spans) AS s, count(*) AS c FROM logs JOIN spans USING (n)"],
    ['DESCRIBE of a table', 'DESCRIBE logs'],
    ['SUMMARIZE of a query', 'SUMMARIZE SELECT n FROM spans'],
  ];
  it.each(same)('%s: %s', async (_what, sql) => {
    expect(await run(sql)).toEqual(await throughViews(sql));
  });

  it('an unknown table is the engine\'s own error about the name the user wrote', async () => {
    await expect(run('SELECT * FROM metrics_sum')).rejects.toThrow(/metrics_sum/);
    await expect(run('SELECT * FROM logs JOIN nowhere USING (n)')).rejects.toThrow(/nowhere/);
  });

  it('the plan scans the Parquet files directly: no projection between the scan and count(*)', async () => {
    const plan = async (r: QueryResult) => r.rows.map((row) => row.join('\n')).join('\n');
    const viaViews = await plan(await throughViews('EXPLAIN SELECT count(*) FROM logs'));
    expect(viaViews).toMatch(/PROJECTION/);
    const served = await plan(await run('EXPLAIN SELECT count(*) FROM logs'));
    expect(served).toMatch(/READ_PARQUET|PARQUET_SCAN|TABLE_SCAN/);
    expect(served).not.toMatch(/PROJECTION/);
    // The same with a multi-byte character before the name (the parser's places are UTF-8 byte offsets).
    const unicode = await plan(await run("EXPLAIN SELECT count(*) AS \"ñ€\" FROM logs"));
    expect(unicode).not.toMatch(/PROJECTION/);
  });

  it('an error while running a replaced statement shows none of the replaced text', async () => {
    const err = await run('SELECT CAST(service_name AS INT) FROM logs').then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/^Conversion Error: Could not convert string 'svc\d' to INT32/);
    expect(err?.message).not.toMatch(/read_parquet|\.parquet/);
  });

  it('many references after a multi-byte character are all replaced (one pass over the text)', async () => {
    const sql = `SELECT 'ü' AS u, ${Array.from({ length: 200 }, (_, i) => `(SELECT count(*) FROM logs WHERE n > ${i}) AS c${i}`).join(', ')}`;
    expect(await run(sql)).toEqual(await throughViews(sql));
    const tree = JSON.parse(String((await oracle.runAndReadAll('SELECT json_serialize_sql($1::VARCHAR)', [sql])).getRows()[0]![0])) as SerializedSql;
    const refs = tableRefs(tree, sql, 0);
    expect(refs).toHaveLength(200);
    for (const r of refs) expect(sql.slice(r.at, r.at + r.length)).toBe('logs');
  });

  it('a kept statement answers the same on its next execution', async () => {
    const sql = 'SELECT severity_text, count(*) FROM logs GROUP BY 1 ORDER BY 1';
    const first = await run(sql);
    expect(await run(sql)).toEqual(first);
    expect(first).toEqual(await throughViews(sql));
  });
});

describe('a plain count of one table answered from the Iceberg metadata', () => {
  const onEngine = (e: TenantEngine, sql: string) => runQuery(e, sql, { maxRows: 10_000, timeoutMs: 30_000 });
  const treeOf = async (sql: string) => JSON.parse(String((await oracle.runAndReadAll('SELECT json_serialize_sql($1::VARCHAR)', [sql])).getRows()[0]![0])) as SerializedSql;

  // Each answered from the metadata: the skewed engine gives its metadata count, not the files'.
  const plain: [string, string][] = [
    ['count(*)', 'SELECT count(*) FROM logs'],
    ['an alias for the column', 'SELECT count(*) AS n FROM logs'],
    ['count_star() by name', 'SELECT count_star() FROM logs'],
    ['an alias for the table, upper case, quoted', 'SELECT COUNT(*) AS "N" FROM "LOGS" AS l'],
    ['FROM-first', 'FROM logs SELECT count(*)'],
    ['a comment and new lines', 'SELECT /* all */ count(*)\nFROM\nlogs -- rows'],
  ];
  it.each(plain)('%s: %s', async (_what, sql) => {
    expect(countedTable(await treeOf(sql))).toBe('logs');
    const oracleAnswer = await throughViews(sql);
    expect(await onEngine(counted, sql)).toEqual(oracleAnswer);
    const fromMetadata = await onEngine(skewed, sql);
    expect(fromMetadata.columns).toEqual(oracleAnswer.columns);
    expect(fromMetadata.rows).toEqual([[String(SKEWED_COUNT)]]);
  });

  // Anything else is planned by the engine over the files: the skewed engine answers what the views do.
  const other: [string, string][] = [
    ['a WHERE clause', 'SELECT count(*) FROM logs WHERE true'],
    ['LIMIT 0 (no row at all)', 'SELECT count(*) FROM logs LIMIT 0'],
    ['OFFSET 1 (no row at all)', 'SELECT count(*) FROM logs OFFSET 1'],
    ['HAVING', 'SELECT count(*) FROM logs HAVING count(*) > 1000000'],
    ['QUALIFY', 'SELECT count(*) FROM logs QUALIFY row_number() OVER () = 2'],
    ['GROUP BY', 'SELECT count(*) FROM logs GROUP BY service_name ORDER BY 1'],
    ['GROUP BY ALL', 'SELECT count(*) FROM logs GROUP BY ALL'],
    ['GROUP BY ()', 'SELECT count(*) FROM logs GROUP BY ()'],
    ['DISTINCT', 'SELECT DISTINCT count(*) FROM logs'],
    ['ORDER BY', 'SELECT count(*) FROM logs ORDER BY 1'],
    ['FILTER', 'SELECT count(*) FILTER (WHERE n > 10) FROM logs'],
    ['a window', 'SELECT count(*) OVER () FROM logs LIMIT 1'],
    ['count of a column', 'SELECT count(n) FROM logs'],
    ['count(1)', 'SELECT count(1) FROM logs'],
    ['count(DISTINCT …)', 'SELECT count(DISTINCT service_name) FROM logs'],
    ['an expression on the count', 'SELECT count(*) + 0 FROM logs'],
    ['two select items', 'SELECT count(*), count(*) FROM logs'],
    ['a sample', 'SELECT count(*) FROM logs USING SAMPLE 10 ROWS'],
    ['a table sample', 'SELECT count(*) FROM logs TABLESAMPLE 10 ROWS'],
    ['a join', 'SELECT count(*) FROM logs, spans'],
    ['a subquery', 'SELECT count(*) FROM (SELECT * FROM logs)'],
    ['a CTE named like the table', 'WITH logs AS (SELECT 1 AS n) SELECT count(*) FROM logs'],
    ['a CTE beside the table', 'WITH x AS (SELECT 1) SELECT count(*) FROM logs'],
    ['a set operation', 'SELECT count(*) FROM logs UNION ALL SELECT count(*) FROM logs'],
    ['column aliases on the table', 'SELECT count(*) FROM logs AS l(a)'],
    ['a table function', "SELECT count(*) FROM range(5)"],
  ];
  it.each(other)('%s: %s', async (_what, sql) => {
    expect(countedTable(await treeOf(sql))).toBeUndefined();
    const oracleAnswer = await throughViews(sql);
    expect(await onEngine(counted, sql)).toEqual(oracleAnswer);
    expect(await onEngine(skewed, sql)).toEqual(oracleAnswer);
  });

  it('EXPLAIN of a plain count shows the scan of the files, not a constant', async () => {
    const plan = (await onEngine(skewed, 'EXPLAIN SELECT count(*) FROM logs')).rows.map((r) => r.join('\n')).join('\n');
    expect(plan).toMatch(/READ_PARQUET|PARQUET_SCAN|TABLE_SCAN/);
    expect(plan).not.toContain(String(SKEWED_COUNT));
  });

  it('a table with no metadata count, and an unknown table, take the engine\'s path', async () => {
    expect(await onEngine(skewed, 'SELECT count(*) FROM spans')).toEqual(await throughViews('SELECT count(*) FROM spans'));
    expect(await onEngine(engine, 'SELECT count(*) FROM logs')).toEqual(await throughViews('SELECT count(*) FROM logs'));
    await expect(onEngine(skewed, 'SELECT count(*) FROM metrics_sum')).rejects.toThrow(/metrics_sum/);
  });

  it('a kept statement is answered from the metadata of its own context on its next execution', async () => {
    const sql = 'SELECT count(*) AS kept FROM logs';
    for (let i = 0; i < 3; i++) {
      expect((await onEngine(skewed, sql)).rows).toEqual([[String(SKEWED_COUNT)]]);
      expect((await onEngine(counted, sql)).rows).toEqual([['800']]);
    }
  });
});
