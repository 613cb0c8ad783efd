// The C probes under perf/ (docs/performance.md quotes their figures) still
// build warning-free with the compiler the native addon needs, run every mode
// they document on a small load, print the figures the docs read, and leave
// nothing behind in the directory they measured in.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO, tempDir } from '../helpers/ingester.js';

const dir = tempDir('siglake-perf-c-');
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function build(name: string): string {
  const out = path.join(dir, name);
  const cc = spawnSync('cc', ['-O2', '-Wall', '-Wextra', '-Werror', '-pthread', '-o', out, path.join(REPO, 'perf', `${name}.c`)], { encoding: 'utf8' });
  expect(cc.status, cc.stderr).toBe(0);
  return out;
}

describe('perf/ C probes', () => {
  it('p5-floor: each mode measures one lane against many and removes its lane and journal files', () => {
    const bin = build('p5-floor');
    for (const mode of ['inline', 'overlap', 'deferred']) {
      const work = path.join(dir, `floor-${mode}`);
      // 300 lanes, 0.5 s windows, one run each, 64 descriptors, rounds of 22, 2 pool threads, a checkpoint every 100 ms.
      const r = spawnSync(bin, [work, '300', '0.5', '1', '64', '22', '2', '100', mode], { encoding: 'utf8', timeout: 60_000 });
      expect(r.status, r.stderr).toBe(0);
      const rows = r.stdout.split('\n').filter((l) => /^\s+1\s+(1|300)\s/.test(l));
      expect(rows, r.stdout).toHaveLength(2);
      for (const row of rows) {
        const [, lanes, rps, cpu, busy, checkpoints] = row.trim().split(/\s+/).map(Number);
        expect([1, 300]).toContain(lanes);
        expect(rps).toBeGreaterThan(0);
        expect(cpu).toBeGreaterThan(0);
        expect(Number.isFinite(busy)).toBe(true);
        // A checkpoint every 100 ms over half a second: at least one ran in each window.
        expect(checkpoints).toBeGreaterThanOrEqual(1);
      }
      expect(r.stdout).toMatch(/^300 lanes add -?\d+\.\d\d us of process CPU per request \(-?\d+\.\d\d of the machine's\); rate ratio \d+\.\d %$/m);
      expect(fs.readdirSync(work)).toEqual([]);
    }
  }, 120_000);

  it('p5-floor refuses an unknown mode and a bad count', () => {
    const bin = build('p5-floor');
    const bad = spawnSync(bin, [path.join(dir, 'bad'), '300', '0.5', '1', '64', '22', '2', '100', 'sideways'], { encoding: 'utf8' });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('MODE is inline, overlap or deferred');
    const zero = spawnSync(bin, [path.join(dir, 'bad'), '0'], { encoding: 'utf8' });
    expect(zero.status).toBe(2);
    expect(zero.stderr).toContain('every argument must be positive');
  });

  it('journal-sync-modes: each way of making a round durable is timed, a bad mode refused, no file left', () => {
    const bin = build('journal-sync-modes');
    const work = path.join(dir, 'jsm');
    fs.mkdirSync(work);
    for (const mode of ['0', '1', '2', '3']) {
      const r = spawnSync(bin, [work, mode, '20000', '20'], { encoding: 'utf8', timeout: 60_000 });
      if (mode === '2' && r.status === 3) {
        // A temporary directory on tmpfs: no direct I/O there, and it says so.
        expect(r.stdout).toBe('mode 2, 20000 bytes: O_DIRECT refused by this file system\n');
        expect(fs.readdirSync(work)).toEqual([]);
        continue;
      }
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`^mode ${mode}, 20000 bytes: p50 \\d+\\.\\d p90 \\d+\\.\\d p99 \\d+\\.\\d us\n$`));
      expect(fs.readdirSync(work)).toEqual([]);
    }
    const bad = spawnSync(bin, [work, '4', '20000', '20'], { encoding: 'utf8' });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('MODE 0-3');
    expect(fs.readdirSync(work)).toEqual([]);
  }, 120_000);

  it('checkpoint-sync: per-file fdatasync against one syncfs, and no file left', () => {
    const bin = build('checkpoint-sync');
    const work = path.join(dir, 'cs');
    fs.mkdirSync(work);
    const r = spawnSync(bin, [work, '200', '1100', '2', '2'], { encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/fdatasync each: wall \d+\.\d ms, process CPU \d+\.\d ms, machine busy \d+\.\d ms/);
    expect(r.stdout).toMatch(/one syncfs: +wall \d+\.\d ms/);
    expect(fs.readdirSync(work)).toEqual([]);
  });
});
