// The real `siglake ingest` in batch mode: the checkpoint timer rests after a
// long checkpoint. A checkpoint costs a write and an fdatasync per lane
// written since the last one, so at 10,000 lanes on a slow disk one took
// 5-10 s and the 10 s timer kept one running most of the time; now the timer
// starts the next one no sooner than three times the last one's duration
// after it ended (src/worker/shard-loop.ts CHECKPOINT_REST_FACTOR). Here every
// checkpoint is made 400 ms longer (test hook) and the timer asks for one
// every 100 ms: before, one ran every ~0.5 s; now at most one every 1.6 s.
// The assertion is an upper bound on a count, so a slow machine (fewer
// checkpoints) cannot make it fail.

import { afterAll, describe, expect, it } from 'vitest';
import { runCli, startIngester, tempDir, type RunningIngester } from '../helpers/ingester.js';
import { exportLogs, makeLogRecords } from '../helpers/otel.js';

const live = new Set<RunningIngester>();
afterAll(async () => {
  for (const ing of live) await ing.kill9();
});

const DELAY_MS = 400;
const WINDOW_MS = 8_000;

describe('the checkpoint timer rests after a long checkpoint', () => {
  it('starts the next timed checkpoint no sooner than 3x the last one lasted; the records are all there after the stop', async () => {
    const ing = await startIngester({
      dataDir: tempDir(),
      env: { SIGLAKE_TEST_HOOKS: '1', SIGLAKE_TEST_CHECKPOINT_MS: '100', SIGLAKE_TEST_CHECKPOINT_DELAY_MS: String(DELAY_MS) },
      args: ['--compactor=false', '--wal-fsync', 'batch', '--workers', '1'],
    });
    live.add(ing);
    const target = { url: ing.url, grpcAddress: ing.grpcAddress, headers: {} };
    const send = async (i: number): Promise<void> => {
      const r = await exportLogs(target, 'http', await makeLogRecords([`rest-${i}`]));
      expect(r.ok, r.error?.message).toBe(true);
    };
    let sent = 0;
    // One checkpoint first, so that the window starts with the timer resting or due.
    for (;;) {
      await send(sent++);
      if (((await ing.metrics()).get('siglake_wal_checkpoints_total') ?? 0) >= 1) break;
    }
    const c0 = (await ing.metrics()).get('siglake_wal_checkpoints_total') ?? 0;
    const t0 = Date.now();
    while (Date.now() - t0 < WINDOW_MS) {
      await send(sent++);
      await new Promise((r) => setTimeout(r, 20));
    }
    const m = await ing.metrics();
    const elapsed = Date.now() - t0;
    const checkpoints = (m.get('siglake_wal_checkpoints_total') ?? 0) - c0;
    // Each checkpoint lasts at least DELAY_MS and is followed by a rest of 3x that: a cycle of at
    // least 4 x DELAY_MS (before: DELAY_MS + the 100 ms timer, 16 or so in the window).
    expect(checkpoints).toBeLessThanOrEqual(Math.floor(elapsed / (4 * DELAY_MS)) + 1);
    // The timer still runs: a checkpoint every cycle or so.
    expect(checkpoints).toBeGreaterThanOrEqual(2);
    expect(m.get('siglake_wal_write_errors_total')).toBe(0);
    await ing.stop();
    live.delete(ing);
    const v = runCli(['wal', 'verify', ing.walDir]);
    expect(v.status, v.stdout + v.stderr).toBe(0);
    expect(v.stdout).toMatch(new RegExp(`, ${sent} records, 0 torn tails, 0 problems: OK`));
  }, 60_000);
});
