// The audit stream's sink under load and when it misbehaves (declared-
// tenants.md §4; docs/tenants.md "Observability"): thousands of refusals a
// second into a FIFO nobody reads, a reader that stopped reading at a stop,
// and logrotate's two ways (rename then SIGHUP; copytruncate). The acceptor
// answers every request, the queue drops and counts past its bound, the loss
// is logged (throttled) and never with a token, and a stop is not held.
// Before: an ingester with a FIFO and no reader hung at start (opening it for
// writing waited for a reader), one whose reader stopped reading never
// exited at SIGTERM (the stop waited for a write blocked in a thread), drops
// at the bound were counted but never logged, and a SIGHUP without a tenants
// file killed the ingester (no handler), so logrotate's rename-then-HUP ended it.

import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { LoadReportJson } from '../../src/loadgen/load-report.js';
import { auditEvents } from '../helpers/audit-events.js';
import { post } from '../helpers/http.js';
import { CLI, startIngester, tempDir, type RunningIngester } from '../helpers/ingester.js';
import { logsProto } from '../helpers/otlp-bodies.js';
import { until } from '../helpers/wait.js';

const TOKEN = 'tok-audit-sink-7';
const made: string[] = [];
function scratch(): string {
  const d = tempDir('siglake-audit-sink-');
  made.push(d);
  return d;
}
afterAll(() => {
  for (const d of made) fs.rmSync(d, { recursive: true, force: true });
});

/** `siglake loadgen` without credentials: every request a 401, so one audit event each. */
function refusals(ing: RunningIngester, requests: number, out: string): Promise<LoadReportJson> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [CLI, 'loadgen', '--target', ing.url, '--requests', String(requests), '--duration', '0', '--connections', '16', '--threads', '1', '--body-bytes', '256', '--bodies', '1', '--max-error-rate', '100%', '--quiet', '--no-progress', '--out', out],
      { stdio: 'ignore' },
    );
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(fs.readFileSync(out, 'utf8')) as LoadReportJson) : reject(new Error(`loadgen exited ${code}`))));
  });
}

const dropped = async (ing: RunningIngester): Promise<number> => (await ing.metric('siglake_audit_events_dropped_total')) ?? -1;

/** Refusals one by one (no credentials: 401). */
async function refuse(ing: RunningIngester, n: number): Promise<void> {
  for (let i = 0; i < n; i++) expect((await post(ing.url, '/v1/logs', logsProto(['x']), { contentType: 'application/x-protobuf' })).status).toBe(401);
}

describe('a FIFO as the audit file', () => {
  it('with no reader: start-up goes on, 40,000 refusals answered, the excess dropped, counted and logged once; a reader that comes later gets every other event whole', async () => {
    const dir = scratch();
    const fifo = path.join(dir, 'audit.fifo');
    execFileSync('mkfifo', [fifo]);
    const ing = await startIngester({ args: ['--auth-bearer-tokens', TOKEN, '--audit-file', fifo] });
    try {
      const j = await refusals(ing, 40_000, path.join(dir, 'lg.json'));
      expect(j.statusCounts).toEqual({ '401': 40_000 });
      // The 4 MiB queue holds about 30,000 events and the pipe 64 KiB: the rest was dropped.
      const lost = await dropped(ing);
      expect(lost).toBeGreaterThan(5_000);
      const warned = ing.logs.filter((l) => l.msg.startsWith('audit sink does not keep up'));
      expect(warned.length).toBeGreaterThanOrEqual(1);
      expect(warned.length).toBeLessThanOrEqual(2); // one line per 10 s
      expect(warned[0]).toMatchObject({ level: 40, file: fifo, queueBytes: 4 * 1024 * 1024 });
      // A reader now: what was queued comes out, every line whole.
      const reader = spawn('cat', [fifo], { stdio: ['ignore', 'pipe', 'ignore'] });
      let text = '';
      reader.stdout.setEncoding('utf8').on('data', (c: string) => (text += c));
      const lines = (): string[] => text.split('\n').slice(0, -1);
      await until(() => lines().length + lost === 40_000, 30_000, 'every event read or counted dropped');
      for (const l of lines()) expect(JSON.parse(l)).toMatchObject({ event: 'refusal', reason: 'SIGLAKE_UNAUTHENTICATED', remote: '127.0.0.1' });
      expect(await dropped(ing)).toBe(lost);
      reader.kill();
      expect(JSON.stringify(ing.logs)).not.toContain(TOKEN);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
  });

  it('whose reader stopped reading: SIGTERM still stops it (exit 0), and the events lost at the stop are counted in one warn line', async () => {
    const dir = scratch();
    const fifo = path.join(dir, 'audit.fifo');
    execFileSync('mkfifo', [fifo]);
    // A reader that opened the FIFO and never reads.
    const fd = fs.openSync(fifo, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
    const reader = spawn('sleep', ['600'], { stdio: [fd, 'ignore', 'ignore'] });
    fs.closeSync(fd);
    const ing = await startIngester({ args: ['--auth-bearer-tokens', TOKEN, '--audit-file', fifo] });
    try {
      const j = await refusals(ing, 2_000, path.join(dir, 'lg.json'));
      expect(j.statusCounts).toEqual({ '401': 2_000 });
    } finally {
      // The helper SIGKILLs past 30 s: a stop the sink held would have no exit code.
      expect(await ing.stop()).toBe(0);
      reader.kill();
    }
    const atStop = ing.logs.find((l) => l.msg.startsWith('audit events lost at the stop'));
    expect(atStop).toMatchObject({ level: 40, file: fifo });
    // 64 KiB in the pipe, the rest lost at the stop.
    expect(Number(atStop!['lost'])).toBeGreaterThan(1_000);
    expect(ing.logs.at(-1)?.msg).toBe('stopped');
  });
});

describe('logrotate', () => {
  it('rename then SIGHUP: the ingester lives on (a SIGHUP without a tenants file ended it) and writes a new file; copytruncate: appends go on at the new end', async () => {
    const dir = scratch();
    const file = path.join(dir, 'audit.jsonl');
    const ing = await startIngester({ args: ['--auth-bearer-tokens', TOKEN, '--audit-file', file] });
    try {
      await refuse(ing, 5);
      await until(() => auditEvents(file).length === 5, 10_000, 'five events written');
      fs.renameSync(file, `${file}.1`);
      ing.child.kill('SIGHUP');
      await until(() => fs.existsSync(file), 10_000, 'the audit file opened again under its name');
      expect(ing.exitCode).toBeNull();
      await refuse(ing, 7);
      await until(() => auditEvents(file).length === 7, 10_000, 'seven events in the new file');
      expect(auditEvents(`${file}.1`)).toHaveLength(5);

      // copytruncate: copy, then truncate in place; no SIGHUP.
      fs.copyFileSync(file, `${file}.2`);
      fs.truncateSync(file, 0);
      await refuse(ing, 3);
      await until(() => auditEvents(file).length === 3, 10_000, 'three events after the truncation');
      // O_APPEND: written at the new end, not at the old offset behind a hole of NULs.
      expect(fs.readFileSync(file).includes(0)).toBe(false);
      expect(auditEvents(`${file}.2`)).toHaveLength(7);
      expect(await dropped(ing)).toBe(0);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
  });

  it('a SIGHUP while the file cannot be made again (its directory gone) keeps writing the open file and says so', async () => {
    const dir = scratch();
    const sub = path.join(dir, 'logs');
    fs.mkdirSync(sub);
    const file = path.join(sub, 'audit.jsonl');
    const ing = await startIngester({ args: ['--auth-bearer-tokens', TOKEN, '--audit-file', file] });
    try {
      await refuse(ing, 2);
      await until(() => auditEvents(file).length === 2, 10_000, 'two events written');
      const moved = path.join(dir, 'logs.old');
      fs.renameSync(sub, moved);
      ing.child.kill('SIGHUP');
      await until(() => ing.logs.some((l) => l.msg.startsWith('audit file not reopened on SIGHUP')), 10_000, 'the failed reopen logged');
      await refuse(ing, 3);
      await until(() => auditEvents(path.join(moved, 'audit.jsonl')).length === 5, 10_000, 'the open file still written');
      expect(await dropped(ing)).toBe(0);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
  });
});
