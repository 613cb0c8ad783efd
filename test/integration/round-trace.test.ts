// The round trace (src/shard/round-trace.ts), test-only: the real ingester
// with SIGLAKE_TEST_ROUND_TRACE writes one row per request answered and one
// per worker round as it shuts down, and native-bench/timeline.mjs reads them
// (docs/performance.md, "A round's timeline"). Without the test hooks nothing
// is traced.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { post } from '../helpers/http.js';
import { REPO, startIngester, tempDir, type RunningIngester } from '../helpers/ingester.js';
import { logsProto } from '../helpers/otlp-bodies.js';
// @ts-expect-error: a plain .mjs script of the bench, without types
import { analyse, describe as describeTimeline, rowsOf as untypedRowsOf } from '../../native-bench/timeline.mjs';

/** The rows of a trace file, by the bench's own reader. */
const rowsOf = untypedRowsOf as (file: string, width: number) => Float64Array[];

const running: RunningIngester[] = [];
afterAll(async () => {
  for (const ing of running) await ing.stop();
});

const ACCEPTOR_COLUMNS = 7;
const ROUND_COLUMNS = 7;

/** `n` requests, `parallel` at a time, alternating between the tenants; the statuses. */
async function send(ing: RunningIngester, n: number, parallel: number, tenants: string[], lineBytes = 0): Promise<number[]> {
  const pad = 'x'.repeat(lineBytes);
  const statuses: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < n) {
        const i = next++;
        const body = i === 7 ? new Uint8Array([0x0a, 0xff]) : logsProto([`line ${i} ${pad}`]);
        const r = await post(ing.url, '/v1/logs', body, { headers: { 'x-scope-orgid': tenants[i % tenants.length]! } });
        statuses.push(r.status);
      }
    }),
  );
  return statuses;
}

/**
 * A round that served requests synced between `written` and `posted`; its
 * `synced` is NaN only when it wrote nothing: request 7 (refused 400) read
 * alone. `alone` counts those.
 */
function expectSynced(row: Float64Array, alone: () => void): void {
  const [, , written, synced, posted, n] = row;
  if (Number.isNaN(synced)) {
    expect(n).toBe(1);
    alone();
    return;
  }
  expect(written!).toBeLessThanOrEqual(synced!);
  expect(synced!).toBeLessThanOrEqual(posted!);
}

describe('round trace', () => {
  it('writes a row per request answered and per round, in order, and the timeline reads them', async () => {
    const dir = tempDir('siglake-trace-');
    const prefix = path.join(dir, 'trace');
    const ing = await startIngester({ workers: 2, args: ['--trust-tenant-header'], env: { SIGLAKE_TEST_ROUND_TRACE: prefix } });
    running.push(ing);
    const statuses = await send(ing, 300, 8, ['tenant-a', 'tenant-b', 'tenant-c']);
    // Request 7 is a truncated protobuf: refused by its worker, and traced like the rest.
    expect(statuses.filter((s) => s === 200)).toHaveLength(299);
    expect(statuses.filter((s) => s === 400)).toHaveLength(1);
    expect(await ing.stop()).toBe(0);

    const acc = rowsOf(`${prefix}.acceptor.f64`, ACCEPTOR_COLUMNS);
    expect(acc).toHaveLength(300);
    for (const r of acc) {
      const [published, read, posted, round, drained, answered, woke] = r;
      // One clock across threads: each stage after the one before it.
      expect(round!).toBeLessThanOrEqual(read!);
      expect(published!).toBeLessThanOrEqual(read!);
      expect(read!).toBeLessThanOrEqual(posted!);
      expect(posted!).toBeLessThanOrEqual(drained!);
      expect(drained!).toBeLessThanOrEqual(answered!);
      expect([0, 1]).toContain(woke);
    }
    const shardFiles = fs.readdirSync(dir).filter((f) => /^trace\.shard\d\.f64$/.test(f));
    expect(shardFiles.sort()).toEqual(['trace.shard0.f64', 'trace.shard1.f64']);
    let served = 0;
    let refusedAlone = 0;
    const starts = new Set(acc.map((r) => r[3]));
    for (const f of shardFiles) {
      const rounds = rowsOf(path.join(dir, f), ROUND_COLUMNS).filter((r) => r[5]! > 0);
      for (const r of rounds) {
        const [start, read, written, synced, posted] = r;
        expect(start!).toBeLessThanOrEqual(read!);
        expect(read!).toBeLessThanOrEqual(written!);
        // batch mode: every round that wrote fdatasyncs the journal on the worker's thread.
        expectSynced(r, () => refusedAlone++);
        // Each round that served requests is the round some request names.
        expect(starts.has(start)).toBe(true);
        served += r[5]!;
      }
    }
    expect(served).toBe(300);
    expect(refusedAlone).toBeLessThanOrEqual(1);

    const s = analyse(prefix, 0);
    expect(s.requests).toBe(300);
    expect(s.workers).toBe(2);
    expect(s.request.total.n).toBe(300);
    expect(s.request.total.p50).toBeGreaterThan(0);
    expect(s.round.sync.p50).toBeGreaterThan(0);
    const lines: string[] = describeTimeline(s);
    expect(lines[0]).toMatch(/^timeline: 300 requests, \d+ rounds on 2 worker\(s\)/);
  });

  it('follows two rounds in flight (--wal-rounds-in-flight 2): every round gets its sync and its answers, and rounds overlap', async () => {
    const dir = tempDir('siglake-trace-two-');
    const prefix = path.join(dir, 'trace');
    // A second round is read while the first syncs only if requests are left
    // in the ring once a round is read. A round reads at most 2 MiB
    // (MAX_ROUND_BYTES), so: 128 KiB requests, 48 at a time (6 MiB queued),
    // with every journal fdatasync 200 ms slower, so that they reach the
    // ring while the worker syncs, however slowly the client sends them.
    // Every round is journaled (--wal-direct-round-kib 0): the delay is the
    // journal's.
    const ing = await startIngester({
      args: ['--trust-tenant-header', '--wal-rounds-in-flight', '2', '--wal-direct-round-kib', '0'],
      env: { SIGLAKE_TEST_ROUND_TRACE: prefix, SIGLAKE_TEST_JOURNAL_SYNC_DELAY_MS: '200' },
    });
    running.push(ing);
    const statuses = await send(ing, 192, 48, ['tenant-a'], 128 * 1024);
    expect(statuses.filter((s) => s === 200)).toHaveLength(191);
    expect(await ing.stop()).toBe(0);

    const rounds = rowsOf(`${prefix}.shard0.f64`, ROUND_COLUMNS).filter((r) => r[5]! > 0);
    let served = 0;
    let refusedAlone = 0;
    let overlapping = 0;
    for (let i = 0; i < rounds.length; i++) {
      const [start, read, written, synced, posted, n] = rounds[i]!;
      expect(start!).toBeLessThanOrEqual(read!);
      expect(read!).toBeLessThanOrEqual(written!);
      expectSynced(rounds[i]!, () => refusedAlone++);
      served += n!;
      // The next round began before this one was answered: two in flight.
      if (i + 1 < rounds.length && rounds[i + 1]![0]! < posted!) overlapping++;
    }
    expect(served).toBe(192);
    expect(refusedAlone).toBeLessThanOrEqual(1);
    expect(overlapping).toBeGreaterThan(0);
    const s = analyse(prefix, 0);
    expect(s.requests).toBe(192);
    // Busy time is the union of overlapping rounds: never more than all of it.
    expect(s.round.busyShare).toBeLessThanOrEqual(1);
    expect(s.round.overlapShare).toBeCloseTo(overlapping / (rounds.length - 1), 10);
  });

  it('traces nothing without the test hooks', async () => {
    const dir = tempDir('siglake-trace-off-');
    const ing = await startIngester({ args: ['--trust-tenant-header'], env: { SIGLAKE_TEST_HOOKS: '0', SIGLAKE_TEST_ROUND_TRACE: path.join(dir, 'trace') } });
    running.push(ing);
    const statuses = await send(ing, 20, 4, ['tenant-a']);
    expect(statuses.filter((s) => s === 200)).toHaveLength(19);
    expect(await ing.stop()).toBe(0);
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  it("is the bench's `--only timeline` row: P1's server traced under wrk, summarised in the log and the JSON", () => {
    const env = { ...process.env, BENCH_SECS: '1', BENCH_RUNS: '1', BENCH_WARMUP_SECS: '0', BENCH_DIR: tempDir('siglake-bench-trace-') };
    const r = spawnSync(process.execPath, [path.join(REPO, 'native-bench', 'run.mjs'), '--no-build', '--only', 'timeline'], { encoding: 'utf8', env, timeout: 120_000 });
    expect(r.stderr).toMatch(/timeline: \d+ requests, \d+ rounds on \d+ worker\(s\)/);
    expect(r.status).toBe(0);
    const wrote = /wrote (native-bench\/results\/partial-\S+\.json)/.exec(r.stderr);
    expect(wrote).not.toBeNull();
    const json = JSON.parse(fs.readFileSync(path.join(REPO, wrote![1]!), 'utf8')) as { rows: { id: string; rps: number; timeline?: { requests: number; rounds: number } }[] };
    fs.rmSync(path.join(REPO, wrote![1]!));
    fs.rmSync(path.join(REPO, wrote![1]!.replace(/\.json$/, '.html')), { force: true });
    const row = json.rows.find((x) => x.id === 'timeline-1k');
    expect(row?.timeline?.requests).toBeGreaterThan(0);
    // Every request wrk finished went through a worker, and the trace holds them all but those in flight at the end.
    expect(row!.timeline!.requests).toBeGreaterThanOrEqual(row!.rps * 0.9);
    expect(row!.timeline!.rounds).toBeGreaterThan(0);
  });
});
