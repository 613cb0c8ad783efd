// Authentication on the acceptor's hot path (performance.md P6: JWT verify on
// a cache hit ≤ 2 µs median).
//
// Run:
//   npx tsc --outDir node_modules/.cache/siglake-bench --module nodenext --target es2022 \
//     --skipLibCheck --types node perf/auth-cache.bench.ts
//   node node_modules/.cache/siglake-bench/perf/auth-cache.bench.js
//
// Sub-microsecond operations sit near the timer's resolution, so each sample
// runs the operation BATCH times and the figures are divided by BATCH. The
// jose verification of a cache miss is measured alongside (one per sample) to
// show what the cache saves.

import { hash, timingSafeEqual } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { Bench } from 'tinybench';
import { Authenticator, type AuthResult } from '../src/auth/authenticator.js';
import { OidcVerifier } from '../src/auth/oidc-verifier.js';
import { StaticTokenAuth } from '../src/auth/static-tokens.js';

const BATCH = 1000;
const ISS = 'https://idp.example.test';
const AUD = 'siglake';

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'siglake-bench-'));
  try {
    const rsa = await generateKeyPair('RS256', { extractable: true });
    const ec = await generateKeyPair('ES256', { extractable: true });
    const jwksFile = join(dir, 'jwks.json');
    writeFileSync(
      jwksFile,
      JSON.stringify({
        keys: [
          { ...(await exportJWK(rsa.publicKey)), kid: 'rsa', alg: 'RS256' },
          { ...(await exportJWK(ec.publicKey)), kid: 'ec', alg: 'ES256' },
        ],
      }),
    );
    const sign = (key: CryptoKey, alg: string, kid: string, n: number, pad = ''): Promise<string> =>
      new SignJWT({ org: `tenant-${n}`, sub: `svc-${n}`, ...(pad ? { pad } : {}) })
        .setProtectedHeader({ alg, kid })
        .setIssuer(ISS)
        .setAudience(AUD)
        .setIssuedAt()
        .setExpirationTime('1h')
        .sign(key);

    const oidcOpts = { issuer: ISS, audience: AUD, jwksFile, cacheSize: 10_000 };
    const auth = new Authenticator({ bearerTokens: [], oidc: oidcOpts });
    const verifier = new OidcVerifier(oidcOpts);
    // 1000 distinct cached tokens, visited round-robin, like many clients.
    const tokens: string[] = [];
    for (let i = 0; i < 1000; i++) tokens.push(await sign(rsa.privateKey, 'RS256', 'rsa', i));
    const headers = tokens.map((t) => `Bearer ${t}`);
    for (const h of headers) await auth.authenticate(h);
    // The same, with tokens of about 2 KiB (IdPs that put groups and roles in the token).
    const bigHeaders: string[] = [];
    for (let i = 0; i < 1000; i++) bigHeaders.push(`Bearer ${await sign(rsa.privateKey, 'RS256', 'rsa', i, 'g'.repeat(1100))}`);
    for (const h of bigHeaders) await auth.authenticate(h);
    for (const t of tokens) await verifier.verify(t);
    console.log(`token sizes: ${tokens[0].length} and ${bigHeaders[0].length - 7} characters`);

    const staticTokens = Array.from({ length: 8 }, (_, i) => `sk_live_${i}_${'q'.repeat(32)}`);
    const staticAuth = new Authenticator({ bearerTokens: staticTokens });
    const staticOnly = new StaticTokenAuth(staticTokens);
    const staticHeader = `Bearer ${staticTokens[7]}`;
    const open = new Authenticator({ bearerTokens: [] });
    // The alternative StaticTokenAuth replaced: Buffer digests and timingSafeEqual.
    const staticBuffers = staticTokens.map((t) => hash('sha256', t, 'buffer'));

    const missRsa = new OidcVerifier({ ...oidcOpts, cacheSize: 0 });
    const rsaToken = tokens[0];
    const ecToken = await sign(ec.privateKey, 'ES256', 'ec', 0);

    let sink = 0;
    const bench = new Bench({ name: 'auth', time: 1500, warmupTime: 300 });
    let k = 0;
    bench
      .add(`Authenticator.authenticate, JWT cache hit (x${BATCH})`, () => {
        for (let i = 0; i < BATCH; i++) {
          const r = auth.authenticate(headers[k]) as AuthResult;
          k = k === 999 ? 0 : k + 1;
          if (r.claims !== undefined) sink++;
        }
      })
      .add(`Authenticator.authenticate, JWT cache hit, ~2 KiB tokens (x${BATCH})`, () => {
        for (let i = 0; i < BATCH; i++) {
          const r = auth.authenticate(bigHeaders[k]) as AuthResult;
          k = k === 999 ? 0 : k + 1;
          if (r.claims !== undefined) sink++;
        }
      })
      .add(`OidcVerifier.lookup, cache hit (x${BATCH})`, () => {
        for (let i = 0; i < BATCH; i++) {
          if (verifier.lookup(tokens[k]) !== undefined) sink++;
          k = k === 999 ? 0 : k + 1;
        }
      })
      .add(`Authenticator.authenticate, static token, 8 configured (x${BATCH})`, () => {
        for (let i = 0; i < BATCH; i++) if (staticAuth.authenticate(staticHeader) !== undefined) sink++;
      })
      .add(`StaticTokenAuth.verify, 8 configured (x${BATCH})`, () => {
        for (let i = 0; i < BATCH; i++) if (staticOnly.verify(staticTokens[7])) sink++;
      })
      .add(`alternative: sha256 Buffer + timingSafeEqual x8 (x${BATCH})`, () => {
        for (let i = 0; i < BATCH; i++) {
          const p = hash('sha256', staticTokens[7], 'buffer');
          let m = 0;
          for (const b of staticBuffers) m |= timingSafeEqual(p, b) ? 1 : 0;
          sink += m;
        }
      })
      .add(`Authenticator.authenticate, open (x${BATCH})`, () => {
        for (let i = 0; i < BATCH; i++) if (open.authenticate(undefined) !== undefined) sink++;
      })
      .add('OidcVerifier.verify, cache miss, RS256 (x1)', async () => {
        if ((await missRsa.verify(rsaToken)).claims !== undefined) sink++;
      })
      .add('OidcVerifier.verify, cache miss, ES256 (x1)', async () => {
        if ((await missRsa.verify(ecToken)).claims !== undefined) sink++;
      });
    await bench.run();
    report(bench);
    if (sink === 0) throw new Error('benchmark did no work');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function report(bench: Bench): void {
  console.log(`${'task'.padEnd(70)} ${'median/op'.padStart(12)} ${'p99/op'.padStart(12)}`);
  for (const task of bench.tasks) {
    const r = task.result;
    if (r.state !== 'completed') {
      console.log(`${task.name.padEnd(70)} ${r.state}`);
      continue;
    }
    const per = /\(x(\d+)\)$/.exec(task.name);
    const div = per ? Number(per[1]) : 1;
    const ns = (ms: number): string => `${((ms * 1e6) / div).toFixed(1)} ns`;
    console.log(`${task.name.padEnd(70)} ${ns(r.latency.p50).padStart(12)} ${ns(r.latency.p99).padStart(12)}`);
  }
}

await main();
