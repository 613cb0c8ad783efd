// Declared-tenant resolution (declared-tenants.md §2: ≤ 100 ns median, no
// allocation, 10,000 tenants at the cost of 10) and a reload of 10,000 tenants
// (≤ 100 ms: parse + validate + build the indexes).
//
// Every case runs twice: `memo` is resolve() as admission calls it (the
// answer memoized per verified claims object, tenant-index.ts), `walk` the
// same index without the memo (every call walks the claim and group indexes),
// so one run prints the cost of both.
//
// Run (bounded: about 25 s):
//   node --expose-gc perf/run-ts.mjs perf/tenants-resolve.bench.ts
//
// Each sample runs the operation BATCH times; figures are per operation.
// Allocation: a million resolutions in chunks of 10,000; a chunk during which
// V8 ran no GC allocated exactly its heapUsed growth (chunks with a GC are
// left out and counted).

import { PerformanceObserver } from 'node:perf_hooks';
import { Bench } from 'tinybench';
import { TenantIndex } from '../src/tenants/tenant-index.js';
import { parseTenantsText } from '../src/tenants/tenants-file.js';

const BATCH = 1000;
const PRINCIPALS = 1024;

function fileOf(n: number, shape: 'claim' | 'group'): string {
  const tenants = [];
  for (let i = 0; i < n; i++) {
    tenants.push({
      id: `t${i}`,
      subjects: shape === 'claim' ? { claims: { org_id: `org-${i}` } } : { groups: [`grp-${i}`] },
      rateLimit: { requestsPerSec: 100, burst: 200 },
      budget: { period: 'day', records: 1_000_000 },
    });
  }
  return JSON.stringify({ tenants });
}

/** Verified claims as the token cache holds them: frozen objects, one per principal. */
function principals(n: number, shape: 'claim' | 'group'): Readonly<Record<string, unknown>>[] {
  return Array.from({ length: PRINCIPALS }, (_, k) => {
    const i = (k * 7919) % n;
    const base = { iss: 'https://idp', sub: `svc-${k}`, aud: 'siglake', exp: 2e9 };
    return Object.freeze(shape === 'claim' ? { ...base, org_id: `org-${i}` } : { ...base, groups: Object.freeze(['staff', `grp-${i}`]) });
  });
}

const cases: { name: string; index: TenantIndex; claims: Readonly<Record<string, unknown>>[] }[] = [];
for (const memo of [false, true]) {
  for (const n of [10, 10_000]) {
    for (const shape of ['claim', 'group'] as const) {
      cases.push({
        name: `${n} tenants, ${shape} selector, ${memo ? 'memo' : 'walk'}`,
        index: new TenantIndex(parseTenantsText(fileOf(n, shape), 'tenants.json'), { memo }),
        claims: principals(n, shape),
      });
    }
  }
}

let sink = 0;
function runBatch(c: (typeof cases)[number], start: number): void {
  const idx = c.index;
  const cl = c.claims;
  for (let i = 0; i < BATCH; i++) {
    const r = idx.resolve(cl[(start + i) & (PRINCIPALS - 1)]);
    if (r !== null && typeof r === "object") sink = (sink + r.ord) | 0;
  }
}

let cursor = 0;
const bench = new Bench({ name: 'tenants', time: 1200, warmupTime: 300 });
for (const c of cases) {
  bench.add(`resolve, ${c.name} (x${BATCH})`, () => {
    runBatch(c, cursor);
    cursor = (cursor + 13) & (PRINCIPALS - 1);
  });
}
const text10k = fileOf(10_000, 'claim');
bench.add('reload: parse + validate + index 10,000 tenants (JSON)', () => {
  sink ^= new TenantIndex(parseTenantsText(text10k, 'tenants.json')).size;
});
await bench.run();

console.log(`${'task'.padEnd(64)} ${'median/op'.padStart(12)} ${'p99/op'.padStart(12)}`);
for (const task of bench.tasks) {
  const r = task.result;
  if (r.state !== 'completed') {
    console.log(`${task.name.padEnd(64)} ${r.state}`);
    continue;
  }
  const per = task.name.startsWith('reload') ? 1 : BATCH;
  const fmt = (ms: number): string => (per === 1 ? `${ms.toFixed(1)} ms` : `${((ms * 1e6) / per).toFixed(1)} ns`);
  console.log(`${task.name.padEnd(64)} ${fmt(r.latency.p50).padStart(12)} ${fmt(r.latency.p99).padStart(12)}`);
}

// ------------------------------------------------------------------ allocation
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) console.log('(run node with --expose-gc for the forced-GC figures)');
let gcCount = 0;
const obs = new PerformanceObserver((list) => {
  gcCount += list.getEntries().length;
});
obs.observe({ entryTypes: ['gc'] });
const drain = (): Promise<void> => new Promise((r) => setTimeout(r, 0));
console.log(`${'allocation'.padEnd(64)} ${'bytes/op'.padStart(12)} ${'gc chunks'.padStart(10)}`);
for (const c of cases) {
  gc?.();
  await drain();
  let bytes = 0;
  let ops = 0;
  let gcChunks = 0;
  for (let chunk = 0; chunk < 100; chunk++) {
    const g0 = gcCount;
    const h0 = process.memoryUsage().heapUsed;
    for (let k = 0; k < 10; k++) runBatch(c, (chunk * 10 + k) & (PRINCIPALS - 1));
    const h1 = process.memoryUsage().heapUsed;
    await drain();
    if (gcCount === g0) {
      bytes += h1 - h0;
      ops += 10 * BATCH;
    } else gcChunks++;
  }
  console.log(`${`resolve, ${c.name}`.padEnd(64)} ${(ops === 0 ? NaN : bytes / ops).toFixed(3).padStart(12)} ${String(gcChunks).padStart(10)}`);
}
obs.disconnect();
if (sink === 0) throw new Error('benchmark did no work');
