// Where a query's time goes between DuckDB called directly and the query
// server's engine path (issue 15), in one process, interleaved: the same
// files, the same query, each variant run in turn, median wall and mean CPU
// over the runs. No HTTP: this isolates the engine side.
//
//   node perf/run-ts.mjs perf/query-stages.ts [--rows 2000000] [--files 20] [--runs 31] [--dir /tmp/x (keep the files)] [--only count]
//
// With --dir the files are made once and reused by later runs (--rows and
// --files then apply to the first run only).

import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance, JsonDuckDBValueConverter, type DuckDBConnection, type DuckDBPreparedStatement } from '@duckdb/node-api';
import { runQuery } from '../src/query/query-runner.js';
import { TenantEngine } from '../src/query/tenant-engine.js';

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(name);
  return i === -1 ? dflt : process.argv[i + 1]!;
}
const ROWS = Number(arg('--rows', '2000000'));
const FILES = Number(arg('--files', '20'));
const RUNS = Number(arg('--runs', '31'));
const KEEP = arg('--dir', '');
const ONLY = arg('--only', '');

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

async function makeFiles(dir: string): Promise<string[]> {
  const listing = path.join(dir, 'files.json');
  if (fs.existsSync(listing)) return JSON.parse(fs.readFileSync(listing, 'utf8')) as string[];
  fs.mkdirSync(dir, { recursive: true });
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  const files: string[] = [];
  const per = Math.ceil(ROWS / FILES);
  for (let f = 0; f < FILES; f++) {
    const file = path.join(dir, `${randomUUID()}.parquet`);
    const lo = f * per;
    const hi = Math.min(ROWS, lo + per);
    await conn.run(`COPY (
      SELECT TIMESTAMP '2026-01-15 00:00:00' + to_microseconds(range) AS time,
             'svc-' || (range % 16) AS service_name,
             'INFO' AS severity_text,
             'body-' || range AS body,
             MAP {'k': 'v' || (range % 100), 'n': (range % 7)::VARCHAR} AS attributes
      FROM range(${lo}, ${hi})) TO '${file}' (FORMAT parquet, COMPRESSION zstd)`);
    files.push(file);
  }
  conn.closeSync();
  db.closeSync();
  fs.writeFileSync(listing, JSON.stringify(files));
  return files;
}

async function drain(conn: DuckDBConnection, sql: string): Promise<unknown> {
  return (await conn.runAndReadAll(sql)).getRowsJson();
}

/** Streams a prepared statement chunk by chunk, as the server's runQuery does. */
async function streamAll(p: DuckDBPreparedStatement): Promise<unknown[]> {
  const r = await p.stream();
  const rows: unknown[] = [];
  for (;;) {
    const c = await r.fetchChunk();
    if (c === null || c.rowCount === 0) break;
    rows.push(...c.convertRows(JsonDuckDBValueConverter));
  }
  return rows;
}

async function main(): Promise<void> {
  const dir = KEEP !== '' ? KEEP : fs.mkdtempSync(path.join(os.tmpdir(), 'siglake-query-stages-'));
  const files = await makeFiles(dir);
  const source = `read_parquet([${files.map((f) => `'${f}'`).join(', ')}])`;

  // What perf/query-overhead.ts's direct side is: a plain instance, the footer cache, the inline source.
  const plain = await DuckDBInstance.create(':memory:');
  const pc = await plain.connect();
  await pc.run('SET parquet_metadata_cache = true');
  await pc.run(`CREATE VIEW logs AS SELECT * FROM ${source}`);
  // The server's tenant context, built by the server's own code.
  const engine = await TenantEngine.open([{ name: 'logs', files }], { memoryLimitMib: 1024 });
  const borrowed = await engine.borrow();
  const ec = borrowed.conn;
  engine.giveBack(borrowed, true);

  // The context as built before 9a58260: the footer cache SET without GLOBAL on the
  // setting-up connection only, the queries on a connection of their own.
  const old = await DuckDBInstance.create(':memory:', { autoinstall_known_extensions: 'false', autoload_known_extensions: 'false', allow_community_extensions: 'false', memory_limit: '1024MiB' });
  const setup = await old.connect();
  await setup.run(`CREATE VIEW logs AS SELECT * FROM ${source}`);
  await setup.run('SET parquet_metadata_cache = true');
  await setup.run(`SET allowed_paths = [${files.map((f) => `'${f}'`).join(', ')}]::VARCHAR[]`);
  await setup.run('SET allowed_directories = []::VARCHAR[]');
  await setup.run('SET enable_external_access = false');
  await setup.run('SET lock_configuration = true');
  setup.closeSync();
  const oc = await old.connect();

  const queries: [string, string][] = [
    ['count(*)', 'SELECT count(*) AS n FROM logs'],
    ['GROUP BY', 'SELECT service_name, count(*) AS n FROM logs GROUP BY service_name ORDER BY service_name'],
    ['SELECT 1', 'SELECT 1 AS one'],
  ];
  for (const [qname, sql] of queries) {
    if (ONLY !== '' && !qname.startsWith(ONLY)) continue;
    const inline = sql.replace(/\blogs\b/, source);
    const pPlain = await pc.prepare(sql);
    const pEngine = await ec.prepare(sql);
    const pOld = await oc.prepare(sql);
    const variants: [string, () => Promise<unknown>][] = [
      ['plain, inline read_parquet, runAndReadAll (bench direct)', () => drain(pc, inline)],
      ['plain, view, runAndReadAll', () => drain(pc, sql)],
      ['plain, view, prepared.run()', async () => (await pPlain.runAndReadAll()).getRowsJson()],
      ['plain, view, prepared.stream() + fetchChunk', () => streamAll(pPlain)],
      ['locked, view, runAndReadAll', () => drain(ec, sql)],
      ['locked, view, prepared.run()', async () => (await pEngine.runAndReadAll()).getRowsJson()],
      ['locked, view, prepared.stream() + fetchChunk', () => streamAll(pEngine)],
      ['server runQuery (borrow, guard, kept statement, stream)', () => runQuery(engine, sql, { maxRows: 10_000, timeoutMs: 60_000 })],
      ['locked as before 9a58260 (footer cache on the setup connection only), prepared.stream() + fetchChunk', () => streamAll(pOld)],
    ];
    const wall = variants.map(() => [] as number[]);
    const cpu = variants.map(() => [] as number[]);
    for (const [, f] of variants) await f();
    for (let i = 0; i < RUNS; i++) {
      for (let v = 0; v < variants.length; v++) {
        const u = process.cpuUsage();
        const s = performance.now();
        await variants[v]![1]();
        wall[v]!.push(performance.now() - s);
        const d = process.cpuUsage(u);
        cpu[v]!.push((d.user + d.system) / 1000);
      }
    }
    process.stdout.write(`\n${qname}: ${files.length} files, ${RUNS} runs interleaved\n| variant | wall median (ms) | CPU mean (ms) |\n| --- | --- | --- |\n`);
    for (let v = 0; v < variants.length; v++) {
      process.stdout.write(`| ${variants[v]![0]} | ${median(wall[v]!).toFixed(2)} | ${mean(cpu[v]!).toFixed(2)} |\n`);
    }
    pPlain.destroySync();
    pEngine.destroySync();
    pOld.destroySync();
  }
  oc.closeSync();
  old.closeSync();
  pc.closeSync();
  plain.closeSync();
  engine.close();
  if (KEEP === '') fs.rmSync(dir, { recursive: true, force: true });
}

main().catch((e: unknown) => {
  process.stderr.write(`${(e as Error).stack}\n`);
  process.exit(1);
});
