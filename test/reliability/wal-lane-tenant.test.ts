// `siglake wal dump|verify` given one tenant's lane directory of a WAL root,
// found at stop 55: in a root holding no other lane (the root marker there),
// the tenant was read from the path by the rule for a lane outside any root
// ("the directory above looks like a root holding other lanes"), so acme's
// records were printed as the default tenant's. Inside a root, the root says
// whose lane it is. And a lane or tenant directory was judged without the
// root's commit journal: a torn segment whose bytes the journal holds (replay
// writes them back), which verify of the root passed, failed verify of the
// lane (exit 1).

import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { dumpLines, runCli, startIngester, tempDir } from '../helpers/ingester.js';
import { acmeWal, sendLog, walTestLeftovers } from '../helpers/written-wal.js';
import { decodeJournal, JOURNAL_ROOT } from '../../src/wal/journal-format.js';

/** No checkpoint retires the journal while the test runs: the kill leaves every round's entry in it. */
const ENV = { SIGLAKE_TEST_CHECKPOINT_MS: '600000' };
const { dirs, live } = walTestLeftovers();

describe('a lane directory given to wal dump and verify', () => {
  it("acme's logs lane in a root holding no other lane: its records are acme's, not the default tenant's", { timeout: 120_000 }, async () => {
    const { dataDir, wal } = await acmeWal('stop', 2, 'siglake-lane-tenant-');
    dirs.push(dataDir);
    const lane = path.join(wal, 'acme', 'logs');
    for (const dir of [lane, path.relative(process.cwd(), lane)]) {
      const d = runCli(['wal', 'dump', dir]);
      expect(d.status, d.stderr).toBe(0);
      expect(dumpLines(d.stdout).map((l) => [l.tenant, l.table, l.texts])).toEqual([
        ['acme', 'logs', ['acme-0']],
        ['acme', 'logs', ['acme-1']],
      ]);
      const v = runCli(['wal', 'verify', dir]);
      expect(v.status, v.stdout).toBe(0);
      expect(v.stdout).toContain(`lane acme logs ${dir}: 1 segments, 2 records`);
    }
  });
});

describe("a lane or tenant directory given to wal verify and dump is judged with its root's commit journal", () => {
  it('a torn segment before the last whose bytes the journal holds (a machine crash in batch mode): verify and dump of the lane and of the tenant pass it, as verify of the root does', { timeout: 120_000 }, async () => {
    const dataDir = tempDir('siglake-lane-held-');
    dirs.push(dataDir);
    // Segments of 4 KiB: each ~3 KiB request rotates to a new one.
    const ing = await startIngester({ dataDir, args: ['--trust-tenant-header', '--compactor=false', '--wal-segment-bytes', '4096'], env: ENV });
    live.add(ing);
    for (let i = 0; i < 3; i++) expect((await sendLog(ing.url, 'acme', `acme-${i}-` + 'x'.repeat(3000))).status).toBe(200);
    await ing.kill9();
    live.delete(ing);
    const wal = path.join(dataDir, 'wal');
    const lane = path.join(wal, 'acme', 'logs');
    const segs = fs.readdirSync(lane).filter((f) => f.endsWith('.seg')).sort();
    expect(segs.length).toBeGreaterThanOrEqual(2);
    // The power took the unsynced end of the first segment; the journal still holds its records.
    const entries = decodeJournal(fs.readFileSync(path.join(wal, JOURNAL_ROOT, 'shard-0-of-1', '00000001.jnl')), 1).entries;
    const from = Math.min(...entries.filter((e) => e.tag === 'acme/logs' && e.segment === 1).map((e) => e.offset));
    fs.truncateSync(path.join(lane, segs[0]!), from + 40);
    const held = `in ${segs[0]} at offset ${Math.max(from, 32)}`;

    for (const dir of [wal, path.join(wal, 'acme'), lane]) {
      const v = runCli(['wal', 'verify', dir]);
      expect(v.status, `verify ${dir}: ${v.stdout}`).toBe(0);
      expect(v.stdout).toContain(held);
      expect(v.stdout).toContain('the commit journal holds these bytes: start-up replay writes them back');
      expect(v.stdout).toMatch(/0 problems: OK/);
      const d = runCli(['wal', 'dump', dir]);
      expect(d.status, `dump ${dir}: ${d.stderr}`).toBe(0);
    }
  });
});
