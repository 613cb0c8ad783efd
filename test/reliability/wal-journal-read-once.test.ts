// What `siglake wal verify|dump` and start-up replay read of a commit journal
// file, counted as the kernel counts it (rchar of /proc/self/io: every byte
// the process's read calls returned), found at stop 55:
//
// - verify and dump read each journal file twice, once for the bytes its
//   entries hold for the lane segments and once to count and judge it; and
//   an entry longer than the 4 MiB window was read twice within each pass
//   (summed a window at a time for its CRC, then read again whole): a
//   journal of large requests cost four times its length;
// - an entry whose length was damaged to gigabytes over a sparse tail was
//   read and summed to the length it declared before its CRC failed, about
//   3 s of CPU a GiB, in verify (twice) and in every start.
//
// Now each file is read once, a long entry's payload once, and a damaged
// length is refused where the entry's real records end (or, past the longest
// body a segment can hold, before its body is read). What must hold: the
// same report and exit code as before, the same replay outcome, and reads of
// about the file's length, never of what a damaged length declares.

import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { dumpLines, runCli, startIngester, tempDir } from '../helpers/ingester.js';
import { post } from '../helpers/http.js';
import { logsProto } from '../helpers/otlp-bodies.js';
import { readBytes, readBytesEnv } from '../helpers/read-bytes.js';
import { acmeWal, walTestLeftovers } from '../helpers/written-wal.js';
import { decodeJournal, JOURNAL_ROOT, MAX_ENTRY_SPAN } from '../../src/wal/journal-format.js';

const MIB = 2 ** 20;
const ARGS = ['--trust-tenant-header', '--compactor=false'];
/** No checkpoint retires the journal while the test runs: the kill leaves every round's entry in it. */
const ENV = { SIGLAKE_TEST_CHECKPOINT_MS: '600000' };
const SHARD = `${JOURNAL_ROOT}/shard-0-of-1`;
const JNL = `${SHARD}/00000001.jnl`;
const { dirs, live } = walTestLeftovers();

/** `siglake <args>`, with the bytes it read. */
function counted(args: string[], dir: string): { status: number | null; stdout: string; stderr: string; read: number } {
  const file = path.join(dir, `rchar-${Math.random().toString(36).slice(2)}`);
  const r = runCli(args, { timeoutMs: 300_000, env: readBytesEnv(file) });
  expect(r.signal, `${args.join(' ')} did not finish: ${r.stderr}`).toBeNull();
  return { ...r, read: readBytes(file) };
}

/**
 * What `wal <cmd>` reads of a copy of `wal` without its `.journal`: the
 * process's own start (its modules) and the lanes' segments.
 */
function readsWithoutJournal(cmd: 'verify' | 'dump', wal: string): number {
  const copy = `${wal}-without-journal`;
  if (!fs.existsSync(copy)) fs.cpSync(wal, copy, { recursive: true, filter: (src) => path.basename(src) !== JOURNAL_ROOT });
  const r = counted(['wal', cmd, copy], path.dirname(wal));
  expect(r.status, r.stdout + r.stderr).toBe(0);
  return r.read;
}

function filesBytes(dir: string, re: RegExp): number {
  return fs.readdirSync(dir, { recursive: true, encoding: 'utf8' }).reduce((n, f) => (re.test(f) ? n + fs.statSync(path.join(dir, f)).size : n), 0);
}

describe('wal verify and dump read a commit journal file once', () => {
  it('a journal of five 12 MiB requests (entries three times the 4 MiB window): verify and dump read about the WAL once over, the same report as ever', { timeout: 240_000 }, async () => {
    const dataDir = tempDir('siglake-jnl-once-');
    dirs.push(dataDir);
    // Direct rounds off: every round, however large, goes through the journal.
    const ing = await startIngester({ dataDir, args: [...ARGS, '--wal-direct-round-kib', '0'], env: ENV, timeoutMs: 60_000 });
    live.add(ing);
    const texts: string[] = [];
    for (let i = 0; i < 5; i++) {
      const text = `big-${i}-` + String.fromCharCode(0x61 + i).repeat(12 * MIB);
      texts.push(text);
      const r = await post(ing.url, '/v1/logs', logsProto([text]), { headers: { 'x-scope-orgid': 'acme' } });
      expect(r.status).toBe(200);
    }
    await ing.kill9();
    live.delete(ing);
    const wal = path.join(dataDir, 'wal');
    const shard = path.join(wal, SHARD);
    const names = fs.readdirSync(shard).filter((f) => /^\d{8}\.jnl$/.test(f)).sort();
    const jnlBytes = filesBytes(shard, /^\d{8}\.jnl$/);
    const decoded = names.map((f) => decodeJournal(fs.readFileSync(path.join(shard, f)), Number(f.slice(0, 8))));
    for (const j of decoded) expect(j.stop.kind).toBe('end');
    const entries = decoded.flatMap((j) => j.entries);
    expect(entries.map((e) => [e.tag, e.records])).toEqual(Array.from({ length: 5 }, () => ['acme/logs', 1]));
    expect(Math.min(...entries.map((e) => e.body.length))).toBeGreaterThan(3 * 4 * MIB);
    expect(filesBytes(wal, /\.seg$/)).toBeGreaterThan(5 * 12 * MIB);

    const v = counted(['wal', 'verify', wal], dataDir);
    expect(v.status, v.stdout + v.stderr).toBe(0);
    for (const [i, f] of names.entries()) {
      const n = decoded[i]!.entries.length;
      expect(v.stdout).toContain(`journal ${SHARD}/${f}: ${n} entries, ${n} records, ends cleanly`);
    }
    expect(v.stdout).toMatch(/verify: 1 lanes, \d+ segments, 5 records, 0 torn tails, 0 problems: OK/);
    // The journal read once, give or take a few record headers: not twice (nor four times, as it was).
    const journalReads = v.read - readsWithoutJournal('verify', wal);
    expect(journalReads).toBeGreaterThan(jnlBytes - 64 * 1024); // every entry read (what follows the last, a terminator, may not be)
    expect(journalReads).toBeLessThan(jnlBytes + MIB);

    const d = counted(['wal', 'dump', wal], dataDir);
    expect(d.status, d.stderr).toBe(0);
    expect(dumpLines(d.stdout).map((l) => l.texts[0]?.length)).toEqual(texts.map((t) => t.length));
    const dumpJournalReads = d.read - readsWithoutJournal('dump', wal);
    expect(dumpJournalReads).toBeGreaterThan(jnlBytes - 64 * 1024);
    expect(dumpJournalReads).toBeLessThan(jnlBytes + MIB);
  });
});

describe('a version-4 entry whose length is damaged to gigabytes over a sparse tail', () => {
  // 2.5 GB: within the longest body a segment can hold, refused where its real records end;
  // 3.75 GiB: past it, refused before a byte of its body is read.
  for (const declared of [2_500_000_000, 0xf000_0000]) {
    it(`declaring ${declared} bytes: verify, dump and the start report it as the damage it is, as before, reading far less than it declares`, { timeout: 240_000 }, async () => {
      expect(declared > MAX_ENTRY_SPAN).toBe(declared === 0xf000_0000);
      const { dataDir, wal } = await acmeWal('kill9', 3, 'siglake-jnl-longlen-', ENV);
      dirs.push(dataDir);
      const jnl = path.join(wal, JNL);
      const bytes = fs.readFileSync(jnl);
      const j = decodeJournal(bytes, 1);
      expect(j.entries.map((e) => e.records)).toEqual([1, 1, 1]);
      const second = j.entries[1]!;
      bytes.writeUInt32LE(declared, second.at);
      fs.writeFileSync(jnl, bytes);
      // The declared body fits the (sparse) file: it is not cut short, it is damaged.
      fs.truncateSync(jnl, second.at + declared + 4096);
      const line = `DAMAGED: journal ${JNL}: 1 entries, 1 records, corrupt at offset ${second.at}: entry CRC mismatch`;

      const v = counted(['wal', 'verify', wal], dataDir);
      expect(v.status, v.stdout + v.stderr).toBe(1);
      expect(v.stdout).toContain(line);
      expect(v.stdout).toMatch(/1 problems: FAILED/);
      expect(v.read).toBeLessThan(200 * MIB);

      const d = counted(['wal', 'dump', wal], dataDir);
      expect(d.status).toBe(1);
      expect(d.stderr).toContain(line);
      expect(dumpLines(d.stdout).flatMap((l) => l.texts)).toEqual(['acme-0', 'acme-1', 'acme-2']);
      expect(d.read).toBeLessThan(200 * MIB);

      // The start replays the entry before the damage, keeps the file aside and serves.
      const file = path.join(dataDir, `rchar-ingest`);
      const ing = await startIngester({ dataDir, args: ARGS, env: { ...ENV, ...readBytesEnv(file) }, timeoutMs: 120_000 });
      live.add(ing);
      const kept = path.join(wal, JOURNAL_ROOT, 'shard-0-of-1-00000001.jnl.damaged-1');
      expect(ing.logs.find((l) => l.msg.startsWith('WAL journal damaged'))).toMatchObject({ file: jnl, keptAs: kept, offset: second.at, why: 'entry CRC mismatch' });
      expect(fs.existsSync(kept)).toBe(true);
      expect(await ing.stop()).toBe(0);
      live.delete(ing);
      expect(readBytes(file)).toBeLessThan(200 * MIB);
    });
  }
});
