// SIGHUP to the servers. It reloads tenants.file and reopens audit.file when
// they are set; with neither it does nothing. Node's default for SIGHUP is to
// exit, so before stop 50 a logrotate postrotate `kill -HUP` (or a closed
// terminal) ended an ingester or query server that had neither set.

import { afterEach, describe, expect, it } from 'vitest';
import { startIngester, tempDir, type RunningIngester } from '../helpers/ingester.js';
import { startQuery, type RunningQuery } from '../helpers/query.js';
import { sleep } from '../helpers/wait.js';

let ing: RunningIngester | undefined;
let q: RunningQuery | undefined;

afterEach(async () => {
  await ing?.stop();
  await q?.stop();
  ing = q = undefined;
});

describe('SIGHUP with no tenants file and no audit file', () => {
  it('regression (sighup-exits-plain-server): the ingester lives on and stores what it is sent', async () => {
    ing = await startIngester();
    ing.child.kill('SIGHUP');
    await sleep(500);
    expect(ing.child.exitCode).toBeNull();
    expect(ing.child.signalCode).toBeNull();
    const r = await fetch(`${ing.url}/v1/logs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"resourceLogs":[]}' });
    expect(r.status).toBe(200);
    expect(await ing.stop()).toBe(0);
  });

  it('regression (sighup-exits-plain-server): the query server lives on and answers', async () => {
    const dir = tempDir('siglake-sighup-query-');
    q = await startQuery(dir, []);
    q.child.kill('SIGHUP');
    await sleep(500);
    expect(q.child.exitCode).toBeNull();
    expect(q.child.signalCode).toBeNull();
    const r = await fetch(`${q.url}/healthz`);
    expect(r.status).toBe(200);
    expect(await q.stop()).toBe(0);
  });
});
