// A request body copied into the SharedArrayBuffer request ring (the
// acceptor's one copy per request, src/lanes/shared-copy.ts): V8's direct
// TypedArray.set into shared memory, from an 8-byte-aligned source and from a
// misaligned one (as a uWS body chunk usually is), beside copyIntoShared,
// which stages a misaligned source through an aligned scratch buffer.
//
// Run: node perf/run-ts.mjs perf/shared-copy.bench.ts [--time-ms 500]

import { Bench } from 'tinybench';
import { copyIntoShared } from '../src/lanes/shared-copy.js';

const argTime = process.argv.indexOf('--time-ms');
const timeMs = argTime > 0 ? Number(process.argv[argTime + 1]) : 500;

const ring = new Uint8Array(new SharedArrayBuffer(1 << 20), 128);
const DST = 16; // a payload offset in the ring: 8-byte aligned
/**
 * Sources at 16 places across a page: a copy's speed also depends on where
 * source and destination sit relative to each other within 4 KiB (a load that
 * seems to alias a recent store waits for it), so one place alone can mislead.
 */
const PLACES = 16;
const bench = new Bench({ name: 'copy into shared memory', time: timeMs, warmupTime: 100 });
const bytesPerTask = new Map<string, number>();

for (const size of [1024, 64 << 10, 256 << 10]) {
  const source = new ArrayBuffer(size + PLACES * 256 + 8);
  new Uint8Array(source).fill(7);
  for (const misalign of [0, 3]) {
    const srcs = Array.from({ length: PLACES }, (_, k) => new Uint8Array(source, k * 256 + misalign, size));
    const label = `${size >> 10} KiB, source ${misalign === 0 ? 'aligned' : `at +${misalign}`}`;
    bytesPerTask.set(`direct set, ${label}`, size * PLACES);
    bench.add(`direct set, ${label}`, () => {
      for (let k = 0; k < PLACES; k++) ring.set(srcs[k]!, DST);
    });
    bytesPerTask.set(`copyIntoShared, ${label}`, size * PLACES);
    // alignmentUnknown as the HTTP acceptor passes it for a uWS chunk.
    bench.add(`copyIntoShared, ${label}`, () => {
      for (let k = 0; k < PLACES; k++) copyIntoShared(ring, DST, srcs[k]!, true);
    });
  }
}

await bench.run();
console.log(`${'task (per copy)'.padEnd(44)} ${'median'.padStart(12)} ${'GB/s'.padStart(7)}`);
for (const t of bench.tasks) {
  const r = t.result as unknown as { latency?: { p50?: number }; p50?: number } | undefined;
  const ms = r?.latency?.p50 ?? r?.p50 ?? NaN;
  const bytes = bytesPerTask.get(t.name) ?? 0;
  const ns = (ms * 1e6) / PLACES;
  console.log(`${t.name.padEnd(44)} ${`${ns >= 1000 ? `${(ns / 1000).toFixed(2)} µs` : `${ns.toFixed(0)} ns`}`.padStart(12)} ${((bytes / PLACES) / ns).toFixed(2).padStart(7)}`);
}
