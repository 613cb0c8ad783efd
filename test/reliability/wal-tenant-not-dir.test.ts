// A regular file where a tenant's WAL directory lives (`<walDir>/acme`),
// found in the review of 2026-12-07: `siglake wal verify` passed it, and
// every request of that tenant was answered 500 SIGLAKE_WAL_WRITE (ENOTDIR),
// the contract's "a bug". It is the environment's doing, like a full or
// read-only disk: now acme's requests get 503 + Retry-After: 5 with
// SIGLAKE_WAL_DISK, the worker logs it at error with the path, other tenants
// keep writing, and verify fails naming it.

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { post } from '../helpers/http.js';
import { runCli, startIngester, tempDir, walDump, type RunningIngester } from '../helpers/ingester.js';
import { logsProto } from '../helpers/otlp-bodies.js';
import { httpCode } from '../helpers/rpc-status.js';

const ARGS = ['--trust-tenant-header', '--compactor=false'];
const dirs: string[] = [];
const live = new Set<RunningIngester>();
afterAll(async () => {
  for (const ing of live) await ing.kill9();
  for (const d of dirs) if (!process.env['KEEP']) fs.rmSync(d, { recursive: true, force: true });
});

describe("a regular file named as a tenant's WAL directory", () => {
  it("refuses that tenant 503 SIGLAKE_WAL_DISK + Retry-After 5, logged at error with the path; other tenants write; verify fails naming it", { timeout: 60_000 }, async () => {
    const dataDir = tempDir('siglake-tenant-file-');
    dirs.push(dataDir);
    const wal = path.join(dataDir, 'wal');
    fs.mkdirSync(wal);
    const acme = path.join(wal, 'acme');
    fs.writeFileSync(acme, 'not a directory\n');

    const ing = await startIngester({ dataDir, args: ARGS });
    live.add(ing);
    for (let i = 0; i < 2; i++) {
      const r = await post(ing.url, '/v1/logs', logsProto([`acme-${i}`]), { headers: { 'x-scope-orgid': 'acme' } });
      expect(r.status).toBe(503);
      expect(r.headers.get('retry-after')).toBe('5');
      expect(httpCode(r)).toBe('SIGLAKE_WAL_DISK');
    }
    const bob = await post(ing.url, '/v1/logs', logsProto(['bob-0']), { headers: { 'x-scope-orgid': 'bob' } });
    expect(bob.status).toBe(200);
    expect(ing.exitCode).toBeNull();
    expect((await fetch(`${ing.url}/healthz`)).status).toBe(200);
    const line = ing.logs.find((l) => l.msg === 'WAL write failed' && l['path'] === acme);
    expect(line, JSON.stringify(ing.logs.filter((l) => l.level >= 50))).toMatchObject({ level: 50 });
    expect(String(line!['err'])).toContain(`${acme} is a regular file`);
    // Nothing of acme's written anywhere, the file untouched.
    expect(fs.readFileSync(acme, 'utf8')).toBe('not a directory\n');
    expect(await ing.stop()).toBe(0);
    live.delete(ing);

    // bob's bytes are on disk.
    expect(walDump(path.join(wal, 'bob')).flatMap((l) => l.texts)).toEqual(['bob-0']);
    const v = runCli(['wal', 'verify', wal], { timeoutMs: 30_000 });
    expect(v.status, v.stdout).toBe(1);
    expect(v.stdout).toContain(`DAMAGED: ${acme} is a file where tenant acme's directory lives`);
    const d = runCli(['wal', 'dump', wal], { timeoutMs: 30_000 });
    expect(d.status).toBe(1);
    expect(d.stderr).toContain(`DAMAGED: ${acme} is a file where tenant acme's directory lives`);
  });
});
