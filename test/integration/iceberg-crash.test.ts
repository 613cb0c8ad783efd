// Exactly once across a crash of `siglake compact` between the catalog
// commit and the retirement of the WAL segments it landed (SIGKILL from the
// test hook right after the first commit), on a shared PostgreSQL catalog:
// after a restart, every acknowledged record is in its table once.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import { listLaneDirs } from '../../src/wal/layout.js';
import { listLaneFiles } from '../../src/wal/segment-files.js';
import { icebirdRows, installFileFetch } from '../helpers/iceberg.js';
import { CLI, startIngester, tempDir } from '../helpers/ingester.js';
import { exportLogs, exportSpans, makeLogRecords, makeSpans } from '../helpers/otel.js';
import { startPostgres, type PostgresServer } from '../helpers/postgres.js';

describe('siglake compact killed between commit and retirement', () => {
  let pg: PostgresServer;
  let restoreFetch: () => void;
  beforeAll(async () => {
    pg = await startPostgres();
    restoreFetch = installFileFetch();
  });
  afterAll(async () => {
    restoreFetch();
    await pg.stop();
  });

  it('loses no row and lands none twice', async () => {
    const dataDir = tempDir('siglake-iceberg-crash-');
    const walDir = path.join(dataDir, 'wal');
    const flags = ['--wal-dir', walDir, '--catalog-url', pg.url, '--catalog-name', 'crashtest', '--warehouse', path.join(dataDir, 'warehouse')];
    const logs: Record<string, string[]> = {};
    const spans: Record<string, string[]> = {};
    // Two lives of the ingester: two segments per lane.
    for (const life of [1, 2]) {
      const ing = await startIngester({ dataDir, args: ['--trust-tenant-header', '--compactor=false'] });
      for (const tenant of ['acme', 'globex']) {
        const target = { url: ing.url, grpcAddress: ing.grpcAddress, headers: { 'x-scope-orgid': tenant } };
        const bodies = Array.from({ length: 20 }, (_, i) => `life${life}-${tenant}-${i}`);
        expect((await exportLogs(target, 'http', await makeLogRecords(bodies))).ok).toBe(true);
        (logs[tenant] ??= []).push(...bodies);
        const names = Array.from({ length: 5 }, (_, i) => `life${life}-${tenant}-span-${i}`);
        expect((await exportSpans(target, 'grpc', await makeSpans(names))).ok).toBe(true);
        (spans[tenant] ??= []).push(...names);
      }
      expect(await ing.stop()).toBe(0);
    }
    const liveSegments = () =>
      listLaneDirs(walDir).flatMap((l) => listLaneFiles(l.dir).segments.filter((s) => fs.statSync(s.path).size > 0).map((s) => s.path));
    const before = liveSegments();
    expect(before).toHaveLength(8);

    const crashed = spawnSync(process.execPath, [CLI, 'compact', '--once', '--ingester-stopped', ...flags], {
      env: { ...process.env, SIGLAKE_TEST_HOOKS: '1', SIGLAKE_TEST_CRASH_AFTER_COMMITS: '1' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(crashed.signal).toBe('SIGKILL');
    // One table's commit is visible; no segment was retired.
    const catalog = SqlCatalog.open(pg.url, 'crashtest');
    try {
      const committed: string[] = [];
      for (const ns of ['tenant_acme', 'tenant_globex']) for (const t of await catalog.tables(ns)) committed.push(`${ns}.${t}`);
      expect(committed).toHaveLength(1);
      expect(liveSegments()).toEqual(before);

      const again = spawnSync(process.execPath, [CLI, 'compact', '--once', '--ingester-stopped', ...flags], { encoding: 'utf8', timeout: 60_000 });
      expect(again.status, again.stderr).toBe(0);
      expect(liveSegments()).toEqual([]);
      for (const tenant of ['acme', 'globex']) {
        const ns = `tenant_${tenant}`;
        const logRows = await icebirdRows((await catalog.metadataLocation(ns, 'logs'))!);
        expect(logRows.map((r) => r['body'] as string).sort()).toEqual([...logs[tenant]!].sort());
        const spanRows = await icebirdRows((await catalog.metadataLocation(ns, 'traces'))!);
        expect(spanRows.map((r) => r['name'] as string).sort()).toEqual([...spans[tenant]!].sort());
      }
      // A third run finds nothing to do and changes nothing.
      const third = spawnSync(process.execPath, [CLI, 'compact', '--once', '--ingester-stopped', ...flags], { encoding: 'utf8', timeout: 60_000 });
      expect(third.status).toBe(0);
      expect(await catalog.tables('tenant_acme')).toEqual(['logs', 'traces']);
    } finally {
      await catalog.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
