// How long one thread takes to wake another and hear back, the way the
// ingester's threads wake each other (docs/performance.md, "A round's
// timeline"): the main thread stores a number and notifies a worker blocked
// in Atomics.wait (the writer's side), the worker stores it back and notifies
// the main thread, which waits with Atomics.waitAsync (the acceptor's side).
// A timer turn between round trips lets both threads go idle first, as they
// do between P1's rounds. Prints the round trip's p50 and p90 in µs.
//
//   node perf/wake-roundtrip.mjs [ROUNDS=20000]
import { Worker, isMainThread, workerData } from 'node:worker_threads';

if (isMainThread) {
  const rounds = Number(process.argv[2] ?? 20000);
  const cells = new Int32Array(new SharedArrayBuffer(8));
  const worker = new Worker(new URL(import.meta.url), { workerData: cells.buffer });
  await new Promise((resolve) => setTimeout(resolve, 200));
  const micros = [];
  for (let i = 1; i <= rounds; i++) {
    await new Promise((resolve) => setTimeout(resolve, 0));
    const start = performance.now();
    Atomics.store(cells, 0, i);
    Atomics.notify(cells, 0);
    const wait = Atomics.waitAsync(cells, 1, i - 1);
    if (wait.async) await wait.value;
    micros.push((performance.now() - start) * 1000);
  }
  micros.sort((x, y) => x - y);
  const at = (q) => micros[Math.min(micros.length - 1, Math.floor(micros.length * q))].toFixed(1);
  console.log(`${rounds} round trips: p50 ${at(0.5)} µs, p90 ${at(0.9)} µs`);
  await worker.terminate();
} else {
  const cells = new Int32Array(workerData);
  let seen = 0;
  for (;;) {
    Atomics.wait(cells, 0, seen);
    seen = Atomics.load(cells, 0);
    Atomics.store(cells, 1, seen);
    Atomics.notify(cells, 1);
  }
}
