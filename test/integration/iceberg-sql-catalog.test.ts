// The SQL catalog against both of its databases: the embedded SQLite file and
// a real PostgreSQL server started for the suite. Commits are a
// compare-and-swap of metadata_location; concurrent writers to one table must
// all land, in order, with no lost snapshot.

import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Compactor } from '../../src/compactor/compactor.js';
import { SealRule } from '../../src/compactor/seal-rule.js';
import { TableBuilder } from '../../src/compactor/table-builder.js';
import { FileStorage } from '../../src/iceberg/file-storage.js';
import { PostgresDriver } from '../../src/iceberg/postgres-driver.js';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import { TableAppender } from '../../src/iceberg/table-appender.js';
import { TableSchema } from '../../src/iceberg/table-schema.js';
import { ZstdCodec, type Compressor } from '../../src/iceberg/zstd-codec.js';
import { createLogger } from '../../src/log.js';
import { LOGS_TABLE } from '../../src/wal/layout.js';
import { icebirdRows, installFileFetch, logsRequest, writeLane } from '../helpers/iceberg.js';
import { startPostgres, type PostgresServer } from '../helpers/postgres.js';
import { postSql, startQuery } from '../helpers/query.js';
import { until } from '../helpers/wait.js';

const log = createLogger('warn');

let pg: PostgresServer;
let restoreFetch: () => void;
let zstd: Compressor;
const dirs: string[] = [];
let dbCounter = 0;

beforeAll(async () => {
  pg = await startPostgres();
  restoreFetch = installFileFetch();
  zstd = await ZstdCodec.load();
});

afterAll(async () => {
  restoreFetch();
  await pg.stop();
  for (const d of dirs) if (!process.env.KEEP) fs.rmSync(d, { recursive: true, force: true });
});

function tmp(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'siglake-cat-'));
  dirs.push(d);
  return d;
}

/** A catalog URL for a fresh, empty catalog of the backend. */
async function freshUrl(kind: 'sqlite' | 'postgres', dir: string): Promise<string> {
  if (kind === 'sqlite') return `sqlite:${path.join(dir, 'catalog.db')}`;
  const name = `cat_${process.pid}_${++dbCounter}`;
  const admin = SqlCatalog.open(pg.url, 'admin');
  await admin.driver.run(`CREATE DATABASE ${name}`);
  await admin.close();
  return pg.url.replace(/\/postgres$/, `/${name}`);
}

/** One small data file of `n` log rows for `table`. */
async function dataFile(storage: FileStorage, ns: string, table: string, n: number, tag: string) {
  const b = new TableBuilder({ namespace: ns, table, schema: TableSchema.LOGS, location: storage.locationOf(ns, table), storage, zstd });
  for (let i = 0; i < n; i++) {
    const row: unknown[] = TableSchema.LOGS.columns.map((c) =>
      c.type === 'map' ? [] : c.type === 'string' ? null : c.type === 'int' ? 0 : c.required ? 0n : null,
    );
    row[0] = 1_767_225_600_000_000n + BigInt(i);
    row[6] = `${tag}-${i}`;
    const p = b.add(row, 10);
    if (p) await p;
  }
  return b.finish();
}

describe.each(['sqlite', 'postgres'] as const)('SQL catalog on %s', (kind) => {
  const open: SqlCatalog[] = [];
  const catalog = async (url: string, name = 'siglake') => {
    const c = SqlCatalog.open(url, name);
    open.push(c);
    return c;
  };
  afterEach(async () => {
    for (const c of open.splice(0)) await c.close();
  });

  it('creates the JdbcCatalog / SqlCatalog tables and namespaces with the `exists` property row', async () => {
    const dir = tmp();
    const url = await freshUrl(kind, dir);
    const cat = await catalog(url);
    if (kind === 'sqlite') expect(fs.existsSync(path.join(dir, 'catalog.db'))).toBe(false); // nothing until first use
    expect(await cat.namespaceExists('tenant_acme')).toBe(false);
    await cat.ensureNamespace('tenant_acme');
    await cat.ensureNamespace('tenant_acme');
    expect(await cat.namespaceExists('tenant_acme')).toBe(true);
    const props = await cat.driver.all('SELECT catalog_name, namespace, property_key, property_value FROM iceberg_namespace_properties');
    expect(props).toEqual([{ catalog_name: 'siglake', namespace: 'tenant_acme', property_key: 'exists', property_value: 'true' }]);
    const cols = await cat.driver.all(
      kind === 'sqlite'
        ? "SELECT name FROM pragma_table_info('iceberg_tables') ORDER BY cid"
        : "SELECT column_name AS name FROM information_schema.columns WHERE table_name = 'iceberg_tables' ORDER BY ordinal_position",
    );
    expect(cols.map((c) => c['name'])).toEqual(['catalog_name', 'table_namespace', 'table_name', 'metadata_location', 'previous_metadata_location']);
    // Another catalog name shares the database but not the rows.
    const other = await catalog(url, 'other');
    expect(await other.namespaceExists('tenant_acme')).toBe(false);
  });

  it('registers a table once and swaps its metadata_location only from the expected value', async () => {
    const cat = await catalog(await freshUrl(kind, tmp()));
    expect(await cat.createTable('main', 'logs', 'file:///w/main/logs/metadata/00000-a.metadata.json')).toBe(true);
    expect(await cat.createTable('main', 'logs', 'file:///w/main/logs/metadata/00000-b.metadata.json')).toBe(false);
    expect(await cat.metadataLocation('main', 'logs')).toBe('file:///w/main/logs/metadata/00000-a.metadata.json');
    expect(await cat.swapMetadataLocation('main', 'logs', 'file:///wrong', 'file:///w/x.json')).toBe(false);
    expect(await cat.swapMetadataLocation('main', 'logs', 'file:///w/main/logs/metadata/00000-a.metadata.json', 'file:///w/main/logs/metadata/00001-c.metadata.json')).toBe(true);
    const row = await cat.driver.all('SELECT metadata_location, previous_metadata_location FROM iceberg_tables');
    expect(row).toEqual([
      { metadata_location: 'file:///w/main/logs/metadata/00001-c.metadata.json', previous_metadata_location: 'file:///w/main/logs/metadata/00000-a.metadata.json' },
    ]);
    expect(await cat.tables('main')).toEqual(['logs']);
    expect(await cat.metadataLocation('main', 'traces')).toBeNull();
    // What the query server compares on each request: every table and its current metadata file, in one statement.
    expect(await cat.createTable('main', 'traces', 'file:///w/main/traces/metadata/00000-t.metadata.json')).toBe(true);
    expect(await cat.tableLocations('main')).toEqual([
      { name: 'logs', metadataLocation: 'file:///w/main/logs/metadata/00001-c.metadata.json' },
      { name: 'traces', metadataLocation: 'file:///w/main/traces/metadata/00000-t.metadata.json' },
    ]);
    expect(await cat.tableLocations('tenant_nobody')).toEqual([]);
  });

  it('honours the V1 schema of Iceberg Java (iceberg_type) when the column is there', async () => {
    const url = await freshUrl(kind, tmp());
    const setup = await catalog(url);
    await setup.ready();
    await setup.driver.run('ALTER TABLE iceberg_tables ADD COLUMN iceberg_type VARCHAR(5)');
    const cat = await catalog(url);
    expect(await cat.createTable('main', 'logs', 'file:///a')).toBe(true);
    expect(await cat.driver.all('SELECT iceberg_type FROM iceberg_tables')).toEqual([{ iceberg_type: 'TABLE' }]);
    await cat.driver.run("INSERT INTO iceberg_tables VALUES ('siglake', 'main', 'v', 'file:///view', NULL, 'VIEW')");
    expect(await cat.tables('main')).toEqual(['logs']);
    expect(await cat.tableLocations('main')).toEqual([{ name: 'logs', metadataLocation: 'file:///a' }]);
    expect(await cat.swapMetadataLocation('main', 'v', 'file:///view', 'file:///x')).toBe(false);
  });

  it('lands every one of many concurrent appends from two writers, in one chain of snapshots', async () => {
    const dir = tmp();
    const url = await freshUrl(kind, dir);
    const storage = new FileStorage(path.join(dir, 'warehouse'));
    let conflicts = 0;
    const appenders = [0, 1].map(
      () => new TableAppender({ catalog: SqlCatalog.open(url, 'siglake'), storage, onConflict: () => conflicts++ }),
    );
    const perWriter = 6;
    const jobs: Promise<unknown>[] = [];
    for (let w = 0; w < 2; w++) {
      for (let k = 0; k < perWriter; k++) {
        jobs.push(
          (async () => {
            const files = await dataFile(storage, 'main', 'logs', 3, `w${w}-${k}`);
            return appenders[w]!.append({
              namespace: 'main',
              table: 'logs',
              schema: TableSchema.LOGS,
              location: storage.locationOf('main', 'logs'),
              files,
              summary: { [`siglake.test.w${w}.k${k}`]: '1' },
            });
          })(),
        );
      }
    }
    const results = (await Promise.all(jobs)) as { status: string; sequenceNumber: bigint }[];
    expect(results.every((r) => r.status === 'committed')).toBe(true);
    expect(conflicts).toBeGreaterThan(0);

    const reader = await catalog(url);
    const loaded = await new TableAppender({ catalog: reader, storage }).load('main', 'logs');
    const chain = loaded!.metadata.ancestry();
    expect(chain).toHaveLength(2 * perWriter);
    expect(loaded!.metadata.snapshots).toHaveLength(2 * perWriter);
    // Sequence numbers 12, 11, …, 1 down the parent chain: every commit built on the one before it.
    expect(chain.map((s) => Number(s.sequenceNumber))).toEqual(Array.from({ length: 2 * perWriter }, (_, i) => 2 * perWriter - i));
    expect([...results.map((r) => Number(r.sequenceNumber))].sort((a, b) => a - b)).toEqual(Array.from({ length: 2 * perWriter }, (_, i) => i + 1));
    // Summary entries carry over: the newest snapshot knows every writer's.
    const summary = chain[0]!.summary;
    for (let w = 0; w < 2; w++) for (let k = 0; k < perWriter; k++) expect(summary[`siglake.test.w${w}.k${k}`]).toBe('1');
    expect(summary['total-records']).toBe(String(2 * perWriter * 3));
    const rows = await icebirdRows(loaded!.metadataLocation);
    expect(rows.map((r) => r['body']).sort()).toEqual(
      [0, 1].flatMap((w) => Array.from({ length: perWriter }, (_, k) => [0, 1, 2].map((i) => `w${w}-${k}-${i}`)).flat()).sort(),
    );
  });

  it('two compactors on two WALs commit to one table concurrently, round after round, losing nothing', async () => {
    const dir = tmp();
    const url = await freshUrl(kind, dir);
    const warehouse = path.join(dir, 'warehouse');
    const wals = [path.join(dir, 'wal-a'), path.join(dir, 'wal-b')];
    const compactors = await Promise.all(
      wals.map((walDir) =>
        Compactor.create({ walDir, catalog: SqlCatalog.open(url, 'siglake'), storage: new FileStorage(warehouse), sealRule: new SealRule('stopped'), log }),
      ),
    );
    const expected: string[] = [];
    for (let round = 0; round < 3; round++) {
      for (let w = 0; w < 2; w++) {
        const bodies = Array.from({ length: 5 }, (_, i) => `wal${w}-r${round}-${i}`);
        expected.push(...bodies);
        await writeLane(wals[w]!, 'acme', LOGS_TABLE, [{ type: 'logs', request: logsRequest(bodies) }]);
      }
      const results = await Promise.all(compactors.map((c) => c.runRound()));
      for (const r of results) expect(r).toMatchObject({ commits: 1, failedTables: 0, retired: 1 });
    }
    const reader = await catalog(url);
    const loaded = await new TableAppender({ catalog: reader, storage: new FileStorage(warehouse) }).load('tenant_acme', 'logs');
    const chain = loaded!.metadata.ancestry();
    expect(chain.map((s) => Number(s.sequenceNumber))).toEqual([6, 5, 4, 3, 2, 1]);
    const progress = Object.entries(chain[0]!.summary).filter(([k]) => k.startsWith('siglake.wal.'));
    expect(progress).toHaveLength(2);
    expect(progress.map(([, v]) => v)).toEqual(['3', '3']);
    const rows = await icebirdRows(loaded!.metadataLocation);
    expect(rows.map((r) => r['body']).sort()).toEqual(expected.sort());
    for (const c of compactors) expect(c.stats.commits).toBe(3);
  });
});

/**
 * A TCP proxy in front of PostgreSQL that drops every packet on the
 * connections it holds while `partitioned` (a blackhole, not a reset): what a
 * cloud network partition looks like. `cut` ends or resets every connection
 * it holds without a word from PostgreSQL (a proxy or NAT reset, a failover);
 * `delayMs` holds the server's answers that long, so a cut finds a statement
 * in flight.
 */
async function blackholeProxy(
  url: string,
  delayMs = 0,
): Promise<{ url: string; partition(on: boolean): void; cut(how: 'end' | 'reset'): number; close(): void }> {
  const target = new URL(url);
  let partitioned = false;
  const held = new Set<net.Socket>();
  const proxy = net.createServer((client) => {
    const server = net.connect(Number(target.port), target.hostname);
    held.add(client);
    let dead = false;
    const pass = (to: net.Socket, delay: number) => (d: Buffer) => {
      if (partitioned) dead = true;
      if (dead) return;
      if (delay === 0) to.write(d);
      else setTimeout(() => !to.destroyed && to.write(d), delay);
    };
    client.on('data', pass(server, 0));
    server.on('data', pass(client, delayMs));
    for (const sock of [client, server]) sock.on('error', () => undefined);
    client.on('close', () => {
      held.delete(client);
      server.destroy();
    });
    server.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const port = (proxy.address() as net.AddressInfo).port;
  return {
    url: url.replace(`:${target.port}/`, `:${port}/`),
    partition: (on) => (partitioned = on),
    cut: (how) => {
      const n = held.size;
      for (const c of held) {
        if (how === 'reset') c.resetAndDestroy();
        else c.end();
      }
      held.clear();
      return n;
    },
    close: () => proxy.close(),
  };
}

describe('the PostgreSQL catalog across a network partition', () => {
  // node-postgres waited on a blackholed connection forever and queued every
  // later statement behind it, so a one-second partition wedged the catalog,
  // and every commit and every query of every tenant with it, for good.
  it('a statement without an answer fails within the timeout, its connection goes, and the catalog works once the network heals', async () => {
    const proxy = await blackholeProxy(pg.url);
    const driver = new PostgresDriver(proxy.url, 800);
    try {
      await Promise.all([driver.all('SELECT 1 AS x'), driver.all('SELECT 2 AS x')]); // both pooled connections open
      proxy.partition(true);
      const t0 = Date.now();
      const lost = await Promise.allSettled([driver.all('SELECT 3 AS x'), driver.all('SELECT 4 AS x')]);
      expect(lost.map((r) => r.status)).toEqual(['rejected', 'rejected']);
      expect(String((lost[0] as PromiseRejectedResult).reason.message)).toMatch(/no answer within 800 ms/);
      expect(Date.now() - t0).toBeLessThan(5_000); // bounded, never forever
      proxy.partition(false);
      expect(await driver.all('SELECT 5 AS x')).toEqual([{ x: 5 }]);
      expect(await driver.all('SELECT 6 AS x')).toEqual([{ x: 6 }]);
    } finally {
      await driver.close();
      proxy.close();
    }
  });

  // A client checked out of node-postgres's pool has no 'error' listener: a connection that ended
  // or was reset without a message from PostgreSQL (a proxy, NAT or load balancer reset, a
  // failover) mid-statement emitted an unhandled 'error' and ended the whole process.
  for (const how of ['reset', 'end'] as const) {
    it(`siglake query survives its catalog connection being cut (${how}) mid-statement, and answers once it reconnects`, async () => {
      const proxy = await blackholeProxy(pg.url, 300);
      const dir = tmp();
      const q = await startQuery(dir, ['--catalog-url', proxy.url, '--warehouse', path.join(dir, 'warehouse')]);
      try {
        expect((await postSql(q.url, 'SELECT 1 AS one')).status).toBe(200);
        for (let i = 0; i < 3; i++) {
          const inFlight = postSql(q.url, `SELECT ${i} AS n`);
          await new Promise((r) => setTimeout(r, 100));
          expect(proxy.cut(how)).toBeGreaterThan(0);
          const r = await inFlight;
          // The cut statement fails its query with the engine's 500 (contract §4), or the query had
          // its catalog answer already; never a crash.
          expect([200, 500], r.text).toContain(r.status);
          if (r.status === 500) expect(r.text).toMatch(/SIGLAKE_QUERY_ENGINE.*PostgreSQL catalog: (read ECONNRESET|Connection terminated)/);
          await new Promise((r) => setTimeout(r, 100));
          expect(q.exitCode, q.stderr).toBeNull();
        }
        await until(async () => (await postSql(q.url, 'SELECT 7 AS seven')).status === 200, 30_000, 'the query server to answer again');
        expect(q.exitCode).toBeNull();
      } finally {
        await q.stop();
        proxy.close();
      }
    });
  }

  it('siglake query answers 504 within query.timeoutSecs while its catalog does not answer, and answers again once it does', async () => {
    const proxy = await blackholeProxy(pg.url);
    const dir = tmp();
    const q = await startQuery(dir, ['--catalog-url', proxy.url, '--warehouse', path.join(dir, 'warehouse'), '--query-timeout-secs', '2']);
    try {
      expect((await postSql(q.url, 'SELECT 1 AS one')).status).toBe(200);
      proxy.partition(true);
      const t0 = Date.now();
      const r = await postSql(q.url, 'SELECT 2 AS two');
      expect(r.status, r.text).toBe(504);
      expect((r.body['error'] as { code: string }).code).toBe('SIGLAKE_QUERY_TIMEOUT');
      expect(Date.now() - t0).toBeLessThan(6_000); // the 2 s bound, not the catalog's 10 s (or forever)
      proxy.partition(false);
      await until(async () => (await postSql(q.url, 'SELECT 3 AS three')).status === 200, 30_000, 'the query server to answer again');
    } finally {
      await q.stop();
      proxy.close();
    }
  });
});
