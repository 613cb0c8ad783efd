// Direct rounds in the real `siglake ingest --wal-fsync batch`: a round of
// one lane that writes at least --wal-direct-round-kib skips the commit
// journal (no entry for it in any journal file) and is made durable by its
// segment's fdatasync (siglake_wal_direct_rounds_total, and one more
// siglake_wal_fsync_seconds observation); a smaller one is journaled as
// before; 0 journals everything. Each request is sent by the real OTel
// exporter, and the records are read back with `siglake wal verify` after a
// kill -9 and a restart.

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeJournal, JOURNAL_ROOT } from '../../src/wal/journal-format.js';
import { runCli, startIngester, tempDir, walDump, type RunningIngester } from '../helpers/ingester.js';
import { exportLogs, makeLogRecords } from '../helpers/otel.js';

const live = new Set<RunningIngester>();
afterAll(async () => {
  for (const ing of live) await ing.kill9();
});

async function start(dataDir: string, directKib: number): Promise<RunningIngester> {
  const ing = await startIngester({ dataDir, args: ['--compactor=false', '--wal-fsync', 'batch', '--wal-direct-round-kib', String(directKib)] });
  live.add(ing);
  return ing;
}

/** Whole entries in every journal file of the WAL (a kill -9 leaves them for replay). */
function journalEntries(walDir: string): number {
  const root = path.join(walDir, JOURNAL_ROOT);
  let n = 0;
  for (const shard of fs.existsSync(root) ? fs.readdirSync(root) : []) {
    for (const f of fs.readdirSync(path.join(root, shard))) {
      if (/^\d+\.jnl$/.test(f)) n += decodeJournal(fs.readFileSync(path.join(root, shard, f))).entries.length;
    }
  }
  return n;
}

/** One request of `n` records of about 1 KiB each, which must be acknowledged. */
async function send(ing: RunningIngester, tag: string, n: number): Promise<void> {
  const bodies = Array.from({ length: n }, (_, k) => `${tag}-${k}-${'d'.repeat(1000)}`);
  const r = await exportLogs({ url: ing.url, grpcAddress: ing.grpcAddress, headers: {} }, 'http', await makeLogRecords(bodies));
  expect(r.ok, r.error?.message).toBe(true);
}

const texts = (walDir: string): string[] => walDump(walDir).flatMap((l) => l.texts ?? []);

describe('direct rounds in the real process', () => {
  it('a large one-lane round bypasses the journal and is durable by its segment; a small one is journaled', async () => {
    const dataDir = tempDir();
    const ing = await start(dataDir, 64);
    const fsyncs0 = (await ing.metric('siglake_wal_fsync_seconds_count')) ?? 0;
    expect(await ing.metric('siglake_wal_direct_rounds_total')).toBe(0);

    await send(ing, 'large', 200); // ~200 KiB to one lane: direct
    expect(await ing.metric('siglake_wal_direct_rounds_total')).toBe(1);
    expect(await ing.metric('siglake_wal_fsync_seconds_count')).toBe(fsyncs0 + 1);
    expect(journalEntries(ing.walDir), 'journal entries after the direct round').toBe(0);

    await send(ing, 'small', 10); // ~10 KiB: journaled
    expect(await ing.metric('siglake_wal_direct_rounds_total')).toBe(1);
    expect(journalEntries(ing.walDir), 'journal entries after the small round').toBe(1);
    expect(await ing.metric('siglake_wal_write_errors_total')).toBe(0);

    // A crash: the journal's entry is replayed; the direct round needs none.
    await ing.kill9();
    live.delete(ing);
    const again = await start(dataDir, 64);
    expect(await again.metric('siglake_wal_journal_replayed_records_total')).toBe(0); // the segment still held it (page cache)
    const v = runCli(['wal', 'verify', again.walDir]);
    expect(v.status, v.stdout + v.stderr).toBe(0);
    expect(v.stdout).toMatch(/, 2 records, 0 torn tails, 0 problems: OK/);
    const all = texts(again.walDir);
    expect(all.filter((t) => t.startsWith('large-'))).toHaveLength(200);
    expect(all.filter((t) => t.startsWith('small-'))).toHaveLength(10);
    expect(await again.stop()).toBe(0);
    live.delete(again);
  }, 60_000);

  it('--wal-direct-round-kib 0 journals every round', async () => {
    const dataDir = tempDir();
    const ing = await start(dataDir, 0);
    await send(ing, 'large', 200);
    expect(await ing.metric('siglake_wal_direct_rounds_total')).toBe(0);
    expect(journalEntries(ing.walDir)).toBe(1);
    expect(await ing.stop()).toBe(0);
    live.delete(ing);
    expect(texts(ing.walDir).filter((t) => t.startsWith('large-'))).toHaveLength(200);
  }, 60_000);
});
