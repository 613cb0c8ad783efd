// The "worker death" row of the reliability table against the real process
// with two writer workers: the test hook terminates shard 0's thread under
// load on several lanes. Its in-flight requests get 500 (never a hang, never a
// 200 for what was lost), the shard restarts and its lanes answer 200 again,
// shard 1's lanes never notice, and every acknowledged record is in the WAL,
// which verifies clean afterwards.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LaneKey } from '../../src/shard/lane-key.js';
import { RawGrpcClient, grpc } from '../helpers/grpc-client.js';
import { sleep } from '../helpers/wait.js';
import { runCli, startIngester, walDump, type RunningIngester } from '../helpers/ingester.js';
import { logsProto, tracesProto } from '../helpers/otlp-bodies.js';
import { grpcCode, httpCode } from '../helpers/rpc-status.js';

interface Lane {
  name: string;
  signal: 'logs' | 'traces';
  index?: string;
  shard: number;
}

interface Outcome {
  lane: string;
  shard: number;
  transport: 'http' | 'grpc';
  text: string;
  start: number;
  end: number;
  /** HTTP status, or the HTTP status of the gRPC code; -1 for a hang or a transport error. */
  status: number;
  /** The refusal's SIGLAKE_ code (ErrorInfo reason); undefined for a 200 or no answer. */
  errorCode?: string;
}

const WORKERS = 2;
const GRPC_TO_HTTP: Record<number, number> = { 0: 200, 13: 500, 14: 503, 3: 400 };

function lanesByShard(): Lane[] {
  const all: Lane[] = [
    { name: 'logs', signal: 'logs', shard: LaneKey.of('default', 'logs', undefined).shard(WORKERS) },
    { name: 'traces', signal: 'traces', shard: LaneKey.of('default', 'traces', undefined).shard(WORKERS) },
  ];
  for (let i = 0; i < 20; i++) {
    const index = `idx${i}`;
    all.push({ name: `index:${index}`, signal: 'logs', index, shard: LaneKey.of('default', 'logs', index).shard(WORKERS) });
  }
  // Two lanes per shard.
  return [0, 1].flatMap((s) => all.filter((l) => l.shard === s).slice(0, 2));
}

/** The dispatcher's line when a writer thread dies (src/shard/dispatcher.ts). */
const WORKER_DIED_MSG = 'writer worker died; refusing its in-flight requests (SIGLAKE_WORKER_DIED) and restarting the shard';

describe('worker death (--workers 2, kill-worker hook on shard 0)', () => {
  let ing: RunningIngester;
  beforeAll(async () => {
    ing = await startIngester({ workers: WORKERS, indexes: { default: Array.from({ length: 20 }, (_, i) => `idx${i}`) } });
  });
  afterAll(async () => {
    await ing.kill9();
  });

  it('in-flight requests of the killed shard get 500, the shard recovers, the other shard is untouched, nothing acknowledged is lost', async () => {
    const lanes = lanesByShard();
    expect(lanes.filter((l) => l.shard === 0)).toHaveLength(2);
    expect(lanes.filter((l) => l.shard === 1)).toHaveLength(2);
    const rpc = new RawGrpcClient(ing.grpcAddress);
    const outcomes: Outcome[] = [];
    let stop = false;
    let killAt = 0;

    /** One OTLP/HTTP request on the lane, its outcome recorded (status -1: no answer). `service` pads the request. */
    const sendHttp = async (lane: Lane, text: string, service?: string) => {
      const start = Date.now();
      let status = -1;
      let errorCode: string | undefined;
      try {
        const res = await fetch(`${ing.url}/v1/${lane.signal}`, {
          method: 'POST',
          body: lane.signal === 'logs' ? logsProto([text], service) : tracesProto([text], service),
          headers: { 'content-type': 'application/x-protobuf', ...(lane.index ? { 'x-siglake-index': lane.index } : {}) },
          signal: AbortSignal.timeout(10_000),
        });
        const body = new Uint8Array(await res.arrayBuffer());
        status = res.status;
        if (status !== 200) errorCode = httpCode({ contentType: res.headers.get('content-type') ?? '', body });
      } catch {
        status = -1;
      }
      outcomes.push({ lane: lane.name, shard: lane.shard, transport: 'http', text, start, end: Date.now(), status, errorCode });
    };
    const httpLoop = async (lane: Lane, id: number) => {
      for (let i = 0; !stop; i++) await sendHttp(lane, `${lane.name}-h${id}-${i}`);
    };
    const grpcLoop = async (lane: Lane) => {
      for (let i = 0; !stop; i++) {
        const text = `${lane.name}-g-${i}`;
        const start = Date.now();
        const r = await rpc.export(
          lane.signal,
          lane.signal === 'logs' ? logsProto([text]) : tracesProto([text]),
          lane.index ? { 'x-siglake-index': lane.index } : {},
          10_000,
        );
        const status = GRPC_TO_HTTP[r.code] ?? -1;
        const errorCode = r.code === grpc.status.OK || status === -1 ? undefined : grpcCode(r);
        outcomes.push({ lane: lane.name, shard: lane.shard, transport: 'grpc', text, start, end: Date.now(), status, errorCode });
      }
    };

    const loops = lanes.flatMap((l) => [httpLoop(l, 0), httpLoop(l, 1), grpcLoop(l)]);
    const oks = () => outcomes.filter((o) => o.status === 200).length;
    while (oks() < 60) await sleep(10);

    // A burst of larger requests on the shard's lanes right before the kill, so
    // that some are in the worker's hands when it dies.
    const pad = 'p'.repeat(64 * 1024);
    // The padding rides in a resource attribute, so dump texts stay short.
    const burst = (lane: Lane, n: number, round: number) => sendHttp(lane, `${lane.name}-burst${round}-${n}`, pad);

    // Killing an idle worker fails nothing; try a few rounds until a kill catches requests in flight.
    const rounds: { killAt: number; recoveryMs: number; failed: number }[] = [];
    const shard0Lanes = lanes.filter((l) => l.shard === 0);
    for (let round = 0; round < 5; round++) {
      const base = oks();
      while (oks() < base + 30) await sleep(10);
      const bursts = shard0Lanes.flatMap((l) => Array.from({ length: 12 }, (_, n) => burst(l, n, round)));
      await sleep(2);
      killAt = Date.now();
      const kill = await fetch(`${ing.url}/-/test/kill-worker?shard=0`, { method: 'POST' });
      expect(kill.status).toBe(200);
      await kill.text();
      await Promise.all(bursts);
      const at = killAt;
      // Keep the load on until shard 0's lanes have answered 200 to requests sent after the kill for a while.
      const recovered = () => outcomes.filter((o) => o.shard === 0 && o.status === 200 && o.start > at);
      const deadline = Date.now() + 20_000;
      while (recovered().length < 20 && Date.now() < deadline) await sleep(20);
      const firstRecovered = recovered().reduce((a, o) => Math.min(a, o.end), Infinity);
      const failures = outcomes.filter((o) => o.shard === 0 && o.status === 500 && o.end >= at);
      rounds.push({ killAt: at, recoveryMs: firstRecovered - at, failed: failures.length });
      console.log(
        `worker death round ${round}: shard 0 recovered ${firstRecovered - at} ms after the kill ` +
          `(first 200 on its lanes for a request sent after the kill); ${failures.length} in-flight requests answered 500`,
      );
      expect(Number.isFinite(firstRecovered)).toBe(true);
      expect(firstRecovered - at).toBeLessThan(10_000);
      // The 500s are requests sent before the dispatcher learnt of the death
      // (its log line; the same clock), not later ones. (Not "before the first
      // 200 sent after the kill": the dying thread may still answer a round
      // between terminate() and its end, while later requests wait in its ring.)
      const death = ing.logs.find((l) => l.msg === WORKER_DIED_MSG && (l['time'] as number) >= at);
      expect(death, 'the worker death is logged').toBeDefined();
      for (const f of failures) expect(f.start).toBeLessThanOrEqual(death!['time'] as number);
      if (failures.length > 0) break;
    }
    await sleep(200);
    stop = true;
    await Promise.all(loops);
    rpc.close();

    const shard0 = outcomes.filter((o) => o.shard === 0);
    const shard1 = outcomes.filter((o) => o.shard === 1);
    // No hang, no transport error, anywhere.
    expect(outcomes.filter((o) => o.status === -1).map((o) => o.text)).toEqual([]);
    // The killed shard: only 200 or 500, and in-flight requests got 500.
    expect([...new Set(shard0.map((o) => o.status))].sort()).toEqual([200, 500]);
    // Each refusal names the dead worker, on both transports.
    expect([...new Set(shard0.filter((o) => o.status === 500).map((o) => `${o.transport}:${o.errorCode}`))].sort()).toEqual(
      [...new Set(shard0.filter((o) => o.status === 500).map((o) => `${o.transport}:SIGLAKE_WORKER_DIED`))].sort(),
    );
    expect(rounds.some((r) => r.failed > 0)).toBe(true);
    // The other shard kept succeeding.
    expect(shard1.filter((o) => o.status !== 200).map((o) => `${o.text}:${o.status}`)).toEqual([]);
    expect(shard1.filter((o) => o.start > rounds[0]!.killAt).length).toBeGreaterThan(0);

    // The ingester counted the 500s it answered.
    const m = await ing.metrics();
    const http500 = (endpoint: string) => m.get(`siglake_ingest_requests_total{endpoint="${endpoint}",status="500"}`) ?? 0;
    const seen500 = (signal: string) =>
      shard0.filter((o) => o.status === 500 && lanes.find((l) => l.name === o.lane)!.signal === signal).length;
    expect(http500('otlp')).toBe(seen500('logs'));
    expect(http500('otlp_traces')).toBe(seen500('traces'));

    expect(await ing.stop()).toBe(0);
    const dumped = new Set(walDump(ing.walDir).flatMap((l) => l.texts));
    const acked = outcomes.filter((o) => o.status === 200).map((o) => o.text);
    expect(acked.filter((t) => !dumped.has(t))).toEqual([]);
    const v = runCli(['wal', 'verify', ing.walDir]);
    expect(v.status, v.stdout + v.stderr).toBe(0);
    expect(v.stdout).toMatch(/0 problems: OK/);
  });
});
