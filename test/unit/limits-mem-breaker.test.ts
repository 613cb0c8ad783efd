import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BreakerFlag } from '../../src/limits/breaker-flag.js';
import { LimitsError } from '../../src/limits/limits-error.js';
import { MemBreaker } from '../../src/limits/mem-breaker.js';
import { sleep } from '../helpers/wait.js';


function statusFile(vmRssKb: number | null): string {
  // The shape of /proc/self/status around the line the breaker reads.
  const lines = ['Name:\tnode', 'Umask:\t0022', 'State:\tR (running)', 'VmPeak:\t 1200000 kB', 'VmSize:\t 1100000 kB'];
  if (vmRssKb !== null) lines.push(`VmRSS:\t${String(vmRssKb).padStart(8)} kB`);
  lines.push('RssAnon:\t   40000 kB', 'Threads:\t11', '');
  return lines.join('\n');
}

describe('MemBreaker', () => {
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'siglake-breaker-'));
  });

  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('trips on the real /proc/self/status with a tiny limit and closes when the limit is raised', () => {
    const b = new MemBreaker({ limitMib: 1, sampleSecs: 1 });
    try {
      expect(b.enabled).toBe(true);
      expect(b.isOpen()).toBe(true); // any Node process is over 1 MiB
      const rss = b.rssBytes();
      const reported = process.memoryUsage.rss();
      expect(rss).toBeGreaterThan(1024 * 1024);
      expect(rss).toBeGreaterThan(reported * 0.5);
      expect(rss).toBeLessThan(reported * 2);
      b.setLimitMib(1024 * 1024); // 1 TiB
      expect(b.isOpen()).toBe(false);
      b.setLimitMib(1);
      expect(b.isOpen()).toBe(true);
    } finally {
      b.close();
    }
  });

  it('is off at limitMib 0: never open', () => {
    const b = new MemBreaker({ limitMib: 0, sampleSecs: 1 });
    b.sample();
    expect(b.enabled).toBe(false);
    expect(b.isOpen()).toBe(false);
    expect(b.rssBytes()).toBeGreaterThan(1024 * 1024);
    b.close();
  });

  it('opens at or above the limit, read from the status file', () => {
    const path = join(dir, 'status-exact');
    writeFileSync(path, statusFile(2048));
    const b = new MemBreaker({ limitMib: 2, sampleSecs: 60, statusPath: path });
    try {
      expect(b.isOpen()).toBe(true); // exactly at the limit: open
      expect(b.rssBytes()).toBe(2048 * 1024);
      b.setLimitMib(2.5);
      expect(b.isOpen()).toBe(false);
      writeFileSync(path, statusFile(4096));
      b.sample();
      expect(b.isOpen()).toBe(true);
      writeFileSync(path, statusFile(100));
      b.sample();
      expect(b.isOpen()).toBe(false);
    } finally {
      b.close();
    }
  });

  it('follows the file on its own timer', async () => {
    const path = join(dir, 'status-timer');
    writeFileSync(path, statusFile(10));
    const b = new MemBreaker({ limitMib: 1, sampleSecs: 0.02, statusPath: path });
    try {
      expect(b.isOpen()).toBe(false);
      writeFileSync(path, statusFile(5000));
      await sleep(200);
      expect(b.isOpen()).toBe(true);
      writeFileSync(path, statusFile(10));
      await sleep(200);
      expect(b.isOpen()).toBe(false);
    } finally {
      b.close();
    }
  });

  it('never trips where the status file is missing; rssBytes falls back to process.memoryUsage.rss()', () => {
    const b = new MemBreaker({ limitMib: 1, sampleSecs: 1, statusPath: join(dir, 'no-such-file') });
    try {
      b.sample();
      expect(b.isOpen()).toBe(false);
      const before = process.memoryUsage.rss();
      const rss = b.rssBytes();
      const after = process.memoryUsage.rss();
      expect(rss).toBeGreaterThanOrEqual(Math.min(before, after) * 0.9);
      expect(rss).toBeLessThanOrEqual(Math.max(before, after) * 1.1);
    } finally {
      b.close();
    }
  });

  it('never trips on a status file without a VmRSS line or a directory in its place', () => {
    const path = join(dir, 'status-no-rss');
    writeFileSync(path, statusFile(null));
    for (const statusPath of [path, dir]) {
      const b = new MemBreaker({ limitMib: 1, sampleSecs: 1, statusPath });
      b.sample();
      expect(b.isOpen()).toBe(false);
      expect(b.rssBytes()).toBeGreaterThan(0);
      b.close();
    }
  });

  it('reads a status file larger than its first buffer', () => {
    const path = join(dir, 'status-big');
    writeFileSync(path, `${'Padding:\t' + 'x'.repeat(9000)}\n${statusFile(3000)}`);
    const b = new MemBreaker({ limitMib: 2, sampleSecs: 60, statusPath: path });
    expect(b.rssBytes()).toBe(3000 * 1024);
    expect(b.isOpen()).toBe(true);
    b.close();
  });

  it('publishes its state on a SharedArrayBuffer that another view reads', () => {
    const path = join(dir, 'status-shared');
    writeFileSync(path, statusFile(4096));
    const b = new MemBreaker({ limitMib: 3, sampleSecs: 60, statusPath: path });
    const view = new BreakerFlag(b.buffer);
    expect(view.isOpen()).toBe(true);
    expect(view.rssKiB()).toBe(4096);
    b.setLimitMib(8);
    expect(view.isOpen()).toBe(false);
    b.close();
    expect(() => new BreakerFlag(new SharedArrayBuffer(4))).toThrow(LimitsError);
  });

  it('refuses bad options with a coded error', () => {
    for (const [opts, param] of [
      [{ limitMib: -1, sampleSecs: 1 }, 'limitMib'],
      [{ limitMib: Number.NaN, sampleSecs: 1 }, 'limitMib'],
      [{ limitMib: 1, sampleSecs: 0 }, 'sampleSecs'],
      [{ limitMib: 1, sampleSecs: 4000 }, 'sampleSecs'],
    ] as const) {
      try {
        new MemBreaker(opts).close();
        throw new Error(`accepted ${JSON.stringify(opts)}`);
      } catch (err) {
        expect((err as LimitsError).code).toBe('SIGLAKE_LIMITS_BAD_PARAM');
        expect((err as LimitsError).param).toBe(param);
      }
    }
  });
});
