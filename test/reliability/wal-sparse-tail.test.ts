// A segment made 1 TiB long by `truncate -s` (a sparse tail of zeros, as an
// operator's mistake or a damaged file system leaves), found in the review
// of 2026-12-07: start-up recovery, `wal verify` and `wal dump` read every
// byte of such a tail, byte by byte in JavaScript (a 2 GiB tail cost 7-13 s
// of start-up; 1 TiB holds it for hours). No segment the writer makes is
// longer than MAX_SEGMENT_FILE_BYTES, so what lies past the last whole
// record of a longer file is damage, and is not read: the unsealed last
// segment of a killed ingester is cut back there, as a torn tail is; the
// sealed one of a stopped ingester is kept and reported, as damage is.
// Either way the start and verify finish within the test's timeout, and
// every record written before is there.

import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { dumpLines, runCli, startIngester } from '../helpers/ingester.js';
import { acmeWal, sendLog, walTestLeftovers } from '../helpers/written-wal.js';
import { MAX_SEGMENT_FILE_BYTES } from '../../src/wal/format.js';

const TIB = 2 ** 40;
const ARGS = ['--trust-tenant-header', '--compactor=false'];
const { dirs, live } = walTestLeftovers();

/** acme's texts in `wal dump` of the root, and its exit code. */
function dumped(wal: string): { status: number | null; texts: string[] } {
  const r = runCli(['wal', 'dump', wal], { timeoutMs: 30_000 });
  expect(r.signal, `wal dump did not finish: ${r.stderr}`).toBeNull();
  const texts = dumpLines(r.stdout)
    .filter((l) => l.tenant === 'acme')
    .flatMap((l) => l.texts ?? []); // a damage line has none
  return { status: r.status, texts };
}

/** acmeWal's WAL (acme-0..4, stopped or killed), acme's last segment then made 1 TiB long, sparse. */
async function written(how: 'stop' | 'kill9'): Promise<{ dataDir: string; wal: string; seg: string; size: number }> {
  const { dataDir, wal, seg, size } = await acmeWal(how, 5, `siglake-sparse-${how}-`);
  dirs.push(dataDir);
  // Sparse: no block is written. (ext4 takes files up to 16 TiB; the test's temp directory is on it.)
  fs.truncateSync(seg, TIB);
  expect(fs.statSync(seg).size).toBe(TIB);
  expect(TIB).toBeGreaterThan(MAX_SEGMENT_FILE_BYTES);
  return { dataDir, wal, seg, size };
}

describe('a segment with a 1 TiB sparse tail', () => {
  it("a killed ingester's unsealed last segment: the start cuts it back to its last record, verify is clean, every record is there", { timeout: 60_000 }, async () => {
    const { dataDir, wal, seg, size } = await written('kill9');
    const ing = await startIngester({ dataDir, args: ARGS, timeoutMs: 45_000 });
    live.add(ing);
    expect(fs.statSync(seg).size).toBe(size);
    const cut = ing.logs.find((l) => l.msg.startsWith('WAL tail repaired'));
    expect(cut).toMatchObject({ level: 40, segment: seg, offset: size, truncatedBytes: TIB - size });
    expect((await sendLog(ing.url, 'acme', 'acme-after')).status).toBe(200);
    expect(await ing.stop()).toBe(0);
    live.delete(ing);
    const v = runCli(['wal', 'verify', wal], { timeoutMs: 30_000 });
    expect(v.signal).toBeNull();
    expect(v.status, v.stdout).toBe(0);
    const d = dumped(wal);
    expect(d.status).toBe(0);
    expect(d.texts).toEqual(['acme-0', 'acme-1', 'acme-2', 'acme-3', 'acme-4', 'acme-after']);
  });

  it("a stopped ingester's sealed last segment: verify and dump finish and fail naming it, the start keeps it whole and serves, every record is there", { timeout: 60_000 }, async () => {
    const { dataDir, wal, seg } = await written('stop');
    const v = runCli(['wal', 'verify', wal], { timeoutMs: 30_000 });
    expect(v.signal, 'verify did not finish').toBeNull();
    expect(v.status).toBe(1);
    expect(v.stdout).toMatch(new RegExp(`DAMAGED: ${path.basename(seg)} at offset \\d+: .*longer than any segment the writer makes`));
    expect(dumped(wal)).toEqual({ status: 1, texts: ['acme-0', 'acme-1', 'acme-2', 'acme-3', 'acme-4'] });

    const ing = await startIngester({ dataDir, args: ARGS, timeoutMs: 45_000 });
    live.add(ing);
    // Sealed: synced before it was marked, so no crash tore it; its bytes are kept and reported.
    expect(fs.statSync(seg).size).toBe(TIB);
    const kept = ing.logs.find((l) => l.msg.startsWith('WAL segment damaged: not repaired'));
    expect(kept).toMatchObject({ level: 50 });
    expect(String(kept!['damage'])).toContain(seg);
    expect((await sendLog(ing.url, 'acme', 'acme-after')).status).toBe(200);
    expect(await ing.stop()).toBe(0);
    live.delete(ing);
    expect(dumped(wal)).toEqual({ status: 1, texts: ['acme-0', 'acme-1', 'acme-2', 'acme-3', 'acme-4', 'acme-after'] });
  });
});
