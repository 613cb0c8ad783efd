// What stands under `.sealed.tmp` in a lane (found by a review of hostile
// files, 2026-12-07): the `.sealed` marker was written to `.sealed.tmp`
// through whatever stood there. A FIFO blocked the open for ever in the
// writer's seal: `siglake ingest` never finished its stop (its worker's
// thread stuck in open(), past the shutdown timeout), in both fsync modes. A
// symbolic link was written through, over the file it points at. Now the
// marker is created exclusively, and what stands there is removed first.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { post } from '../helpers/http.js';
import { runCli, startIngester, tempDir, type RunningIngester } from '../helpers/ingester.js';
import { logsProto } from '../helpers/otlp-bodies.js';

const live = new Set<RunningIngester>();
afterAll(async () => {
  for (const ing of live) await ing.kill9();
});

describe('what stands under .sealed.tmp', () => {
  for (const fsync of ['batch', 'interval'] as const) {
    for (const kind of ['a FIFO', 'a link to a file outside the WAL'] as const) {
      it(`--wal-fsync ${fsync}: ${kind} is replaced; the stop finishes, the marker is written, nothing else is touched`, async () => {
        const dataDir = tempDir(`siglake-marker-tmp-${fsync}-`);
        const victim = path.join(dataDir, 'victim.txt');
        fs.writeFileSync(victim, 'not the WAL\n');
        const ing = await startIngester({ dataDir, args: ['--trust-tenant-header', '--compactor=false', '--wal-fsync', fsync] });
        live.add(ing);
        const r = await post(ing.url, '/v1/logs', logsProto(['acme-0']), { headers: { 'x-scope-orgid': 'acme' } });
        expect(r.status).toBe(200);
        const lane = path.join(dataDir, 'wal', 'acme', 'logs');
        const tmp = path.join(lane, '.sealed.tmp');
        if (kind === 'a FIFO') execFileSync('mkfifo', [tmp]);
        else fs.symlinkSync(victim, tmp);
        expect(await ing.stop()).toBe(0);
        live.delete(ing);
        expect(fs.readFileSync(victim, 'utf8')).toBe('not the WAL\n');
        expect(fs.lstatSync(path.join(lane, '.sealed')).isFile()).toBe(true);
        expect(fs.readFileSync(path.join(lane, '.sealed'), 'utf8')).toBe('1\n');
        expect(fs.existsSync(tmp)).toBe(false);
        const v = runCli(['wal', 'verify', path.join(dataDir, 'wal')]);
        expect(v.status, v.stdout).toBe(0);
        fs.rmSync(dataDir, { recursive: true, force: true });
      });
    }
  }
});
