// The bench's tools for a machine with more cores (docs/performance.md, "On 16
// cores"): the worker curve's rows, a run that needs only the load tools its
// rows use, many-cores.sh's sections against a deadline, and the portable
// bundle that carries node, wrk and h2load to a machine without them.

import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO } from '../helpers/ingester.js';

const RUN = path.join(REPO, 'native-bench', 'run.mjs');
const temps: string[] = [];
afterAll(() => {
  for (const d of temps) rmSync(d, { recursive: true, force: true });
});
function tempDir(prefix: string): string {
  const d = mkdtempSync(path.join(os.tmpdir(), prefix));
  temps.push(d);
  return d;
}

/** A PATH holding only sh and getconf: no wrk, no h2load. */
function barePath(): string {
  const bin = tempDir('siglake-bare-path-');
  for (const tool of ['sh', 'getconf']) {
    const found = spawnSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim();
    symlinkSync(found, path.join(bin, tool));
  }
  return bin;
}

describe('native-bench on more cores', () => {
  it('lists the worker curve rows for BENCH_CURVE_WORKERS, with the disk rows in the curve goal', () => {
    const r = spawnSync(process.execPath, [RUN, '--list'], { encoding: 'utf8', env: { ...process.env, BENCH_CURVE_WORKERS: '3,5', BENCH_CURVE_WRK_THREADS: '4' } });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^curve-1k-w3\s+siglake HTTP batch, 64 tenants, --workers 3; wrk -t4$/m);
    expect(r.stdout).toMatch(/^curve-256k-w5\s+siglake HTTP batch, 64 tenants, --workers 5; wrk -t4$/m);
    expect(r.stdout).toContain('curve = disk-1k + disk-256k + curve-1k-w3 + curve-256k-w3 + curve-1k-w5 + curve-256k-w5');
    expect(r.stdout).toContain('acceptors = ceiling-1k + ceiling-1k-wrk2 + ceiling-1k-2t + ceiling-1k-2t-wrk2 + ceiling-1k-4t-wrk4');
  });

  it('runs rows that need no load tool without wrk or h2load, and names the missing tool for rows that do', () => {
    const bin = barePath();
    const env = { ...process.env, PATH: bin, BENCH_SECS: '1', BENCH_RUNS: '1', BENCH_WARMUP_SECS: '0', BENCH_DIR: tempDir('siglake-bench-dir-') };
    const disk = spawnSync(process.execPath, [RUN, '--no-build', '--only', 'disk-1k'], { encoding: 'utf8', env, timeout: 120_000 });
    expect(disk.stderr).not.toMatch(/not found/);
    expect(disk.status).toBe(0);
    // The table's one row: writes + fdatasync a second.
    const row = /^disk-1k\s+([\d,]+)\s/m.exec(disk.stdout);
    expect(row).not.toBeNull();
    expect(Number(row![1]!.replace(/,/g, ''))).toBeGreaterThan(0);
    const grpc = spawnSync(process.execPath, [RUN, '--no-build', '--only', 'p3'], { encoding: 'utf8', env, timeout: 60_000 });
    expect(grpc.status).toBe(1);
    expect(grpc.stderr).toContain('h2load not found');
    expect(grpc.stderr).not.toContain('wrk not found');
  });

  it('many-cores.sh skips a section that does not fit the deadline and names an unknown one', () => {
    const out = tempDir('siglake-many-cores-');
    const r = spawnSync('bash', [path.join(REPO, 'native-bench', 'many-cores.sh'), out, '0', 'A X'], { encoding: 'utf8', env: { ...process.env, BENCH_DIR: tempDir('siglake-bench-dir-') }, timeout: 60_000 });
    expect(r.status).toBe(0);
    const log = readFileSync(path.join(out, 'run.log'), 'utf8');
    expect(log).toMatch(/^cores: \d+;/m);
    expect(log).toMatch(/^== section A skipped: -?\d+ s left, it needs about 130 s$/m);
    expect(log).toMatch(/^== no section X$/m);
    expect(existsSync(path.join(out, 'A.json'))).toBe(false);
  });

  it('pack-portable.sh packs node, wrk and h2load that run from the bundle', () => {
    const dest = path.join(tempDir('siglake-pack-'), 'bundle');
    const pack = spawnSync('bash', [path.join(REPO, 'native-bench', 'pack-portable.sh'), dest], { encoding: 'utf8', timeout: 300_000 });
    expect(pack.stderr + pack.stdout).not.toMatch(/not found|build first/);
    expect(pack.status).toBe(0);
    for (const f of ['node.xz', 'node_modules.tar.xz', 'dist.tar.xz', 'unpack.sh', 'bin/wrk', 'bin/h2load']) expect(existsSync(path.join(dest, f))).toBe(true);
    // Unpacked into an empty directory standing for the other machine's checkout.
    const there = tempDir('siglake-unpacked-');
    mkdirSync(path.join(there, 'native'), { recursive: true });
    copyFileSync(path.join(REPO, 'package.json'), path.join(there, 'package.json'));
    const script = [
      `. ${JSON.stringify(path.join(dest, 'unpack.sh'))}`,
      'command -v node',
      'node -e "const u = require(\'./node_modules/uWebSockets.js/package.json\'); console.log(process.version, u.name)"',
      'wrk -v 2>&1 | head -1',
      'h2load --version',
      'node dist/cli.js --version',
      'test -f native/build/Release/siglake_native.node && echo addon',
    ].join(' && ');
    const r = spawnSync('bash', ['-c', script], { cwd: there, encoding: 'utf8', timeout: 120_000 });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toBe(path.join(dest, 'bin', 'node'));
    expect(lines[1]).toBe(`${process.version} @trufflesuite/uws-js-unofficial`);
    expect(lines[2]).toMatch(/^wrk /);
    expect(lines[3]).toMatch(/^h2load nghttp2\//);
    expect(lines[4]).toMatch(/^siglake \d+\.\d+\.\d+/);
    expect(lines[5]).toBe('addon');
  }, 420_000);
});
