// The budget refusal comes after the body (ingest-contract.md §4: step 11
// body, then step 12 budgets), against the real `siglake ingest` process,
// over OTLP/HTTP and OTLP/gRPC:
//
//   - exhausted budget + a bad body: the decode refusal (400 SIGLAKE_BAD_BODY),
//     not the 429
//   - exhausted budget + a good body: 429 SIGLAKE_BUDGET_EXHAUSTED with
//     Retry-After to the end of the UTC day (gRPC: RESOURCE_EXHAUSTED,
//     retry-after metadata and a google.rpc.RetryInfo), nothing stored (the
//     WAL bytes on disk do not change), nothing charged
//   - the counters: outcome budget_exhausted for the 429s, refused for the
//     400s, the 429 and 400 statuses of siglake_ingest_requests_total, the
//     audit event with tenant, subject and scope
//   - a refused request of a novel tenant leaves no lane, no tenant slot and
//     no WAL directory behind, whichever of the two refusals it got

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep } from '../helpers/wait.js';
import { clearOfUtcPeriodEnd, UTC_PERIOD_WAIT_MAX_MS } from '../helpers/utc-period.js';
import { startIngester, tempDir, type RunningIngester } from '../helpers/ingester.js';
import { AUDIENCE, ISSUER, makeKeyPair, mint, writeJwksFile, type KeyPair } from '../helpers/jwt.js';
import { grpc } from '../helpers/grpc-client.js';
import { logsProto, pseudoRandomBytes } from '../helpers/otlp-bodies.js';
import { RETRY_INFO_URL } from '../helpers/rpc-status.js';
import { Client, expectCode, textsUnder, topDirs, walBytes, type Reply, type Transport } from '../helpers/tenancy-client.js';

const TRANSPORTS: Transport[] = ['http', 'grpc'];

/** Seconds from now to the next UTC midnight. */
function secondsToUtcMidnight(): number {
  const now = new Date();
  return (Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1) - now.getTime()) / 1000;
}

function badBody(r: Reply): void {
  if (r.transport === 'http') expect(r.status, r.message).toBe(400);
  else expect(r.code, r.message).toBe(grpc.status.INVALID_ARGUMENT);
  expectCode(r, 'SIGLAKE_BAD_BODY');
}

function budgetRefused(r: Reply, scope: string): void {
  if (r.transport === 'http') expect(r.status, r.message).toBe(429);
  else expect(r.code, r.message).toBe(grpc.status.RESOURCE_EXHAUSTED);
  expectCode(r, 'SIGLAKE_BUDGET_EXHAUSTED');
  expect(r.message).toMatch(new RegExp(`budget exhausted: the ${scope} budget`));
  expect(Math.abs(Number(r.retryAfter) - secondsToUtcMidnight())).toBeLessThan(30);
}

describe('budgets refuse after the body (declared tenant)', () => {
  let key: KeyPair;
  let dir: string;
  let ing: RunningIngester;
  let c: Client;
  let auditFile: string;
  beforeAll(async () => {
    // A day budget spent, then refused to the end of the UTC day: never across 00:00 UTC.
    await clearOfUtcPeriodEnd('day');
    key = await makeKeyPair('ES256', 'k-budget-order');
    dir = tempDir('siglake-budget-order-');
    const jwks = writeJwksFile(dir, [key.jwk]);
    const file = path.join(dir, 'tenants.json');
    fs.writeFileSync(file, JSON.stringify({ tenants: [{ id: 'initech', subjects: { claims: { org_id: 'initech' } }, budget: { period: 'day', records: 1 } }] }));
    auditFile = path.join(dir, 'audit.jsonl');
    ing = await startIngester({
      args: ['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks, '--tenants-file', file, '--audit-file', auditFile],
    });
    c = new Client(ing);
  }, UTC_PERIOD_WAIT_MAX_MS + 60_000);
  afterAll(async () => {
    c?.close();
    if (ing) expect(await ing.stop()).toBe(0);
  });

  it('a bad body gets its 400 and a good one the 429 with Retry-After; nothing stored, nothing charged', async () => {
    const auth = async (sub: string) => ({ authorization: `Bearer ${await mint(key, { org_id: 'initech' }, { sub })}` });
    const m0 = await ing.metrics();
    const status = (m: Map<string, number>, s: number) =>
      (m.get(`siglake_ingest_requests_total{endpoint="otlp",status="${s}"}`) ?? 0);
    // Before the budget is spent, a bad body is the 400 it always was.
    badBody(await c.send('http', 'logs', '', await auth('svc-0'), pseudoRandomBytes(300)));
    const first = await c.send('http', 'logs', 'first', await auth('svc-1'));
    expect(first.status, first.message).toBe(200);
    expect(await ing.metric('siglake_tenant_budget_remaining{tenant="initech",unit="records"}')).toBe(0);
    const tenantDir = path.join(ing.walDir, 'initech');
    const bytes = walBytes(tenantDir);
    expect(bytes).toBeGreaterThan(0);

    for (const t of TRANSPORTS) {
      // Exhausted budget, bad body: the decode refusal (step 11 comes before step 12).
      badBody(await c.send(t, 'logs', '', await auth(`svc-bad-${t}`), pseudoRandomBytes(512, 7)));
      badBody(await c.send(t, 'logs', '', await auth(`svc-wire-${t}`), Uint8Array.from([0x0a, 0x05, 0x01])));
      // Exhausted budget, good body: 429 to the end of the UTC day.
      const r = await c.send(t, 'logs', `refused-${t}`, await auth(`svc-good-${t}`));
      budgetRefused(r, 'tenant');
    }
    // gRPC: RESOURCE_EXHAUSTED carries a RetryInfo as today's budget refusal does.
    const raw = await c.rpc.export('logs', logsProto(['refused-raw']), await auth('svc-raw'));
    expect(raw.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    const { grpcStatusOf } = await import('../helpers/rpc-status.js');
    const st = grpcStatusOf(raw.metadata)!;
    expect(st.detailTypes).toContain(RETRY_INFO_URL);
    expect(Math.abs(st.retrySecs! - secondsToUtcMidnight())).toBeLessThan(30);

    // Nothing stored: the tenant's WAL is byte for byte what the one 200 wrote.
    expect(walBytes(tenantDir)).toBe(bytes);
    expect(textsUnder(tenantDir)).toEqual(['first']);
    const m1 = await ing.metrics();
    expect(m1.get('siglake_tenant_records_total{tenant="initech"}')).toBe(1);
    expect(m1.get('siglake_tenant_requests_total{tenant="initech",outcome="accepted"}')).toBe(1);
    expect(m1.get('siglake_tenant_requests_total{tenant="initech",outcome="budget_exhausted"}')).toBe(3);
    expect(m1.get('siglake_tenant_requests_total{tenant="initech",outcome="refused"}')).toBe(5);
    expect(m1.get('siglake_tenant_budget_remaining{tenant="initech",unit="records"}')).toBe(0);
    expect(status(m1, 429) - status(m0, 429)).toBe(3);
    expect(status(m1, 400) - status(m0, 400)).toBe(5);
    expect(status(m1, 200) - status(m0, 200)).toBe(1);

    // The audit stream names the scope and the subject of each budget refusal.
    let lines: Record<string, unknown>[] = [];
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      const text = fs.existsSync(auditFile) ? fs.readFileSync(auditFile, 'utf8') : '';
      lines = text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
      if (lines.filter((l) => l['reason'] === 'budget_exhausted_tenant').length >= 3) break;
      await sleep(50);
    }
    const budgetLines = lines.filter((l) => l['reason'] === 'budget_exhausted_tenant');
    expect(budgetLines.map((l) => l['subject']).sort()).toEqual(['svc-good-grpc', 'svc-good-http', 'svc-raw']);
    for (const l of budgetLines) expect(l).toMatchObject({ event: 'refusal', tenant: 'initech' });
    // The bad bodies are audited as the worker's refusals, never as budget refusals.
    expect(lines.filter((l) => l['reason'] === 'SIGLAKE_BAD_BODY' && l['tenant'] === 'initech')).toHaveLength(5);
  });
});

describe('budgets refuse after the body (server budget, a novel tenant)', () => {
  let ing: RunningIngester;
  let c: Client;
  beforeAll(async () => {
    // The server budget's period is a day (the default): spent, then refused, never across 00:00 UTC.
    await clearOfUtcPeriodEnd('day');
    // Trusted-header routing, no declared tenant: the server budget governs every tenant.
    ing = await startIngester({ args: ['--trust-tenant-header', '--server-budget-records', '1'] });
    c = new Client(ing);
  }, UTC_PERIOD_WAIT_MAX_MS + 60_000);
  afterAll(async () => {
    c?.close();
    if (ing) expect(await ing.stop()).toBe(0);
  });

  it('either refusal leaves no lane, no tenant slot and no directory behind', async () => {
    const r = await c.send('http', 'logs', 'spent', { 'x-scope-orgid': 'spender' });
    expect(r.status, r.message).toBe(200);
    const m0 = await ing.metrics();
    const before = walBytes(ing.walDir);
    for (const t of TRANSPORTS) {
      badBody(await c.send(t, 'logs', '', { 'x-scope-orgid': `novel-bad-${t}` }, pseudoRandomBytes(256, 3)));
      budgetRefused(await c.send(t, 'logs', `novel-${t}`, { 'x-scope-orgid': `novel-good-${t}` }), 'server');
      // A lane of the tenant that wrote, refused by the budget: its lane stays (it wrote), nothing is added to it.
      budgetRefused(await c.send(t, 'traces', `spender-${t}`, { 'x-scope-orgid': 'spender' }), 'server');
    }
    const m1 = await ing.metrics();
    expect(m1.get('siglake_ingest_tenants_admitted')).toBe(m0.get('siglake_ingest_tenants_admitted'));
    expect(m1.get('siglake_ingest_lanes')).toBe(m0.get('siglake_ingest_lanes'));
    expect(topDirs(ing.walDir)).toEqual(['spender']);
    expect(walBytes(ing.walDir)).toBe(before);
    expect(textsUnder(path.join(ing.walDir, 'spender'))).toEqual(['spent']);
  });

  it('an empty export request against the spent budget is a 200 (contract §6), charging and writing nothing', async () => {
    const r = await c.send('http', 'logs', 'spent-again', { 'x-scope-orgid': 'spender' });
    if (r.status !== 429) expect(r.status, r.message).toBe(200); // the budget is spent either way
    const m0 = await ing.metrics();
    const before = walBytes(ing.walDir);
    const empties: [Uint8Array, string][] = [
      [new Uint8Array(0), 'application/x-protobuf'],
      [Buffer.from('{}'), 'application/json'],
      [Buffer.from('{"resourceLogs":[]}'), 'application/json'],
    ];
    for (const t of TRANSPORTS) {
      for (const [body, type] of t === 'grpc' ? empties.slice(0, 1) : empties) {
        const e = await c.send(t, 'logs', '', { 'x-scope-orgid': 'spender' }, body, type);
        if (t === 'http') expect(e.status, `${type} ${body.length} B: ${e.message}`).toBe(200);
        else expect(e.code, `${body.length} B: ${e.message}`).toBe(grpc.status.OK);
      }
      // A body with a record is still refused.
      budgetRefused(await c.send(t, 'logs', `after-empty-${t}`, { 'x-scope-orgid': 'spender' }), 'server');
    }
    const m1 = await ing.metrics();
    expect(m1.get('siglake_tenant_records_total{tenant="spender"}')).toBe(m0.get('siglake_tenant_records_total{tenant="spender"}'));
    expect(walBytes(ing.walDir)).toBe(before);
  });
});
