// The OpenTelemetry Python SDK (opentelemetry-exporter-otlp-proto-http and
// -grpc) exports logs and traces to the real `siglake ingest`, gzip on and
// off, with the tenant in `X-Scope-OrgID` or in a bearer JWT's claim. Every
// record the exporter reported as exported is in the WAL of the right tenant,
// and nowhere else; a refused token is reported as a failure and leaves nothing.

import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIngester, tempDir, walDump, type RunningIngester } from '../helpers/ingester.js';
import { AUDIENCE, ISSUER, makeKeyPair, mint, secretParts, writeJwksFile, type KeyPair } from '../helpers/jwt.js';
import { pythonPeer } from './helpers.js';

interface SdkOutcome {
  logs: { acked: string[]; failed: string[] };
  traces: { acked: string[]; failed: string[] };
}

type Protocol = 'http' | 'grpc';

function sdk(ing: RunningIngester, protocol: Protocol, prefix: string, opts: { gzip?: boolean; orgId?: string; token?: string }): Promise<SdkOutcome> {
  const args = ['--protocol', protocol, '--endpoint', protocol === 'http' ? ing.url : ing.grpcAddress, '--prefix', prefix, '--count', '6'];
  if (opts.gzip === true) args.push('--gzip');
  if (opts.orgId !== undefined) args.push('--header', `x-scope-orgid=${opts.orgId}`);
  if (opts.token !== undefined) args.push('--token', opts.token);
  return pythonPeer<SdkOutcome>('otel_sdk_peer.py', args);
}

/** tenant → table → texts (log bodies, span names) in the WAL. */
function walByTenant(walDir: string): Map<string, Map<string, string[]>> {
  const out = new Map<string, Map<string, string[]>>();
  for (const line of walDump(walDir)) {
    const t = out.get(line.tenant) ?? new Map<string, string[]>();
    t.set(line.table, [...(t.get(line.table) ?? []), ...line.texts]);
    out.set(line.tenant, t);
  }
  return out;
}

const sorted = (xs: string[]) => [...xs].sort();

describe('OpenTelemetry Python SDK 1.45 → siglake ingest', () => {
  const dirs: string[] = [];
  const running: RunningIngester[] = [];
  afterAll(async () => {
    for (const ing of running) await ing.stop();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  describe('tenant from X-Scope-OrgID (--trust-tenant-header)', () => {
    let ing: RunningIngester;
    const cases: Array<{ protocol: Protocol; gzip: boolean; orgId: string | undefined; tenant: string }> = [
      { protocol: 'http', gzip: true, orgId: 'acme', tenant: 'acme' },
      { protocol: 'http', gzip: false, orgId: undefined, tenant: 'default' },
      { protocol: 'grpc', gzip: true, orgId: 'globex', tenant: 'globex' },
      { protocol: 'grpc', gzip: false, orgId: 'acme', tenant: 'acme' },
    ];
    const expected = new Map<string, string[]>();

    beforeAll(async () => {
      const dir = tempDir('siglake-interop-pysdk-');
      dirs.push(dir);
      ing = await startIngester({ dataDir: dir, args: ['--trust-tenant-header', '--compactor=false'] });
      running.push(ing);
    });

    it.each(cases)('$protocol, gzip $gzip, org $orgId: every record exported', async (c) => {
      const prefix = `hdr-${c.protocol}-${c.gzip ? 'gz' : 'plain'}-${c.tenant}`;
      const out = await sdk(ing, c.protocol, prefix, { gzip: c.gzip, orgId: c.orgId });
      expect(out.logs.failed).toEqual([]);
      expect(out.traces.failed).toEqual([]);
      expect(out.logs.acked).toHaveLength(6);
      expect(out.traces.acked).toHaveLength(6);
      for (const [table, items] of [['logs', out.logs.acked], ['traces', out.traces.acked]] as const) {
        const key = `${c.tenant}/${table}`;
        expected.set(key, [...(expected.get(key) ?? []), ...items]);
      }
    });

    it('each tenant WAL holds exactly what the SDK exported for it', async () => {
      expect(await ing.stop()).toBe(0);
      const wal = walByTenant(ing.walDir);
      expect(sorted([...wal.keys()])).toEqual(['acme', 'default', 'globex']);
      for (const [tenant, tables] of wal) {
        for (const [table, texts] of tables) expect(sorted(texts), `${tenant}/${table}`).toEqual(sorted(expected.get(`${tenant}/${table}`) ?? []));
      }
      expect([...wal.values()].flatMap((t) => [...t.values()]).flat()).toHaveLength([...expected.values()].flat().length);
    });
  });

  describe('tenant from a bearer JWT claim (--oidc-jwks-file, --tenant-claim org_id)', () => {
    let ing: RunningIngester;
    let key: KeyPair;
    const tokens: string[] = [];
    const expected = new Map<string, string[]>();

    beforeAll(async () => {
      const dir = tempDir('siglake-interop-pysdk-jwt-');
      dirs.push(dir);
      key = await makeKeyPair('RS256', 'interop-1');
      const jwks = writeJwksFile(dir, [key.jwk]);
      ing = await startIngester({
        dataDir: dir,
        args: ['--compactor=false', '--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks, '--tenant-claim', 'org_id'],
      });
      running.push(ing);
    });

    it.each([
      { protocol: 'http' as Protocol, gzip: true, tenant: 'initech', orgId: 'initech' },
      { protocol: 'grpc' as Protocol, gzip: true, tenant: 'umbrella', orgId: undefined },
    ])('$protocol, gzip, X-Scope-OrgID $orgId: records land in the tenant of the token', async (c) => {
      const token = await mint(key, { org_id: c.tenant });
      tokens.push(token);
      const out = await sdk(ing, c.protocol, `jwt-${c.protocol}-${c.tenant}`, { gzip: c.gzip, token, ...(c.orgId !== undefined ? { orgId: c.orgId } : {}) });
      expect(out.logs.failed).toEqual([]);
      expect(out.traces.failed).toEqual([]);
      expect(out.logs.acked).toHaveLength(6);
      expect(out.traces.acked).toHaveLength(6);
      expected.set(`${c.tenant}/logs`, out.logs.acked);
      expected.set(`${c.tenant}/traces`, out.traces.acked);
    });

    it.each(['http', 'grpc'] as Protocol[])("%s: initech's token with X-Scope-OrgID naming umbrella is reported as failed (403), nothing lands", async (protocol) => {
      const token = await mint(key, { org_id: 'initech' });
      tokens.push(token);
      const out = await sdk(ing, protocol, `mismatch-${protocol}`, { gzip: true, token, orgId: 'umbrella' });
      expect(out.logs.acked).toEqual([]);
      expect(out.traces.acked).toEqual([]);
      expect(out.logs.failed).toHaveLength(6);
      expect(out.traces.failed).toHaveLength(6);
    });

    it('each tenant WAL holds exactly what was exported with its token; no token reached the logs', async () => {
      expect(await ing.stop()).toBe(0);
      const wal = walByTenant(ing.walDir);
      expect(sorted([...wal.keys()])).toEqual(['initech', 'umbrella']);
      for (const [tenant, tables] of wal) {
        for (const [table, texts] of tables) expect(sorted(texts), `${tenant}/${table}`).toEqual(sorted(expected.get(`${tenant}/${table}`)!));
      }
      const logText = ing.logs.map((l) => JSON.stringify(l)).join('\n') + ing.stderr;
      for (const t of tokens) for (const part of secretParts(t)) expect(logText.includes(part)).toBe(false);
    });
  });
});
