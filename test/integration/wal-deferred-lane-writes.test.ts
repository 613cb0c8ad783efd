// Deferred lane writes in the real `siglake ingest --wal-fsync batch`
// (docs/wal-format.md "Deferred lane writes"): with more lanes than
// descriptors, a lane whose segment descriptor the LRU closed writes its
// round to the commit journal only. Sent by the real OTel exporter, one
// request per tenant and round; then a kill -9 before any checkpoint, so
// that the lane segments hold only what was written through a descriptor,
// and a restart that writes the rest back from the journal. With
// --wal-defer-lane-writes=false every record is in its segment at once.

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli, startIngester, tempDir, walDump, type RunningIngester } from '../helpers/ingester.js';
import { exportLogs, makeLogRecords } from '../helpers/otel.js';

const TENANTS = 40;
const live = new Set<RunningIngester>();
afterAll(async () => {
  for (const ing of live) await ing.kill9();
});

async function start(dataDir: string, defer: boolean): Promise<RunningIngester> {
  const ing = await startIngester({
    dataDir,
    args: ['--trust-tenant-header', '--compactor=false', '--wal-fsync', 'batch', '--wal-max-open-files', '8', `--wal-defer-lane-writes=${defer}`],
    // No checkpoint in the test's life (a test hook): the deferred records stay in the journal only.
    env: { SIGLAKE_TEST_CHECKPOINT_MS: '3600000' },
  });
  live.add(ing);
  return ing;
}

/** Descriptors of the ingester process open on files of its WAL directory. */
function walDescriptors(ing: RunningIngester): number {
  const fdDir = `/proc/${ing.child.pid}/fd`;
  let n = 0;
  for (const fd of fs.readdirSync(fdDir)) {
    try {
      if (fs.readlinkSync(path.join(fdDir, fd)).startsWith(ing.walDir + path.sep)) n++;
    } catch {
      // closed between the listing and the read
    }
  }
  return n;
}

/** Two rounds over every tenant, one acknowledged request of one record each; returns the most WAL descriptors seen. */
async function sendRounds(ing: RunningIngester): Promise<number> {
  let most = 0;
  for (let round = 0; round < 2; round++) {
    for (let t = 0; t < TENANTS; t++) {
      const r = await exportLogs({ url: ing.url, grpcAddress: ing.grpcAddress, headers: { 'x-scope-orgid': `t${t}` } }, 'http', await makeLogRecords([`r${round}-t${t}`]));
      expect(r.ok, r.error?.message).toBe(true);
      most = Math.max(most, walDescriptors(ing));
    }
  }
  return most;
}

/** Each tenant's record texts in its lane segments, as `siglake wal dump` reads them from disk. */
function byTenant(walDir: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const l of walDump(walDir)) out.set(l.tenant, [...(out.get(l.tenant) ?? []), ...l.texts]);
  return out;
}

const count = (m: Map<string, string[]>): number => [...m.values()].reduce((s, v) => s + v.length, 0);

describe('deferred lane writes in the real process', () => {
  it('rounds of lanes without a descriptor go to the journal only; a kill -9 and a restart write them to their segments', async () => {
    const dataDir = tempDir();
    const ing = await start(dataDir, true);
    const most = await sendRounds(ing);
    expect(most, 'WAL descriptors').toBeLessThanOrEqual(8);
    const deferred = (await ing.metric('siglake_wal_deferred_bytes_total')) ?? 0;
    expect(deferred, 'bytes deferred to the checkpoint').toBeGreaterThan(0);
    expect(await ing.metric('siglake_wal_write_errors_total')).toBe(0);

    await ing.kill9();
    live.delete(ing);
    // The segments on disk (the page cache survives a kill -9) hold every
    // lane's first record, written when its segment was created, and the
    // second only where the lane still had its descriptor.
    const before = byTenant(ing.walDir);
    expect(before.size).toBe(TENANTS);
    for (let t = 0; t < TENANTS; t++) expect(before.get(`t${t}`)?.[0]).toBe(`r0-t${t}`);
    const missing = 2 * TENANTS - count(before);
    expect(missing, 'records only the journal holds').toBeGreaterThan(TENANTS / 2);

    const again = await start(dataDir, true);
    expect(await again.metric('siglake_wal_journal_replayed_records_total'), 'records written back from the journal').toBe(missing);
    const v = runCli(['wal', 'verify', again.walDir]);
    expect(v.status, v.stdout + v.stderr).toBe(0);
    expect(v.stdout).toMatch(/ 0 torn tails, 0 problems: OK/);
    const after = byTenant(again.walDir);
    for (let t = 0; t < TENANTS; t++) expect(after.get(`t${t}`)).toEqual([`r0-t${t}`, `r1-t${t}`]);
    expect(await again.stop()).toBe(0);
    live.delete(again);
  }, 120_000);

  it('--wal-defer-lane-writes=false writes every round to its segment, through the same few descriptors', async () => {
    const ing = await start(tempDir(), false);
    const most = await sendRounds(ing);
    expect(most, 'WAL descriptors').toBeLessThanOrEqual(8);
    expect(await ing.metric('siglake_wal_deferred_bytes_total')).toBe(0);
    // Running, before any checkpoint: every acknowledged record is in its segment already.
    const now = byTenant(ing.walDir);
    for (let t = 0; t < TENANTS; t++) expect(now.get(`t${t}`)).toEqual([`r0-t${t}`, `r1-t${t}`]);
    expect(await ing.stop()).toBe(0);
    live.delete(ing);
  }, 120_000);
});
