// Micro-benchmarks of the admission-path limits (performance.md P6: ≤ 1 µs
// median, no steady-state allocation), with tinybench.
//
// Run (Node 20 has no TypeScript loader; vite's module runner transpiles):
//   node --expose-gc --input-type=module \
//     -e "import { runnerImport } from 'vite'; await runnerImport('./perf/limits-bucket.bench.ts')"
//
// A single take is tens of nanoseconds, below what one timer read resolves, so
// every task runs BATCH takes per sample and the table reports per take.
// Rows marked "clock:" measure the clock read alone, the one choice that decides
// whether a take allocates.
// The allocation check needs --expose-gc: it runs a million takes of each kind
// after a forced GC and reports the heap growth and any collection in between.

import { Session } from 'node:inspector/promises';
import { performance } from 'node:perf_hooks';
import { Bench } from 'tinybench';
import { MemBreaker } from '../src/limits/mem-breaker.js';
import { RateLimiter } from '../src/limits/rate-limiter.js';
import { TokenBucketTable } from '../src/limits/token-bucket-table.js';

type HeapProfilerNode = { callFrame: { functionName: string }; selfSize: number; children: HeapProfilerNode[] };

const BATCH = 1000;
const GOAL_NS = 1000;

// Fixtures. The "admit" table has a rate high enough that an advancing injected
// clock always finds a token; the "refuse" one is drained; the "flood" one is
// taken on the real clock far faster than it refills (mostly refusals, some admits).
const admitTable = new TokenBucketTable({ ratePerSec: 1_000_000, burst: 1000, slots: 1, nowMicros: 0 });
let fakeNow = 0;
const refuseTable = new TokenBucketTable({ ratePerSec: 1, burst: 1, slots: 1 });
refuseTable.take(0);
const floodTable = new TokenBucketTable({ ratePerSec: 100_000, burst: 1000, slots: 16 });
const limiter = new RateLimiter({ ratePerSec: 100_000, burst: 1000, maxTenantBuckets: 20_000 });
const tenants = Array.from({ length: 10_000 }, (_, i) => `tenant-${i}`);
for (const t of tenants) limiter.takeTenant(t);
const off = new RateLimiter({ ratePerSec: 0, maxTenantBuckets: 1 });
const breaker = new MemBreaker({ limitMib: 1024 * 1024, sampleSecs: 1 });

// Results land in a typed array, not in a captured `let`: a float stored to a
// closure variable is boxed, which would be the harness allocating, not the take.
const sink = new Float64Array(1);
let tenantIdx = 0;

const tasks: Record<string, () => void> = {
  'bucket take, admitted (injected clock)': () => {
    let s = 0;
    let now = fakeNow;
    for (let i = 0; i < BATCH; i++) s += admitTable.take(0, ++now);
    fakeNow = now;
    sink[0] += s;
  },
  'bucket take, refused (own clock)': () => {
    let s = 0;
    for (let i = 0; i < BATCH; i++) s += refuseTable.take(0);
    sink[0] += s;
  },
  'bucket take, flood (own clock)': () => {
    let s = 0;
    for (let i = 0; i < BATCH; i++) s += floodTable.take(i & 15);
    sink[0] += s;
  },
  'RateLimiter.takeGlobal': () => {
    let s = 0;
    for (let i = 0; i < BATCH; i++) s += limiter.takeGlobal();
    sink[0] += s;
  },
  'RateLimiter.takeTenant (10k known tenants)': () => {
    let s = 0;
    let j = tenantIdx;
    for (let i = 0; i < BATCH; i++) {
      s += limiter.takeTenant(tenants[j]);
      j = j === tenants.length - 1 ? 0 : j + 1;
    }
    tenantIdx = j;
    sink[0] += s;
  },
  'RateLimiter off (ratePerSec 0)': () => {
    let s = 0;
    for (let i = 0; i < BATCH; i++) s += off.takeGlobal() + off.takeTenant('a');
    sink[0] += s;
  },
  // The clock alternatives, for the record: the table reads process.hrtime()
  // (allocation-free once optimised); performance.now() boxes its result on Node 20.
  'clock: process.hrtime() as the table reads it': () => {
    let s = 0;
    for (let i = 0; i < BATCH; i++) {
      const t = process.hrtime();
      s += (Math.imul(t[0], 1_000_000) + t[1] / 1000) | 0;
    }
    sink[0] += s;
  },
  'clock: performance.now() (rejected)': () => {
    let s = 0;
    for (let i = 0; i < BATCH; i++) s += performance.now();
    sink[0] += s;
  },
  'MemBreaker.isOpen': () => {
    let s = 0;
    for (let i = 0; i < BATCH; i++) s += breaker.isOpen() ? 1 : 0;
    sink[0] += s;
  },
};

const bench = new Bench({ name: 'limits', time: 500, warmupTime: 200 });
for (const [name, fn] of Object.entries(tasks)) bench.add(name, fn);
await bench.run();

const rows = bench.tasks.map((task) => {
  const r = task.result;
  if (r.state !== 'completed') return { task: task.name, 'median ns/op': NaN, 'mean ns/op': NaN, samples: 0, goal: 'error' };
  const median = (r.latency.p50 * 1e6) / BATCH;
  return {
    task: task.name,
    'median ns/op': Number(median.toFixed(1)),
    'mean ns/op': Number(((r.latency.mean * 1e6) / BATCH).toFixed(1)),
    samples: r.latency.samplesCount,
    goal: median <= GOAL_NS ? 'ok (≤ 1 µs)' : 'OVER 1 µs',
  };
});
console.table(rows);

// Steady-state allocation, two ways, a million takes of each kind:
// - heapUsed before and after, with a forced GC first (needs --expose-gc), as a
//   coarse check; a scavenge in the middle can hide allocation from it, so
// - the sampling heap profiler (inspector) with objects later collected included,
//   which attributes every sampled byte allocated during the run.
const gc = (globalThis as { gc?: () => void }).gc;
const session = new Session();
session.connect();
const alloc: Record<string, number | string>[] = [];
for (const [name, fn] of Object.entries(tasks)) {
  for (let k = 0; k < 100; k++) fn(); // warm
  gc?.();
  const before = process.memoryUsage().heapUsed;
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: 64,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  for (let k = 0; k < 1_000_000 / BATCH; k++) fn();
  const grown = process.memoryUsage().heapUsed - before;
  gc?.();
  const retained = process.memoryUsage().heapUsed - before;
  const { profile } = await session.post('HeapProfiler.stopSampling');
  // Bytes sampled in frames of this task (the profiler's own promise plumbing is excluded).
  let sampled = 0;
  const walk = (node: HeapProfilerNode, inTask: boolean): void => {
    const here = inTask || node.callFrame.functionName === name;
    if (here) sampled += node.selfSize;
    for (const child of node.children) walk(child, here);
  };
  walk(profile.head, false);
  alloc.push({
    task: name,
    'sampled bytes/op': Number((sampled / 1_000_000).toFixed(3)),
    'heapUsed growth (bytes)': grown,
    'retained after gc (bytes)': gc === undefined ? 'needs --expose-gc' : retained,
  });
}
session.disconnect();
console.log('1,000,000 operations per row:');
console.table(alloc);

await limiter.close();
breaker.close();
if (sink[0] === -1) console.log(sink[0]); // keep the results observable
