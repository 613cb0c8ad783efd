// Symbolic links where the commit journal lives, found at stop 55: a
// `.journal` linked to another directory (another WAL's journal, say)
// passed `wal verify` (exit 0), and the start replayed what it held into
// this WAL's lanes, deleted its files and wrote the new life's journal
// there; a linked shard directory was replayed by its worker. Symbolic
// links are not followed below the WAL root (docs/wal-format.md): now both
// stop the start (exit 1, naming the link, "move it aside") and fail
// verify and dump, and nothing behind the link is read, written or deleted.

import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, startIngester, tempDir } from '../helpers/ingester.js';
import { acmeWal, walTestLeftovers } from '../helpers/written-wal.js';
import { JOURNAL_ROOT } from '../../src/wal/journal-format.js';

const ARGS = ['--trust-tenant-header', '--compactor=false'];
/** No checkpoint retires the journal while the test runs: the kill leaves every round's entry in it. */
const ENV = { SIGLAKE_TEST_CHECKPOINT_MS: '600000' };
const { dirs, live } = walTestLeftovers();

/** Every file below `dir`, with its bytes. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of fs.readdirSync(dir, { recursive: true, encoding: 'utf8' }).sort()) {
    const p = path.join(dir, f);
    out[f] = fs.lstatSync(p).isFile() ? fs.readFileSync(p).toString('hex') : 'dir';
  }
  return out;
}

describe('a symbolic link where the commit journal lives', () => {
  for (const where of ['.journal', '.journal/shard-0-of-1'] as const) {
    it(`${where} linked elsewhere: verify and dump fail naming it, the start stops naming it, nothing behind it is touched`, { timeout: 120_000 }, async () => {
      const { dataDir, wal } = await acmeWal('kill9', 3, 'siglake-jnl-link-', ENV);
      dirs.push(dataDir);
      const at = path.join(wal, where);
      const elsewhere = path.join(dataDir, 'elsewhere');
      fs.renameSync(at, elsewhere);
      fs.symlinkSync(elsewhere, at);
      const before = snapshot(elsewhere);
      expect(Object.keys(before).some((f) => f.endsWith('00000001.jnl'))).toBe(true);

      const v = runCli(['wal', 'verify', wal]);
      expect(v.status, v.stdout + v.stderr).toBe(1);
      expect(v.stdout).toContain(`DAMAGED: ${at}: a symbolic link`);
      expect(v.stdout).toMatch(/problems: FAILED/);
      const d = runCli(['wal', 'dump', wal]);
      expect(d.status, d.stderr).toBe(1);
      expect(d.stderr).toContain(`DAMAGED: ${at}: a symbolic link`);

      const r = runCli(['ingest', '--wal-dir', wal, '--workers', '1', '--http-listen', '127.0.0.1:0', '--grpc-listen', '127.0.0.1:0', ...ARGS], {
        cwd: dataDir,
        timeoutMs: 60_000,
        env: ENV,
      });
      expect(r.signal, 'the start did not stop').toBeNull();
      expect(r.status).toBe(1);
      expect(r.stderr).toContain(`${at}: a symbolic link`);
      expect(r.stderr).toContain('move it aside');
      expect(fs.lstatSync(at).isSymbolicLink()).toBe(true);
      expect(snapshot(elsewhere)).toEqual(before);
    });
  }

  it('a WAL root reached through a link (the root itself, or a directory above it) is no link inside the root: verify and dump pass, the start replays it', { timeout: 120_000 }, async () => {
    const { dataDir, wal } = await acmeWal('kill9', 3, 'siglake-jnl-root-link-', ENV);
    dirs.push(dataDir);
    const links = tempDir('siglake-jnl-root-link-to-');
    dirs.push(links);
    // `--wal-dir /data/wal` where /data is a link, and where the wal directory itself is one.
    fs.symlinkSync(dataDir, path.join(links, 'data'));
    const viaParent = path.join(links, 'data', 'wal');
    const ownDir = path.join(links, 'own');
    fs.mkdirSync(ownDir);
    fs.symlinkSync(wal, path.join(ownDir, 'wal'));
    const viaRoot = path.join(ownDir, 'wal');
    for (const root of [viaParent, viaRoot]) {
      const v = runCli(['wal', 'verify', root]);
      expect(v.status, v.stdout + v.stderr).toBe(0);
      expect(v.stdout).not.toContain('symbolic link');
      const d = runCli(['wal', 'dump', root]);
      expect(d.status, d.stderr).toBe(0);
      expect(d.stdout).toContain('acme');
    }
    for (const dir of [path.join(links, 'data'), ownDir]) {
      const ing = await startIngester({ dataDir: dir, args: ARGS, env: ENV });
      live.add(ing);
      expect(ing.stderr).not.toContain('symbolic link');
      expect(await ing.stop()).toBe(0);
      live.delete(ing);
    }
    expect(fs.lstatSync(viaRoot).isSymbolicLink()).toBe(true);
  });
});
