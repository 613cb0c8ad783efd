// Scale-down: a WAL volume is about to go. `siglake drain` (on the stopped
// ingester's volume) and `--drain-on-shutdown` (the ingester's own SIGTERM
// path) must land every acknowledged record in the Iceberg tables and leave
// no record in the WAL; a segment that cannot be landed (corrupt) makes the
// drain fail, so the volume is kept.

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import { listLaneDirs } from '../../src/wal/layout.js';
import { listLaneFiles } from '../../src/wal/segment-files.js';
import { icebirdRows, installFileFetch } from '../helpers/iceberg.js';
import { runCli, startIngester, tempDir, walDump, type LogLine, type RunningIngester } from '../helpers/ingester.js';
import { exportLogs, exportSpans, makeLogRecords, makeSpans } from '../helpers/otel.js';

/** Sends logs and spans for two tenants; returns tenant → table → what was acknowledged. */
async function sendSome(ing: RunningIngester, tag: string): Promise<Map<string, Map<string, string[]>>> {
  const acked = new Map<string, Map<string, string[]>>();
  for (const tenant of ['acme', 'globex']) {
    const target = { url: ing.url, grpcAddress: ing.grpcAddress, headers: { 'x-scope-orgid': tenant } };
    const bodies = Array.from({ length: 12 }, (_, i) => `${tag}-${tenant}-log-${i}`);
    const logs = await exportLogs(target, 'http', await makeLogRecords(bodies));
    expect(logs.ok, logs.error?.message).toBe(true);
    const names = Array.from({ length: 4 }, (_, i) => `${tag}-${tenant}-span-${i}`);
    const spans = await exportSpans(target, 'grpc', await makeSpans(names));
    expect(spans.ok, spans.error?.message).toBe(true);
    acked.set(
      tenant,
      new Map([
        ['logs', bodies],
        ['traces', names],
      ]),
    );
  }
  return acked;
}

async function expectTables(catalogUrl: string, acked: Map<string, Map<string, string[]>>): Promise<void> {
  const catalog = SqlCatalog.open(catalogUrl, 'siglake');
  try {
    for (const [tenant, tables] of acked) {
      for (const [table, items] of tables) {
        const loc = await catalog.metadataLocation(`tenant_${tenant}`, table);
        expect(loc, `${tenant}.${table}`).not.toBeNull();
        const rows = await icebirdRows(loc!);
        expect(rows.map((r) => r[table === 'traces' ? 'name' : 'body'] as string).sort()).toEqual([...items].sort());
      }
    }
  } finally {
    await catalog.close();
  }
}

function logLines(stdout: string): LogLine[] {
  return stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine);
}

describe('draining a WAL volume into the lake', () => {
  let restoreFetch: () => void;
  const dirs: string[] = [];
  beforeAll(() => {
    restoreFetch = installFileFetch();
  });
  afterAll(() => {
    restoreFetch();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it('siglake drain lands every record of a stopped ingester and leaves none in the WAL', async () => {
    const dataDir = tempDir('siglake-drain-');
    dirs.push(dataDir);
    const walDir = path.join(dataDir, 'wal');
    const catalogUrl = `sqlite:${path.join(dataDir, 'catalog.db')}`;
    const flags = ['--wal-dir', walDir, '--catalog-url', catalogUrl, '--warehouse', path.join(dataDir, 'warehouse')];
    // The compactor is off: everything acknowledged is only in the WAL when the ingester stops.
    const ing = await startIngester({ dataDir, args: ['--trust-tenant-header', '--compactor=false', ...flags.slice(2)] });
    const acked = await sendSome(ing, 'drain');
    expect(await ing.stop()).toBe(0);
    expect(walDump(walDir).length).toBeGreaterThan(0);

    const r = runCli(['drain', ...flags]);
    expect(r.status, r.stderr + r.stdout).toBe(0);
    const done = logLines(r.stdout).find((l) => l.msg === 'drained');
    expect(done).toMatchObject({ left: [], rows: 32 });
    expect(walDump(walDir)).toEqual([]);
    await expectTables(catalogUrl, acked);

    // Idempotent: a second drain finds nothing and commits nothing.
    const again = runCli(['drain', ...flags]);
    expect(again.status).toBe(0);
    expect(logLines(again.stdout).find((l) => l.msg === 'drained')).toMatchObject({ left: [], rows: 0, commits: 0 });
    await expectTables(catalogUrl, acked);
  });

  it('--drain-on-shutdown lands everything at SIGTERM before the process exits', async () => {
    const dataDir = tempDir('siglake-drain-shutdown-');
    dirs.push(dataDir);
    const walDir = path.join(dataDir, 'wal');
    const catalogUrl = `sqlite:${path.join(dataDir, 'catalog.db')}`;
    // A compactor that would not run a round for an hour: only the drain can land the records.
    const ing = await startIngester({
      dataDir,
      args: ['--trust-tenant-header', '--compact-interval-secs', '3600', '--drain-on-shutdown', '--catalog-url', catalogUrl, '--warehouse', path.join(dataDir, 'warehouse')],
    });
    const acked = await sendSome(ing, 'shutdown');
    expect(await ing.stop(60_000)).toBe(0);
    expect(ing.logs.find((l) => l.msg === 'drained')).toMatchObject({ left: [], rows: 32 });
    expect(walDump(walDir)).toEqual([]);
    await expectTables(catalogUrl, acked);
  });

  it('fails, naming the segment, when a record cannot be landed: the volume must be kept', async () => {
    const dataDir = tempDir('siglake-drain-corrupt-');
    dirs.push(dataDir);
    const walDir = path.join(dataDir, 'wal');
    const catalogUrl = `sqlite:${path.join(dataDir, 'catalog.db')}`;
    const flags = ['--wal-dir', walDir, '--catalog-url', catalogUrl, '--warehouse', path.join(dataDir, 'warehouse')];
    const ing = await startIngester({ dataDir, args: ['--trust-tenant-header', '--compactor=false', ...flags.slice(2)] });
    const target = { url: ing.url, grpcAddress: ing.grpcAddress, headers: { 'x-scope-orgid': 'acme' } };
    for (const batch of ['a', 'b']) expect((await exportLogs(target, 'http', await makeLogRecords([`${batch}-0`, `${batch}-1`]))).ok).toBe(true);
    expect(await ing.stop()).toBe(0);
    // Damage the last record's payload (its CRC no longer matches).
    const lane = listLaneDirs(walDir).find((l) => l.tenant === 'acme' && l.table.kind === 'logs')!;
    const seg = listLaneFiles(lane.dir).segments.find((s) => fs.statSync(s.path).size > 64)!;
    const bytes = fs.readFileSync(seg.path);
    bytes[bytes.length - 8] = bytes[bytes.length - 8]! ^ 0xff;
    fs.writeFileSync(seg.path, bytes);

    const r = runCli(['drain', ...flags]);
    expect(r.status).toBe(1);
    const incomplete = logLines(r.stdout).find((l) => /^drain incomplete/.test(l.msg));
    expect(incomplete?.['left']).toEqual([seg.path]);
    expect(fs.existsSync(seg.path)).toBe(true);
  });
});
