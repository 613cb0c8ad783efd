// The checkpoint's native write of a segment's deferred runs
// (src/wal/native-runs.ts, native/deferred-runs.c) on real files: runs read
// from several journal files land at their places in the segment, byte for
// byte, whether they follow each other, leave gaps or span more than one
// write chunk; the synced pages are dropped when asked; each failure says
// which step failed, as an error shaped like node:fs's, and a bad call is a
// TypeError. The addon must be built here (npm run build); without it this
// file fails.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadAddon } from '../../src/native/addon.js';
import { nativeRunsWriter } from '../../src/wal/native-runs.js';
import { tempDir } from '../helpers/ingester.js';

const dir = tempDir('siglake-native-runs-');
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const journalPath = (n: number) => path.join(dir, `j-${n}.jnl`);

function bytes(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 131 + seed * 7) & 0xff;
  return b;
}

/** Four numbers a run: journal file, offset there, length, offset in the segment. */
function spec(runs: [number, number, number, number][]): Uint32Array {
  return Uint32Array.from(runs.flat());
}

function resident(file: string): number {
  return Number(execFileSync('fincore', ['--bytes', '--noheadings', '--output', 'RES', file], { encoding: 'utf8' }).trim());
}

describe('native write of deferred runs', () => {
  it('loads with the addon built', () => {
    expect(loadAddon().addon).not.toBeNull();
    expect(nativeRunsWriter(journalPath, false).writer).not.toBeNull();
  });

  it('writes runs from two journal files to their places, contiguous, with a gap, and across the 1 MiB chunk', async () => {
    const j1 = bytes(3 << 20, 1);
    const j2 = bytes(1 << 16, 2);
    fs.writeFileSync(journalPath(7), j1);
    fs.writeFileSync(journalPath(9), j2);
    const seg = path.join(dir, 'a.seg');
    fs.writeFileSync(seg, Buffer.from('HEADER--'));
    const { writer } = nativeRunsWriter(journalPath, false);
    const big = (1 << 20) + 12_345; // longer than a chunk by itself
    const runs: [number, number, number, number][] = [
      [7, 100, 500, 8], // right after the header
      [9, 0, 300, 508], // follows it, from the other file
      [7, 4096, 1000, 808],
      [7, 200_000, big, 1808], // joins the group until it would pass the chunk
      [9, 1000, 64, 1808 + big + 100], // after a gap of 100 bytes
    ];
    await writer!(seg, spec(runs), runs.length);
    const got = fs.readFileSync(seg);
    expect(got.subarray(0, 8).toString()).toBe('HEADER--');
    for (const [file, off, len, at] of runs) {
      const src = file === 7 ? j1 : j2;
      expect(got.subarray(at, at + len).equals(src.subarray(off, off + len)), `run at ${at}`).toBe(true);
    }
    expect(got.length).toBe(1808 + big + 100 + 64);
    // The gap is a hole, read as zeros.
    expect(got.subarray(1808 + big, 1808 + big + 100).every((b) => b === 0)).toBe(true);
  });

  it('uses only the first `count` runs of the array', async () => {
    fs.writeFileSync(journalPath(3), bytes(4096, 3));
    const seg = path.join(dir, 'count.seg');
    fs.writeFileSync(seg, '');
    const { writer } = nativeRunsWriter(journalPath, false);
    await writer!(seg, spec([[3, 0, 10, 0], [3, 10, 10, 10], [99, 0, 10, 20]]), 2);
    expect(fs.statSync(seg).size).toBe(20);
  });

  it('drops the synced whole pages when asked', async () => {
    fs.writeFileSync(journalPath(4), bytes(64 * 4096, 4));
    const seg = path.join(dir, 'drop.seg');
    fs.writeFileSync(seg, '');
    const { writer } = nativeRunsWriter(journalPath, true);
    await writer!(seg, spec([[4, 0, 16 * 4096 + 100, 0]]), 1);
    expect(resident(seg)).toBe(4096); // the partly written last page stays
    expect(fs.readFileSync(seg).equals(bytes(64 * 4096, 4).subarray(0, 16 * 4096 + 100))).toBe(true);
  });

  it('says which step failed: the segment missing, a journal file missing, a run past the end of its file', async () => {
    fs.writeFileSync(journalPath(5), bytes(1000, 5));
    const seg = path.join(dir, 'fail.seg');
    fs.writeFileSync(seg, '');
    const { writer } = nativeRunsWriter(journalPath, false);
    await expect(writer!(path.join(dir, 'gone.seg'), spec([[5, 0, 10, 0]]), 1)).rejects.toMatchObject({ code: 'ENOENT', syscall: 'open' });
    await expect(writer!(seg, spec([[6, 0, 10, 0]]), 1)).rejects.toMatchObject({ code: 'ENOENT', syscall: 'read' });
    await expect(writer!(seg, spec([[5, 900, 200, 0]]), 1)).rejects.toMatchObject({ code: 'EIO', syscall: 'read' });
    // Nothing of a run that could not be read reached the segment.
    expect(fs.statSync(seg).size).toBe(0);
  });

  it('a failed fdatasync rejects as one: a segment path naming /dev/null takes the write and refuses the sync (EINVAL)', async () => {
    fs.writeFileSync(journalPath(5), bytes(1000, 5));
    const seg = path.join(dir, 'null.seg');
    fs.symlinkSync('/dev/null', seg);
    const { writer } = nativeRunsWriter(journalPath, false);
    await expect(writer!(seg, spec([[5, 0, 10, 0]]), 1)).rejects.toMatchObject({ code: 'EINVAL', syscall: 'fdatasync' });
    // With page dropping asked for too (page-cache.c's sync), the same refusal.
    const dropping = nativeRunsWriter(journalPath, true).writer!;
    await expect(dropping(seg, spec([[5, 0, 10, 0]]), 1)).rejects.toMatchObject({ code: 'EINVAL', syscall: 'fdatasync' });
  });

  it('refuses a malformed call with a TypeError', () => {
    const addon = loadAddon().addon!;
    const cb = () => undefined;
    expect(() => addon.writeRuns(1 as unknown as string, [], new Uint32Array(4), 1, cb)).toThrow(TypeError);
    expect(() => addon.writeRuns('x', [], new Uint32Array(3), 1, cb)).toThrow(/four numbers a run/);
    expect(() => addon.writeRuns('x', [2 as unknown as string], new Uint32Array(4), 1, cb)).toThrow(TypeError);
    expect(() => addon.writeRuns('x', [], new Int32Array(4) as unknown as Uint32Array, 1, cb)).toThrow(TypeError);
  });

  it('a run naming no journal file of the call is EINVAL', async () => {
    const addon = loadAddon().addon!;
    const seg = path.join(dir, 'einval.seg');
    fs.writeFileSync(seg, '');
    const [errno, op] = await new Promise<[number, number]>((resolve) => addon.writeRuns(seg, [], new Uint32Array([0, 0, 1, 0]), 1, (e, o) => resolve([e, o])));
    expect([errno, op]).toEqual([22, 3]);
  });
});
