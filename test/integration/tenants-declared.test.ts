// Declared tenants (issue 16; declared-tenants.md; ingest-contract.md §4 as
// amended) against the real `siglake ingest` process with minted JWTs, over
// OTLP/HTTP and OTLP/gRPC:
//
//   - ten principals of one tenant share one bucket: the request past the
//     burst is refused whichever principal sends it; another tenant is untouched
//   - a principal over its own bucket spends nothing of its tenant's
//   - budgets charge narrowest first: a request refused by the index budget
//     spends nothing of the tenant's, one refused by the tenant budget nothing
//     of the server's; 429 + Retry-After to the end of the UTC day
//   - an index outside the tenant's subset: 403 before any budget
//   - ambiguity: at load (exit 2, both tenants named), at request time (403)
//   - a principal matching no tenant routes exactly as before (tenant default)
//   - reload: SIGHUP and file change; a tenant added can write within a
//     second, a removed one's next request is governed as undeclared; a bad
//     reload keeps the old set and is counted
//   - the audit file: refusals with tenant and subject, never a token
//   - metrics: the label sets of every pre-existing series are unchanged

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, until } from '../helpers/wait.js';
import { clearOfUtcPeriodEnd, UTC_PERIOD_WAIT_MAX_MS } from '../helpers/utc-period.js';
import { runCli, startIngester, tempDir, type RunningIngester } from '../helpers/ingester.js';
import { AUDIENCE, ISSUER, makeKeyPair, mint, writeJwksFile, type KeyPair } from '../helpers/jwt.js';
import { grpc } from '../helpers/grpc-client.js';
import { Client, textsUnder, topDirs, type Reply, type Transport } from '../helpers/tenancy-client.js';

const oidcArgs = (jwks: string): string[] => ['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks];

let key: KeyPair;
let dir: string;
let jwks: string;

beforeAll(async () => {
  key = await makeKeyPair('ES256', 'k-tenants');
  dir = tempDir('siglake-tenants-');
  jwks = writeJwksFile(dir, [key.jwk]);
});

const token = (sub: string, claims: Record<string, unknown> = {}): Promise<string> => mint(key, claims, { sub });
const auth = async (sub: string, claims: Record<string, unknown> = {}, extra: Record<string, string> = {}): Promise<Record<string, string>> => ({
  authorization: `Bearer ${await token(sub, claims)}`,
  ...extra,
});

function ok(r: Reply): void {
  if (r.transport === 'http') expect(r.status, r.message).toBe(200);
  else expect(r.code, r.message).toBe(grpc.status.OK);
}

function refused(r: Reply, http: number, grpcCode: number, message: RegExp): void {
  if (r.transport === 'http') expect(r.status).toBe(http);
  else expect(r.code).toBe(grpcCode);
  expect(r.message).toMatch(message);
}

/** Seconds from now to the next UTC midnight. */
function secondsToUtcMidnight(): number {
  const now = new Date();
  return (Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1) - now.getTime()) / 1000;
}

const TENANTS = {
  tenants: [
    // Very slow refill: within a test the bucket is its burst.
    { id: 'acme', subjects: { claims: { org_id: 'acme-prod' } }, rateLimit: { requestsPerSec: 0.01, burst: 10 } },
    { id: 'globex', subjects: { groups: ['globex-writers'] }, rateLimit: { requestsPerSec: 0.01, burst: 10 } },
    { id: 'umbrella', subjects: { claims: { org_id: 'umbrella' } }, rateLimit: { requestsPerSec: 0.01, burst: 3 } },
    {
      id: 'initech',
      subjects: { claims: { org_id: 'initech' } },
      budget: { period: 'day', records: 4 },
      indexes: [{ name: 'payments', budget: { period: 'day', records: 2 } }, 'audit'],
    },
    // Compound: overlaps acme only for a principal holding both claims (request time).
    { id: 'hooli', subjects: { issuers: [ISSUER], claims: { env: 'prod' } } },
  ],
};

describe('declared tenants at admission', () => {
  let ing: RunningIngester;
  let c: Client;
  let auditFile: string;
  beforeAll(async () => {
    // initech's day budgets and the server's (21 records, spent across the tests below) must not
    // start again at 00:00 UTC halfway: the refusals and Retry-After below expect one day.
    await clearOfUtcPeriodEnd('day');
    const file = path.join(dir, 'tenants.json');
    fs.writeFileSync(file, JSON.stringify(TENANTS));
    auditFile = path.join(dir, 'audit.jsonl');
    ing = await startIngester({
      // The indexes exist in initech's registry (contract §4 step 7: an unknown one is a 400);
      // `other` exists too, so that its refusal is the declared tenant's subset (403), not the registry's.
      indexes: { initech: ['payments', 'audit', 'other'] },
      args: [
        ...oidcArgs(jwks),
        '--tenants-file',
        file,
        '--rate-limit-per-principal-per-sec',
        '0.01',
        '--server-budget-records',
        '21',
        '--audit-file',
        auditFile,
      ],
    });
    c = new Client(ing);
  }, UTC_PERIOD_WAIT_MAX_MS + 60_000);
  afterAll(async () => {
    c?.close();
    if (ing) expect(await ing.stop()).toBe(0);
  });

  it('ten principals of one tenant share one bucket; another tenant is untouched', async () => {
    const transports: Transport[] = ['http', 'grpc'];
    for (let i = 0; i < 10; i++) {
      ok(await c.send(transports[i % 2]!, 'logs', `acme-${i}`, await auth(`acme-svc-${i}`, { org_id: 'acme-prod' })));
    }
    // The eleventh, from a principal that never sent, and from one that did: both refused.
    for (const t of transports) {
      refused(await c.send(t, 'logs', 'acme-x', await auth('acme-svc-new', { org_id: 'acme-prod' })), 429, grpc.status.RESOURCE_EXHAUSTED, /rate limited/);
      refused(await c.send(t, 'logs', 'acme-y', await auth('acme-svc-3', { org_id: 'acme-prod' })), 429, grpc.status.RESOURCE_EXHAUSTED, /rate limited/);
    }
    for (const t of transports) ok(await c.send(t, 'logs', `globex-${t}`, await auth(`globex-${t}`, { groups: ['staff', 'globex-writers'] })));
    expect(await ing.metric('siglake_tenant_requests_total{tenant="acme",outcome="rate_limited"}')).toBe(4);
    expect(topDirs(ing.walDir)).toEqual(expect.arrayContaining(['acme', 'globex']));
  });

  it("a principal over its own bucket spends nothing of its tenant's", async () => {
    const u0 = await auth('umbrella-0', { org_id: 'umbrella' });
    ok(await c.send('http', 'logs', 'u0', u0));
    // Over its own bucket (one token): refused three times; the tenant keeps 2 of 3.
    for (let i = 0; i < 3; i++) refused(await c.send(i % 2 ? 'grpc' : 'http', 'logs', 'u0-again', u0), 429, grpc.status.RESOURCE_EXHAUSTED, /rate limited/);
    ok(await c.send('http', 'logs', 'u1', await auth('umbrella-1', { org_id: 'umbrella' })));
    ok(await c.send('grpc', 'logs', 'u2', await auth('umbrella-2', { org_id: 'umbrella' })));
    refused(await c.send('http', 'logs', 'u3', await auth('umbrella-3', { org_id: 'umbrella' })), 429, grpc.status.RESOURCE_EXHAUSTED, /rate limited/);
  });

  it('budgets charge narrowest first; a refusal spends nothing wider; 429 + Retry-After to the end of the UTC day', async () => {
    const init = (n: string, index?: string) => auth(`initech-${n}`, { org_id: 'initech' }, index ? { 'x-siglake-index': index } : {});
    const remaining = () => ing.metric('siglake_tenant_budget_remaining{tenant="initech",unit="records"}');
    expect(await remaining()).toBe(4);
    ok(await c.send('http', 'logs', 'p1', await init('1', 'payments')));
    ok(await c.send('grpc', 'logs', 'p2', await init('2', 'payments')));
    expect(await remaining()).toBe(2);
    // The index budget is spent: refused, and the tenant's is untouched.
    const r = await c.send('http', 'logs', 'p3', await init('3', 'payments'));
    refused(r, 429, grpc.status.RESOURCE_EXHAUSTED, /budget exhausted: the index budget/);
    const retry = Number(r.retryAfter);
    expect(Math.abs(retry - secondsToUtcMidnight())).toBeLessThan(30);
    const g = await c.send('grpc', 'logs', 'p4', await init('4', 'payments'));
    refused(g, 429, grpc.status.RESOURCE_EXHAUSTED, /budget exhausted: the index budget/);
    expect(Number(g.retryAfter)).toBeGreaterThan(0);
    expect(await remaining()).toBe(2);
    // An index outside the subset: 403 before any budget.
    refused(await c.send('http', 'logs', 'o1', await init('5', 'other')), 403, grpc.status.PERMISSION_DENIED, /index not in tenant/);
    refused(await c.send('grpc', 'logs', 'o2', await init('6', 'other')), 403, grpc.status.PERMISSION_DENIED, /index not in tenant/);
    ok(await c.send('http', 'logs', 'a1', await init('7', 'audit')));
    ok(await c.send('grpc', 'logs', 'a2', await init('8')));
    expect(await remaining()).toBe(0);
    // The tenant budget is spent: refused, and nothing of the server's (21) spent by it.
    refused(await c.send('http', 'logs', 'a3', await init('9', 'audit')), 429, grpc.status.RESOURCE_EXHAUSTED, /the tenant budget/);
    refused(await c.send('grpc', 'logs', 'a4', await init('10')), 429, grpc.status.RESOURCE_EXHAUSTED, /the tenant budget/);
    expect(await ing.metric('siglake_tenant_requests_total{tenant="initech",outcome="budget_exhausted"}')).toBe(4);
    expect(await ing.metric('siglake_tenant_records_total{tenant="initech"}')).toBe(4);
    // Written so far, every tenant together: acme 10, globex 2, umbrella 3, initech 4 = 19 of the server's 21.
    // Had the refusals above spent it, the first of these would be refused.
    ok(await c.send('http', 'logs', 'd1', await auth('nobody-1')));
    ok(await c.send('grpc', 'logs', 'd2', await auth('nobody-2')));
    refused(await c.send('http', 'logs', 'd3', await auth('nobody-3')), 429, grpc.status.RESOURCE_EXHAUSTED, /the server budget/);
    refused(await c.send('grpc', 'logs', 'd4', await auth('nobody-4')), 429, grpc.status.RESOURCE_EXHAUSTED, /the server budget/);
  });

  it('a principal matching two tenants at request time: 403 SIGLAKE_TENANT_AMBIGUOUS, counted', async () => {
    const both = await auth('both', { org_id: 'acme-prod', env: 'prod' });
    refused(await c.send('http', 'logs', 'amb', both), 403, grpc.status.PERMISSION_DENIED, /tenant ambiguous/);
    refused(await c.send('grpc', 'logs', 'amb', both), 403, grpc.status.PERMISSION_DENIED, /tenant ambiguous/);
    expect(await ing.metric('siglake_tenant_ambiguous_total')).toBe(2);
  });

  it('X-Scope-OrgID naming another tenant than the declared one: 403 header_mismatch; an empty one stays a 400', async () => {
    refused(
      await c.send('http', 'logs', 'he', await auth('globex-he', { groups: ['globex-writers'] }, { 'x-scope-orgid': '' })),
      400,
      grpc.status.INVALID_ARGUMENT,
      /X-Scope-OrgID is empty/,
    );
    refused(
      await c.send('http', 'logs', 'hm', await auth('globex-hm', { groups: ['globex-writers'] }, { 'x-scope-orgid': 'acme' })),
      403,
      grpc.status.PERMISSION_DENIED,
      /header_mismatch/,
    );
    // A tenant denial as every other one (it went uncounted before stop 45).
    expect(await ing.metric('siglake_ingest_tenant_denied_total{reason="header_mismatch"}')).toBe(1);
    // A comma list is two headers folded into one: 400 as in every mode, not a mismatch (it was 403 over HTTP).
    for (const t of ['http', 'grpc'] as const) {
      refused(
        await c.send(t, 'logs', 'hc', await auth('globex-hc', { groups: ['globex-writers'] }, { 'x-scope-orgid': 'globex,globex' })),
        400,
        grpc.status.INVALID_ARGUMENT,
        /X-Scope-OrgID sent more than once/,
      );
    }
  });

  it('the audit file has refusals with tenant and subject, never a token', async () => {
    const t = await token('audit-probe', { org_id: 'acme-prod' });
    await c.send('http', 'logs', 'probe', { authorization: `Bearer ${t}` });
    // Bad bodies on a lane that never stores: no lane admission to audit (each was audited before stop 45).
    for (const tr of ['http', 'grpc'] as const) {
      refused(await c.send(tr, 'traces', 'bad', await auth(`hooli-svc-${tr}`, { env: 'prod' }), Uint8Array.from([0xff, 0xff])), 400, grpc.status.INVALID_ARGUMENT, /invalid protobuf/);
    }
    await c.send('grpc', 'logs', 'no-token', {});
    let lines: Record<string, unknown>[] = [];
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      const text = fs.existsSync(auditFile) ? fs.readFileSync(auditFile, 'utf8') : '';
      lines = text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
      if (lines.some((l) => l['subject'] === 'audit-probe') && lines.some((l) => l['reason'] === 'SIGLAKE_UNAUTHENTICATED')) break;
      await sleep(50);
    }
    const text = fs.readFileSync(auditFile, 'utf8');
    expect(text).not.toContain(t.split('.')[2]!);
    expect(text).not.toContain('Bearer');
    for (const l of lines) expect(Object.keys(l)).toEqual(expect.arrayContaining(['time', 'event', 'tenant', 'subject', 'reason', 'remote']));
    expect(lines).toContainEqual(
      expect.objectContaining({ event: 'refusal', tenant: 'acme', subject: 'audit-probe', reason: 'tenant_rate_limited', remote: expect.stringMatching(/127\.0\.0\.1/) }),
    );
    // Refusals before authentication are audited too (no tenant, no subject).
    expect(lines).toContainEqual(expect.objectContaining({ event: 'refusal', tenant: null, subject: null, reason: 'SIGLAKE_UNAUTHENTICATED' }));
    expect(lines).toContainEqual(expect.objectContaining({ event: 'refusal', tenant: null, subject: 'both', reason: 'tenant_ambiguous' }));
    expect(lines).toContainEqual(expect.objectContaining({ event: 'refusal', tenant: 'initech', reason: 'budget_exhausted_index' }));
    expect(lines).toContainEqual(expect.objectContaining({ event: 'tenant_first_admission', tenant: 'acme' }));
    expect(lines).toContainEqual(expect.objectContaining({ event: 'lane_first_admission', tenant: 'initech', index: 'payments' }));
    expect(lines.filter((l) => l['event'] === 'lane_first_admission' && l['tenant'] === 'hooli')).toEqual([]);
    // Once per lane: initech's payments lane stored twice and was refused twice by its budget.
    expect(lines.filter((l) => l['event'] === 'lane_first_admission' && l['tenant'] === 'initech' && l['index'] === 'payments')).toHaveLength(1);
  });
});

describe('a principal of no declared tenant routed to a declared one', () => {
  // Routing stays as before (here X-Scope-OrgID, trusted), but the tenant it
  // lands in governs it: the query side hides an index outside the subset from
  // every reader, so a write there would be accepted and never seen again.
  it("is held to that tenant's index subset and shares its one bucket", async () => {
    const file = path.join(dir, 'tenants-routed.json');
    fs.writeFileSync(
      file,
      JSON.stringify({
        tenants: [
          { id: 'initech', subjects: { claims: { org_id: 'initech' } }, indexes: ['payments'] },
          { id: 'vandelay', subjects: { claims: { org_id: 'vandelay' } }, rateLimit: { requestsPerSec: 0.01, burst: 3 } },
        ],
      }),
    );
    const ing = await startIngester({
      indexes: { initech: ['payments', 'other'] },
      args: [...oidcArgs(jwks), '--trust-tenant-header', '--tenants-file', file],
    });
    const c = new Client(ing);
    try {
      const gw = (tenant: string, index?: string) => auth('gateway', {}, { 'x-scope-orgid': tenant, ...(index ? { 'x-siglake-index': index } : {}) });
      refused(await c.send('http', 'logs', 'gw-other', await gw('initech', 'other')), 403, grpc.status.PERMISSION_DENIED, /index not in tenant/);
      refused(await c.send('grpc', 'logs', 'gw-other', await gw('initech', 'other')), 403, grpc.status.PERMISSION_DENIED, /index not in tenant/);
      ok(await c.send('http', 'logs', 'gw-payments', await gw('initech', 'payments')));
      ok(await c.send('grpc', 'logs', 'gw-logs', await gw('initech')));
      expect(await ing.metric('siglake_tenant_requests_total{tenant="initech",outcome="index_not_in_tenant"}')).toBe(2);
      expect(textsUnder(path.join(ing.walDir, 'initech'))).toEqual(['gw-logs', 'gw-payments']);

      // vandelay's bucket (3) is one bucket whoever writes: two from the gateway, one from its own principal, then none.
      ok(await c.send('http', 'logs', 'v1', await gw('vandelay')));
      ok(await c.send('grpc', 'logs', 'v2', await gw('vandelay')));
      const own = await auth('vandelay-svc', { org_id: 'vandelay' });
      ok(await c.send('http', 'logs', 'v3', own));
      refused(await c.send('http', 'logs', 'v4', own), 429, grpc.status.RESOURCE_EXHAUSTED, /rate limited/);
      refused(await c.send('grpc', 'logs', 'v5', await gw('vandelay')), 429, grpc.status.RESOURCE_EXHAUSTED, /rate limited/);
      expect(textsUnder(path.join(ing.walDir, 'vandelay'))).toEqual(['v1', 'v2', 'v3']);
    } finally {
      c.close();
      expect(await ing.stop()).toBe(0);
    }
  });
});

describe("a principal's own bucket refuses before its tenant's is spent (no tenants file)", () => {
  it("three principals, a generic tenant bucket of 3: the one its own bucket refused spent none of it", async () => {
    const ing = await startIngester({
      args: [...oidcArgs(jwks), '--rate-limit-per-sec', '0.01', '--rate-limit-burst', '3', '--rate-limit-per-principal-per-sec', '0.01'],
    });
    const c = new Client(ing);
    try {
      const p = await auth('principal-p');
      ok(await c.send('http', 'logs', 'p1', p));
      refused(await c.send('grpc', 'logs', 'p2', p), 429, grpc.status.RESOURCE_EXHAUSTED, /rate limited/); // its own bucket
      ok(await c.send('grpc', 'logs', 'q1', await auth('principal-q')));
      // Had p2 spent a token of the tenant's three, this would be refused.
      ok(await c.send('http', 'logs', 'r1', await auth('principal-r')));
      refused(await c.send('http', 'logs', 's1', await auth('principal-s')), 429, grpc.status.RESOURCE_EXHAUSTED, /rate limited/); // the tenant's, now empty
      expect(textsUnder(path.join(ing.walDir, 'logs'))).toEqual(['p1', 'q1', 'r1']);
    } finally {
      c.close();
      expect(await ing.stop()).toBe(0);
    }
  });
});

describe('tenants file at start-up and reload', () => {
  it('a bad file stops start-up with exit 2 and one line naming the setting, its source, the file and the problem (an overlap names both tenants)', () => {
    const file = path.join(dir, 'overlap.yaml');
    fs.writeFileSync(file, 'tenants:\n  - id: a\n    subjects: { groups: [ops] }\n  - id: b\n    subjects: { groups: [dev, ops] }\n');
    const ingest = (wal: string, args: string[], env: Record<string, string> = {}) =>
      runCli(['ingest', '--http-listen', '127.0.0.1:0', '--grpc-listen', '127.0.0.1:0', '--wal-dir', path.join(dir, wal), ...args], { env });
    // The overlap is found once the index is built, after the file was read: it named neither the setting nor its source.
    const r = ingest('w-overlap', ['--tenants-file', file]);
    expect(r.status).toBe(2);
    expect(r.stderr).toBe(`siglake: invalid tenants.file (flag --tenants-file): ${file}: tenants "a" and "b" overlap: both select group "ops" (a principal belongs to at most one tenant)\n`);
    const byEnv = ingest('w-overlap-env', [], { SIGLAKE_TENANTS_FILE: file });
    expect(byEnv.status).toBe(2);
    expect(byEnv.stderr).toMatch(/^siglake: invalid tenants\.file \(env SIGLAKE_TENANTS_FILE\): .*overlap\.yaml: tenants "a" and "b" overlap/);
    const bad = path.join(dir, 'noselector.yaml');
    fs.writeFileSync(bad, 'tenants:\n  - id: a\n    rateLimit: { requestsPerSec: 5 }\n');
    const r2 = ingest('w-nosel', ['--tenants-file', bad]);
    expect(r2.status).toBe(2);
    expect(r2.stderr).toMatch(/^siglake: invalid tenants\.file \(flag --tenants-file\): .*noselector\.yaml: .*tenant "a" subjects: required: at least one selector.*\n$/);
    const config = path.join(dir, 'siglake-tenants.yaml');
    fs.writeFileSync(config, `tenants:\n  file: ${path.join(dir, 'absent.yaml')}\n`);
    const r3 = ingest('w-absent', ['--config', config]);
    expect(r3.status).toBe(2);
    expect(r3.stderr).toBe(`siglake: invalid tenants.file (file ${config} key tenants.file): ${path.join(dir, 'absent.yaml')}: cannot read (ENOENT)\n`);
  });

  it('reload adds a tenant that writes without a restart, removes one (then undeclared), and a bad reload keeps the old set', async () => {
    const file = path.join(dir, 'reload.yaml');
    fs.writeFileSync(file, 'tenants:\n  - id: alpha\n    subjects: { claims: { org_id: alpha } }\n');
    const ing = await startIngester({ args: [...oidcArgs(jwks), '--tenants-file', file] });
    const c = new Client(ing);
    try {
      const alpha = await auth('alpha-1', { org_id: 'alpha' });
      const beta = await auth('beta-1', { org_id: 'beta' });
      ok(await c.send('http', 'logs', 'a', alpha));
      ok(await c.send('http', 'logs', 'b-undeclared', beta));
      expect(topDirs(ing.walDir).sort()).toEqual(['alpha', 'logs']);
      // File change: beta added, alpha removed.
      fs.writeFileSync(file, 'tenants:\n  - id: beta\n    subjects: { claims: { org_id: beta } }\n');
      const changed = Date.now();
      let firstBetaMs = -1;
      while (Date.now() - changed < 10_000) {
        ok(await c.send('http', 'logs', 'b', beta));
        if (topDirs(ing.walDir).includes('beta')) {
          firstBetaMs = Date.now() - changed;
          break;
        }
        await sleep(20);
      }
      expect(firstBetaMs).toBeGreaterThanOrEqual(0);
      // The issue's "within a second" is a figure, printed here, not a timed assertion (the machine is shared).
      console.log(`[tenants-declared] a tenant added by a file change wrote after ${firstBetaMs} ms`);
      // alpha is undeclared now: routed as before declared tenants (tenant default).
      const before = fs.readdirSync(path.join(ing.walDir, 'logs')).length;
      ok(await c.send('grpc', 'logs', 'a-undeclared', alpha));
      expect(fs.readdirSync(path.join(ing.walDir, 'logs')).length).toBeGreaterThanOrEqual(before);
      expect(await ing.metric('siglake_tenant_requests_total{tenant="alpha",outcome="accepted"}')).toBeUndefined();
      // A bad reload (SIGHUP): counted, old set (beta) still in force.
      fs.writeFileSync(file, 'tenants:\n  - id: beta\n    subjects: { claims: { org_id: beta } }\n  - id: gamma\n    subjects: { claims: { org_id: beta } }\n');
      const deadline = Date.now() + 10_000;
      while (Date.now() < deadline && (await ing.metric('siglake_tenants_reload_failures_total')) !== 1) await sleep(20);
      expect(await ing.metric('siglake_tenants_reload_failures_total')).toBe(1);
      ing.child.kill('SIGHUP');
      while (Date.now() < deadline && (await ing.metric('siglake_tenants_reload_failures_total')) !== 2) await sleep(20);
      expect(await ing.metric('siglake_tenants_reload_failures_total')).toBe(2);
      expect(ing.logs.filter((l) => l.msg.includes('reload refused')).at(-1)?.['err']).toMatch(/"beta" and "gamma" overlap/);
      const accepted = (await ing.metric('siglake_tenant_requests_total{tenant="beta",outcome="accepted"}')) ?? 0;
      ok(await c.send('http', 'logs', 'b2', beta));
      expect(await ing.metric('siglake_tenant_requests_total{tenant="beta",outcome="accepted"}')).toBe(accepted + 1);
    } finally {
      c.close();
      expect(await ing.stop()).toBe(0);
    }
  });
});

describe('tenants file mounted from a Kubernetes ConfigMap', () => {
  it('is reloaded when the kubelet swaps the ..data link (the file itself is never written)', async () => {
    // The kubelet's atomic writer: <dir>/tenants.yaml -> ..data/tenants.yaml, ..data -> ..<timestamp>;
    // an update writes a new timestamped directory and renames a new ..data over the old one.
    const cm = path.join(dir, 'configmap');
    const version = (name: string, text: string): void => {
      fs.mkdirSync(path.join(cm, name), { recursive: true });
      fs.writeFileSync(path.join(cm, name, 'tenants.yaml'), text);
      fs.symlinkSync(name, path.join(cm, '..data_tmp'));
      fs.renameSync(path.join(cm, '..data_tmp'), path.join(cm, '..data'));
    };
    version('..2026_12_05_v1', 'tenants:\n  - id: alpha\n    subjects: { claims: { org_id: alpha } }\n');
    fs.symlinkSync('..data/tenants.yaml', path.join(cm, 'tenants.yaml'));
    const ing = await startIngester({ args: [...oidcArgs(jwks), '--tenants-file', path.join(cm, 'tenants.yaml')] });
    const c = new Client(ing);
    try {
      const beta = await auth('beta-cm', { org_id: 'beta' });
      ok(await c.send('http', 'logs', 'b-undeclared', beta));
      expect(topDirs(ing.walDir)).not.toContain('beta');
      version('..2026_12_05_v2', 'tenants:\n  - id: beta\n    subjects: { claims: { org_id: beta } }\n');
      await until(() => ing.logs.some((l) => l.msg === 'tenants file reloaded'), 10_000, 'the reload after the ..data swap');
      ok(await c.send('http', 'logs', 'b', beta));
      expect(topDirs(ing.walDir)).toContain('beta');
    } finally {
      c.close();
      expect(await ing.stop()).toBe(0);
    }
  });
});

describe('metrics: new names only', () => {
  /** name → sorted label names of each series (as a set of joined strings). */
  async function labelSets(ing: RunningIngester): Promise<Map<string, Set<string>>> {
    const text = await (await fetch(`${ing.url}/metrics`)).text();
    const out = new Map<string, Set<string>>();
    for (const line of text.split('\n')) {
      if (line === '' || line.startsWith('#')) continue;
      const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s/.exec(line);
      if (m === null) continue;
      const labels = (m[3] ?? '')
        .split(/,(?=[a-zA-Z_]+=")/)
        .filter(Boolean)
        .map((kv) => kv.slice(0, kv.indexOf('=')))
        .sort()
        .join(',');
      let s = out.get(m[1]!);
      if (s === undefined) out.set(m[1]!, (s = new Set()));
      s.add(labels);
    }
    return out;
  }

  it('declaring tenants adds no label to any pre-existing series, only siglake_tenant* / siglake_audit* names', async () => {
    const plain = await startIngester({ args: oidcArgs(jwks) });
    const before = await labelSets(plain);
    expect(await plain.stop()).toBe(0);
    const file = path.join(dir, 'labels.json');
    fs.writeFileSync(file, JSON.stringify(TENANTS));
    const declared = await startIngester({ args: [...oidcArgs(jwks), '--tenants-file', file, '--rate-limit-per-principal-per-sec', '5'] });
    const c = new Client(declared);
    try {
      ok(await c.send('http', 'logs', 'x', await auth('acme-l', { org_id: 'acme-prod' })));
      ok(await c.send('http', 'logs', 'y', await auth('nobody-l')));
      const plain2 = await labelSets(declared);
      let compared = 0;
      for (const [name, sets] of before) {
        const after = plain2.get(name);
        // prom-client's default nodejs_* / process_* series come and go with the runtime's state: compared when present.
        if (!name.startsWith('siglake_') && after === undefined) continue;
        expect(after, `series ${name} still exists`).toBeDefined();
        for (const s of after!) expect(sets.has(s), `${name}: label set {${s}} is new`).toBe(true);
        for (const s of sets) expect(after!.has(s), `${name}: label set {${s}} kept`).toBe(true);
        compared++;
      }
      expect(compared).toBeGreaterThan(20);
      const added = [...plain2.keys()].filter((n) => !before.has(n));
      expect(added.length).toBeGreaterThan(0);
      // (nodejs_* / process_* series of prom-client's default metrics appear lazily: not ours.)
      for (const n of added.filter((x) => x.startsWith('siglake_'))) expect(n).toMatch(/^siglake_(tenant_|tenants_|audit_)/);
      expect(added).toContain('siglake_tenant_requests_total');
    } finally {
      c.close();
      expect(await declared.stop()).toBe(0);
    }
  });
});

describe('headers survive an asynchronous admission (a JWT cache miss)', () => {
  it('concurrent requests with fresh tokens each write where their own X-Scope-OrgID says', async () => {
    // Every token is new, so each admission waits for a signature check while
    // the acceptor reads the next request's headers.
    const ing = await startIngester({ args: [...oidcArgs(jwks), '--trust-tenant-header'] });
    const c = new Client(ing);
    try {
      const n = 12;
      const tokens = await Promise.all(Array.from({ length: n }, (_, i) => token(`conc-${i}`)));
      const replies = await Promise.all(
        tokens.map((t, i) => c.send('http', 'logs', `conc-text-${i}`, { authorization: `Bearer ${t}`, 'x-scope-orgid': `conc-${i}` })),
      );
      for (const r of replies) ok(r);
      for (let i = 0; i < n; i++) expect(textsUnder(path.join(ing.walDir, `conc-${i}`))).toEqual([`conc-text-${i}`]);
    } finally {
      c.close();
      expect(await ing.stop()).toBe(0);
    }
  });
});
