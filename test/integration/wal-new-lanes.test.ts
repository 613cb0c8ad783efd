// New lanes in the real `siglake ingest` (batch mode): a round that brings
// many new tenants makes their directories, then syncs every parent once, in
// parallel, before it writes a record (docs/wal-format.md "New lanes"): the
// WAL root once for the round, each tenant directory once, where each lane
// used to pay two fsyncs of its own, one after the other on the writer thread.
// siglake_wal_lane_dir_fsyncs_total counts them. A second life finds the
// directories and syncs each tenant directory once (it may have been made by
// a life killed before its parent's fsync).

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

const TENANTS = 48;
// Every journal fdatasync 200 ms longer: the requests sent together queue
// behind the first round's sync and reach the writer in a few rounds.
const ENV = { SIGLAKE_TEST_HOOKS: '1', SIGLAKE_TEST_JOURNAL_SYNC_DELAY_MS: '200' };

async function start(dataDir: string): Promise<RunningIngester> {
  const ing = await startIngester({ dataDir, env: ENV, args: ['--compactor=false', '--wal-fsync', 'batch', '--trust-tenant-header'] });
  live.add(ing);
  return ing;
}

async function sendEach(ing: RunningIngester, tenants: readonly string[]): Promise<void> {
  const replies = await Promise.all(tenants.map((t) => post(ing.url, '/v1/logs', logsProto([`new-lane ${t}`]), { headers: { 'x-scope-orgid': t } })));
  expect(replies.map((r) => r.status)).toEqual(tenants.map(() => 200));
}

const fsyncs = async (ing: RunningIngester): Promise<number> => (await ing.metric('siglake_wal_lane_dir_fsyncs_total')) ?? NaN;

describe('new lanes', () => {
  it("sync the WAL root once for a round's new tenants, each tenant directory once; a second life syncs each tenant directory once", async () => {
    const dataDir = tempDir();
    const tenants = Array.from({ length: TENANTS }, (_, i) => `nl${i}`);
    let ing = await start(dataDir);
    await sendEach(ing, ['first']); // the WAL root's own parent is synced once, for the first lane
    const before = await fsyncs(ing);
    expect(before).toBeGreaterThanOrEqual(2);

    await sendEach(ing, tenants);
    const made = (await fsyncs(ing)) - before;
    // Each tenant directory once, plus the WAL root once for each round that brought new tenants:
    // two a lane (48 of the root) was the cost of one fsync pair per lane.
    expect(made).toBeGreaterThanOrEqual(TENANTS + 1);
    expect(made).toBeLessThan(2 * TENANTS);
    for (const t of tenants) expect(fs.statSync(path.join(ing.walDir, t, 'logs')).isDirectory()).toBe(true);

    await ing.kill9();
    live.delete(ing);
    ing = await start(dataDir);
    const again = await fsyncs(ing);
    await sendEach(ing, tenants);
    // Found, not made: the parent of each lane directory (its tenant's), nothing above.
    expect((await fsyncs(ing)) - again).toBe(TENANTS);
    expect(await ing.stop()).toBe(0);
    live.delete(ing);

    const verify = runCli(['wal', 'verify', path.join(dataDir, 'wal')]);
    expect(verify.status, verify.stdout + verify.stderr).toBe(0);
    expect(verify.stdout).toMatch(new RegExp(`verify: ${TENANTS + 1} lanes, \\d+ segments, ${2 * TENANTS + 1} records, 0 torn tails, 0 problems: OK`));
  });
});
