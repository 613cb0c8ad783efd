// A tenant whose shared rate leases one token at a time (requestsPerSec 100,
// lease 1) through a Redis that is far away (test/helpers/delay-proxy.ts adds
// 0, 5, 10, 20 ms to the round trip), driven by 8 closed-loop clients for 3 s,
// while one client probes a tenant with a large shared rate (lease 1,000) and
// one with none: whether only the small tenant waits on Redis
// (docs/performance.md, "Stop 50"; docs/reliability.md finding 125). Prints
// one line per RTT; asserts nothing.
//
//   node perf/run-ts.mjs perf/redis-lease-far.ts    (after npm run build)

import fs from 'node:fs';
import path from 'node:path';
import { delayProxy } from '../test/helpers/delay-proxy.js';
import { startIngester, tempDir } from '../test/helpers/ingester.js';
import { AUDIENCE, ISSUER, makeKeyPair, mint, writeJwksFile } from '../test/helpers/jwt.js';
import { RedisServer } from '../test/helpers/redis-server.js';
import { Client } from '../test/helpers/tenancy-client.js';
import { sleep } from '../test/helpers/wait.js';

const pct = (a: number[], p: number) => { const s = [...a].sort((x, y) => x - y); return s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))]!.toFixed(1) : '-'; };

async function main(): Promise<void> {
  const redis = await RedisServer.start();
  try {
    const key = await makeKeyPair('ES256', 'k-b');
    const dir = tempDir('siglake-bench-');
    const jwks = writeJwksFile(dir, [key.jwk]);
    const file = path.join(dir, 't.yaml');
    fs.writeFileSync(file, 'tenants:\n  - id: slow\n    subjects: { claims: { org_id: slow } }\n    rateLimit: { requestsPerSec: 100, burst: 100 }\n  - id: other\n    subjects: { claims: { org_id: other } }\n    rateLimit: { requestsPerSec: 100000, burst: 100000 }\n  - id: free\n    subjects: { claims: { org_id: free } }\n');
    const hs = { authorization: `Bearer ${await mint(key, { org_id: 'slow' }, { sub: 's' })}` };
    const ho = { authorization: `Bearer ${await mint(key, { org_id: 'other' }, { sub: 'o' })}` };
    const hf = { authorization: `Bearer ${await mint(key, { org_id: 'free' }, { sub: 'f' })}` };
    for (const rtt of [0, 5, 10, 20]) {
      const proxy = await delayProxy(redis.port, rtt);
      const args = ['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks, '--tenants-file', file, '--redis-url', `redis://127.0.0.1:${proxy.port}`, '--redis-timeout-ms', '500'];
      const ing = await startIngester({ args, workers: 2 });
      const clients = Array.from({ length: 9 }, () => new Client(ing));
      for (const h of [hs, ho, hf]) await clients[0]!.send('http', 'logs', 'w', h);
      await sleep(1500);
      const probe = async (h: Record<string, string>, ms: number, c: Client) => { const lat: number[] = []; const end = performance.now() + ms; while (performance.now() < end) { const t = performance.now(); await c.send('http', 'logs', 'p', h); lat.push(performance.now() - t); } return lat; };
      const alone = { o: await probe(ho, 1500, clients[0]!), f: await probe(hf, 1500, clients[0]!) };
      // slow tenant: 8 closed-loop clients for 3 s, while other/free probe
      let ok = 0, r429 = 0; const slat: number[] = [];
      const end = performance.now() + 3000;
      const loops = clients.slice(1).map(async (c) => { while (performance.now() < end) { const t = performance.now(); const r = await c.send('http', 'logs', 's', hs); slat.push(performance.now() - t); if (r.status === 200) ok++; else if (r.status === 429) r429++; } });
      const under = { o: probe(ho, 2800, clients[0]!) };
      const [uo] = await Promise.all([under.o, ...loops]);
      const uf = await (async () => { let ok2=0; const end2 = performance.now() + 3000; const l2 = clients.slice(1).map(async (c) => { while (performance.now() < end2) { const r = await c.send('http', 'logs', 's', hs); if (r.status===200) ok2++; } }); const [f] = await Promise.all([probe(hf, 2800, clients[0]!), ...l2]); return f; })();
      const errs = await ing.metric('siglake_rate_budget_backend_errors_total');
      console.log(`RTT+${rtt}ms: slow(100/s,lease 1, 8 conns): ${(ok / 3).toFixed(0)} admitted/s, ${(r429 / 3).toFixed(0)} 429/s, p50 ${pct(slat, 0.5)} p99 ${pct(slat, 0.99)} ms | other(lease 1000) alone p50 ${pct(alone.o, 0.5)} p99 ${pct(alone.o, 0.99)}, under load p50 ${pct(uo, 0.5)} p99 ${pct(uo, 0.99)} (n=${uo.length}) | free alone p50 ${pct(alone.f, 0.5)} p99 ${pct(alone.f, 0.99)}, under load p50 ${pct(uf, 0.5)} p99 ${pct(uf, 0.99)} | backend errors ${errs}`);
      for (const c of clients) c.close();
      await ing.stop();
      proxy.close();
    }
  } finally {
    await redis.stop();
  }
}

await main();
