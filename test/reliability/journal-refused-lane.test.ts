// A lane opened again after the commit journal refused its first round (found
// in review). In a new life every lane starts provisional; when its first
// round is refused because the journal cannot be written, the worker cuts the
// new segment back to its header and the acceptor forgets the lane. The next
// request opens it again: the new lane writer must not take the segment
// number recovery handed the first one (its file exists now: `wx` fails with
// EEXIST and the request got a 500). The journal sits on a small tmpfs the
// test mounts at `<walDir>/.journal` and fills (CI runs as root, as for the
// disk-full suite).

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { post } from '../helpers/http.js';
import { startIngester, tempDir, walDump, type RunningIngester } from '../helpers/ingester.js';
import { logsProto } from '../helpers/otlp-bodies.js';
import { TmpfsMount } from './lib/mount.js';

const live = new Set<RunningIngester>();
let mount: TmpfsMount | undefined;
afterAll(async () => {
  for (const ing of live) await ing.kill9();
  mount?.unmount();
});


describe('a lane refused by the commit journal, then opened again', () => {
  it('is answered 503 while the journal cannot be written, and 200 once it can (not 500 on a segment number taken)', async () => {
    const dataDir = tempDir();
    const args = ['--compactor=false', '--wal-fsync', 'batch'];
    // An earlier life: the lane exists on disk, so recovery hands its next number to the first writer.
    const first = await startIngester({ dataDir, args });
    live.add(first);
    expect((await post(first.url, '/v1/logs', logsProto(['refused-lane-life-1']))).status).toBe(200);
    expect(await first.stop()).toBe(0);
    live.delete(first);

    const journalRoot = path.join(dataDir, 'wal', '.journal');
    fs.rmSync(journalRoot, { recursive: true, force: true });
    mount = new TmpfsMount(journalRoot, 64 * 1024);
    mount.mount();
    const ballast = mount.fill();

    const second = await startIngester({ dataDir, args });
    live.add(second);
    const refused = await post(second.url, '/v1/logs', logsProto(['refused-lane-refused']));
    expect(refused.status).toBe(503);
    expect(Buffer.from(refused.body).toString('latin1')).toContain('SIGLAKE_WAL_DISK'); // the google.rpc.Status's ErrorInfo
    fs.rmSync(ballast);
    // Each try is a new provisional lane (the refused one was forgotten): the first after the space returned must be stored.
    const again = await post(second.url, '/v1/logs', logsProto(['refused-lane-stored']));
    expect(again.status, Buffer.from(again.body).toString()).toBe(200);
    expect(await second.stop()).toBe(0);
    live.delete(second);
    mount.unmount();
    mount = undefined;

    const texts = walDump(path.join(dataDir, 'wal')).flatMap((l) => l.texts ?? []);
    expect(texts).toContain('refused-lane-life-1');
    expect(texts).toContain('refused-lane-stored');
    expect(texts).not.toContain('refused-lane-refused');
  });
});
