// Declared tenants on `siglake query` (declared-tenants.md §2, "the query
// server resolves declared tenants the same way"), against the real process:
// a principal a tenants file declares reads and writes that tenant (over any
// tenant claim it also holds), one matching two tenants is a counted 403
// SIGLAKE_TENANT_AMBIGUOUS, one matching none takes the claim routing, and
// the query allow-list still applies afterwards. A bad file stops start-up.
// The file is reloaded as on ingest (file change and SIGHUP): a newly declared
// tenant's principal reaches its namespace; a bad reload keeps the old set,
// logs one line, is counted and audited.

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startIngester, tempDir } from '../helpers/ingester.js';
import { AUDIENCE, ISSUER, makeKeyPair, mint, writeJwksFile } from '../helpers/jwt.js';
import { jsonBytes, logsJson } from '../helpers/otlp-bodies.js';
import { icebergFlags, startQuery, type RunningQuery } from '../helpers/query.js';
import { until } from '../helpers/wait.js';

const TENANTS = {
  tenants: [
    { id: 'acme', subjects: { claims: { org_id: 'acme-prod' } } },
    // Compound: overlaps acme only for a principal holding both claims (request time).
    { id: 'hooli', subjects: { issuers: [ISSUER], claims: { env: 'prod' } } },
    { id: 'initech', subjects: { claims: { org_id: 'initech' } } },
  ],
};

describe('siglake query with --tenants-file: declared tenants first, then the claim routing', () => {
  const dataDir = tempDir('siglake-query-declared-');
  const tenantsFile = path.join(dataDir, 'tenants.json');
  let q: RunningQuery;
  let oidc: string[] = [];
  const t: Record<string, string> = {};

  const call = async (method: string, p: string, token: string, body?: unknown) => {
    const res = await fetch(`${q.url}${p}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, json: text === '' ? undefined : JSON.parse(text) };
  };
  const names = async (token: string) => ((await call('GET', '/api/v1/indexes', token)).json.indexes as { name: string }[]).map((i) => i.name).sort();

  beforeAll(async () => {
    fs.writeFileSync(tenantsFile, JSON.stringify(TENANTS));
    const key = await makeKeyPair('ES256', 'k1');
    const jwks = writeJwksFile(dataDir, [key.jwk]);
    oidc = ['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks];
    t['declaredAcme'] = await mint(key, { org_id: 'acme-prod' });
    t['declaredAcmeClaimingGlobex'] = await mint(key, { org_id: 'acme-prod', tenant: 'globex' });
    t['claimAcme'] = await mint(key, { tenant: 'acme' });
    t['claimGlobex'] = await mint(key, { tenant: 'globex' });
    t['both'] = await mint(key, { org_id: 'acme-prod', env: 'prod' });
    t['initech'] = await mint(key, { org_id: 'initech' });
    q = await startQuery(dataDir, [
      ...icebergFlags(dataDir),
      ...oidc,
      ...['--query-tenant-claim', 'tenant', '--query-allowed-tenants', 'acme,globex,hooli', '--tenants-file', tenantsFile],
    ]);
  }, 60_000);

  afterAll(async () => {
    await q?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('routes a declared principal to its tenant (over its tenant claim), an undeclared one by its claim, refuses an ambiguous one (403, counted) and an unlisted declared one', async () => {
    const m0 = await q.metrics();
    expect(m0.get('siglake_tenant_ambiguous_total')).toBe(0);

    // Declared acme: the index lands in acme's namespace, as a tenant-claim caller of acme sees.
    expect((await call('PUT', '/api/v1/indexes/payments', t['declaredAcme']!, { retentionDays: 3 })).status).toBe(201);
    // Declared acme that also claims globex: still acme (declared first).
    expect((await call('PUT', '/api/v1/indexes/audit', t['declaredAcmeClaimingGlobex']!, {})).status).toBe(201);
    expect(await names(t['claimAcme']!)).toEqual(['audit', 'payments']);
    // Undeclared principal: the claim routing, unchanged.
    expect((await call('PUT', '/api/v1/indexes/orders', t['claimGlobex']!, {})).status).toBe(201);
    expect(await names(t['claimGlobex']!)).toEqual(['orders']);
    expect(await names(t['declaredAcme']!)).toEqual(['audit', 'payments']);

    // The SQL endpoint takes the same route.
    const sql = await fetch(`${q.url}/api/v1/tables`, { headers: { authorization: `Bearer ${t['declaredAcme']}` } });
    expect(((await sql.json()) as { tables: { name: string }[] }).tables.map((x) => x.name).sort()).toEqual(['audit', 'payments']);

    const amb = await call('GET', '/api/v1/indexes', t['both']!);
    expect(amb.status).toBe(403);
    expect(amb.json.error.code).toBe('SIGLAKE_TENANT_AMBIGUOUS');
    const ambSql = await fetch(`${q.url}/api/v1/sql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t['both']}`, 'content-type': 'application/json' },
      body: JSON.stringify({ sql: 'SELECT 1' }),
    });
    expect(ambSql.status).toBe(403);
    expect(((await ambSql.json()) as { error: { code: string } }).error.code).toBe('SIGLAKE_TENANT_AMBIGUOUS');

    // Declared, but outside query.allowedTenants: the allow-list still applies.
    const unlisted = await call('GET', '/api/v1/indexes', t['initech']!);
    expect(unlisted.status).toBe(403);
    expect(unlisted.json.error.message).toContain('(unlisted)');

    const m1 = await q.metrics();
    expect(m1.get('siglake_tenant_ambiguous_total')).toBe(2);
    expect(m1.get('siglake_query_tenant_denied_total{reason="unlisted"}')).toBe(1);
  });

  it('a tenants file that does not load stops start-up with exit 2 and one line naming the setting, its source and the file', async () => {
    const bad = path.join(dataDir, 'bad.yaml');
    fs.writeFileSync(bad, 'tenants:\n  - id: a\n    subjects: { groups: [ops] }\n  - id: b\n    subjects: { groups: [dev, ops] }\n');
    const query = (args: string[], env: Record<string, string> = {}) =>
      runCli(['query', '--query-listen', '127.0.0.1:0', ...icebergFlags(dataDir), ...oidc, '--query-tenant-claim', 'tenant', ...args], { env });
    const r = query(['--tenants-file', bad]);
    expect(r.status).toBe(2);
    expect(r.stderr).toBe(`siglake: invalid tenants.file (flag --tenants-file): ${bad}: tenants "a" and "b" overlap: both select group "ops" (a principal belongs to at most one tenant)\n`);
    const absent = path.join(dataDir, 'absent.yaml');
    const r2 = query([], { SIGLAKE_TENANTS_FILE: absent });
    expect(r2.status).toBe(2);
    expect(r2.stderr).toBe(`siglake: invalid tenants.file (env SIGLAKE_TENANTS_FILE): ${absent}: cannot read (ENOENT)\n`);
  });
});

describe('siglake query reloads --tenants-file on change and on SIGHUP, as ingest does', () => {
  const dataDir = tempDir('siglake-query-reload-');
  // The server watches the directory of tenants.json, a symbolic link: replacing
  // the link is a file change it sees; editing its target (in real/) is not,
  // so only a SIGHUP applies that.
  const tenantsFile = path.join(dataDir, 'tenants.json');
  const realDir = path.join(dataDir, 'real');
  const auditFile = path.join(dataDir, 'audit.jsonl');
  let q: RunningQuery;
  const t: Record<string, string> = {};
  const decl = (id: string, orgId: string) => ({ id, subjects: { claims: { org_id: orgId } } });

  /** Points tenants.json at a new file with `content`, renamed into place as an editor does. */
  const replaceLink = (name: string, content: string) => {
    const target = path.join(realDir, name);
    fs.writeFileSync(target, content);
    const tmp = path.join(dataDir, `.tenants.json.${name}`);
    fs.symlinkSync(target, tmp);
    fs.renameSync(tmp, tenantsFile);
  };
  const call = async (method: string, p: string, token: string) => {
    const res = await fetch(`${q.url}${p}`, { method, headers: { authorization: `Bearer ${token}`, ...(method === 'PUT' ? { 'content-type': 'application/json' } : {}) }, ...(method === 'PUT' ? { body: '{}' } : {}) });
    const text = await res.text();
    return { status: res.status, json: text === '' ? undefined : JSON.parse(text) };
  };
  const indexes = async (token: string) => ((await call('GET', '/api/v1/indexes', token)).json.indexes as { name: string }[]).map((i) => i.name).sort();
  const metric = async (name: string) => (await q.metrics()).get(name);
  const audit = () => (fs.existsSync(auditFile) ? fs.readFileSync(auditFile, 'utf8').trim().split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>) : []);
  const refusedLines = () => q.logs.filter((l) => l.msg === 'tenants file reload refused: the previous set stays in force');

  beforeAll(async () => {
    fs.mkdirSync(realDir, { recursive: true });
    replaceLink('t1.json', JSON.stringify({ tenants: [decl('acme', 'acme-prod')] }));
    const key = await makeKeyPair('ES256', 'k1');
    const jwks = writeJwksFile(dataDir, [key.jwk]);
    // umbrella's principal also claims globex: until umbrella is declared, the claim routes it there.
    t['umbrella'] = await mint(key, { org_id: 'umbrella', tenant: 'globex' });
    t['initech'] = await mint(key, { org_id: 'initech', tenant: 'globex' });
    for (const id of ['acme', 'globex', 'umbrella', 'initech']) t[`claim-${id}`] = await mint(key, { tenant: id });
    q = await startQuery(dataDir, [
      ...icebergFlags(dataDir),
      ...['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks],
      ...['--query-tenant-claim', 'tenant', '--tenants-file', tenantsFile, '--audit-file', auditFile],
    ]);
  }, 60_000);

  afterAll(async () => {
    await q?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('a file change declaring a new tenant routes its principal to that namespace from the next request on', async () => {
    expect(await metric('siglake_tenants_declared')).toBe(1);
    expect(await metric('siglake_tenants_reload_failures_total')).toBe(0);
    // Not declared yet: the tenant claim routes umbrella's principal to globex.
    expect((await call('PUT', '/api/v1/indexes/before_reload', t['umbrella']!)).status).toBe(201);
    expect(await indexes(t['claim-globex']!)).toEqual(['before_reload']);

    replaceLink('t2.json', JSON.stringify({ tenants: [decl('acme', 'acme-prod'), decl('umbrella', 'umbrella')] }));
    await until(async () => (await metric('siglake_tenants_declared')) === 2, 20_000, 'the changed tenants file to be in force');

    // The same token now reaches umbrella's own namespace, and nothing of globex's.
    expect(await indexes(t['umbrella']!)).toEqual([]);
    expect((await call('PUT', '/api/v1/indexes/after_reload', t['umbrella']!)).status).toBe(201);
    expect(await indexes(t['claim-umbrella']!)).toEqual(['after_reload']);
    expect(await indexes(t['claim-globex']!)).toEqual(['before_reload']);
    const tables = await fetch(`${q.url}/api/v1/tables`, { headers: { authorization: `Bearer ${t['umbrella']}` } });
    expect(((await tables.json()) as { tables: { name: string }[] }).tables.map((x) => x.name)).toEqual(['after_reload']);
    await until(() => audit().some((e) => e['event'] === 'tenants_reload'), 10_000, 'the reload audit event');
    const ev = audit().find((e) => e['event'] === 'tenants_reload')!;
    expect(ev).toMatchObject({ reason: 'file change', tenants: 2, added: ['umbrella'], removed: [] });
  });

  it('a bad file change keeps the previous set: one log line, counted, audited', async () => {
    // Two tenants selecting the same claim value: the file does not load.
    replaceLink('bad.json', JSON.stringify({ tenants: [decl('acme', 'acme-prod'), decl('umbrella', 'umbrella'), decl('hooli', 'umbrella')] }));
    await until(async () => (await metric('siglake_tenants_reload_failures_total')) === 1, 20_000, 'the bad reload to be counted');
    // The counter is read over HTTP, the log line through the child's stdout pipe: wait for both.
    await until(() => refusedLines().length >= 1, 10_000, 'the refusal log line');
    expect(refusedLines()).toHaveLength(1);
    expect(refusedLines()[0]!['cause']).toBe('file change');
    expect(await metric('siglake_tenants_declared')).toBe(2);
    // Still umbrella's namespace.
    expect(await indexes(t['umbrella']!)).toEqual(['after_reload']);
    await until(() => audit().some((e) => e['event'] === 'tenants_reload_failed'), 10_000, 'the failed reload audit event');
    expect(String(audit().find((e) => e['event'] === 'tenants_reload_failed')!['reason'])).toContain(tenantsFile);
  });

  it('SIGHUP reloads a change the watch cannot see; a bad one is refused the same way', async () => {
    // Edit the link's target in place (another directory: no change event), then SIGHUP.
    fs.writeFileSync(path.join(realDir, 'bad.json'), JSON.stringify({ tenants: [decl('acme', 'acme-prod'), decl('umbrella', 'umbrella'), decl('initech', 'initech')] }));
    q.child.kill('SIGHUP');
    await until(async () => (await metric('siglake_tenants_declared')) === 3, 20_000, 'the SIGHUP reload to be in force');
    expect((await call('PUT', '/api/v1/indexes/via_sighup', t['initech']!)).status).toBe(201);
    expect(await indexes(t['claim-initech']!)).toEqual(['via_sighup']);
    expect(await indexes(t['claim-globex']!)).toEqual(['before_reload']);

    fs.writeFileSync(path.join(realDir, 'bad.json'), 'tenants: [ {');
    q.child.kill('SIGHUP');
    await until(async () => (await metric('siglake_tenants_reload_failures_total')) === 2, 20_000, 'the bad SIGHUP reload to be counted');
    await until(() => refusedLines().length >= 2, 10_000, 'the refusal log line');
    expect(refusedLines()).toHaveLength(2);
    expect(refusedLines()[1]!['cause']).toBe('SIGHUP');
    expect(await metric('siglake_tenants_declared')).toBe(3);
    expect(await indexes(t['initech']!)).toEqual(['via_sighup']);
    expect(q.exitCode).toBeNull();
  });
});

describe("a declared tenant's index subset on siglake query (declared-tenants.md §3)", () => {
  const dataDir = tempDir('siglake-query-subset-');
  const tenantsFile = path.join(dataDir, 'tenants.json');
  let q: RunningQuery;
  let acme = '';

  const call = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`${q.url}${p}`, {
      method,
      headers: { authorization: `Bearer ${acme}`, ...(body !== undefined ? { 'content-type': typeof body === 'string' ? 'text/plain' : 'application/json' } : {}) },
      ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, json: text === '' ? undefined : (JSON.parse(text) as Record<string, unknown>) };
  };
  const declare = async (decl: Record<string, unknown>, declared: string) => {
    fs.writeFileSync(tenantsFile, JSON.stringify({ tenants: [{ id: 'acme', subjects: { claims: { org_id: 'acme-prod' } }, ...decl }] }));
    q.child.kill('SIGHUP');
    await until(() => q.logs.filter((l) => l.msg === 'tenants file reloaded').length >= Number(declared), 20_000, 'the reload');
  };

  beforeAll(async () => {
    fs.writeFileSync(tenantsFile, JSON.stringify({ tenants: [{ id: 'acme', subjects: { claims: { org_id: 'acme-prod' } } }] }));
    // Two of acme's indexes, each holding rows, landed by the real ingester and compactor.
    const ing = await startIngester({ dataDir, args: ['--trust-tenant-header', '--compactor=false', ...icebergFlags(dataDir)], indexes: { acme: ['payments', 'audit'] } });
    try {
      for (const index of ['payments', 'audit']) {
        const r = await fetch(`${ing.url}/v1/logs`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-scope-orgid': 'acme', 'x-siglake-index': index },
          body: jsonBytes(logsJson([`${index}-row-0`, `${index}-row-1`], 'svc-acme')),
        });
        expect(r.status, await r.text()).toBe(200);
      }
    } finally {
      expect(await ing.stop()).toBe(0);
    }
    const c = runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', path.join(dataDir, 'wal'), ...icebergFlags(dataDir)]);
    expect(c.status, c.stderr).toBe(0);
    const key = await makeKeyPair('ES256', 'k1');
    const jwks = writeJwksFile(dataDir, [key.jwk]);
    acme = await mint(key, { org_id: 'acme-prod' });
    q = await startQuery(dataDir, [...icebergFlags(dataDir), '--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks, '--tenants-file', tenantsFile]);
  }, 120_000);

  afterAll(async () => {
    await q?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('an index outside the subset is as one that does not exist, in SQL, both listings and the index API; the subset follows a reload', async () => {
    const sql = async (text: string) => call('POST', '/api/v1/sql', text);
    const tables = async () => ((await call('GET', '/api/v1/tables')).json!['tables'] as { name: string }[]).map((t) => t.name).sort();
    const listed = async () => ((await call('GET', '/api/v1/indexes')).json!['indexes'] as { name: string }[]).map((i) => i.name).sort();
    // No subset: both indexes.
    const first = await sql('SELECT body FROM audit ORDER BY body');
    expect(first.status, JSON.stringify(first.json)).toBe(200);
    expect((await sql('SELECT body FROM audit ORDER BY body')).json!['rows']).toEqual([['audit-row-0'], ['audit-row-1']]);
    expect(await listed()).toEqual(['audit', 'payments']);

    await declare({ indexes: ['payments'] }, '1');
    const none = await sql('SELECT body FROM nosuch');
    const hidden = await sql('SELECT body FROM audit');
    expect(hidden.status).toBe(400);
    // The engine's own refusal of an unknown table (its "did you mean" suggestion aside).
    const firstLine = (r: { json?: Record<string, unknown> }) => (r.json!['error'] as { message: string }).message.split('\n')[0];
    expect(firstLine(hidden)).toBe(firstLine(none)!.replace('nosuch', 'audit'));
    expect(firstLine(hidden)).toBe('Catalog Error: Table with name audit does not exist!');
    expect((await sql('SELECT body FROM payments ORDER BY body')).json!['rows']).toEqual([['payments-row-0'], ['payments-row-1']]);
    expect(await listed()).toEqual(['payments']);
    expect(await tables()).toEqual(['payments']);
    const getHidden = await call('GET', '/api/v1/indexes/audit');
    const getNone = await call('GET', '/api/v1/indexes/nosuch');
    expect(getHidden.status).toBe(404);
    expect(getHidden.json).toEqual({ error: { code: 'SIGLAKE_UNKNOWN_INDEX', message: (getNone.json!['error'] as { message: string }).message.replace('nosuch', 'audit') } });
    expect((await call('DELETE', '/api/v1/indexes/audit')).status).toBe(404);
    const put = await call('PUT', '/api/v1/indexes/refunds', {});
    expect(put).toEqual({ status: 403, json: { error: { code: 'SIGLAKE_INDEX_NOT_IN_TENANT', message: "index refunds is not among this tenant's declared indexes" } } });
    expect((await call('GET', '/api/v1/indexes/refunds')).status).toBe(404);

    // The subset removed: audit is back, untouched.
    await declare({}, '2');
    expect(await listed()).toEqual(['audit', 'payments']);
    expect((await sql('SELECT body FROM audit ORDER BY body')).json!['rows']).toEqual([['audit-row-0'], ['audit-row-1']]);
  });
});
