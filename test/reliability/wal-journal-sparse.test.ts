// The commit journal's readers on journal files no writer leaves, found and
// left at stop 53:
//
// - a journal file made long and sparse after a kill -9 (`truncate -s
//   1500000000`) was read whole by `wal verify`, `wal dump` and start-up
//   replay: 2.99 GB resident for 1.5 GB;
// - one over 2 GiB (Node's largest read) was refused by name, which stopped
//   the start, while deferral lets a journal file grow toward 3 GiB;
// - a journal file under a name that is not the writer's (`00000000.jnl`, a
//   number past 2^53) holding real entries was passed over in silence by
//   verify, dump and replay.
//
// Now the readers read a journal file a piece at a time (src/wal/journal-file.ts),
// whatever its length, and say what a shard directory holds under a name
// replay does not read. What must hold: each process finishes normally, its
// peak resident set stays far below the file's length, replay still writes
// back every acknowledged record a (simulated) machine crash took from the
// lane segment, and the stray names are reported, never read as this life's.

import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { dumpLines, runCli, startIngester, type RunningIngester } from '../helpers/ingester.js';
import { maxRssEnv, peakRssBytes } from '../helpers/max-rss.js';
import { acmeWal, sendLog, walTestLeftovers } from '../helpers/written-wal.js';
import { decodeJournal, JOURNAL_ROOT } from '../../src/wal/journal-format.js';
import { parseSegmentName } from '../../src/wal/format.js';

const MIB = 2 ** 20;
/** Far below the sparse files' lengths (1.5 GB, 2.5 GB), well above what a CLI or an ingester holds. */
const RSS_CEILING = 400 * MIB;
const ARGS = ['--trust-tenant-header', '--compactor=false'];
/** No checkpoint retires the journal while the test runs: the kill leaves every round's entry in it. */
const ENV = { SIGLAKE_TEST_CHECKPOINT_MS: '600000' };
const SHARD = `${JOURNAL_ROOT}/shard-0-of-1`;
const { dirs, live } = walTestLeftovers();

/** `siglake wal <cmd> wal`, with its peak RSS. */
function cli(cmd: 'verify' | 'dump', wal: string): { status: number | null; stdout: string; stderr: string; peak: number } {
  const rss = path.join(path.dirname(wal), `rss-${cmd}-${Math.random().toString(36).slice(2)}`);
  const r = runCli(['wal', cmd, wal], { timeoutMs: 120_000, env: maxRssEnv(rss) });
  expect(r.signal, `wal ${cmd} did not finish: ${r.stderr}`).toBeNull();
  return { ...r, peak: peakRssBytes(rss) };
}

function acmeTexts(stdout: string): string[] {
  return dumpLines(stdout)
    .filter((l) => l.tenant === 'acme')
    .flatMap((l) => l.texts ?? []);
}

/**
 * An ingester that stored acme-0..2 and was killed -9: its WAL, the shard's
 * one journal file (holding the three rounds' entries, checked), and acme's
 * last segment.
 */
async function killed(prefix: string): Promise<{ dataDir: string; wal: string; jnl: string; seg: string; bytes: Buffer }> {
  const { dataDir, wal, seg } = await acmeWal('kill9', 3, prefix, ENV);
  dirs.push(dataDir);
  const shard = path.join(wal, SHARD);
  const names = fs.readdirSync(shard).filter((f) => /^\d{8}\.jnl$/.test(f));
  expect(names).toEqual(['00000001.jnl']);
  const jnl = path.join(shard, names[0]!);
  const bytes = fs.readFileSync(jnl);
  const j = decodeJournal(bytes, 1);
  expect(j.stop.kind).toBe('end');
  expect(j.entries.map((e) => [e.tag, e.records])).toEqual([
    ['acme/logs', 1],
    ['acme/logs', 1],
    ['acme/logs', 1],
  ]);
  return { dataDir, wal, jnl, seg, bytes };
}

/**
 * What a machine crash leaves of a lane write no checkpoint synced: acme's
 * segment cut back to where the journal's first entry for it starts, so that
 * only the journal holds the three acknowledged records.
 */
function loseLaneWrites(seg: string, bytes: Buffer): void {
  const n = parseSegmentName(path.basename(seg))!.number;
  const from = Math.min(...decodeJournal(bytes, 1).entries.filter((e) => e.segment === n).map((e) => e.offset));
  fs.truncateSync(seg, from);
}

/** The ingester started on `dataDir` (peak RSS measured), asserted to have replayed the three records, then acme-after stored and a clean stop. */
async function startReplayAndStop(dataDir: string): Promise<{ peak: number; ing: RunningIngester }> {
  const rss = path.join(dataDir, `rss-ingest-${Math.random().toString(36).slice(2)}`);
  const ing = await startIngester({ dataDir, args: ARGS, env: { ...ENV, ...maxRssEnv(rss) }, timeoutMs: 60_000 });
  live.add(ing);
  expect(ing.logs.find((l) => l.msg === 'WAL recovery done')).toMatchObject({ journalFiles: 1, journalEntries: 3, journalRewrittenRecords: 3 });
  expect((await sendLog(ing.url, 'acme', 'acme-after')).status).toBe(200);
  expect(await ing.stop()).toBe(0);
  live.delete(ing);
  return { peak: peakRssBytes(rss), ing };
}

describe('a commit journal file made long and sparse after a kill -9', () => {
  it('1.5 GB: verify and dump read it in pieces (peak RSS far below its length); start-up replays every record the segment lost, then serves', { timeout: 180_000 }, async () => {
    const { dataDir, wal, jnl, seg, bytes } = await killed('siglake-jnl-sparse-');
    loseLaneWrites(seg, bytes);
    fs.truncateSync(jnl, 1_500_000_000); // sparse: nothing past the terminator is written

    const v = cli('verify', wal);
    expect(v.status, v.stdout + v.stderr).toBe(0);
    expect(v.stdout).toContain(`journal ${SHARD}/00000001.jnl: 3 entries, 3 records, ends cleanly`);
    expect(v.peak).toBeLessThan(RSS_CEILING);

    const d = cli('dump', wal);
    expect(d.status, d.stderr).toBe(0);
    expect(d.peak).toBeLessThan(RSS_CEILING);

    const { peak } = await startReplayAndStop(dataDir);
    expect(peak).toBeLessThan(RSS_CEILING);
    expect(fs.readdirSync(path.join(wal, SHARD)).filter((f) => f.endsWith('.jnl'))).toEqual([]);
    const after = runCli(['wal', 'dump', wal]);
    expect(after.status, after.stderr).toBe(0);
    expect(acmeTexts(after.stdout)).toEqual(['acme-0', 'acme-1', 'acme-2', 'acme-after']);
  });

  it('2.5 GB, past the 2 GiB Node reads at once: verify passes it, and the start replays it instead of refusing it', { timeout: 180_000 }, async () => {
    const { dataDir, wal, jnl, seg, bytes } = await killed('siglake-jnl-over2g-');
    loseLaneWrites(seg, bytes);
    fs.truncateSync(jnl, 2_500_000_000);
    expect(fs.statSync(jnl).size).toBeGreaterThan(2 ** 31);

    const v = cli('verify', wal);
    expect(v.status, v.stdout + v.stderr).toBe(0);
    expect(v.stdout).toContain(`journal ${SHARD}/00000001.jnl: 3 entries, 3 records, ends cleanly`);
    expect(v.peak).toBeLessThan(RSS_CEILING);

    const { peak } = await startReplayAndStop(dataDir);
    expect(peak).toBeLessThan(RSS_CEILING);
    const after = runCli(['wal', 'dump', wal]);
    expect(after.status, after.stderr).toBe(0);
    expect(acmeTexts(after.stdout)).toEqual(['acme-0', 'acme-1', 'acme-2', 'acme-after']);
  });
});

describe('a commit journal file under a name start-up does not read', () => {
  it('00000000.jnl and a number past 2^53, holding real entries: verify reports them as unexpected entries with what they hold (exit 0), start-up warns without tenant data and leaves them', { timeout: 120_000 }, async () => {
    const { dataDir, wal, jnl } = await killed('siglake-jnl-names-');
    const zero = path.join(wal, SHARD, '00000000.jnl');
    const huge = path.join(wal, SHARD, '99999999999999999999.jnl');
    fs.renameSync(jnl, zero);
    fs.copyFileSync(zero, huge);

    const v = runCli(['wal', 'verify', wal]);
    expect(v.status, v.stdout + v.stderr).toBe(0);
    for (const f of [zero, huge]) {
      expect(v.stdout).toContain(
        `unexpected entry ${SHARD}/${path.basename(f)} (ignored): a commit journal file holding 3 entries, 3 records, which start-up neither replays nor deletes`,
      );
    }
    const d = runCli(['wal', 'dump', wal]);
    expect(d.status, d.stderr).toBe(0);
    expect(acmeTexts(d.stdout)).toEqual(['acme-0', 'acme-1', 'acme-2']);

    const ing = await startIngester({ dataDir, args: ARGS, env: ENV });
    live.add(ing);
    const warned = ing.logs.filter((l) => l.msg.startsWith('WAL journal directory holds an entry under a name start-up does not read'));
    expect(warned.map((l) => [l.level, l['file'], l['entries'], l['records']])).toEqual([
      [40, zero, 3, 3],
      [40, huge, 3, 3],
    ]);
    for (const l of warned) expect(JSON.stringify(l)).not.toContain('acme');
    expect((await sendLog(ing.url, 'acme', 'acme-after')).status).toBe(200);
    expect(await ing.stop()).toBe(0);
    live.delete(ing);
    expect(fs.existsSync(zero) && fs.existsSync(huge)).toBe(true);
    const after = runCli(['wal', 'dump', wal]);
    expect(acmeTexts(after.stdout)).toEqual(['acme-0', 'acme-1', 'acme-2', 'acme-after']);
  });

  it("in the journal directory of another worker count, which start-up replays and removes: the start stops naming the directory and the entry (exit 1), not with a bare ENOTEMPTY", { timeout: 120_000 }, async () => {
    const { dataDir, wal, jnl } = await killed('siglake-jnl-foreign-');
    const foreign = path.join(wal, JOURNAL_ROOT, 'shard-0-of-2');
    fs.mkdirSync(foreign);
    fs.renameSync(jnl, path.join(foreign, '00000000.jnl'));

    const r = runCli(['ingest', '--wal-dir', wal, '--workers', '1', '--http-listen', '127.0.0.1:0', '--grpc-listen', '127.0.0.1:0', ...ARGS], { cwd: dataDir, timeoutMs: 60_000 });
    expect(r.signal, 'the start did not stop').toBeNull();
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`${foreign}: holds 00000000.jnl, under names start-up does not read`);
    expect(r.stderr).toContain('move them aside');
    expect(fs.existsSync(path.join(foreign, '00000000.jnl'))).toBe(true);
  });

  it('000000001.jnl, a non-canonical spelling of a number: verify and dump fail naming it (exit 1), as for a non-canonical segment name', { timeout: 120_000 }, async () => {
    const { wal, jnl } = await killed('siglake-jnl-noncanon-');
    const odd = path.join(wal, SHARD, '000000001.jnl');
    fs.renameSync(jnl, odd);

    const v = runCli(['wal', 'verify', wal]);
    expect(v.status, v.stdout).toBe(1);
    expect(v.stdout).toContain(
      `DAMAGED: non-canonical journal file name ${SHARD}/000000001.jnl (the writer spells it 00000001.jnl): a commit journal file holding 3 entries, 3 records, which start-up neither replays nor deletes`,
    );
    expect(v.stdout).toMatch(/1 problems: FAILED/);
    const d = runCli(['wal', 'dump', wal]);
    expect(d.status, d.stderr).toBe(1);
    expect(d.stderr).toContain(`DAMAGED: non-canonical journal file name ${SHARD}/000000001.jnl`);
  });
});
