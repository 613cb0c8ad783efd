// The acceptor → worker request ring and the worker → acceptor completion ring
// (src/lanes/): one push and one pop per request on the hot path. Beside them,
// the alternative they replace: a MessageChannel postMessage of the same bytes
// (a copy per message, and an event-loop turn to receive it).
//
// Run (Node 20 has no TypeScript loader; vite's module runner transpiles):
//   node perf/run-ts.mjs perf/lanes-ring.bench.ts [--time-ms 1000]
//
// Each sample pushes and pops BATCH frames; the table reports per frame and
// the MB/s of payload it implies.

import { MessageChannel, receiveMessageOnPort } from 'node:worker_threads';
import { Bench } from 'tinybench';
import { ByteRing, type Frame } from '../src/lanes/byte-ring.js';
import { CompletionRing } from '../src/shard/completion-ring.js';

const argTime = process.argv.indexOf('--time-ms');
const timeMs = argTime > 0 ? Number(process.argv[argTime + 1]) : 1000;
const BATCH = 1000;

const frame: Frame = { offset: 0, length: 0, tag: 0 };
const sink = new Float64Array(1);
const bytesPerTask = new Map<string, number>();
const bench = new Bench({ name: 'rings', time: timeMs, warmupTime: 200 });

function addByteRing(size: number, perRelease: number): void {
  const ring = ByteRing.create(ByteRing.capacityFor(1 << 20));
  const payload = new Uint8Array(size).fill(7);
  const name = `ByteRing push+read ${size >= 1024 ? `${size >> 10} KiB` : `${size} B`}, release every ${perRelease} (x${BATCH})`;
  bytesPerTask.set(name, size * BATCH);
  bench.add(name, () => {
    let s = 0;
    for (let i = 0; i < BATCH; i += perRelease) {
      for (let k = 0; k < perRelease; k++) if (!ring.push(payload, i + k)) throw new Error('ring full');
      while (ring.read(frame)) s += frame.length;
      ring.release();
    }
    sink[0] += s;
  });
}

addByteRing(64, 1);
addByteRing(1024, 1);
addByteRing(1024, 64);
addByteRing(16 * 1024, 16);
addByteRing(256 * 1024, 1);

{
  const ring = CompletionRing.create(4096);
  const name = `CompletionRing push+drain, status 200 (x${BATCH})`;
  bytesPerTask.set(name, 0);
  let s = 0;
  const onDone = (_id: number, status: number, records: number): void => {
    s += status + records;
  };
  bench.add(name, () => {
    for (let i = 0; i < BATCH; i += 32) {
      for (let k = 0; k < 32; k++) ring.push(i + k, 200, 3);
      ring.drain(onDone);
    }
    sink[0] += s;
  });
  const msgName = `CompletionRing push+drain, refusal with a message (x${BATCH})`;
  bytesPerTask.set(msgName, 0);
  bench.add(msgName, () => {
    for (let i = 0; i < BATCH; i += 32) {
      for (let k = 0; k < 32; k++) ring.push(i + k, 400, 0, 'invalid protobuf: LogRecord.trace_id is 5 bytes');
      ring.drain(onDone);
    }
    sink[0] += s;
  });
}

{
  const { port1, port2 } = new MessageChannel();
  const payload = new Uint8Array(1024).fill(7);
  const name = `  alternative: MessagePort postMessage 1 KiB + receive (x${BATCH})`;
  bytesPerTask.set(name, 1024 * BATCH);
  bench.add(name, () => {
    let s = 0;
    for (let i = 0; i < BATCH; i++) {
      port1.postMessage(payload);
      const m = receiveMessageOnPort(port2);
      s += (m?.message as Uint8Array).length;
    }
    sink[0] += s;
  });
  process.once('exit', () => port1.close());
}

await bench.run();

const rows = bench.tasks.map((t) => {
  const r = t.result;
  if (r.state !== 'completed') return { task: t.name, state: r.state };
  const p50 = r.latency.p50;
  const bytes = bytesPerTask.get(t.name) ?? 0;
  return {
    task: t.name,
    'median ns/frame': Number(((p50 * 1e6) / BATCH).toFixed(1)),
    'p50 MB/s': bytes > 0 ? Math.round(bytes / 1e6 / (p50 / 1000)) : '',
    samples: r.latency.samplesCount,
  };
});
console.table(rows);
console.log(`node ${process.version}, ${timeMs} ms per task (sink ${sink[0] > 0 ? 'ok' : 'empty'})`);
