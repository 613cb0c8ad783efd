// Start-up recovery must never destroy what it cannot read, and never spin.
// Found by a review of the WAL against docs/wal-format.md (stop 47):
// - a writer worker whose recovery threw (a path it cannot open) was
//   restarted at once, forever: hundreds of recoveries a second, never ready,
//   never exiting;
// - a journal of a newer release was deleted, and a last segment of a newer
//   release cut to nothing, with every acknowledged record they held;
// - a sealed segment with one bad byte was cut there, losing the
//   acknowledged records after it, though no crash can tear a sealed segment.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { crc32c } from '@node-rs/crc32';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI, runCli, startIngester, tempDir, walDump } from '../helpers/ingester.js';
import { until } from '../helpers/wait.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) if (!process.env['KEEP']) fs.rmSync(d, { recursive: true, force: true });
});

async function send(url: string, bodies: string[]): Promise<void> {
  const body = { resourceLogs: [{ scopeLogs: [{ logRecords: bodies.map((b) => ({ body: { stringValue: b } })) }] }] };
  const r = await fetch(`${url}/v1/logs`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-scope-orgid': 'acme' }, body: JSON.stringify(body) });
  expect(r.status).toBe(200);
}

/** A WAL with five acknowledged records of tenant acme, left by a killed (`kill9`) or stopped ingester. */
async function walWithRecords(how: 'kill9' | 'stop'): Promise<{ dir: string; wal: string; seg: string }> {
  const dir = tempDir('siglake-recovery-');
  dirs.push(dir);
  const ing = await startIngester({ dataDir: dir, args: ['--trust-tenant-header', '--compactor=false'] });
  for (let i = 0; i < 5; i++) await send(ing.url, [`acme-${i}`]);
  if (how === 'kill9') await ing.kill9();
  else expect(await ing.stop()).toBe(0);
  const wal = path.join(dir, 'wal');
  return { dir, wal, seg: path.join(wal, 'acme', 'logs', '00000001.seg') };
}

/** `siglake ingest` on `dir` that is expected to exit: its code and stderr (null code: still running after `ms`). */
function startExpectingExit(dir: string, ms = 20_000): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      [CLI, 'ingest', '--http-listen', '127.0.0.1:0', '--grpc-listen', '127.0.0.1:0', '--wal-dir', path.join(dir, 'wal'), '--workers', '1', '--compactor=false'],
      { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const t = setTimeout(() => child.kill('SIGKILL'), ms);
    child.on('exit', (code) => {
      clearTimeout(t);
      resolve({ code, stderr });
    });
  });
}

/** Sets a header's u16 version and recomputes its CRC (u32 at 28, over bytes 0..28), as a newer release would write it. */
function rewriteVersion(file: string, version: number): void {
  const b = fs.readFileSync(file);
  b.writeUInt16LE(version, 4);
  b.writeUInt32LE(crc32c(b.subarray(0, 28)), 28);
  fs.writeFileSync(file, b);
}

const bodiesIn = (wal: string) => walDump(wal).flatMap((l) => l.texts);

describe('WAL start-up recovery refuses what it cannot read', () => {
  it('a worker whose recovery fails stops the start, naming why, instead of restarting forever', async () => {
    const { dir, seg } = await walWithRecords('kill9');
    fs.rmSync(seg);
    fs.mkdirSync(seg); // a segment name that is a directory: every recovery fails the same way
    const r = await startExpectingExit(dir);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/writer worker 0 could not recover its WAL: .*(EISDIR|illegal operation on a directory|a directory, not a regular file)/);
  });

  it('a journal of a newer release is refused, and kept with every byte', async () => {
    const { dir, wal, seg } = await walWithRecords('kill9');
    const jdir = path.join(wal, '.journal', 'shard-0-of-1');
    const journals = fs.readdirSync(jdir).filter((f) => f.endsWith('.jnl'));
    expect(journals.length).toBeGreaterThan(0);
    const jnl = path.join(jdir, journals.sort()[0]!);
    rewriteVersion(jnl, 99);
    const before = fs.readFileSync(jnl);
    const segBefore = fs.readFileSync(seg);
    const r = await startExpectingExit(dir);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(`${jnl}: a WAL journal of format version 99, written by a newer release of Siglake`);
    expect(fs.readFileSync(jnl).equals(before)).toBe(true);
    expect(fs.readFileSync(seg).equals(segBefore)).toBe(true);
  });

  it('a last segment of a newer release is refused, not cut to nothing', async () => {
    const { dir, wal, seg } = await walWithRecords('kill9');
    // The journal's replay would put the records back: without it, the segment alone holds them.
    fs.rmSync(path.join(wal, '.journal'), { recursive: true });
    rewriteVersion(seg, 2);
    const before = fs.readFileSync(seg);
    const r = await startExpectingExit(dir);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(`${seg}: a WAL segment of format version 2, written by a newer release of Siglake`);
    expect(fs.readFileSync(seg).equals(before)).toBe(true);
  });

  it('a sealed segment with a bad byte is kept whole and reported, and the ingester serves', async () => {
    const { dir, wal, seg } = await walWithRecords('stop');
    expect(bodiesIn(wal).sort()).toEqual(['acme-0', 'acme-1', 'acme-2', 'acme-3', 'acme-4']);
    const b = fs.readFileSync(seg);
    // Flip one byte of the second record's body text: its CRC no longer matches.
    const at = b.indexOf(Buffer.from('acme-1'));
    expect(at).toBeGreaterThan(0);
    b[at] = b[at]! ^ 0x20;
    fs.writeFileSync(seg, b);
    const ing = await startIngester({ dataDir: dir, args: ['--trust-tenant-header', '--compactor=false'] });
    try {
      expect(fs.statSync(seg).size).toBe(b.length); // not cut: the three records after the bad one are still there
      expect(fs.readFileSync(seg).equals(b)).toBe(true);
      const damage = ing.logs.find((l) => l.msg === 'WAL segment damaged: not repaired, its bytes kept (run siglake wal verify)');
      expect(damage, JSON.stringify(ing.logs.map((l) => l.msg))).toBeDefined();
      expect(String(damage!['damage'])).toContain('00000001.seg at offset');
      expect((await fetch(`${ing.url}/readyz`)).status).toBe(200);
      await send(ing.url, ['acme-after']);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
  });
});

describe('the compactor and a damaged sealed segment', () => {
  // Found by review (stop 47): recovery kept the segment, but the compactor read a damaged length in
  // a lane's highest segment as a crash's torn tail: it landed the records before the damage and
  // emptied the file, and the acknowledged records after it were gone.
  it('a damaged length in a quiet lane\'s sealed segment: the records before it land, the file is kept whole', async () => {
    const { dir, wal, seg } = await walWithRecords('stop');
    const b = fs.readFileSync(seg);
    // Record 2's length field (u32 at +4 of its header) made huge: it reads as running past the end.
    let at = 32;
    at += 24 + b.readUInt32LE(at + 4);
    b.writeUInt32LE(0xffffff, at + 4);
    fs.writeFileSync(seg, b);
    const ing = await startIngester({ dataDir: dir, args: ['--trust-tenant-header', '--compact-interval-secs', '1'] });
    try {
      await until(() => ing.logs.some((l) => l.msg === 'corrupt WAL segment: its records before the damage are landed, the file is kept (run siglake wal verify)'), 30_000, 'the compactor to report the damage');
      expect(fs.readFileSync(seg).equals(b)).toBe(true); // not emptied: the three records after the damage are still there
      const dump = runCli(['wal', 'dump', wal]);
      expect(dump.status).toBe(1); // the damage is reported
      expect(dump.stdout).toContain('acme-0');
    } finally {
      expect(await ing.stop()).toBe(0);
    }
    expect(fs.readFileSync(seg).equals(b)).toBe(true);
  });
});
