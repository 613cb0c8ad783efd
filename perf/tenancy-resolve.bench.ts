// Tenant resolution and the allow-list on the acceptor's hot path
// (performance.md P6: admission ≤ 1 µs median in all; resolution is a part).
//
// Run:
//   npx tsc --outDir node_modules/.cache/siglake-bench --module nodenext --target es2022 \
//     --skipLibCheck --types node perf/tenancy-resolve.bench.ts
//   node node_modules/.cache/siglake-bench/perf/tenancy-resolve.bench.js
//
// Each sample runs the operation BATCH times; figures are per operation.

import { Bench } from 'tinybench';
import { AllowList } from '../src/tenancy/allow-list.js';
import { TenantResolver } from '../src/tenancy/tenant-resolver.js';

const BATCH = 1000;

async function main(): Promise<void> {
  const defaultMode = new TenantResolver({ trustTenantHeader: false });
  const headerMode = new TenantResolver({ trustTenantHeader: true });
  const claimMode = new TenantResolver({ trustTenantHeader: false, tenantClaim: 'org' });
  // 1000 tenants visited round-robin, as headers and as frozen verified claims.
  const tenants = Array.from({ length: 1000 }, (_, i) => `tenant-${i}-${'x'.repeat(i % 24)}`);
  const claims = tenants.map((t) => Object.freeze({ iss: 'https://idp', sub: 'svc', exp: 2e9, org: t }));
  const allow = new AllowList(tenants);
  const openAllow = new AllowList([]);

  let sink = 0;
  let k = 0;
  const next = (): number => (k = k === 999 ? 0 : k + 1);
  const bench = new Bench({ name: 'tenancy', time: 1500, warmupTime: 300 });
  bench
    .add(`default mode, no header (x${BATCH})`, () => {
      for (let i = 0; i < BATCH; i++) sink += defaultMode.resolve(undefined, 0, undefined).length;
    })
    .add(`default mode, header "default" (x${BATCH})`, () => {
      for (let i = 0; i < BATCH; i++) sink += defaultMode.resolve('default', 1, undefined).length;
    })
    .add(`trusted-header mode, 1000 tenants (x${BATCH})`, () => {
      for (let i = 0; i < BATCH; i++) sink += headerMode.resolve(tenants[next()], 1, undefined).length;
    })
    .add(`claim mode, no header, 1000 tenants (x${BATCH})`, () => {
      for (let i = 0; i < BATCH; i++) sink += claimMode.resolve(undefined, 0, claims[next()]).length;
    })
    .add(`claim mode, matching header, 1000 tenants (x${BATCH})`, () => {
      for (let i = 0; i < BATCH; i++) {
        const j = next();
        sink += claimMode.resolve(tenants[j], 1, claims[j]).length;
      }
    })
    .add(`default mode, refused header_not_trusted (x${BATCH})`, () => {
      for (let i = 0; i < BATCH; i++) {
        try {
          defaultMode.resolve(tenants[next()], 1, undefined);
        } catch {
          sink++;
        }
      }
    })
    .add(`resolveIndex "errors" (x${BATCH})`, () => {
      for (let i = 0; i < BATCH; i++) sink += (claimMode.resolveIndex('errors') ?? '').length;
    })
    .add(`AllowList.check, 1000 listed (x${BATCH})`, () => {
      for (let i = 0; i < BATCH; i++) {
        allow.check(tenants[next()]);
        sink++;
      }
    })
    .add(`AllowList.check, open (x${BATCH})`, () => {
      for (let i = 0; i < BATCH; i++) {
        openAllow.check(tenants[next()]);
        sink++;
      }
    });
  await bench.run();
  console.log(`${'task'.padEnd(60)} ${'median/op'.padStart(12)} ${'p99/op'.padStart(12)}`);
  for (const task of bench.tasks) {
    const r = task.result;
    if (r.state !== 'completed') {
      console.log(`${task.name.padEnd(60)} ${r.state}`);
      continue;
    }
    const ns = (ms: number): string => `${((ms * 1e6) / BATCH).toFixed(1)} ns`;
    console.log(`${task.name.padEnd(60)} ${ns(r.latency.p50).padStart(12)} ${ns(r.latency.p99).padStart(12)}`);
  }
  if (sink === 0) throw new Error('benchmark did no work');
}

await main();
