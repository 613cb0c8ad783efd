// Several ingesters, one lake: two `siglake ingest` processes with their own
// WAL directories share one PostgreSQL catalog and one S3 bucket (SeaweedFS)
// and compact the same tenants' tables concurrently, while a third replica's
// `siglake compact` is SIGKILLed mid-commit (its data files, manifests and
// metadata file written to the bucket, the catalog swap not done). Then the
// replicas are drained for a scale-down. Every acknowledged record must be in
// its table exactly once, each table's history must be one linear chain
// (every snapshot the child of the one before, sequence numbers 1..n), and
// the killed commit's objects, unreferenced by any metadata the catalog
// points at, must be invisible to a reader.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import { icebirdDataFiles, icebirdRows } from '../helpers/iceberg.js';
import { CLI, runCli, startIngester, tempDir, walDump, type LogLine, type RunningIngester } from '../helpers/ingester.js';
import { exportLogs, makeLogRecords } from '../helpers/otel.js';
import { startPostgres, type PostgresServer } from '../helpers/postgres.js';
import { installS3Fetch, SeaweedFs, splitS3 } from '../helpers/seaweedfs.js';

const BUCKET = 'siglake-fleet';
const TENANTS = ['acme', 'globex'];
const CATALOG_NAME = 'fleet';

interface Snapshot {
  'snapshot-id': number | string;
  'parent-snapshot-id'?: number | string;
  'sequence-number': number;
  summary: Record<string, string>;
}

async function until<T>(what: string, deadlineMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe('two ingesters, one PostgreSQL catalog, one S3 bucket', () => {
  let pg: PostgresServer;
  let sw: SeaweedFs;
  let restoreFetch: () => void;
  const dirs: string[] = [];
  const running: RunningIngester[] = [];

  beforeAll(async () => {
    [pg, sw] = await Promise.all([startPostgres(), SeaweedFs.start()]);
    await sw.createBucket(BUCKET);
    restoreFetch = installS3Fetch(sw);
  });
  afterAll(async () => {
    for (const r of running) await r.kill9();
    restoreFetch?.();
    await Promise.all([sw?.stop(), pg?.stop()]);
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it('lands every acknowledged record exactly once with a linear history, through a mid-commit kill and a drain', async () => {
    const lake = ['--catalog-url', pg.url, '--catalog-name', CATALOG_NAME, ...sw.warehouseFlags(BUCKET, 'lake')];
    /** tenant → log bodies acknowledged (by any replica). */
    const acked = new Map<string, string[]>(TENANTS.map((t) => [t, []]));

    // Replica C: its WAL is written with its compactor off, landed later by a `siglake compact` that is killed mid-commit.
    const dirC = tempDir('siglake-fleet-c-');
    dirs.push(dirC);
    const c = await startIngester({ dataDir: dirC, args: ['--trust-tenant-header', '--compactor=false', ...lake], env: sw.env });
    for (const tenant of TENANTS) {
      const bodies = Array.from({ length: 30 }, (_, i) => `c-${tenant}-${i}`);
      const out = await exportLogs({ url: c.url, grpcAddress: c.grpcAddress, headers: { 'x-scope-orgid': tenant } }, 'http', await makeLogRecords(bodies));
      expect(out.ok).toBe(true);
      acked.get(tenant)!.push(...bodies);
    }
    expect(await c.stop()).toBe(0);

    // Replicas A and B: compactors on, segments sealed after a second, a round every second: they race on the same tables.
    const replicas: RunningIngester[] = [];
    for (const name of ['a', 'b']) {
      const dataDir = tempDir(`siglake-fleet-${name}-`);
      dirs.push(dataDir);
      const args = ['--trust-tenant-header', '--wal-segment-max-age-secs', '1', '--compact-interval-secs', '1', ...lake];
      if (name === 'b') args.push('--drain-on-shutdown');
      // Each commit held 700 ms before its swap, with a compaction every second: the two replicas' commits
      // to a shared table overlap whatever the phase between their cycles, and race.
      // A checkpoint every 500 ms (10 s by default): under the batch journal the compactor lands a sealed
      // segment only once a checkpoint has marked it, and the race needs landings every second or so.
      const ing = await startIngester({ dataDir, args, env: { ...sw.env, SIGLAKE_TEST_COMMIT_DELAY_MS: '700', SIGLAKE_TEST_CHECKPOINT_MS: '500' } });
      running.push(ing);
      replicas.push(ing);
    }
    const [a, b] = replicas as [RunningIngester, RunningIngester];
    const sendTo = async (ing: RunningIngester, name: string, batch: number) => {
      for (const tenant of TENANTS) {
        const bodies = Array.from({ length: 10 }, (_, i) => `${name}-${tenant}-${batch}-${i}`);
        const out = await exportLogs({ url: ing.url, grpcAddress: ing.grpcAddress, headers: { 'x-scope-orgid': tenant } }, 'http', await makeLogRecords(bodies));
        expect(out.ok, out.error?.message).toBe(true);
        acked.get(tenant)!.push(...bodies);
      }
    };
    const conflicts = async () => {
      let n = 0;
      for (const r of [a, b]) n += (await r.metric('siglake_compactor_commit_conflicts_total')) ?? 0;
      return n;
    };
    // Load on both until the replicas have raced for a table at least once (a lost compare-and-set, retried).
    let raced = false;
    const load = async (ing: RunningIngester, name: string) => {
      for (let i = 0; i < 12 || (!raced && i < 200); i++) {
        await sendTo(ing, name, i);
        await new Promise((r) => setTimeout(r, 150)); // spread the batches over several segments and rounds
        if (name === 'a' && i >= 12) raced = (await conflicts()) > 0;
      }
    };

    // While A and B take load and compact, C's compaction is killed between writing its commit and the catalog swap.
    const loading = Promise.all([load(a, 'a'), load(b, 'b')]);
    const killed = await new Promise<{ signal: NodeJS.Signals | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [CLI, 'compact', '--once', '--ingester-stopped', '--wal-dir', path.join(dirC, 'wal'), ...lake], {
        env: { ...process.env, ...sw.env, SIGLAKE_TEST_HOOKS: '1', SIGLAKE_TEST_CRASH_BEFORE_COMMITS: '1' },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.once('exit', (_code, signal) => resolve({ signal, stderr }));
    });
    expect(killed.signal, killed.stderr).toBe('SIGKILL');
    await loading;

    const catalog = SqlCatalog.open(pg.url, CATALOG_NAME);
    try {
      // Nothing of C is visible: readers follow the catalog's metadata, which never named the killed commit's files.
      const bodiesNow = async (tenant: string): Promise<string[]> => {
        const loc = await catalog.metadataLocation(`tenant_${tenant}`, 'logs');
        return loc === null ? [] : (await icebirdRows(loc)).map((r) => r['body'] as string);
      };
      for (const tenant of TENANTS) expect((await bodiesNow(tenant)).filter((x) => x.startsWith('c-'))).toEqual([]);
      // ...though its objects are in the bucket: Parquet files no manifest of the current snapshot lists.
      const referenced = new Set<string>();
      for (const tenant of TENANTS) {
        const loc = await catalog.metadataLocation(`tenant_${tenant}`, 'logs');
        if (loc !== null) for (const f of await icebirdDataFiles(loc)) referenced.add(f.path);
      }
      const orphansAfterKill = (await sw.keys(BUCKET, 'lake/')).filter((k) => k.includes('/data/') && !referenced.has(`s3://${BUCKET}/${k}`));
      expect(orphansAfterKill.length).toBeGreaterThan(0);

      // C's WAL is landed by a compaction that runs to the end, while A and B still compact.
      const rerun = runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', path.join(dirC, 'wal'), ...lake], { env: sw.env });
      expect(rerun.status, rerun.stderr).toBe(0);
      expect(walDump(path.join(dirC, 'wal'))).toEqual([]);

      // The replicas did race: some commit lost its compare-and-set and was retried on top of the winner.
      expect(await until('a lost compare-and-set', 60_000, async () => ((await conflicts()) > 0 ? true : undefined))).toBe(true);

      // Scale-down: A stops and its volume is drained by `siglake drain`; B drains itself at SIGTERM.
      expect(await a.stop(60_000)).toBe(0);
      const drained = runCli(['drain', '--wal-dir', a.walDir, ...lake], { env: sw.env });
      expect(drained.status, drained.stderr + drained.stdout.slice(-2000)).toBe(0);
      expect(await b.stop(120_000)).toBe(0);
      expect(b.logs.find((l: LogLine) => l.msg === 'drained')).toMatchObject({ left: [] });
      expect(walDump(a.walDir)).toEqual([]);
      expect(walDump(b.walDir)).toEqual([]);

      for (const tenant of TENANTS) {
        // Exactly once: the sorted lists are equal, so no record is missing and none is there twice.
        const got = await until(`${tenant} rows`, 60_000, async () => {
          const rows = await bodiesNow(tenant);
          return rows.length >= acked.get(tenant)!.length ? rows : undefined;
        });
        expect(got.sort()).toEqual([...acked.get(tenant)!].sort());

        // Linear history: one chain of snapshots, sequence numbers 1..n, each the parent of the next.
        const loc = (await catalog.metadataLocation(`tenant_${tenant}`, 'logs'))!;
        const md = JSON.parse(Buffer.from(await (await fetch(`https://${BUCKET}.s3.amazonaws.com/${splitS3(loc)[1]}`)).arrayBuffer()).toString()) as {
          snapshots: Snapshot[];
          'current-snapshot-id': number | string;
          'last-sequence-number': number;
          'metadata-log': { 'metadata-file': string }[];
        };
        const snaps = [...md.snapshots].sort((x, y) => x['sequence-number'] - y['sequence-number']);
        expect(snaps.map((s) => s['sequence-number'])).toEqual(snaps.map((_, i) => i + 1));
        for (let i = 1; i < snaps.length; i++) expect(String(snaps[i]!['parent-snapshot-id'])).toBe(String(snaps[i - 1]!['snapshot-id']));
        expect(String(md['current-snapshot-id'])).toBe(String(snaps.at(-1)!['snapshot-id']));
        expect(md['last-sequence-number']).toBe(snaps.length);
        // One metadata file per commit, each one's predecessor in the log.
        expect(md['metadata-log']).toHaveLength(snaps.length - 1);
        // Every replica's WAL is recorded in the table's progress (they all committed to it).
        const walIds = new Set(snaps.flatMap((s) => Object.keys(s.summary).filter((k) => k.startsWith('siglake.wal.')).map((k) => k.split('.')[2])));
        expect(walIds.size).toBe(3);
      }
    } finally {
      await catalog.close();
    }
  });
});
