// Two rounds in flight (--wal-rounds-in-flight 2) on a commit journal that
// fills up under load: the real ingester, 48 clients on six tenants, the
// journal on a small tmpfs the test fills and then empties. A tmpfs
// fdatasync returns at once, so the test hook makes each journal sync 2 ms
// slower (a slow disk): requests then queue while a round syncs and rounds
// overlap (an instrumented build counted 228 rounds put in flight in one
// run). A round whose
// journal write fails while the round before it is still syncing must be
// refused and cut back without taking the earlier round's acknowledged
// records with it. After the stop, `wal dump` must hold every acknowledged
// record exactly once and `wal verify` must be clean. CI runs as root (the
// mount), as for the disk-full suite.

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { post } from '../helpers/http.js';
import { runCli, startIngester, tempDir, walDump, type RunningIngester } from '../helpers/ingester.js';
import { logsProto } from '../helpers/otlp-bodies.js';
import { TmpfsMount } from './lib/mount.js';

const live = new Set<RunningIngester>();
let mount: TmpfsMount | undefined;
afterAll(async () => {
  for (const ing of live) await ing.kill9();
  mount?.unmount();
});


const until = async (cond: () => boolean, what: string, ms = 30_000) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe('two rounds in flight on a commit journal that fills up', () => {
  it('every 200 is stored exactly once, 503s while the journal is full, 200s again once it is not', async () => {
    const dataDir = tempDir();
    const journalRoot = path.join(dataDir, 'wal', '.journal');
    mount = new TmpfsMount(journalRoot, 8 * 1024 * 1024);
    mount.mount();
    const ing = await startIngester({
      dataDir,
      args: ['--compactor=false', '--wal-fsync', 'batch', '--wal-rounds-in-flight', '2', '--trust-tenant-header'],
      // Checkpoints every 300 ms: journal files are retired (and new ones created) throughout.
      env: { SIGLAKE_TEST_CHECKPOINT_MS: '300', SIGLAKE_TEST_JOURNAL_SYNC_DELAY_MS: '2' },
    });
    live.add(ing);

    const acked: string[] = [];
    const refused: string[] = [];
    const other: number[] = [];
    let stop = false;
    const client = async (c: number) => {
      for (let i = 0; !stop; i++) {
        const text = `c${c}-r${i}`;
        const r = await post(ing.url, '/v1/logs', logsProto([text]), { headers: { 'x-scope-orgid': `tenant-${c % 6}` } });
        if (r.status === 200) acked.push(text);
        else if (r.status === 503 && Buffer.from(r.body).toString('latin1').includes('SIGLAKE_WAL_DISK')) refused.push(text);
        else other.push(r.status);
      }
    };
    const clients = Array.from({ length: 48 }, (_, c) => client(c));
    await until(() => acked.length >= 1500, '1,500 acknowledged records');
    const ballast = mount.fill();
    await until(() => refused.length >= 200, '200 refusals while the journal is full');
    fs.rmSync(ballast);
    const before = acked.length;
    await until(() => acked.length >= before + 1500, '1,500 more acknowledged records once the journal has room');
    stop = true;
    await Promise.all(clients);
    expect(other).toEqual([]);
    expect(await ing.stop()).toBe(0);
    live.delete(ing);
    mount.unmount();
    mount = undefined;

    const texts = walDump(path.join(dataDir, 'wal')).flatMap((l) => l.texts);
    const count = new Map<string, number>();
    for (const t of texts) count.set(t, (count.get(t) ?? 0) + 1);
    const lost = acked.filter((t) => count.get(t) !== 1);
    expect(lost, `acknowledged records missing or repeated: ${lost.slice(0, 5).join(', ')}`).toEqual([]);
    // A refused record may be in a segment a rotation made durable (at-least-once): never twice.
    expect(refused.filter((t) => (count.get(t) ?? 0) > 1)).toEqual([]);
    const verify = runCli(['wal', 'verify', path.join(dataDir, 'wal')]);
    expect(verify.status, verify.stdout + verify.stderr).toBe(0);
  }, 120_000);
});
