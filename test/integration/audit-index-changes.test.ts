// Every index change is in the audit stream (declared-tenants.md §4): the
// query server's index API (PUT that creates or updates, DELETE) and
// `siglake index create|update|delete` each append one `index_change` event
// with the tenant, the index, the action, what made it (`reason`) and, for
// the API, the caller's verified subject and peer; reads and refused changes
// append nothing. Before, neither wrote anything, and the query server opened
// its audit file only with a tenants file. Real processes, real requests.

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditEvents, type AuditEvent } from '../helpers/audit-events.js';
import { runCli, tempDir } from '../helpers/ingester.js';
import { AUDIENCE, ISSUER, makeKeyPair, mint, writeJwksFile } from '../helpers/jwt.js';
import { icebergFlags, startQuery, type RunningQuery } from '../helpers/query.js';
import { sleep, until } from '../helpers/wait.js';

type Event = AuditEvent;
const events = auditEvents;

const definition = { retentionDays: 7, mapping: [{ column: 'http_status', from: 'attributes.http.response.status_code', type: 'long' }] };

describe('index changes through the query server are audited (no tenants file)', () => {
  const dir = tempDir('siglake-audit-index-api-');
  const file = path.join(dir, 'audit.jsonl');
  let q: RunningQuery;
  let alice = '';
  let bob = '';

  beforeAll(async () => {
    const key = await makeKeyPair('ES256', 'k-idx');
    const jwks = writeJwksFile(dir, [key.jwk]);
    alice = await mint(key, { tenant: 'acme' }, { sub: 'alice' });
    bob = await mint(key, { tenant: 'globex' }, { sub: 'bob' });
    q = await startQuery(dir, [
      ...icebergFlags(dir),
      ...['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks, '--query-tenant-claim', 'tenant', '--audit-file', file],
    ]);
  }, 60_000);

  afterAll(async () => {
    expect(await q?.stop()).toBe(0);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const call = async (method: string, name: string, token: string, body?: unknown): Promise<number> => {
    const res = await fetch(`${q.url}/api/v1/indexes/${name}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    });
    await res.arrayBuffer();
    return res.status;
  };

  it('created, updated, deleted: one event each, with tenant, subject and peer; reads and refusals none', async () => {
    expect(await call('PUT', 'payments', alice, definition)).toBe(201);
    expect(await call('GET', 'payments', alice)).toBe(200);
    expect(await call('PUT', 'payments', alice, { ...definition, retentionDays: 30 })).toBe(200);
    expect(await call('PUT', 'payments', alice, '{"retentionDays": "soon"}')).toBe(400); // refused: nothing changed
    expect(await call('DELETE', 'payments', bob)).toBe(404); // globex has no such index
    expect(await call('PUT', 'audit', bob, definition)).toBe(201);
    expect(await call('DELETE', 'payments', alice)).toBe(204);
    expect(await call('DELETE', 'payments', alice)).toBe(404);
    await until(() => events(file).length >= 4, 10_000, 'four index changes');
    await sleep(200); // nothing more comes
    const ev = events(file);
    expect(ev.map((e) => [e['event'], e['tenant'], e['index'], e['action'], e['subject'], e['reason']])).toEqual([
      ['index_change', 'acme', 'payments', 'created', 'alice', 'index_api'],
      ['index_change', 'acme', 'payments', 'updated', 'alice', 'index_api'],
      ['index_change', 'globex', 'audit', 'created', 'bob', 'index_api'],
      ['index_change', 'acme', 'payments', 'deleted', 'alice', 'index_api'],
    ]);
    for (const e of ev) {
      expect(e['remote']).toMatch(/127\.0\.0\.1/);
      expect(typeof e['time']).toBe('string');
    }
    expect(fs.readFileSync(file, 'utf8')).not.toContain(alice);
  });

  it('regression (index-put-not-idempotent): a PUT equal to the definition in force is a 200 that commits nothing and writes no event', async () => {
    // Each identical PUT wrote a metadata file and an `updated` event (a reconciler re-applying its
    // indexes grew the table's metadata and rebuilt the tenant's query context every time).
    const before = events(file).length;
    const orders = { retentionDays: 3, mapping: [{ column: 'order_id', from: 'attributes.order.id', type: 'string' }] };
    expect(await call('PUT', 'orders', alice, orders)).toBe(201);
    const metadataDir = path.join(dir, 'warehouse', 'tenant_acme', 'orders', 'metadata');
    const files = fs.readdirSync(metadataDir).sort();
    expect(await call('PUT', 'orders', alice, orders)).toBe(200);
    expect(await call('PUT', 'orders', alice, orders)).toBe(200);
    expect(fs.readdirSync(metadataDir).sort()).toEqual(files);
    expect(await call('PUT', 'orders', alice, { ...orders, retentionDays: 4 })).toBe(200); // a change commits
    expect(fs.readdirSync(metadataDir).length).toBe(files.length + 1);
    await until(() => events(file).length >= before + 2, 10_000, 'two index changes');
    await sleep(200);
    expect(events(file).slice(before).map((e) => [e['index'], e['action']])).toEqual([
      ['orders', 'created'],
      ['orders', 'updated'],
    ]);
  });
});

describe('the query server audits the callers it turns away, and a reload that changes an index subset', () => {
  const dir = tempDir('siglake-audit-query-refusals-');
  const file = path.join(dir, 'audit.jsonl');
  const tenantsFile = path.join(dir, 'tenants.json');
  const declare = (acmeIndexes: string[]) =>
    fs.writeFileSync(
      tenantsFile,
      JSON.stringify({
        tenants: [
          { id: 'acme', subjects: { claims: { org_id: 'acme-prod' } }, indexes: acmeIndexes },
          { id: 'globex', subjects: { claims: { org_id: 'globex' } } },
        ],
      }),
    );
  let q: RunningQuery;
  let alice = '';
  let mallory = '';

  beforeAll(async () => {
    const key = await makeKeyPair('ES256', 'k-refusals');
    const jwks = writeJwksFile(dir, [key.jwk]);
    alice = await mint(key, { org_id: 'acme-prod' }, { sub: 'alice' });
    mallory = await mint(key, { tenant: 'initech' }, { sub: 'mallory' });
    declare(['payments']);
    q = await startQuery(dir, [
      ...icebergFlags(dir),
      ...['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks, '--query-tenant-claim', 'tenant'],
      ...['--query-allowed-tenants', 'acme,globex', '--tenants-file', tenantsFile, '--audit-file', file],
    ]);
  }, 60_000);

  afterAll(async () => {
    expect(await q?.stop()).toBe(0);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const sql = async (statement: string, token: string | undefined): Promise<{ status: number; code: string | undefined }> => {
    const res = await fetch(`${q.url}/api/v1/sql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify({ sql: statement }),
    });
    const body = (await res.json()) as { error?: { code: string } };
    return { status: res.status, code: body.error?.code };
  };

  it('one refusal event each for 401, 403 and a refused statement, with subject, tenant and peer; a query that fails none', async () => {
    expect(await sql('SELECT 1', undefined)).toEqual({ status: 401, code: 'SIGLAKE_UNAUTHENTICATED' });
    expect(await sql('SELECT 1', mallory)).toEqual({ status: 403, code: 'SIGLAKE_TENANT_DENIED' });
    expect(await sql("ATTACH '/tmp/globex-lake.db' AS other", alice)).toEqual({ status: 400, code: 'SIGLAKE_SQL_REFUSED' });
    expect(await sql('SELEC 1', alice)).toEqual({ status: 400, code: 'SIGLAKE_BAD_SQL' }); // a failed query: not audited
    expect((await sql('SELECT 1 AS one', alice)).status).toBe(200);
    await until(() => events(file).length >= 3, 10_000, 'three refusal events');
    await sleep(200); // nothing more comes
    const ev = events(file);
    expect(ev.map((e) => [e['event'], e['tenant'], e['subject'], e['reason']])).toEqual([
      ['refusal', null, null, 'SIGLAKE_UNAUTHENTICATED'],
      ['refusal', null, 'mallory', 'unlisted'],
      ['refusal', 'acme', 'alice', 'SIGLAKE_SQL_REFUSED'],
    ]);
    for (const e of ev) expect(e['remote']).toMatch(/127\.0\.0\.1/);
    const text = fs.readFileSync(file, 'utf8');
    expect(text).not.toContain(alice);
    expect(text).not.toContain('globex-lake'); // never a tenant's SQL
  });

  it('a reload that changes a declared tenant\'s index subset writes index_change (reason tenants_reload) before its tenants_reload', async () => {
    const before = events(file).length;
    declare(['payments', 'orders']);
    await until(() => events(file).some((e) => e['event'] === 'tenants_reload'), 10_000, 'the reload event');
    const ev = events(file).slice(before);
    expect(ev.map((e) => [e['event'], e['tenant'], e['reason'], e['from'], e['to']])).toEqual([
      ['index_change', 'acme', 'tenants_reload', 'payments', 'orders,payments'],
      ['tenants_reload', null, 'file change', undefined, undefined],
    ]);
  });
});

describe('siglake index create|update|delete are audited', () => {
  it('one event per change, with reason index_command and no subject or peer; list, show and a refused delete none', () => {
    const dir = tempDir('siglake-audit-index-cli-');
    const file = path.join(dir, 'audit.jsonl');
    const def = path.join(dir, 'payments.yaml');
    const flags = [...icebergFlags(dir), '--audit-file', file];
    const index = (...args: string[]) => runCli(['index', ...args, '--tenant', 'acme', ...flags]);
    fs.writeFileSync(def, 'name: payments\nretentionDays: 7\nmapping:\n  - { column: http_status, from: attributes.status, type: long }\n');
    let r = index('create', '--file', def);
    expect(r.status, r.stderr).toBe(0);
    fs.writeFileSync(def, 'name: payments\nretentionDays: 30\nmapping:\n  - { column: http_status, from: attributes.status, type: long }\n');
    r = index('update', '--file', def);
    expect(r.status, r.stderr).toBe(0);
    expect(index('list').status).toBe(0);
    expect(index('show', 'payments').status).toBe(0);
    r = index('delete', 'payments');
    expect(r.status, r.stderr).toBe(0);
    expect(index('delete', 'payments').status).toBe(1); // no such index: refused, nothing changed
    expect(events(file).map((e) => [e['event'], e['tenant'], e['index'], e['action'], e['subject'], e['reason'], e['remote']])).toEqual([
      ['index_change', 'acme', 'payments', 'created', null, 'index_command', null],
      ['index_change', 'acme', 'payments', 'updated', null, 'index_command', null],
      ['index_change', 'acme', 'payments', 'deleted', null, 'index_command', null],
    ]);
    // An audit file that cannot be opened refuses the change, naming the setting and its source.
    const bad = runCli(['index', 'create', '--file', def, '--tenant', 'acme', ...icebergFlags(dir), '--audit-file', path.join(dir, 'no', 'such', 'audit.jsonl')]);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/^siglake: invalid audit\.file \(flag --audit-file\): cannot open .*audit\.jsonl \(ENOENT\)\n$/);
    expect(index('show', 'payments').status).toBe(1); // not created
    fs.rmSync(dir, { recursive: true, force: true });
  });
});
