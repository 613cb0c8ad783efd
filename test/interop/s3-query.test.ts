// The query server on an S3 warehouse: two tenants' logs and spans land in
// `s3://…` on a real SeaweedFS server (ingester + `siglake compact`), and
// `siglake query`, credentials from the AWS environment only, answers each
// tenant's SQL with exactly its acknowledged rows. DuckDB reads local copies
// of the data objects from the bounded file cache (query.cacheDir); a
// tenant's engine may open exactly its own copies, never the other tenant's
// copies lying in the same directory. A later commit is seen by the next query.
// With a cache bound smaller than two tenants' data, the copies no query
// needs are evicted once queries end, and an evicted copy comes back for the
// next query that needs it.

import { HeadObjectCommand } from '@aws-sdk/client-s3';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startIngester, tempDir } from '../helpers/ingester.js';
import { AUDIENCE, ISSUER, makeKeyPair, mint, writeJwksFile } from '../helpers/jwt.js';
import { jsonBytes, logsJson } from '../helpers/otlp-bodies.js';
import { bodiesOf, listFiles, postSql, sendTenants, startQuery, type RunningQuery } from '../helpers/query.js';
import { SeaweedFs } from '../helpers/seaweedfs.js';

const BUCKET = 'siglake-query';
const N = 12;
const lit = (s: string) => `'${s.replace(/'/g, "''")}'`;

describe('siglake query on an S3 warehouse (SeaweedFS)', () => {
  let sw: SeaweedFs;
  let q: RunningQuery;
  let small: RunningQuery | undefined;
  const dataDir = tempDir('siglake-s3-query-');
  const cacheDir = path.join(dataDir, 'query-cache');
  const tokens = new Map<string, string>();
  let lakeFlags: string[] = [];

  /** Lands round `round` of each tenant: ingester (stopped after) then `siglake compact --once`. */
  async function land(tenants: string[], round: string, send?: (url: string) => Promise<void>): Promise<void> {
    const ing = await startIngester({ dataDir, args: ['--trust-tenant-header', '--compactor=false', ...lakeFlags], env: sw.env });
    try {
      await (send ?? ((url) => sendTenants(url, tenants, round, N)))(ing.url);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
    const r = runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', path.join(dataDir, 'wal'), ...lakeFlags], { env: sw.env });
    expect(r.status, r.stderr + r.stdout.slice(-2000)).toBe(0);
  }

  /** The data objects of a tenant's tables in the bucket, as s3:// locations. */
  async function dataLocations(tenant: string): Promise<string[]> {
    const keys = await sw.keys(BUCKET, `warehouse/tenant_${tenant}/`);
    return keys.filter((k) => k.includes('/data/') && k.endsWith('.parquet')).map((k) => `s3://${BUCKET}/${k}`);
  }

  /** Where the cache keeps a location's copy (object-cache.ts: sha256 of the location, extension kept). */
  const cachedPath = (location: string) => path.join(cacheDir, `${createHash('sha256').update(location).digest('hex')}.parquet`);

  beforeAll(async () => {
    sw = await SeaweedFs.start();
    await sw.createBucket(BUCKET);
    lakeFlags = ['--catalog-url', `sqlite:${path.join(dataDir, 'catalog.db')}`, ...sw.warehouseFlags(BUCKET, 'warehouse')];
    await land(['acme', 'globex'], 'r1');
    const key = await makeKeyPair('ES256', 'k1');
    const jwks = writeJwksFile(dataDir, [key.jwk]);
    for (const t of ['acme', 'globex']) tokens.set(t, await mint(key, { tenant: t }));
    q = await startQuery(
      dataDir,
      [...lakeFlags, '--query-cache-dir', cacheDir, '--query-cache-max-mib', '64', '--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks, '--query-tenant-claim', 'tenant'],
      sw.env,
    );
  }, 600_000);

  afterAll(async () => {
    await q?.stop();
    await small?.stop();
    await sw?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('answers each tenant with exactly its acknowledged rows, read from cached copies of the S3 objects', async () => {
    for (const tenant of ['acme', 'globex']) {
      const token = tokens.get(tenant)!;
      const logs = await postSql(q.url, 'SELECT body, service_name FROM logs ORDER BY body', { token });
      expect(logs.status, logs.text).toBe(200);
      expect(logs.body['rows']).toEqual(bodiesOf(tenant, 'r1', N).sort().map((b) => [b, `svc-${tenant}`]));
      const spans = await postSql(q.url, 'SELECT name FROM traces ORDER BY name', { token });
      expect(spans.status, spans.text).toBe(200);
      expect(spans.body['rows']).toEqual([[`r1-${tenant}-span-0`], [`r1-${tenant}-span-1`]]);

      const tables = await fetch(`${q.url}/api/v1/tables`, { headers: { authorization: `Bearer ${token}` } });
      const listed = ((await tables.json()) as { tables: { name: string; rowCount: number }[] }).tables;
      expect(listed.map((t) => [t.name, t.rowCount]).sort()).toEqual([['logs', N], ['traces', 2]]);

      // The engine may open exactly this tenant's cached copies, and they are on disk.
      const allowed = await postSql(q.url, "SELECT unnest(current_setting('allowed_paths')) AS p", { token });
      expect(allowed.status, allowed.text).toBe(200);
      const want = (await dataLocations(tenant)).map(cachedPath).sort();
      expect(want.length).toBeGreaterThan(0);
      expect((allowed.body['rows'] as string[][]).map((r) => r[0]!).sort()).toEqual(want);
      for (const f of want) expect(fs.existsSync(f)).toBe(true);
    }
    // Only the data objects are copied (metadata and manifests are read through the S3 client), and nothing half-written is left.
    const all = [...(await dataLocations('acme')), ...(await dataLocations('globex'))].map((l) => path.basename(cachedPath(l))).sort();
    expect(listFiles(cacheDir)).toEqual(all);
  });

  it("a tenant's engine cannot open the other tenant's cached copies, by path or as s3:// URIs", async () => {
    const acme = tokens.get('acme')!;
    const globexLocations = await dataLocations('globex');
    for (const loc of globexLocations) {
      for (const target of [cachedPath(loc), loc, `${cacheDir}/*.parquet`]) {
        const a = await postSql(q.url, `SELECT * FROM read_parquet(${lit(target)})`, { token: acme });
        expect(a.status, a.text).toBe(400);
        expect((a.body['error'] as { code: string }).code).toBe('SIGLAKE_BAD_SQL');
        expect(a.text).not.toContain('r1-globex');
      }
    }
    // acme still reads its own rows, and only those.
    const own = await postSql(q.url, 'SELECT count(*)::INTEGER AS n, count(DISTINCT service_name)::INTEGER AS s FROM logs', { token: acme });
    expect(own.body['rows']).toEqual([[N, 1]]);
  });

  it('the next query after a commit to the bucket reads the new snapshot', async () => {
    await land(['acme'], 'r2');
    const a = await postSql(q.url, 'SELECT body FROM logs ORDER BY body', { token: tokens.get('acme')! });
    expect(a.status, a.text).toBe(200);
    expect(a.body['rows']).toEqual([...bodiesOf('acme', 'r1', N), ...bodiesOf('acme', 'r2', N)].sort().map((b) => [b]));
    const g = await postSql(q.url, 'SELECT count(*)::INTEGER FROM logs', { token: tokens.get('globex')! });
    expect(g.body['rows']).toEqual([[N]]);
  });

  it('keeps the cache within query.cacheMaxMib once queries end, and fetches an evicted copy again for the next query', async () => {
    // Two tenants of poorly compressible bodies: each tenant's data fits the 1 MiB bound, both do not.
    const big = new Map<string, string[]>();
    for (const t of ['initech', 'hooli']) big.set(t, Array.from({ length: 160 }, (_, i) => `${t}-${String(i).padStart(3, '0')}-${randomBytes(4096).toString('hex')}`));
    await land([...big.keys()], 'big', async (url) => {
      for (const [t, bodies] of big) {
        const r = await fetch(`${url}/v1/logs`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-scope-orgid': t }, body: jsonBytes(logsJson(bodies, `svc-${t}`)) });
        expect(r.status, await r.text()).toBe(200);
      }
    });
    const sizeOf = async (loc: string) => Number((await sw.client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: loc.slice(`s3://${BUCKET}/`.length) }))).ContentLength);
    const bytes: Record<string, number> = {};
    for (const t of big.keys()) {
      bytes[t] = 0;
      for (const loc of await dataLocations(t)) bytes[t] += await sizeOf(loc);
    }
    const bound = 1024 * 1024;
    expect(bytes['initech']!).toBeLessThan(bound);
    expect(bytes['hooli']!).toBeLessThan(bound);
    expect(bytes['initech']! + bytes['hooli']!).toBeGreaterThan(bound);

    const key = await makeKeyPair('ES256', 'k2');
    const jwks = writeJwksFile(path.join(dataDir), [key.jwk]);
    const token = new Map<string, string>();
    for (const t of big.keys()) token.set(t, await mint(key, { tenant: t }));
    const smallDir = path.join(dataDir, 'small-cache');
    small = await startQuery(
      dataDir,
      [...lakeFlags, '--query-cache-dir', smallDir, '--query-cache-max-mib', '1', '--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks, '--query-tenant-claim', 'tenant'],
      sw.env,
    );
    const cachedBytes = () => listFiles(smallDir).reduce((n, f) => n + fs.statSync(path.join(smallDir, f)).size, 0);
    const withinBound = async () => {
      const deadline = Date.now() + 30_000;
      while (cachedBytes() > bound && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      expect(cachedBytes()).toBeLessThanOrEqual(bound);
    };
    for (const round of [1, 2]) {
      for (const [t, bodies] of big) {
        const a = await postSql(small.url, 'SELECT body FROM logs ORDER BY body', { token: token.get(t)! });
        expect(a.status, `${t} round ${round}: ${a.text.slice(0, 300)}`).toBe(200);
        expect((a.body['rows'] as string[][]).map((r) => r[0])).toEqual([...bodies].sort());
        await withinBound();
      }
    }
    // The least recently used tenant's copies made room: at rest the cache holds the last
    // tenant's data and not all of the other's.
    const held = listFiles(smallDir);
    const hooli = (await dataLocations('hooli')).map((l) => path.basename(cachedPath(l)));
    const initech = (await dataLocations('initech')).map((l) => path.basename(cachedPath(l)));
    expect(hooli.every((f) => held.includes(f))).toBe(true);
    expect(initech.every((f) => held.includes(f))).toBe(false);
    // The server's counters say the same: evictions happened, and the copies at rest fit the bound.
    const m = await small.metrics();
    expect(m.get('siglake_query_cache_evictions_total')).toBeGreaterThan(0);
    expect(m.get('siglake_query_cache_misses_total')).toBeGreaterThan(initech.length + hooli.length);
    expect(m.get('siglake_query_cache_bytes')).toBe(cachedBytes());
    expect(m.get('siglake_query_cache_files')).toBe(held.length);
  });
});
