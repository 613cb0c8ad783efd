// Micro-benchmark of the whole acceptor admission per request (contract §4
// steps 1-8; performance.md P6: ≤ 1 µs median, no steady-state allocation):
// `Admission.admit()` from src/ingest/admission.ts wired exactly as
// src/ingest/server.ts wires it, with the real pieces
//
//   MemBreaker (off), RateLimiter (rate on: 1,000,000/s, burst 2,000,000),
//   Authenticator (open), TenantResolver (trusted-header mode), AllowList,
//   LaneTable, IngestMetrics on a prom-client Registry,
//
// followed by `Admission.finish(lane, true)`, for 1 tenant and for 10,000 tenants
// round-robin (lanes created beforehand: steady state), then each piece alone.
//
// Run (Node 20 has no TypeScript loader; vite's module runner transpiles;
// --expose-gc enables the forced-GC heap figures):
//
//   node --expose-gc --input-type=module \
//     -e "import { runnerImport } from 'vite'; await runnerImport('./perf/admission.bench.ts')"
//
// Output: a table of medians per operation (every tinybench sample runs BATCH
// operations; the table divides), then the allocation check: one million
// admit/finish pairs (and one million of each piece) after a forced GC, with
//   - the heapUsed growth over the run and what is left after a forced GC,
//   - the number of GCs V8 ran during the run (a scavenge hides allocation from
//     heapUsed, so growth alone can read 0 while allocating),
//   - the sampling heap profiler's bytes per operation (objects later collected
//     included), which attributes every sampled byte to the function that
//     allocated it; the top allocating functions are listed for each row.
//
// Every admission row also counts refusals: a refused admit would measure a
// different path. The buckets are sized so that none happens at the speeds
// measured (each task gets its own Admission, and so its own full buckets).

import { Session } from 'node:inspector/promises';
import { PerformanceObserver } from 'node:perf_hooks';
import client from 'prom-client';
import { Bench } from 'tinybench';
import { Authenticator } from '../src/auth/authenticator.js';
import { Admission, type IngestHeaders } from '../src/ingest/admission.js';
import { LaneTable, type Lane } from '../src/lanes/lane-table.js';
import { MemBreaker } from '../src/limits/mem-breaker.js';
import { RateLimiter } from '../src/limits/rate-limiter.js';
import { IngestMetrics } from '../src/metrics/ingest-metrics.js';
import { AllowList } from '../src/tenancy/allow-list.js';
import { TenantResolver } from '../src/tenancy/tenant-resolver.js';

type HeapProfilerNode = {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: HeapProfilerNode[];
};

const BATCH = 1000;
const GOAL_NS = 1000;
const ALLOC_OPS = 1_000_000;
const TENANTS = 10_000;
const RATE = 1_000_000; // the highest rate a bucket takes
const BURST = 2_000_000; // the largest burst at that rate (horizon 2^30 ticks)

const tenantNames = Array.from({ length: TENANTS }, (_, i) => `tenant-${i}`);
const longTenantNames = tenantNames.map((t) => t.padEnd(17, '-x'));

/** One admission path, wired as server.ts wires it, with its lanes created and committed. */
function makeAdmission(opts: { tenants: number; allowList: boolean }) {
  const registry = new client.Registry();
  const lanes = new LaneTable(16_384, 1);
  const breaker = new MemBreaker({ limitMib: 0, sampleSecs: 1 });
  const rateBudget = new RateLimiter({ ratePerSec: RATE, burst: BURST, maxTenantBuckets: 65_536 });
  const metrics = new IngestMetrics(registry, {
    workerStats: () => [],
    lanes: () => lanes.laneCount,
    tenantsAdmitted: () => lanes.tenantCount,
    rssBytes: () => breaker.rssBytes(),
  });
  const names = tenantNames.slice(0, opts.tenants);
  const admission = new Admission({
    breaker,
    rateBudget,
    auth: new Authenticator({ bearerTokens: [] }),
    resolver: new TenantResolver({ trustTenantHeader: true }),
    allowList: new AllowList(opts.allowList ? tenantNames : []),
    lanes,
    metrics,
    maxTenants: 0,
    queueCapacity: 1024,
  });
  // The acceptor reuses one header object per request (http-acceptor.ts #h).
  const h: IngestHeaders = { authorization: undefined, authorizationCount: 0, orgId: undefined, orgIdCount: 1, index: undefined, indexCount: 0 };
  for (const name of names) {
    h.orgId = name;
    const lane = admission.admit('logs', h) as Lane;
    admission.finish(lane, true); // committed: never released again
  }
  if (lanes.laneCount !== names.length) throw new Error('lanes not created');
  return { admission, lanes, h, names, breaker, rateBudget, metrics, refused: 0, next: 0 };
}

type Path = ReturnType<typeof makeAdmission>;

/** BATCH admit/finish pairs, round-robin over the path's tenants. */
function admitBatch(p: Path): void {
  const { admission, h, names } = p;
  let j = p.next;
  for (let i = 0; i < BATCH; i++) {
    h.orgId = names[j];
    try {
      const lane = admission.admit('logs', h) as Lane;
      admission.finish(lane, true);
    } catch {
      p.refused++;
    }
    j = j === names.length - 1 ? 0 : j + 1;
  }
  p.next = j;
}

/** Same, but the tenant header arrives as a fresh string each time, as uWS hands it over (the harness allocates it). */
function admitBatchFreshStrings(p: Path): void {
  const { admission, h, names } = p;
  let j = p.next;
  for (let i = 0; i < BATCH; i++) {
    h.orgId = `tenant-${j}`;
    try {
      const lane = admission.admit('logs', h) as Lane;
      admission.finish(lane, true);
    } catch {
      p.refused++;
    }
    j = j === names.length - 1 ? 0 : j + 1;
  }
  p.next = j;
}

// Results land in a typed array, not in a captured `let`: a float stored to a
// closure variable is boxed, which would be the harness allocating.
const sink = new Float64Array(1);

// Fixtures for the pieces (their own instances, so they spend nobody else's tokens).
const pieces = makeAdmission({ tenants: TENANTS, allowList: true });
const pieceLimiter = new RateLimiter({ ratePerSec: RATE, burst: BURST, maxTenantBuckets: 65_536 });
for (const t of tenantNames) pieceLimiter.takeTenant(t);
const openAuth = new Authenticator({ bearerTokens: [] });
const resolver = new TenantResolver({ trustTenantHeader: true });
const openAllow = new AllowList([]);
const fullAllow = new AllowList(tenantNames);
const lanes10k = pieces.lanes;
const laneSlots = Int32Array.from(tenantNames, (t) => lanes10k.find(lanes10k.tenant(t), 'logs', undefined)!.slot);
const breakerOff = new MemBreaker({ limitMib: 0, sampleSecs: 1 });
let pieceIdx = 0;

const paths: Record<string, Path> = {};
const newPaths = () => {
  paths['admit+finish, 1 tenant'] = makeAdmission({ tenants: 1, allowList: false });
  paths['admit+finish, 10,000 tenants round-robin'] = makeAdmission({ tenants: TENANTS, allowList: false });
  paths['admit+finish, 10,000 tenants, allow-list of 10,000'] = makeAdmission({ tenants: TENANTS, allowList: true });
  paths['admit+finish, 10,000 tenants, fresh header strings (harness allocates them)'] = makeAdmission({ tenants: TENANTS, allowList: false });
};
newPaths();

const tasks: Record<string, () => void> = {
  'admit+finish, 1 tenant': () => admitBatch(paths['admit+finish, 1 tenant']!),
  'admit+finish, 10,000 tenants round-robin': () => admitBatch(paths['admit+finish, 10,000 tenants round-robin']!),
  'admit+finish, 10,000 tenants, allow-list of 10,000': () => admitBatch(paths['admit+finish, 10,000 tenants, allow-list of 10,000']!),
  'admit+finish, 10,000 tenants, fresh header strings (harness allocates them)': () =>
    admitBatchFreshStrings(paths['admit+finish, 10,000 tenants, fresh header strings (harness allocates them)']!),
  'piece: MemBreaker.isOpen (off)': () => {
    let s = 0;
    for (let i = 0; i < BATCH; i++) s += breakerOff.isOpen() ? 1 : 0;
    sink[0] += s;
  },
  'piece: bucket take, RateLimiter.takeGlobal': () => {
    let s = 0;
    for (let i = 0; i < BATCH; i++) s += pieceLimiter.takeGlobal();
    sink[0] += s;
  },
  'piece: bucket take, RateLimiter.takeTenant (10,000 tenants)': () => {
    let s = 0;
    let j = pieceIdx;
    for (let i = 0; i < BATCH; i++) {
      s += pieceLimiter.takeTenant(tenantNames[j]!);
      j = j === TENANTS - 1 ? 0 : j + 1;
    }
    pieceIdx = j;
    sink[0] += s;
  },
  'piece: Authenticator.authenticate (open)': () => {
    let s = 0;
    for (let i = 0; i < BATCH; i++) s += openAuth.authenticate(undefined) === undefined ? 1 : 0;
    sink[0] += s;
  },
  'piece: resolve (TenantResolver.resolve + resolveIndex, trusted header)': () => {
    let s = 0;
    let j = pieceIdx;
    for (let i = 0; i < BATCH; i++) {
      s += resolver.resolve(tenantNames[j], 1, undefined).length;
      s += resolver.resolveIndex(undefined, 0) === undefined ? 1 : 0;
      j = j === TENANTS - 1 ? 0 : j + 1;
    }
    pieceIdx = j;
    sink[0] += s;
  },
  // Same with ids longer than 11 characters: isValidIdentifier skips its reserved-name toLowerCase() for those.
  'piece: resolve, 17-character tenant ids': () => {
    let s = 0;
    let j = pieceIdx;
    for (let i = 0; i < BATCH; i++) {
      s += resolver.resolve(longTenantNames[j], 1, undefined).length;
      j = j === TENANTS - 1 ? 0 : j + 1;
    }
    pieceIdx = j;
    sink[0] += s;
  },
  'piece: AllowList.check (open)': () => {
    let j = pieceIdx;
    for (let i = 0; i < BATCH; i++) {
      openAllow.check(tenantNames[j]!);
      j = j === TENANTS - 1 ? 0 : j + 1;
    }
    pieceIdx = j;
  },
  'piece: AllowList.check (10,000 listed)': () => {
    let j = pieceIdx;
    for (let i = 0; i < BATCH; i++) {
      fullAllow.check(tenantNames[j]!);
      j = j === TENANTS - 1 ? 0 : j + 1;
    }
    pieceIdx = j;
  },
  'piece: lane lookup (LaneTable.tenant + find, 10,000 tenants)': () => {
    let s = 0;
    let j = pieceIdx;
    for (let i = 0; i < BATCH; i++) {
      s += lanes10k.find(lanes10k.tenant(tenantNames[j]!), 'logs', undefined)!.slot;
      j = j === TENANTS - 1 ? 0 : j + 1;
    }
    pieceIdx = j;
    sink[0] += s;
  },
  'piece: depth check (Atomics.load ≥ capacity, add, sub)': () => {
    const depth = lanes10k.depth;
    let s = 0;
    let j = pieceIdx;
    for (let i = 0; i < BATCH; i++) {
      const slot = laneSlots[j]!;
      const d = Atomics.load(depth, slot);
      if (d < 1024) {
        Atomics.add(depth, slot, 1);
        Atomics.sub(depth, slot, 1);
        s += d;
      }
      j = j === TENANTS - 1 ? 0 : j + 1;
    }
    pieceIdx = j;
    sink[0] += s;
  },
  'piece: IngestMetrics.queueDepth (typed-array histogram)': () => {
    for (let i = 0; i < BATCH; i++) pieces.metrics.queueDepth(0);
  },
};

const bench = new Bench({ name: 'admission', time: 300, warmupTime: 100 });
for (const [name, fn] of Object.entries(tasks)) bench.add(name, fn);
await bench.run();

const rows = bench.tasks.map((task) => {
  const r = task.result;
  const p = paths[task.name];
  if (r.state !== 'completed') return { task: task.name, 'median ns/op': NaN, 'mean ns/op': NaN, 'p99 ns/op': NaN, samples: 0, refused: '', goal: 'error' };
  const median = (r.latency.p50 * 1e6) / BATCH;
  return {
    task: task.name,
    'median ns/op': Number(median.toFixed(1)),
    'mean ns/op': Number(((r.latency.mean * 1e6) / BATCH).toFixed(1)),
    'p99 ns/op': Number(((r.latency.p99 * 1e6) / BATCH).toFixed(1)),
    samples: r.latency.samplesCount,
    refused: p === undefined ? '' : p.refused,
    goal: median <= GOAL_NS ? 'ok (≤ 1 µs)' : 'OVER 1 µs',
  };
});
console.table(rows);

// ------------------------------------------------------------------ allocation

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) console.log('(run node with --expose-gc for the forced-GC figures)');
let gcCount = 0;
const gcObserver = new PerformanceObserver((list) => {
  gcCount += list.getEntries().length;
});
gcObserver.observe({ entryTypes: ['gc'] });
/** Lets pending GC performance entries be delivered. */
const drainGcEntries = () => new Promise((r) => setTimeout(r, 0));

newPaths(); // fresh buckets: a million admits must all be admitted
const session = new Session();
session.connect();
const CHUNK_BATCHES = 10; // 10,000 operations between two heapUsed readings
const alloc: Record<string, number | string>[] = [];
const where: { task: string; frame: string; 'bytes/op': number }[] = [];
for (const [name, fn] of Object.entries(tasks)) {
  const p = paths[name];
  for (let k = 0; k < 100; k++) fn(); // warm (already optimised by the timed run)
  if (p !== undefined) p.refused = 0;

  // Pass 1, heapUsed: a million operations in chunks of 10,000. A chunk during
  // which V8 ran no GC allocated exactly its heapUsed growth; chunks with a GC
  // are left out of the per-operation figure (and counted).
  gc?.();
  await drainGcEntries();
  const before = process.memoryUsage().heapUsed;
  let cleanBytes = 0;
  let cleanOps = 0;
  let gcChunks = 0;
  const gcsBefore = gcCount;
  for (let c = 0; c < ALLOC_OPS / BATCH / CHUNK_BATCHES; c++) {
    const g0 = gcCount;
    const h0 = process.memoryUsage().heapUsed;
    for (let k = 0; k < CHUNK_BATCHES; k++) fn();
    const h1 = process.memoryUsage().heapUsed;
    await drainGcEntries();
    if (gcCount === g0) {
      cleanBytes += h1 - h0;
      cleanOps += CHUNK_BATCHES * BATCH;
    } else {
      gcChunks++;
    }
  }
  const gcs = gcCount - gcsBefore;
  gc?.();
  const retained = process.memoryUsage().heapUsed - before;

  // Pass 2, attribution: the sampling heap profiler over another million, with
  // objects later collected included, summed per allocating function (inlined
  // callees are charged to the optimised frame they were inlined into).
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: 128,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  for (let k = 0; k < ALLOC_OPS / BATCH; k++) fn();
  const { profile } = await session.post('HeapProfiler.stopSampling');
  let sampled = 0;
  const byFrame = new Map<string, number>();
  const walk = (node: HeapProfilerNode, inTask: boolean): void => {
    const here = inTask || node.callFrame.functionName === name;
    if (here && node.selfSize > 0) {
      sampled += node.selfSize;
      const key = node.callFrame.functionName || '(anonymous)';
      byFrame.set(key, (byFrame.get(key) ?? 0) + node.selfSize);
    }
    for (const child of node.children) walk(child, here);
  };
  walk(profile.head as HeapProfilerNode, false);
  for (const [frame, bytes] of [...byFrame].sort((a, b) => b[1] - a[1]).slice(0, 4)) {
    if (bytes / ALLOC_OPS >= 0.5) where.push({ task: name, frame, 'bytes/op': Number((bytes / ALLOC_OPS).toFixed(1)) });
  }
  alloc.push({
    task: name,
    'heapUsed bytes/op (GC-free chunks)': cleanOps === 0 ? 'n/a' : Number((cleanBytes / cleanOps).toFixed(2)),
    'chunks with a GC (of 100)': gcChunks,
    'GCs in 1M ops': gcs,
    'heapUsed after forced gc − before (bytes)': gc === undefined ? 'needs --expose-gc' : retained,
    'sampled bytes/op': Number((sampled / ALLOC_OPS).toFixed(1)),
    refused: p === undefined ? '' : p.refused,
  });
}
session.disconnect();
gcObserver.disconnect();
console.log(`Allocation, ${ALLOC_OPS.toLocaleString('en')} operations per row and pass (admission rows: admit + finish pairs):`);
console.table(alloc);
if (where.length > 0) {
  console.log('Where the sampled bytes were allocated (allocating frame; ≥ 0.5 bytes/op):');
  console.table(where);
}

for (const p of [...Object.values(paths), pieces]) {
  await p.rateBudget.close();
  p.breaker.close();
}
await pieceLimiter.close();
breakerOff.close();
if (sink[0] === -1) console.log(sink[0]); // keep the results observable
