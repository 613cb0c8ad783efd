// What `siglake ingest` and `siglake compact` take as a WAL root
// (docs/wal-format.md "Directories"), against the real processes.
//
// A tenant's directory given as the root: an ingester there would write the
// default tenant's lanes into that tenant's, and a compactor would land that
// tenant's lanes in the default tenant's namespace. Both refuse it (exit 2,
// naming the root), found by the root marker or the batch mode's `.journal`;
// two roots side by side are not mistaken for tenants.
//
// Symbolic links inside the WAL. Nothing
// that lands the WAL follows one (recovery, the compactor and `wal verify`
// list directories without following links), so what a writer put through a
// link would stay on disk and never land, and a link may point at another
// tenant's lanes. Against the real `siglake` process:
//
//   - a lane reached through a link made while running is not opened: 500
//     SIGLAKE_WAL_WRITE (the log names the link), nothing written where it
//     points, and the other tenants write on
//   - `siglake wal verify` counts the link as a problem (exit 1)
//   - `siglake ingest` refuses to start on a WAL holding one (exit 2, named),
//     and starts once it is gone

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, runCli, startIngester, tempDir } from '../helpers/ingester.js';
import { JOURNAL_ROOT } from '../../src/wal/journal-format.js';
import { INGESTER_LOCK, WAL_ROOT_MARKER } from '../../src/wal/layout.js';
import { until } from '../helpers/wait.js';
import { Client, textsUnder } from '../helpers/tenancy-client.js';

describe('a directory inside a WAL root', () => {
  it("a tenant's directory given as the root is refused by ingest and compact; a sibling root is not", async () => {
    const dataDir = tempDir('siglake-wal-inside-');
    const walDir = path.join(dataDir, 'wal');
    const ing = await startIngester({ dataDir, args: ['--trust-tenant-header'] });
    const c = new Client(ing);
    try {
      expect((await c.send('http', 'logs', 'acme-1', { 'x-scope-orgid': 'acme' })).status).toBe(200);
    } finally {
      c.close();
      expect(await ing.stop()).toBe(0);
    }
    expect(fs.readFileSync(path.join(walDir, WAL_ROOT_MARKER), 'utf8')).toMatch(/^siglake WAL root/);
    const ingest = (dir: string) =>
      runCli(['ingest', '--http-listen', '127.0.0.1:0', '--grpc-listen', '127.0.0.1:0', '--wal-dir', dir], { cwd: dataDir });
    const compact = (dir: string) => runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', dir], { cwd: dataDir });
    const inside = `lies inside the WAL root ${walDir} `;
    for (const dir of [path.join(walDir, 'acme'), path.join(walDir, 'acme', 'logs')]) {
      for (const run of [ingest, compact]) {
        const r = run(dir);
        expect(r.status).toBe(2);
        expect(r.stderr).toContain(inside);
      }
    }
    // Without the batch mode's journal (another fsync mode) the marker alone tells the root.
    fs.rmSync(path.join(walDir, JOURNAL_ROOT), { recursive: true, force: true });
    expect(compact(path.join(walDir, 'acme')).stderr).toContain(inside);
    // Nothing was written under the tenant's directory, and its record stays the tenant's.
    expect(fs.readdirSync(path.join(walDir, 'acme'))).toEqual(['logs']);
    expect(textsUnder(path.join(walDir, 'acme'))).toEqual(['acme-1']);
    // A second root beside the first is a root of its own.
    const sibling = await startIngester({ dataDir: tempDir('siglake-wal-sibling-'), args: ['--wal-dir', path.join(dataDir, 'wal-b')] });
    expect(await sibling.stop()).toBe(0);
    expect(fs.existsSync(path.join(dataDir, 'wal-b', WAL_ROOT_MARKER))).toBe(true);
  });
});

describe('a WAL directory the ingester cannot use', () => {
  it('a file where the directory should be: exit 2 naming the setting and its source, nothing else made', () => {
    // It failed with exit 1 and "EEXIST: mkdir", after the catalog file and the warehouse were made.
    const dir = tempDir('siglake-wal-unusable-');
    fs.writeFileSync(path.join(dir, 'afile'), '');
    const r = runCli(['ingest', '--http-listen', '127.0.0.1:0', '--grpc-listen', '127.0.0.1:0', '--wal-dir', path.join(dir, 'afile')], { cwd: dir });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(`invalid ingester.walDir (flag --wal-dir): ${path.join(dir, 'afile')} is not a directory`);
    expect(fs.readdirSync(dir)).toEqual(['afile']);
  });
});

describe('a WAL root on a file system that refuses directories', () => {
  it('regression (mkdir-recursive-proc): --wal-dir under /proc is refused at once with exit 2 naming the setting (it spun at 100 % CPU for ever)', () => {
    // Node's mkdir({ recursive: true }) never returns for a path under /proc; SIGTERM could not stop it.
    const dir = tempDir('siglake-wal-proc-');
    const walDir = `/proc/siglake-test-${process.pid}/wal`;
    const started = Date.now();
    const r = spawnSync(process.execPath, [CLI, 'ingest', '--http-listen', '127.0.0.1:0', '--grpc-listen', '127.0.0.1:0', '--wal-dir', walDir, '--catalog-url', `sqlite:${dir}/c.db`, '--warehouse', `${dir}/wh`], {
      encoding: 'utf8',
      cwd: dir,
      timeout: 30_000,
      killSignal: 'SIGKILL',
    });
    expect(r.signal, `still running after ${Date.now() - started} ms`).toBeNull();
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(`invalid ingester.walDir (flag --wal-dir): ${walDir} cannot be made (ENOENT: mkdir under /proc)`);
    // Regression (proc-wal-dir-leaves-catalog): refused before the catalog file and the warehouse are made.
    expect(fs.existsSync(path.join(dir, 'c.db'))).toBe(false);
    expect(fs.existsSync(path.join(dir, 'wh'))).toBe(false);
  });
});

describe('drain and compact --ingester-stopped need a WAL root', () => {
  it('a missing directory, or one that is no WAL root, is refused (exit 2), never reported "drained"', () => {
    // "drained" is the signal that the volume may go: a drain Job that mounted the volume elsewhere,
    // or a typo, used to print it for a WAL it never saw.
    const dir = tempDir('siglake-drain-root-');
    const flags = ['--catalog-url', `sqlite:${path.join(dir, 'catalog.db')}`, '--warehouse', path.join(dir, 'warehouse')];
    const missing = path.join(dir, 'typo', 'wal');
    for (const args of [['drain'], ['compact', '--once', '--ingester-stopped']]) {
      const r = runCli([...args, '--wal-dir', missing, ...flags], { cwd: dir });
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toContain(`ingester.walDir ${missing} does not exist`);
      expect(r.stdout).not.toContain('drained');
    }
    const empty = path.join(dir, 'empty');
    fs.mkdirSync(empty);
    const r = runCli(['drain', '--wal-dir', empty, ...flags], { cwd: dir });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('is not a WAL root');
    expect(fs.existsSync(path.join(dir, 'catalog.db'))).toBe(false); // refused before anything was made
  });

  it('regression (compact-once-missing-wal): compact --once refuses a missing directory or one that is no WAL root (exit 2), and lands an empty WAL root with exit 0', () => {
    // It exited 0 for both, the answer of a WAL with nothing sealed: a cron job that mounted the volume
    // elsewhere, or a typo, reported success for a WAL it never saw.
    const dir = tempDir('siglake-once-root-');
    const flags = ['--catalog-url', `sqlite:${path.join(dir, 'catalog.db')}`, '--warehouse', path.join(dir, 'warehouse'), '--log-level', 'warn'];
    const missing = path.join(dir, 'typo', 'wal');
    const r1 = runCli(['compact', '--once', '--wal-dir', missing, ...flags], { cwd: dir });
    expect(r1.status, r1.stderr).toBe(2);
    expect(r1.stderr).toBe(`siglake: ingester.walDir ${missing} does not exist: nothing to land there\n`);
    const empty = path.join(dir, 'empty');
    fs.mkdirSync(empty);
    const r2 = runCli(['compact', '--once', '--wal-dir', empty, ...flags], { cwd: dir });
    expect(r2.status, r2.stderr).toBe(2);
    expect(r2.stderr).toContain(`ingester.walDir ${empty} is not a WAL root`);
    expect(fs.existsSync(path.join(dir, 'catalog.db'))).toBe(false); // refused before anything was made
    fs.writeFileSync(path.join(empty, WAL_ROOT_MARKER), 'siglake WAL root\n');
    const r3 = runCli(['compact', '--once', '--wal-dir', empty, ...flags], { cwd: dir });
    expect(r3.status, r3.stderr).toBe(0);
  });
});

describe('drain beside a running ingester', () => {
  it('is refused while the ingester runs (its lock names it), and drains once it stopped; a lock a dead process left does not block', async () => {
    // Beside a live writer, a drain (or compact --ingester-stopped) took its live segment as sealed,
    // landed it and truncated it while the writer still appended: acknowledged records lost.
    const dataDir = tempDir('siglake-drain-live-');
    const walDir = path.join(dataDir, 'wal');
    const flags = ['--catalog-url', `sqlite:${path.join(dataDir, 'catalog.db')}`, '--warehouse', path.join(dataDir, 'warehouse')];
    const ing = await startIngester({ dataDir, args: ['--compactor=false', ...flags] });
    try {
      const c = new Client(ing);
      expect((await c.send('http', 'logs', 'live-1', {})).status).toBe(200);
      c.close();
      for (const args of [['drain'], ['compact', '--once', '--ingester-stopped']]) {
        const r = runCli([...args, '--wal-dir', walDir, ...flags], { cwd: dataDir });
        expect(r.status, r.stderr).toBe(2);
        expect(r.stderr).toContain(`an ingester (pid ${ing.child.pid}) writes ${walDir}: stop it first`);
      }
    } finally {
      expect(await ing.stop()).toBe(0);
    }
    expect(fs.existsSync(path.join(walDir, INGESTER_LOCK))).toBe(false);
    // A lock left by a process that is gone (a crash) does not stand in the way.
    fs.writeFileSync(path.join(walDir, INGESTER_LOCK), JSON.stringify({ pid: 2 ** 22 + 17, host: os.hostname(), started: '1' }));
    const r = runCli(['drain', '--wal-dir', walDir, ...flags], { cwd: dataDir });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('"msg":"drained"');
  });
});

describe('symbolic links in the WAL', () => {
  it('a linked tenant directory is refused while running, reported by verify, and refused at start', async () => {
    const dataDir = tempDir('siglake-wal-links-');
    const walDir = path.join(dataDir, 'wal');
    const elsewhere = tempDir('siglake-wal-elsewhere-');
    const ing = await startIngester({ dataDir, args: ['--trust-tenant-header'] });
    const c = new Client(ing);
    try {
      expect((await c.send('http', 'logs', 'acme-1', { 'x-scope-orgid': 'acme' })).status).toBe(200);
      fs.symlinkSync(elsewhere, path.join(walDir, 'globex'));
      for (const t of ['http', 'grpc'] as const) {
        const r = await c.send(t, 'logs', `globex-${t}`, { 'x-scope-orgid': 'globex' });
        if (t === 'http') expect(r.status).toBe(500);
        // The client is told the write failed, never a path; the log names the link.
        expect(r.errorCode).toBe('SIGLAKE_WAL_WRITE');
        expect(r.message).toBe('write failed: the WAL could not store the request');
      }
      const named = (l: { msg?: unknown; err?: unknown }) => l.msg === 'WAL write failed' && /wal lane not opened: \S*globex is a symbolic link/.test(String(l.err));
      await until(() => ing.logs.some(named), 10_000, 'the worker to log the link');
      expect(fs.readdirSync(elsewhere)).toEqual([]);
      expect((await c.send('grpc', 'logs', 'acme-2', { 'x-scope-orgid': 'acme' })).code).toBe(0);
    } finally {
      c.close();
      expect(await ing.stop()).toBe(0);
    }
    expect(textsUnder(path.join(walDir, 'acme'))).toEqual(['acme-1', 'acme-2']);

    const verify = runCli(['wal', 'verify', walDir]);
    expect(verify.status).toBe(1);
    expect(verify.stdout).toContain(`NOT FOLLOWED: ${path.join(walDir, 'globex')} is a symbolic link`);

    const start = () => runCli(['ingest', '--http-listen', '127.0.0.1:0', '--grpc-listen', '127.0.0.1:0', '--wal-dir', walDir], { cwd: dataDir });
    const refused = start();
    expect(refused.status).toBe(2);
    expect(refused.stderr).toContain(`symbolic link where a tenant or lane directory lives (${path.join(walDir, 'globex')})`);

    // A link one level down (a lane, an index's lane) is refused the same way; once gone, start-up goes on.
    fs.unlinkSync(path.join(walDir, 'globex'));
    fs.mkdirSync(path.join(walDir, 'initech', 'indexes'), { recursive: true });
    fs.symlinkSync(elsewhere, path.join(walDir, 'initech', 'indexes', 'payments'));
    expect(start().stderr).toContain(path.join(walDir, 'initech', 'indexes', 'payments'));
    fs.unlinkSync(path.join(walDir, 'initech', 'indexes', 'payments'));
    const again = await startIngester({ dataDir });
    expect(await again.stop()).toBe(0);
    expect(runCli(['wal', 'verify', walDir]).status).toBe(0);
  });
});
