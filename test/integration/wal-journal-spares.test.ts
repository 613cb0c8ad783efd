// The real `siglake ingest` in batch mode under load on one lane: the lane's
// live segment is written back a megabyte at a time between checkpoints
// (siglake_wal_writebacks_total), the commit journal's files are made from
// spares (the prefilled first one, then retired files:
// siglake_wal_journal_spare_uses_total), a kill -9 in the middle loses no
// acknowledged record, and a clean stop leaves no spare behind.

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { JOURNAL_ROOT, journalDirName } from '../../src/wal/journal-format.js';
import { isSpareName } from '../../src/wal/journal.js';
import { runCli, startIngester, tempDir, type RunningIngester } from '../helpers/ingester.js';
import { exportLogs, makeLogRecords } from '../helpers/otel.js';

const live = new Set<RunningIngester>();
afterAll(async () => {
  for (const ing of live) await ing.kill9();
});

const ENV = { SIGLAKE_TEST_HOOKS: '1', SIGLAKE_TEST_CHECKPOINT_MS: '300' };

/** `siglake wal verify`: clean, and the WAL records it counts (one per request). */
function verifiedRecords(walDir: string): number {
  const r = runCli(['wal', 'verify', walDir]);
  expect(r.status, r.stdout + r.stderr).toBe(0);
  const m = /verify: \d+ lanes, \d+ segments, (\d+) records, 0 torn tails, 0 problems: OK/.exec(r.stdout);
  expect(m, r.stdout).not.toBeNull();
  return Number(m![1]);
}

async function start(dataDir: string): Promise<RunningIngester> {
  const ing = await startIngester({ dataDir, env: ENV, args: ['--compactor=false', '--wal-fsync', 'batch', '--wal-journal-prefill-mib', '2'] });
  live.add(ing);
  return ing;
}

describe('commit journal spares and early writeback, in the real process', () => {
  it('writes a busy lane back between checkpoints and reuses journal files; a kill -9 loses nothing; a clean stop leaves no spare', async () => {
    const dataDir = tempDir();
    const ing = await start(dataDir);
    const m0 = await ing.metrics();
    expect(m0.get('siglake_wal_writebacks_total')).toBe(0);
    expect(m0.get('siglake_wal_journal_spare_uses_total')).toBe(0);
    expect(m0.get('siglake_wal_checkpoint_seconds_total')).toBe(0);
    const journalDir = path.join(ing.walDir, JOURNAL_ROOT, journalDirName(0, 1));
    const target = { url: ing.url, grpcAddress: ing.grpcAddress, headers: {} };

    let sent = 0;
    let requests = 0;
    let sawSpare = false;
    const deadline = Date.now() + 60_000;
    for (;;) {
      // 100 records of ~1 KiB a request: about 100 KiB each.
      const bodies = Array.from({ length: 100 }, (_, k) => `spares-${sent + k}-${'x'.repeat(1000)}`);
      const r = await exportLogs(target, 'http', await makeLogRecords(bodies));
      expect(r.ok, r.error?.message).toBe(true);
      sent += bodies.length;
      requests++;
      sawSpare ||= fs.readdirSync(journalDir).some(isSpareName);
      const m = await ing.metrics();
      if ((m.get('siglake_wal_writebacks_total') ?? 0) >= 3 && (m.get('siglake_wal_journal_spare_uses_total') ?? 0) >= 2 && sent >= 5000) break;
      if (Date.now() > deadline) throw new Error(`no writebacks or spare uses after ${sent} records: ${JSON.stringify([...m].filter(([k]) => k.startsWith('siglake_wal_')))}`);
    }
    expect(sawSpare).toBe(true);
    const m1 = await ing.metrics();
    expect(m1.get('siglake_wal_write_errors_total')).toBe(0);
    // A spare is a journal file a checkpoint retired: the checkpoints took time, and it was counted.
    expect(m1.get('siglake_wal_checkpoints_total') ?? 0).toBeGreaterThanOrEqual(1);
    expect(m1.get('siglake_wal_checkpoint_seconds_total') ?? 0).toBeGreaterThan(0);

    // A crash while journal files made from spares hold the last rounds.
    await ing.kill9();
    live.delete(ing);
    const again = await start(dataDir);
    expect(verifiedRecords(again.walDir)).toBe(requests);
    // Replay took the spares with the journal files it read.
    expect(fs.readdirSync(journalDir).filter(isSpareName)).toEqual([]);

    // More load, then a clean stop: the last checkpoint retires everything, and no spare is left.
    const target2 = { url: again.url, grpcAddress: again.grpcAddress, headers: {} };
    for (let i = 0; i < 20; i++) {
      const bodies = Array.from({ length: 100 }, (_, k) => `after-${i}-${k}-${'y'.repeat(1000)}`);
      expect((await exportLogs(target2, 'http', await makeLogRecords(bodies))).ok).toBe(true);
      requests++;
    }
    expect(await again.stop()).toBe(0);
    live.delete(again);
    expect(fs.readdirSync(journalDir)).toEqual([]);
    expect(verifiedRecords(again.walDir)).toBe(requests);
  }, 120_000);
});
