// Entry of a client thread (worker_threads). Makes its lanes' bodies and
// tokens, says ready, waits for the common start time, runs the send loop and
// posts its intervals and a final 'done'. No module state: everything lives in
// the objects main() makes.

import { performance } from 'node:perf_hooks';
import { parentPort, workerData } from 'node:worker_threads';
import { ProtoRoot } from '../otlp/proto-root.js';
import { BodyPool } from './body-pool.js';
import { GrpcSender } from './grpc-sender.js';
import { HttpSender } from './http-sender.js';
import { JwtSigner } from './jwt-signer.js';
import { LanePlan } from './lane-plan.js';
import { DRAIN_MAX_MS, LoadClient, type RequestSender } from './load-client.js';
import type { LoadgenOptions } from './loadgen-options.js';

export interface WorkerInput {
  options: LoadgenOptions;
  thread: number;
  threads: number;
}

export interface ReadyMessage {
  type: 'ready';
  thread: number;
  lanes: number;
  bodies: number;
  poolBytes: number;
  prepareMs: number;
}

export interface StartMessage {
  type: 'start';
  /** Date.now() at which every thread starts sending. */
  startAt: number;
}

/** Share `total` over `parts`: the first `total mod parts` get one more. */
function share(total: number, parts: number, i: number): number {
  return Math.floor(total / parts) + (i < total % parts ? 1 : 0);
}

async function main(): Promise<void> {
  const port = parentPort!;
  const { options: o, thread, threads } = workerData as WorkerInput;
  const t0 = performance.now();
  const root = ProtoRoot.load();
  const pool = new BodyPool({
    root,
    signal: o.signal,
    encoding: o.encoding,
    gzip: o.gzip && o.protocol === 'http',
    bodyBytes: o.bodyBytes,
    logBodyBytes: o.logBodyBytes,
    bodies: o.bodies,
    seed: o.seed,
  });
  const signer = o.jwt !== undefined ? new JwtSigner(o.jwt) : undefined;
  const targets = await new LanePlan(o).targets(thread, threads, pool, signer);
  const connections = share(o.connections, threads, thread);
  const sender: RequestSender =
    o.protocol === 'http'
      ? new HttpSender({ target: o.target, connections, encoding: o.encoding, gzip: o.gzip, headers: o.headers, timeoutMs: o.timeoutMs })
      : new GrpcSender({ target: o.target, connections, gzip: o.gzip, headers: o.headers, timeoutMs: o.timeoutMs });
  const ready: ReadyMessage = { type: 'ready', thread, lanes: targets.length, bodies: pool.size, poolBytes: pool.bytes, prepareMs: performance.now() - t0 };

  const start = await new Promise<StartMessage>((resolve) => {
    port.once('message', (m: StartMessage) => resolve(m));
    port.postMessage(ready);
  });
  const startPerf = performance.now() + (start.startAt - Date.now());
  const runMs = (o.warmupSecs + o.durationSecs) * 1000;
  const client = new LoadClient({
    thread,
    targets,
    sender,
    post: (m) => port.postMessage(m),
    startPerf,
    endPerf: o.durationSecs > 0 ? startPerf + runMs : Infinity,
    budget: o.requests !== undefined ? share(o.requests, threads, thread) : Infinity,
    connections,
    streams: o.protocol === 'grpc' ? o.streams : 1,
    rate: o.rate !== undefined ? o.rate / threads : undefined,
    intervalMs: o.intervalMs,
    drainMs: Math.min(o.timeoutMs, DRAIN_MAX_MS),
    describe: (_status, detail) => {
      let text: string;
      if (typeof detail === 'string') {
        text = detail;
      } else {
        try {
          text = root.decodeStatus(detail).message;
        } catch {
          text = detail.toString('latin1');
        }
      }
      text = text.replace(/\s+/g, ' ').trim();
      return text.length > 200 ? `${text.slice(0, 200)}…` : text;
    },
  });
  port.on('message', (m: { type: string }) => {
    if (m.type === 'stop') client.stop();
  });
  const done = await client.run();
  await sender.close();
  port.postMessage(done);
  port.close();
}

main().catch((e: unknown) => {
  parentPort!.postMessage({ type: 'error', message: (e as Error).message });
  parentPort!.close();
});
