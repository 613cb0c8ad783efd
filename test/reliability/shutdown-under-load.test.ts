// The "shutdown" row of the reliability table, with a ledger: SIGTERM while
// many clients send to many lanes over HTTP and gRPC, with large bodies and
// with uploads still streaming in (several chunks, slowly) at the moment of
// the signal. test/integration/ingest-lifecycle.test.ts covers one SIGTERM
// under light load; this suite repeats it per fsync mode, with a worker
// killed just before the signal, and checks with the ledger:
//
// - exit code 0, within --shutdown-timeout-secs (plus a start-up margin);
// - every request is either acknowledged and in the WAL, in its lane, once,
//   or refused (503 while draining) or reset (the listener closed, the
//   process exited); no 500 unless a worker was killed, and then only on its shard;
// - every queued request was answered before the exit (`unanswered` 0);
// - the WAL verifies clean with no torn tail and no `.tmp`: every segment was
//   sealed; a restart has nothing to repair.

import { afterAll, describe, expect, it } from 'vitest';
import { LaneKey } from '../../src/shard/lane-key.js';
import { ManualUpload } from '../helpers/http.js';
import type { RunningIngester } from '../helpers/ingester.js';
import { logsProto, tracesProto } from '../helpers/otlp-bodies.js';
import { LoadRun, Ledger, expectLedgerIntact, laneKey, laneMatrix, sleep, until, type LaneChoice } from './lib/load.js';
import { Prng } from './lib/prng.js';
import { expectCleanRestart, startWalIngester } from './lib/wal-ingester.js';
import { CHAOS, baseSeed, recordFigures, scaled } from './lib/scale.js';
import { snapshotWal, verifyWal } from './lib/wal-files.js';

const WORKERS = 2;
const SHUTDOWN_SECS = 10;
/** Start-up of node and of the exit itself, on a loaded two-core machine: the bound is the flag, this is slack. */
const EXIT_SLACK_MS = 10_000;
const ROUNDS = scaled(1, 5, 'SIGLAKE_SHUTDOWN_ROUNDS');
const seed = baseSeed('shutdown-under-load');
const live = new Set<RunningIngester>();
const figures: Record<string, unknown>[] = [];

afterAll(async () => {
  for (const ing of live) await ing.kill9();
  recordFigures('shutdown-under-load', { seed, shutdownTimeoutSecs: SHUTDOWN_SECS, rounds: figures });
});

const shardOfLane = (l: LaneChoice): number => LaneKey.of(l.tenant, l.signal, l.index).shard(WORKERS);

interface Scenario {
  name: string;
  mode: 'batch' | 'interval' | 'never';
  killWorkerFirst: boolean;
}

const SCENARIOS: Scenario[] = [
  { name: 'batch', mode: 'batch', killWorkerFirst: false },
  { name: 'interval', mode: 'interval', killWorkerFirst: false },
  { name: 'never, a worker killed just before SIGTERM', mode: 'never', killWorkerFirst: true },
];

describe.each(SCENARIOS)('SIGTERM under load: $name', (sc) => {
  it(`${ROUNDS} round(s): exit 0 within the bound; acknowledged ⇒ on disk; otherwise refused or reset; sealed clean`, async () => {
    const prng = new Prng(seed ^ SCENARIOS.indexOf(sc));
    for (let round = 0; round < ROUNDS; round++) {
      const tag = `sd-${sc.mode}-r${round}`;
      const ing = await startWalIngester({
        workers: WORKERS,
        indexes: { default: ['audit'], acme: ['audit'], globex: ['audit'] },
        args: [
          '--trust-tenant-header',
          '--wal-fsync',
          sc.mode,
          '--shutdown-timeout-secs',
          String(SHUTDOWN_SECS),
          '--wal-segment-bytes',
          String(prng.pick([128 * 1024, 1024 * 1024])),
          '--request-timeout-secs',
          '30',
        ],
      });
      live.add(ing);
      const lanes = laneMatrix(['default', 'acme', 'globex'], ['audit']);
      const ledger = new Ledger();
      const load = new LoadRun({
        ing,
        prng: prng.fork(),
        ledger,
        tag,
        lanes,
        clients: scaled(12, 20),
        padChance: 0.2,
        maxPadBytes: 512 * 1024,
        shardOf: shardOfLane,
      });
      await until(() => ledger.acked.length >= 100, 60_000, 'the first acknowledgements');

      // Uploads that will be mid-body at the signal: half the body now, the rest in slow pieces.
      const slow = Array.from({ length: 8 }, (_, i) => {
        const lane = lanes[i % lanes.length]!;
        const text = `${tag}-slow-${i}`;
        const body = lane.signal === 'logs' ? logsProto([text], 's'.repeat(40_000)) : tracesProto([text], 's'.repeat(40_000));
        const headers: Record<string, string> = {};
        if (lane.tenant !== 'default') headers['x-scope-orgid'] = lane.tenant;
        if (lane.index) headers['x-siglake-index'] = lane.index;
        const up = new ManualUpload(ing.httpPort, `/v1/${lane.signal}`, body.length, headers);
        // Closed without an answer (-1): the client still owns it.
        const status = up.response.then((r) => r.status, () => -1);
        return { up, body, lane, text, status, start: Date.now() };
      });
      await Promise.all(slow.map((s) => s.up.connected));
      for (const s of slow) s.up.write(s.body.subarray(0, s.body.length >> 1));
      const pieces = slow.map(async (s) => {
        const half = s.body.length >> 1;
        const step = Math.ceil((s.body.length - half) / 10);
        for (let off = half; off < s.body.length; off += step) {
          await sleep(60);
          if (!s.up.write(s.body.subarray(off, Math.min(off + step, s.body.length)))) break;
        }
      });

      let killedShard = -1;
      if (sc.killWorkerFirst) {
        killedShard = prng.int(WORKERS);
        const k = await fetch(`${ing.url}/-/test/kill-worker?shard=${killedShard}`, { method: 'POST' });
        expect(k.status).toBe(200);
        await k.text();
      }
      await sleep(prng.range(50, 250));
      const termAt = Date.now();
      ing.child.kill('SIGTERM');
      const code = await ing.exited;
      const took = Date.now() - termAt;
      live.delete(ing);
      await load.stop();
      await Promise.all(pieces);
      for (const s of slow) {
        const status = await s.status;
        s.up.destroy();
        ledger.add({ texts: [s.text], lane: laneKey(s.lane), signal: s.lane.signal, transport: 'http-proto', status, start: s.start, end: Date.now(), shard: shardOfLane(s.lane) });
      }

      expect(code).toBe(0);
      expect(took).toBeLessThan(SHUTDOWN_SECS * 1000 + EXIT_SLACK_MS);
      expect(ing.logs.find((l) => l.msg === 'stopped')?.['unanswered']).toBe(0);
      // Refused (503) or reset (-1); 500 only from the killed worker's shard.
      const odd = ledger.entries.filter(
        (e) => e.status !== 200 && e.status !== 503 && e.status !== -1 && !(e.status === 500 && e.shard === killedShard),
      );
      expect(odd.map((e) => `${e.texts[0]} (${e.transport}, shard ${e.shard}): ${e.status}`)).toEqual([]);

      const v = verifyWal(ing.walDir);
      expect(v.status, v.output).toBe(0);
      expect(v.problems, v.output).toBe(0);
      expect(v.tornTails, v.output).toBe(0);
      expect([...snapshotWal(ing.walDir).values()].flatMap((l) => l.tmp)).toEqual([]);
      const c = expectLedgerIntact(ledger, ing.walDir, tag);

      await expectCleanRestart({ dataDir: ing.dataDir, workers: WORKERS, args: ['--trust-tenant-header'] }, live);

      const after = ledger.entries.filter((e) => e.start >= termAt);
      figures.push({
        scenario: sc.name,
        round,
        exitCode: code,
        exitMs: took,
        requests: ledger.entries.length,
        acked: c.ackedRequests,
        lost: c.lost.length,
        sentAfterSigterm: after.length,
        refused503: ledger.entries.filter((e) => e.status === 503).length,
        reset: ledger.entries.filter((e) => e.status === -1).length,
        answered500: ledger.entries.filter((e) => e.status === 500).length,
        slowUploads: slow.length,
        slowAcked: ledger.entries.filter((e) => e.texts[0]!.includes('-slow-') && e.status === 200).length,
        unackedButPresent: c.unackedPresent,
      });
    }
  }, CHAOS ? 1_200_000 : 150_000);
});
