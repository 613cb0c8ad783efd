// `siglake wal verify`, `siglake wal dump` and start-up recovery over a WAL
// whose names hold what the writer never puts there. Found by a seeded
// damage driver (review of 2026-12-07) run over WALs a real ingester wrote:
// - a FIFO named `.sealed`, or a FIFO or a link to /dev/zero named as a
//   journal file, hung verify, dump and the start for ever; a FIFO named as
//   the root's lock hung the start;
// - `.journal` that is a file made verify and dump throw (a stack trace);
// - a directory, FIFO or link under a segment name passed verify, and the
//   ingester then refused every request of that lane (EEXIST, EISDIR);
// - a segment named 9007199254740991.seg killed the writer worker at the
//   lane's first request, refusing every tenant's requests in flight on it;
// - `wal dump <root>/<tenant>` printed that tenant's records as the default
//   tenant's, and a lane reached through a link under another tenant's name;
// - `wal dump` exited 0 over a corrupt journal that `wal verify` fails.

import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, runCli, startIngester, tempDir } from '../helpers/ingester.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) if (!process.env['KEEP']) fs.rmSync(d, { recursive: true, force: true });
});

async function send(url: string, tenant: string, text: string): Promise<Response> {
  const body = { resourceLogs: [{ scopeLogs: [{ logRecords: [{ body: { stringValue: text } }] }] }] };
  return fetch(`${url}/v1/logs`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-scope-orgid': tenant }, body: JSON.stringify(body) });
}

const ARGS = ['--trust-tenant-header', '--compactor=false'];

/** Data directories (a `wal` inside) written by a real ingester: tenants acme and bob, killed or stopped. */
const bases: Record<'kill9' | 'stop', string> = { kill9: '', stop: '' };
beforeAll(async () => {
  for (const how of ['kill9', 'stop'] as const) {
    const dir = tempDir(`siglake-hostile-${how}-`);
    dirs.push(dir);
    const ing = await startIngester({ dataDir: dir, args: ARGS });
    for (let i = 0; i < 3; i++) for (const t of ['acme', 'bob']) expect((await send(ing.url, t, `${t}-${i}`)).status).toBe(200);
    if (how === 'kill9') await ing.kill9();
    else expect(await ing.stop()).toBe(0);
    bases[how] = dir;
  }
});

/** A copy of a base, damaged by `damage(wal)`. */
function damaged(how: 'kill9' | 'stop', damage: (wal: string) => void): string {
  const dir = tempDir('siglake-hostile-case-');
  dirs.push(dir);
  execFileSync('cp', ['-a', path.join(bases[how], 'wal'), path.join(dir, 'wal')]);
  damage(path.join(dir, 'wal'));
  return dir;
}

/** `siglake wal <cmd> DIR`, bounded: a hang is a failure, not a stuck suite. */
function wal(cmd: 'verify' | 'dump', dir: string): { status: number | null; stdout: string; stderr: string } {
  const r = runCli(['wal', cmd, dir], { timeoutMs: 10_000 });
  expect(r.signal, `wal ${cmd} did not finish: ${r.stderr}`).toBeNull();
  expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
  return r;
}

/** `siglake ingest` on `dir`: ready (then stopped) or its exit code and stderr; null code: neither within `ms`. */
function start(dir: string, ms = 15_000): Promise<{ code: number | null; ready: boolean; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      [CLI, 'ingest', '--http-listen', '127.0.0.1:0', '--grpc-listen', '127.0.0.1:0', '--wal-dir', path.join(dir, 'wal'), '--workers', '1', ...ARGS],
      { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stderr = '';
    let out = '';
    let ready = false;
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (!ready && out.includes('"msg":"ready"')) {
        ready = true;
        child.kill('SIGTERM');
      }
    });
    const t = setTimeout(() => child.kill('SIGKILL'), ms);
    child.on('exit', (code) => {
      clearTimeout(t);
      resolve({ code: ready ? 0 : code, ready, stderr });
    });
  });
}

describe('names that hold no regular file never hang or crash the offline commands or the start', () => {
  it('a FIFO named .sealed: verify and dump finish, the ingester starts and serves', async () => {
    const dir = damaged('stop', (w) => {
      fs.rmSync(path.join(w, 'acme', 'logs', '.sealed'));
      execFileSync('mkfifo', [path.join(w, 'acme', 'logs', '.sealed')]);
    });
    expect(wal('verify', path.join(dir, 'wal')).status).toBe(0);
    expect(wal('dump', path.join(dir, 'wal')).status).toBe(0);
    const r = await start(dir);
    expect(r.ready, r.stderr).toBe(true);
  });

  it('a FIFO or a link to /dev/zero named as a journal file: verify fails naming it, the start refuses naming it', async () => {
    for (const make of [
      (p: string) => execFileSync('mkfifo', [p]),
      (p: string) => fs.symlinkSync('/dev/zero', p),
      (p: string) => fs.mkdirSync(p),
    ]) {
      const dir = damaged('kill9', (w) => make(path.join(w, '.journal', 'shard-0-of-1', '00000009.jnl')));
      const v = wal('verify', path.join(dir, 'wal'));
      expect(v.status, v.stdout).toBe(1);
      expect(v.stdout).toMatch(/DAMAGED: journal \.journal\/shard-0-of-1\/00000009\.jnl: .*(a FIFO|a symbolic link|a directory), not a regular file/);
      expect(wal('dump', path.join(dir, 'wal')).status).toBe(1);
      const r = await start(dir);
      expect(r.ready).toBe(false);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/00000009\.jnl: (a FIFO|a symbolic link|a directory), not a regular file.*move it aside/);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
    }
  });

  it('a FIFO named as the root lock: the ingester starts', async () => {
    const dir = damaged('stop', (w) => execFileSync('mkfifo', [path.join(w, '.siglake-ingester')]));
    const r = await start(dir);
    expect(r.ready, r.stderr).toBe(true);
  });

  it('.journal or a shard journal directory that is a file: verify reports it, no stack trace; the start refuses naming it', async () => {
    const asFile = damaged('stop', (w) => {
      fs.rmSync(path.join(w, '.journal'), { recursive: true });
      fs.writeFileSync(path.join(w, '.journal'), 'x');
    });
    const v = wal('verify', path.join(asFile, 'wal'));
    expect(v.status).toBe(1);
    expect(v.stdout).toContain('.journal: not a directory');
    expect(wal('dump', path.join(asFile, 'wal')).status).toBe(1);
    const r = await start(asFile);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${path.join(asFile, 'wal', '.journal')}: not a directory: the commit journal lives there; move it aside`);

    const shard = damaged('stop', (w) => {
      fs.rmSync(path.join(w, '.journal', 'shard-0-of-1'), { recursive: true });
      fs.writeFileSync(path.join(w, '.journal', 'shard-0-of-1'), 'x');
    });
    const vs = wal('verify', path.join(shard, 'wal'));
    expect(vs.status).toBe(1);
    expect(vs.stdout).toContain('DAMAGED: .journal/shard-0-of-1 is not a directory');
  });
});

describe('a lane directory that is a file', () => {
  it('fails verify and dump, naming it (the ingester refuses every request of that lane)', () => {
    const dir = damaged('stop', (w) => {
      fs.rmSync(path.join(w, 'acme', 'logs'), { recursive: true });
      fs.writeFileSync(path.join(w, 'acme', 'logs'), 'x');
    });
    const v = wal('verify', path.join(dir, 'wal'));
    expect(v.status, v.stdout).toBe(1);
    expect(v.stdout).toContain(`DAMAGED: ${path.join(dir, 'wal', 'acme', 'logs')} is a file where a lane directory lives`);
    expect(wal('dump', path.join(dir, 'wal')).status).toBe(1);
  });
});

describe('entries under segment names that are not regular files', () => {
  const kinds: [string, (p: string, w: string) => void][] = [
    ['a directory', (p) => fs.mkdirSync(p)],
    ['a FIFO', (p) => execFileSync('mkfifo', [p])],
    ['a symbolic link', (p, w) => fs.symlinkSync(path.join(w, 'bob', 'logs', '00000001.seg'), p)],
  ];
  for (const [kind, make] of kinds) {
    it(`${kind} named 00000002.seg: verify fails naming it, the lane is written past it, bob's segment untouched`, async () => {
      const dir = damaged('stop', (w) => make(path.join(w, 'acme', 'logs', '00000002.seg'), w));
      const w = path.join(dir, 'wal');
      const bobSeg = fs.readFileSync(path.join(w, 'bob', 'logs', '00000001.seg'));
      const v = wal('verify', w);
      expect(v.status, v.stdout).toBe(1);
      expect(v.stdout).toContain(`DAMAGED: 00000002.seg is ${kind}, not a segment file`);
      expect(wal('dump', w).status).toBe(1);
      const ing = await startIngester({ dataDir: dir, args: ARGS });
      try {
        // Before: every request of the lane was refused (EEXIST, or EISDIR when the name was a directory).
        expect((await send(ing.url, 'acme', 'acme-after')).status).toBe(200);
        expect(ing.logs.some((l) => String(l.msg).startsWith('WAL lane holds entries named as segments that are not regular files'))).toBe(true);
      } finally {
        expect(await ing.stop()).toBe(0);
      }
      expect(fs.existsSync(path.join(w, 'acme', 'logs', '00000003.seg'))).toBe(true);
      expect(fs.readFileSync(path.join(w, 'bob', 'logs', '00000001.seg')).equals(bobSeg)).toBe(true);
    });
  }

  it('a link named as a segment the journal holds records of: replay refuses it, never writes through it into another tenant', async () => {
    const dir = damaged('kill9', (w) => {
      const seg = path.join(w, 'acme', 'logs', '00000001.seg');
      fs.rmSync(seg);
      fs.symlinkSync(path.join(w, 'bob', 'logs', '00000001.seg'), seg);
    });
    const bobSeg = path.join(dir, 'wal', 'bob', 'logs', '00000001.seg');
    const before = fs.readFileSync(bobSeg);
    const r = await start(dir);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('00000001.seg: a symbolic link, not a regular file, where the commit journal holds records of this segment');
    expect(fs.readFileSync(bobSeg).equals(before)).toBe(true);
  });

  it('a segment named 9007199254740991.seg: verify fails, the lane is refused, the writer worker lives', async () => {
    const dir = damaged('stop', (w) => fs.copyFileSync(path.join(w, 'acme', 'logs', '00000001.seg'), path.join(w, 'acme', 'logs', '9007199254740991.seg')));
    const v = wal('verify', path.join(dir, 'wal'));
    expect(v.status).toBe(1);
    expect(v.stdout).toContain('is the highest the format allows');
    const ing = await startIngester({ dataDir: dir, args: ARGS });
    try {
      const r = await send(ing.url, 'acme', 'acme-after');
      expect(r.status).toBe(500);
      expect(await r.text()).toContain('SIGLAKE_WAL_WRITE');
      expect((await send(ing.url, 'bob', 'bob-after')).status).toBe(200);
      expect(ing.logs.some((l) => String(l.msg).startsWith('writer worker died'))).toBe(false);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
  });
});

describe('wal dump of a directory inside a WAL root', () => {
  it("a tenant's directory prints its records under its own name", () => {
    const w = path.join(bases.stop, 'wal');
    const r = wal('dump', path.join(w, 'acme'));
    expect(r.status, r.stderr).toBe(0);
    const rows = r.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { tenant: string; texts: string[] });
    expect(rows.map((x) => x.texts[0]).sort()).toEqual(['acme-0', 'acme-1', 'acme-2']);
    expect(new Set(rows.map((x) => x.tenant))).toEqual(new Set(['acme']));
  });

  it("a lane reached through a link to another tenant's is not read", () => {
    const dir = damaged('stop', (w) => {
      fs.rmSync(path.join(w, 'acme', 'logs'), { recursive: true });
      fs.symlinkSync(path.join(w, 'bob', 'logs'), path.join(w, 'acme', 'logs'));
    });
    for (const cmd of ['dump', 'verify'] as const) {
      const r = wal(cmd, path.join(dir, 'wal', 'acme', 'logs'));
      expect(r.status).toBe(2);
      expect(r.stdout).not.toContain('bob-');
      expect(r.stdout + r.stderr).toContain('reached through a symbolic link below the WAL root');
    }
  });
});

describe('verify and dump agree on a damaged journal', () => {
  it('a corrupt journal entry fails dump as it fails verify', () => {
    const dir = damaged('kill9', (w) => {
      const jdir = path.join(w, '.journal', 'shard-0-of-1');
      const jnl = path.join(jdir, fs.readdirSync(jdir).filter((f) => /^\d+\.jnl$/.test(f)).sort()[0]!);
      const b = fs.readFileSync(jnl);
      b[32 + 4] = b[32 + 4]! ^ 0xff; // the first entry's CRC, with entries after it
      fs.writeFileSync(jnl, b);
    });
    expect(wal('verify', path.join(dir, 'wal')).status).toBe(1);
    const d = wal('dump', path.join(dir, 'wal'));
    expect(d.status).toBe(1);
    expect(d.stderr).toMatch(/DAMAGED: journal .*corrupt at offset 32/);
  });
});

describe('seeded damage of a real segment and journal: no throw, nothing acknowledged before the damage lost, nothing moves lanes', () => {
  // Every cut at a record boundary and inside the headers, plus seeded byte flips and length
  // fields of 2^31 and 2^32 − 1, over one segment and the journal of the killed ingester's WAL.
  // In process (the same modules the CLI and the worker run): verify and dump must not throw, and
  // replay + repair (as a worker runs them at start) must keep every record before the damage.
  it('holds for every case the seed draws', async () => {
    const { walDump: dump, walVerify: verify } = await import('../../src/wal/commands.js');
    const { replayJournalDir } = await import('../../src/wal/journal.js');
    const { recoverWal } = await import('../../src/wal/recovery.js');
    const { Prng } = await import('./lib/prng.js');
    const records = async (w: string): Promise<string[]> => {
      const out: string[] = [];
      await dump(w, (l) => {
        const j = JSON.parse(l) as { tenant: string; table: string; offset: number; stop?: string; texts: string[] };
        if (j.stop === undefined) out.push(`${j.tenant}/${j.table}@${j.offset}:${j.texts.join('|')}`);
      }, (_t, p) => [Buffer.from(p).toString('hex')]);
      return out;
    };
    const rng = new Prng(Number(process.env['SEED'] ?? 20261207));
    for (const how of ['kill9', 'stop'] as const) {
      const base = path.join(bases[how], 'wal');
      const expected = await records(base);
      const segRel = path.join('acme', 'logs', '00000001.seg');
      const size = fs.statSync(path.join(base, segRel)).size;
      const bounds: number[] = [0, 32];
      const seg = fs.readFileSync(path.join(base, segRel));
      for (let at = 32; at + 24 <= size; at += 24 + seg.readUInt32LE(at + 4)) bounds.push(at + 24 + seg.readUInt32LE(at + 4));
      const cases: { what: string; at: number; damage: (w: string) => void }[] = [];
      const edit = (rel: string, f: (b: Buffer) => void) => (w: string) => {
        const p = path.join(w, rel);
        const b = fs.readFileSync(p);
        f(b);
        fs.writeFileSync(p, b);
      };
      for (const n of new Set([...bounds, ...bounds.map((b) => b + 5), ...bounds.map((b) => b + 27), 1, 31])) {
        if (n <= size) cases.push({ what: `cut at ${n}`, at: n, damage: (w) => fs.truncateSync(path.join(w, segRel), n) });
      }
      for (let k = 0; k < 24; k++) {
        const i = rng.int(size);
        cases.push({ what: `flip at ${i}`, at: i, damage: edit(segRel, (b) => (b[i] = b[i]! ^ (1 + rng.int(255)))) });
      }
      for (const v of [2 ** 31, 2 ** 32 - 1]) {
        const rec = bounds[1 + rng.int(bounds.length - 2)]!;
        cases.push({ what: `length ${v} at ${rec}`, at: rec, damage: edit(segRel, (b) => b.writeUInt32LE(v, rec + 4)) });
      }
      const jdir = path.join('.journal', 'shard-0-of-1');
      const jnl = how === 'kill9' ? path.join(jdir, fs.readdirSync(path.join(base, jdir)).find((f) => /^\d+\.jnl$/.test(f))!) : null;
      if (jnl !== null) {
        const jsize = fs.statSync(path.join(base, jnl)).size;
        for (let k = 0; k < 12; k++) {
          const i = rng.int(Math.min(jsize, 400));
          cases.push({ what: `journal flip at ${i}`, at: 0, damage: edit(jnl, (b) => (b[i] = b[i]! ^ 0xff)) });
          const n = rng.int(jsize);
          cases.push({ what: `journal cut at ${n}`, at: 0, damage: (w) => fs.truncateSync(path.join(w, jnl), n) });
        }
        cases.push({ what: 'journal body length 2^31', at: 0, damage: edit(jnl, (b) => b.writeUInt32LE(2 ** 31, 32)) });
      }
      for (const c of cases) {
        const dir = tempDir('siglake-hostile-seed-');
        const w = path.join(dir, 'wal');
        fs.cpSync(base, w, { recursive: true });
        c.damage(w);
        const lines: string[] = [];
        const rcVerify = await verify(w, (l) => lines.push(l));
        expect([0, 1], `${how} ${c.what}: ${lines.join('\n')}`).toContain(rcVerify);
        if (how === 'stop' && c.what.startsWith('flip')) expect(rcVerify, `${how} ${c.what} passed verify: ${lines.join('\n')}`).toBe(1);
        expect([0, 1]).toContain(await dump(w, () => {}, () => []));
        replayJournalDir(w, path.join(w, jdir));
        recoverWal(w, undefined, { cutTornEarlier: true });
        const after = new Set(await records(w));
        const lostBefore = expected.filter((r) => {
          if (after.has(r)) return false;
          const m = /^acme\/logs@(\d+):/.exec(r);
          return m === null || bounds.find((b) => b > Number(m[1]))! <= c.at; // another lane's, or wholly before the damage
        });
        expect(lostBefore, `${how} ${c.what}`).toEqual([]);
        expect([...after].filter((r) => !expected.includes(r)), `${how} ${c.what}`).toEqual([]);
        // The killed ingester's journal holds every record: whatever happened to the segment, replay puts it back.
        if (how === 'kill9' && !c.what.startsWith('journal')) expect(after.size, `${how} ${c.what}`).toBe(expected.length);
        fs.rmSync(dir, { recursive: true, force: true });
      }
    }
  });
});
