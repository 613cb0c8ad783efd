// Isolation of the query server: tenant acme tries every way out of its
// namespace, against tenant globex's data and against files of the host.
// Each attempt is refused (400 with a code and the reason, or an unknown
// table) and leaves nothing behind; acme still reads its own rows, and only those.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/ingester.js';
import { AUDIENCE, ISSUER, makeKeyPair, mint, writeJwksFile } from '../helpers/jwt.js';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import { bodiesOf, icebergFlags, landTenants, listFiles, postSql, startQuery, tableFiles, type RunningQuery } from '../helpers/query.js';

const N = 5;
const dataDir = tempDir('siglake-query-isolation-');
const outDir = tempDir('siglake-query-isolation-out-');
const warehouse = path.join(dataDir, 'warehouse');
const globexDir = path.join(warehouse, 'tenant_globex');
const acmeDir = path.join(warehouse, 'tenant_acme');
const lit = (s: string) => `'${s.replace(/'/g, "''")}'`;

/** Filled in by beforeAll: one of globex's data files and its first metadata file. */
const paths = { globexFile: '', globexMetadata: '' };

type Escape = { name: string; sql: () => string; code: 'SIGLAKE_BAD_SQL' | 'SIGLAKE_SQL_REFUSED'; message: RegExp };

const PERMISSION = /Permission Error: Cannot access (file|directory) .* file system operations are disabled by configuration/;
const NOT_READ_ONLY = /only one read-only statement is allowed/;

const ESCAPES: Escape[] = [
  { name: 'another namespace by qualified name', sql: () => 'SELECT * FROM tenant_globex.logs', code: 'SIGLAKE_BAD_SQL', message: /Catalog Error: Table with name .*tenant_globex.*logs.* does not exist/ },
  { name: 'another namespace, catalog-qualified', sql: () => 'SELECT * FROM memory.tenant_globex.logs', code: 'SIGLAKE_BAD_SQL', message: /Catalog Error/ },
  { name: "read_parquet of globex's data file", sql: () => `SELECT * FROM read_parquet(${lit(paths.globexFile)})`, code: 'SIGLAKE_BAD_SQL', message: PERMISSION },
  { name: "read_parquet of globex's data file as a file: URI", sql: () => `SELECT * FROM read_parquet(${lit('file://' + paths.globexFile)})`, code: 'SIGLAKE_BAD_SQL', message: PERMISSION },
  { name: "read_parquet of a glob over globex's directory", sql: () => `SELECT * FROM read_parquet(${lit(globexDir + '/**/*.parquet')})`, code: 'SIGLAKE_BAD_SQL', message: PERMISSION },
  { name: "read_parquet through acme's directory and .. into globex's", sql: () => `SELECT * FROM read_parquet(${lit(acmeDir + '/../tenant_globex/' + path.relative(globexDir, paths.globexFile))})`, code: 'SIGLAKE_BAD_SQL', message: PERMISSION },
  { name: "a replacement scan of globex's data file", sql: () => `SELECT * FROM ${lit(paths.globexFile)}`, code: 'SIGLAKE_BAD_SQL', message: PERMISSION },
  { name: "parquet_metadata of globex's data file", sql: () => `SELECT * FROM parquet_metadata(${lit(paths.globexFile)})`, code: 'SIGLAKE_BAD_SQL', message: PERMISSION },
  { name: 'read_csv of /etc/passwd', sql: () => "SELECT * FROM read_csv('/etc/passwd')", code: 'SIGLAKE_BAD_SQL', message: PERMISSION },
  { name: "read_csv of globex's metadata file", sql: () => `SELECT * FROM read_csv(${lit(paths.globexMetadata)})`, code: 'SIGLAKE_BAD_SQL', message: PERMISSION },
  { name: "read_json of globex's metadata file", sql: () => `SELECT * FROM read_json(${lit(paths.globexMetadata)})`, code: 'SIGLAKE_BAD_SQL', message: PERMISSION },
  { name: 'read_json of /etc/passwd', sql: () => "SELECT * FROM read_json('/etc/passwd')", code: 'SIGLAKE_BAD_SQL', message: PERMISSION },
  { name: 'read_text of /etc/passwd', sql: () => "SELECT * FROM read_text('/etc/passwd')", code: 'SIGLAKE_BAD_SQL', message: PERMISSION },
  { name: "read_text of globex's metadata file", sql: () => `SELECT * FROM read_text(${lit(paths.globexMetadata)})`, code: 'SIGLAKE_BAD_SQL', message: PERMISSION },
  { name: 'read_blob of /etc/passwd', sql: () => "SELECT * FROM read_blob('/etc/passwd')", code: 'SIGLAKE_BAD_SQL', message: PERMISSION },
  { name: "glob over globex's directory", sql: () => `SELECT * FROM glob(${lit(globexDir + '/*')})`, code: 'SIGLAKE_BAD_SQL', message: PERMISSION },
  { name: 'glob over /etc', sql: () => "SELECT * FROM glob('/etc/*')", code: 'SIGLAKE_BAD_SQL', message: PERMISSION },
  // An in-memory engine's default spill directory, `.tmp` under the working directory (the data directory here), was shared by every tenant's engine and readable.
  { name: 'glob over the default spill directory', sql: () => "SELECT * FROM glob('.tmp/*')", code: 'SIGLAKE_BAD_SQL', message: PERMISSION },
  { name: 'read_blob of the default spill directory, by its absolute path', sql: () => `SELECT * FROM read_blob(${lit(path.join(dataDir, '.tmp') + '/*')})`, code: 'SIGLAKE_BAD_SQL', message: PERMISSION },
  { name: 'COPY a table TO a file', sql: () => `COPY logs TO ${lit(path.join(outDir, 'leak.csv'))}`, code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: "COPY a query TO globex's directory", sql: () => `COPY (SELECT 1) TO ${lit(path.join(globexDir, 'x.parquet'))}`, code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'EXPORT DATABASE', sql: () => `EXPORT DATABASE ${lit(path.join(outDir, 'export'))}`, code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'ATTACH the catalog database', sql: () => `ATTACH ${lit(path.join(dataDir, 'catalog.db'))} AS c`, code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'ATTACH an in-memory database', sql: () => "ATTACH ':memory:' AS m", code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'DETACH', sql: () => 'DETACH memory', code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'INSTALL an extension', sql: () => 'INSTALL httpfs', code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'LOAD an extension', sql: () => 'LOAD httpfs', code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'LOAD an extension from a path', sql: () => `LOAD ${lit(path.join(outDir, 'evil.duckdb_extension'))}`, code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'SET enable_external_access back on', sql: () => 'SET enable_external_access = true', code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'SET allowed_directories to the root', sql: () => "SET allowed_directories = ['/']", code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'RESET allowed_paths', sql: () => 'RESET allowed_paths', code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'SET threads', sql: () => 'SET threads = 1', code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'PRAGMA enable_profiling', sql: () => 'PRAGMA enable_profiling', code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'PRAGMA threads', sql: () => 'PRAGMA threads = 1', code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'CALL a function', sql: () => 'CALL pragma_version()', code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'CHECKPOINT', sql: () => 'CHECKPOINT', code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'getenv', sql: () => "SELECT getenv('HOME')", code: 'SIGLAKE_BAD_SQL', message: /getenv does not exist/ },
  { name: 'two statements', sql: () => 'SELECT 1; SELECT 2', code: 'SIGLAKE_SQL_REFUSED', message: /one statement per request, got 2/ },
  { name: 'a SELECT then a SET', sql: () => 'SELECT 1; SET enable_external_access = true', code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'CREATE TABLE AS', sql: () => 'CREATE TABLE t AS SELECT * FROM logs', code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'CREATE VIEW', sql: () => 'CREATE VIEW v AS SELECT 1', code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'CREATE MACRO', sql: () => 'CREATE MACRO m(x) AS x + 1', code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'CREATE SECRET', sql: () => "CREATE SECRET s (TYPE s3, KEY_ID 'a', SECRET 'b')", code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'DROP VIEW logs', sql: () => 'DROP VIEW logs', code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'ALTER VIEW logs', sql: () => 'ALTER VIEW logs RENAME TO l2', code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'INSERT', sql: () => 'INSERT INTO logs SELECT * FROM logs', code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'UPDATE', sql: () => "UPDATE logs SET body = 'x'", code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'DELETE', sql: () => 'DELETE FROM logs', code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'BEGIN a transaction', sql: () => 'BEGIN', code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'EXPLAIN ANALYZE of a state-changing table function', sql: () => "EXPLAIN ANALYZE SELECT * FROM enable_logging(storage = 'stdout')", code: 'SIGLAKE_SQL_REFUSED', message: NOT_READ_ONLY },
  { name: 'a state-changing table function inside a SELECT', sql: () => "SELECT * FROM enable_logging(storage = 'stdout')", code: 'SIGLAKE_SQL_REFUSED', message: /table function enable_logging is not allowed/ },
  { name: 'a checkpoint inside a SELECT', sql: () => 'SELECT * FROM force_checkpoint()', code: 'SIGLAKE_SQL_REFUSED', message: /table function force_checkpoint is not allowed/ },
  { name: 'query() running an unchecked SQL string', sql: () => `SELECT * FROM query(${lit(`SELECT * FROM read_parquet(${lit(paths.globexFile)})`)})`, code: 'SIGLAKE_SQL_REFUSED', message: /table function query is not allowed/ },
  { name: 'a table function taking raw pointers', sql: () => 'SELECT * FROM arrow_scan(1, 2, 3)', code: 'SIGLAKE_SQL_REFUSED', message: /table function arrow_scan is not allowed/ },
  { name: 'a system-qualified table function', sql: () => 'SELECT * FROM system.main.enable_logging()', code: 'SIGLAKE_SQL_REFUSED', message: /table function main\.enable_logging is not allowed/ },
];

// EXPLAIN of each way out is refused just as the way out itself (statement-guard.ts:
// the inner statement goes through the same checks, and binding it inside the
// locked context fails the same way), and EXPLAIN of EXPLAIN too.
const EXPLAINED_ESCAPES: Escape[] = ESCAPES.map((e) => ({ ...e, name: `EXPLAIN of ${e.name}`, sql: () => `EXPLAIN ${e.sql()}` }));

describe('query isolation: tenant acme against globex and the host', () => {
  let q: RunningQuery;
  let acme = '';
  let globex = '';
  let warehouseBefore: string[] = [];

  beforeAll(async () => {
    await landTenants(dataDir, ['acme', 'globex'], 'r1', N);
    const key = await makeKeyPair('ES256', 'k1');
    const jwks = writeJwksFile(dataDir, [key.jwk]);
    acme = await mint(key, { tenant: 'acme' });
    paths.globexFile = (await tableFiles(dataDir, 'globex', 'logs'))[0]!;
    paths.globexMetadata = path.join(globexDir, 'logs', 'metadata', listFiles(path.join(globexDir, 'logs', 'metadata')).find((f) => f.endsWith('.metadata.json'))!);
    globex = await mint(key, { tenant: 'globex' });
    // A small memory limit, so that a query can run out of it (below).
    q = await startQuery(dataDir, [...icebergFlags(dataDir), '--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks, '--query-tenant-claim', 'tenant', '--query-memory-limit-mib', '64']);
    warehouseBefore = listFiles(warehouse);
  }, 120_000);

  afterAll(async () => {
    await q?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.rmSync(outDir, { recursive: true, force: true });
  });

  it.each([...ESCAPES, ...EXPLAINED_ESCAPES])('$name → 400 $code $message', async ({ sql, code, message }) => {
    const a = await postSql(q.url, sql(), { token: acme });
    expect(a.status, a.text).toBe(400);
    const err = a.body['error'] as { code: string; message: string };
    expect(err.code).toBe(code);
    expect(err.message).toMatch(message);
    // Nothing of globex's in the answer, whatever it says.
    expect(a.text).not.toContain('r1-globex');
  });

  it.each([
    ['EXPLAIN ANALYZE of a plain query (it runs the statement)', 'EXPLAIN ANALYZE SELECT count(*) FROM logs'],
    ['explain analyse, lower case, British spelling', 'explain analyse SELECT 1'],
    ['EXPLAIN with a comment before ANALYZE', 'EXPLAIN /* x */ ANALYZE SELECT 1'],
    ['EXPLAIN with an option list', 'EXPLAIN (FORMAT json) SELECT 1'],
    ['EXPLAIN VERBOSE', 'EXPLAIN VERBOSE SELECT 1'],
    ['a comment before EXPLAIN', '/* x */ EXPLAIN SELECT 1'],
  ])('%s → 400, nothing run', async (_name, sql) => {
    const a = await postSql(q.url, sql, { token: acme });
    expect(a.status, a.text).toBe(400);
    expect(['SIGLAKE_SQL_REFUSED', 'SIGLAKE_BAD_SQL']).toContain((a.body['error'] as { code: string }).code);
  });

  it('EXPLAIN ANALYZE is refused with the reason', async () => {
    const a = await postSql(q.url, 'EXPLAIN ANALYZE SELECT count(*) FROM logs', { token: acme });
    expect(a.status).toBe(400);
    expect(a.body['error']).toEqual({ code: 'SIGLAKE_SQL_REFUSED', message: expect.stringMatching(/^EXPLAIN ANALYZE runs the statement and is not allowed/) as unknown });
  });

  it("EXPLAIN of acme's own query returns the engine's plan over acme's files, in JSON and NDJSON", async () => {
    const a = await postSql(q.url, "EXPLAIN SELECT service_name, count(*) AS n FROM logs WHERE body LIKE 'r1%' GROUP BY service_name", { token: acme });
    expect(a.status, a.text).toBe(200);
    expect(a.body['columns']).toEqual([
      { name: 'explain_key', type: 'VARCHAR' },
      { name: 'explain_value', type: 'VARCHAR' },
    ]);
    const rows = a.body['rows'] as string[][];
    expect(rows.map((r) => r[0])).toEqual(['physical_plan']);
    expect(rows[0]![1]).toMatch(/HASH_GROUP_BY/);
    expect(rows[0]![1]).toMatch(/READ_PARQUET|PARQUET_SCAN|TABLE_SCAN/);
    expect(a.text).not.toContain('tenant_globex');
    const nd = await postSql(q.url, 'explain\nSELECT count(*) FROM traces', { token: acme, accept: 'application/x-ndjson' });
    expect(nd.status, nd.text).toBe(200);
    const lines = nd.text.trim().split('\n').map((l) => JSON.parse(l) as Record<string, string>);
    expect(lines.map((l) => l['explain_key'])).toEqual(['physical_plan']);
    // A DESCRIBE can be explained too; EXPLAIN plans, it runs nothing: still 200.
    expect((await postSql(q.url, 'EXPLAIN DESCRIBE logs', { token: acme })).status).toBe(200);
  });

  it('the engine has no directory it may read, and spills nothing: two tenants\' queries past the memory limit at once fail with the limit named, and write no file', async () => {
    const settings = await postSql(q.url, "SELECT current_setting('allowed_directories')::VARCHAR AS d, current_setting('temp_directory') AS t", { token: acme });
    expect(settings.status, settings.text).toBe(200);
    expect(settings.body['rows']).toEqual([['[]', '']]);
    // A window over a sort of 5 × 400,000 rows of about 110 bytes: far past 64 MiB.
    const big = "SELECT count(*) FROM (SELECT s, row_number() OVER (ORDER BY s) AS rn FROM (SELECT body || '-' || r.i || repeat('p', 100) AS s FROM logs, range(400000) r(i)))";
    const answers = await Promise.all([acme, globex, acme, globex].map((token) => postSql(q.url, big, { token })));
    for (const a of answers) {
      expect(a.status, a.text).toBe(500);
      expect(a.body['error']).toEqual({
        code: 'SIGLAKE_QUERY_ENGINE',
        message: expect.stringMatching(/^Out of Memory Error: .*: the query needs more memory than query\.memoryLimitMib gives this tenant's queries, and nothing spills to disk/) as unknown,
      });
      expect(a.text).not.toMatch(/temp_directory/);
    }
    expect(fs.existsSync(path.join(dataDir, '.tmp'))).toBe(false);
    // The server is alive, and each tenant still reads its own rows.
    const g = await postSql(q.url, 'SELECT count(*) AS n FROM logs', { token: globex });
    expect(g.status, g.text).toBe(200);
    expect(g.body['rows']).toEqual([[String(N)]]);
  });

  it("a catalog row of acme's pointing at globex's metadata file is refused, though globex's query resolved that file just before", async () => {
    const g = await postSql(q.url, 'SELECT count(*) AS n FROM logs', { token: globex });
    expect(g.status, g.text).toBe(200);
    const catalog = SqlCatalog.open(`sqlite:${path.join(dataDir, 'catalog.db')}`, 'siglake');
    const acmeLoc = (await catalog.metadataLocation('tenant_acme', 'logs'))!;
    const globexLoc = (await catalog.metadataLocation('tenant_globex', 'logs'))!;
    expect(await catalog.swapMetadataLocation('tenant_acme', 'logs', acmeLoc, globexLoc)).toBe(true);
    try {
      const a = await postSql(q.url, 'SELECT body FROM logs', { token: acme });
      expect(a.status, a.text).toBe(500);
      // Refused as a table that cannot be read (its cause in the server's log, not in the answer).
      expect(a.body['error']).toEqual({ code: 'SIGLAKE_QUERY_ENGINE', message: expect.stringMatching(/^table logs cannot be read now/) as unknown });
      expect(a.text).not.toContain('r1-globex');
      expect(q.logs.some((l) => l.msg.startsWith('table not readable') && String(l['err']).includes("table location is not under its namespace's directory"))).toBe(true);
    } finally {
      expect(await catalog.swapMetadataLocation('tenant_acme', 'logs', globexLoc, acmeLoc)).toBe(true);
      await catalog.close();
    }
  });

  it('after every attempt: nothing written anywhere, acme reads its own rows and only those, the server is alive', async () => {
    expect(listFiles(outDir)).toEqual([]);
    expect(listFiles(warehouse)).toEqual(warehouseBefore);
    const a = await postSql(q.url, 'SELECT body FROM logs ORDER BY body', { token: acme });
    expect(a.status).toBe(200);
    expect(a.body['rows']).toEqual(bodiesOf('acme', 'r1', N).sort().map((b) => [b]));
    // The engine may open exactly acme's data files and nothing else.
    const allowed = await postSql(q.url, "SELECT unnest(current_setting('allowed_paths')) AS p", { token: acme });
    const files = (allowed.body['rows'] as string[][]).map((r) => r[0]!);
    expect(files.sort()).toEqual([...(await tableFiles(dataDir, 'acme', 'logs')), ...(await tableFiles(dataDir, 'acme', 'traces'))].sort());
    expect(files.every((f) => f.startsWith(acmeDir + path.sep))).toBe(true);
    expect(os.platform()).toBe('linux');
  });
});
