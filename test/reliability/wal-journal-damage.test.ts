// A commit journal file damaged in the middle (a flipped byte, not a torn
// tail), found in the review of 2026-12-07: start-up replayed the entries
// before the damage, logged `WAL journal tail cut` at warn and deleted the
// file, with the entries after the damage, which may be acknowledged records
// only the journal held. Now the file is kept aside whole in `.journal`
// (`shard-<k>-of-<W>-<n>.jnl.damaged-<i>`), logged at error, and `wal
// verify` fails naming it until an operator removes it; the start goes on
// serving. A second life's damaged file of the same number is kept beside
// the first, never over it.

import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { decodeJournal, JOURNAL_ROOT } from '../../src/wal/journal-format.js';
import { dumpLines, runCli, startIngester, tempDir } from '../helpers/ingester.js';
import { sendLog, walTestLeftovers } from '../helpers/written-wal.js';

const ARGS = ['--trust-tenant-header', '--compactor=false', '--wal-fsync', 'batch', '--wal-direct-round-kib', '0'];
/** No checkpoint retires the journal while the test runs: the kill leaves every round's entry in it. */
const ENV = { SIGLAKE_TEST_CHECKPOINT_MS: '600000' };
const { dirs, live } = walTestLeftovers();

/** acme's texts in `wal dump`. */
function acmeTexts(wal: string): string[] {
  const r = runCli(['wal', 'dump', wal], { timeoutMs: 30_000 });
  return dumpLines(r.stdout)
    .filter((l) => l.tenant === 'acme')
    .flatMap((l) => l.texts ?? []); // a damage line has none
}

/**
 * The shard's one journal file after a kill, with a byte of its middle entry's
 * CRC flipped (entries before and after it): its path and damaged bytes.
 */
function damageMiddleEntry(wal: string, entries: number): { jnl: string; bytes: Buffer; at: number } {
  const shard = path.join(wal, JOURNAL_ROOT, 'shard-0-of-1');
  const names = fs.readdirSync(shard).filter((f) => /^\d{8}\.jnl$/.test(f));
  expect(names).toHaveLength(1);
  const jnl = path.join(shard, names[0]!);
  const b = fs.readFileSync(jnl);
  const d = decodeJournal(b, Number(names[0]!.slice(0, 8)));
  expect(d.stop.kind).toBe('end');
  expect(d.entries).toHaveLength(entries);
  const mid = d.entries[Math.floor(entries / 2)]!;
  const at = mid.body.byteOffset - b.byteOffset - Buffer.byteLength(mid.tag) - 32; // its entry header
  b[at + 4] = b[at + 4]! ^ 0xff;
  fs.writeFileSync(jnl, b);
  expect(decodeJournal(b, Number(names[0]!.slice(0, 8))).stop).toMatchObject({ kind: 'corrupt', offset: at });
  return { jnl, bytes: b, at };
}

describe('a commit journal file damaged in its middle entry', () => {
  it('is kept aside whole, logged at error, fails verify naming it; the start serves and the entries before the damage are in the lane', { timeout: 60_000 }, async () => {
    const dataDir = tempDir('siglake-jnl-damage-');
    dirs.push(dataDir);
    const wal = path.join(dataDir, 'wal');
    const kept: { name: string; bytes: Buffer; at: number }[] = [];
    for (const life of [1, 2]) {
      const ing = await startIngester({ dataDir, args: ARGS, env: ENV });
      live.add(ing);
      if (life === 2) {
        // The first life's kept file is still there, bytes intact, and still fails verify.
        expect(fs.readFileSync(path.join(wal, JOURNAL_ROOT, kept[0]!.name)).equals(kept[0]!.bytes)).toBe(true);
      }
      for (let i = 0; i < 5; i++) expect((await sendLog(ing.url, 'acme', `acme-${life}-${i}`)).status).toBe(200);
      await ing.kill9();
      live.delete(ing);
      const { jnl, bytes, at } = damageMiddleEntry(wal, 5);

      const again = await startIngester({ dataDir, args: ARGS, env: ENV });
      live.add(again);
      // Serving: a request of another tenant is taken.
      expect((await sendLog(again.url, 'bob', `bob-${life}`)).status).toBe(200);
      // Its bytes are still on disk, whole, in a file beside the shard directories (the old code deleted it).
      const aside = fs.readdirSync(path.join(wal, JOURNAL_ROOT)).filter((f) => !f.startsWith('shard-0-of-1') || f.includes('.damaged-'));
      expect(aside.filter((f) => fs.readFileSync(path.join(wal, JOURNAL_ROOT, f)).equals(bytes)), `the damaged journal's bytes are gone; .journal holds ${aside.join(', ')}`).toHaveLength(1);
      const line = again.logs.find((l) => l.msg.startsWith('WAL journal damaged'));
      expect(line).toMatchObject({ level: 50, file: jnl, offset: at });
      expect(again.logs.some((l) => l.msg.startsWith('WAL journal tail cut'))).toBe(false);
      const keptAs = line!['keptAs'] as string;
      expect(path.dirname(keptAs)).toBe(path.join(wal, JOURNAL_ROOT));
      expect(path.basename(keptAs)).toBe(`shard-0-of-1-${path.basename(jnl)}.damaged-${life}`);
      // Kept whole, byte for byte; gone from the shard's directory, so never replayed again.
      expect(fs.readFileSync(keptAs).equals(bytes)).toBe(true);
      expect(fs.existsSync(jnl)).toBe(false);
      kept.push({ name: path.basename(keptAs), bytes, at });
      expect(await again.stop()).toBe(0);
      live.delete(again);

      // The entries before the damage were replayed (here the page cache kept the lane's bytes too).
      for (let i = 0; i < 5; i++) expect(acmeTexts(wal)).toContain(`acme-${life}-${i}`);
      const v = runCli(['wal', 'verify', wal], { timeoutMs: 30_000 });
      expect(v.status).toBe(1);
      for (const k of kept) expect(v.stdout).toMatch(new RegExp(`DAMAGED: journal \\.journal/${k.name.replace(/\./g, '\\.')}: .*2 entries, 2 records before the damage at offset ${k.at}`));
      const d = runCli(['wal', 'dump', wal], { timeoutMs: 30_000 });
      expect(d.status).toBe(1);
      expect(d.stderr).toContain(`DAMAGED: journal .journal/${path.basename(keptAs)}`);
    }
    // Both lives' files kept, the first never replaced by the second.
    for (const k of kept) expect(fs.readFileSync(path.join(wal, JOURNAL_ROOT, k.name)).equals(k.bytes)).toBe(true);
    // Once an operator removes them, verify is clean again.
    for (const k of kept) fs.rmSync(path.join(wal, JOURNAL_ROOT, k.name));
    expect(runCli(['wal', 'verify', wal], { timeoutMs: 30_000 }).status).toBe(0);
  });
});
