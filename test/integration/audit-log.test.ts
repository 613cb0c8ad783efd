// The audit stream (declared-tenants.md §4): one event per refusal, with
// the tenant, verified subject, reason and peer of that request (each request
// carries its own note: a field shared by all requests named another
// client's address on a gRPC call's first admission); refusals after
// admission (413, 415, a gRPC lane-step refusal) and without declared
// tenants are audited too; and when its file refuses writes (a full disk:
// /dev/full answers every write ENOSPC) every event lost is counted in
// siglake_audit_events_dropped_total, one per event, and logged at warn,
// throttled, never with a token.

import fs from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { LOGS_EXPORT, grpc } from '../helpers/grpc-client.js';
import { post } from '../helpers/http.js';
import { auditEvents, type AuditEvent } from '../helpers/audit-events.js';
import { runCli, startIngester, tempDir, type RunningIngester } from '../helpers/ingester.js';
import { AUDIENCE, ISSUER, makeKeyPair, mint, writeJwksFile } from '../helpers/jwt.js';
import { logsProto } from '../helpers/otlp-bodies.js';
import { Client } from '../helpers/tenancy-client.js';
import { sleep, until } from '../helpers/wait.js';

type Event = AuditEvent;
const events = auditEvents;
const eventually = async (file: string, pred: (e: Event[]) => boolean, what: string): Promise<Event[]> => {
  await until(() => pred(events(file)), 10_000, what);
  return events(file);
};

/** A POST from another loopback address (127.0.0.3): another client, as the audit sees it. */
function postFrom(localAddress: string, url: string, body: Uint8Array, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}/v1/logs`, { method: 'POST', localAddress, headers: { 'content-type': 'application/x-protobuf', ...headers } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(Buffer.from(body));
  });
}

describe('audit events: each request its own', () => {
  it("a gRPC call's first admission names its own peer, not that of a request refused meanwhile; later refusals carry tenant, subject and reason", async () => {
    const dir = tempDir('siglake-audit-own-');
    const key = await makeKeyPair('ES256', 'k-audit');
    const jwks = writeJwksFile(dir, [key.jwk]);
    const tenants = path.join(dir, 'tenants.yaml');
    fs.writeFileSync(tenants, 'tenants:\n  - id: acme\n    subjects: { claims: { org_id: acme } }\n');
    const file = path.join(dir, 'audit.jsonl');
    const ing: RunningIngester = await startIngester({
      args: ['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks, '--tenants-file', tenants, '--audit-file', file, '--max-tenants', '1', '--max-request-bytes', '4096'],
    });
    const alice = `Bearer ${await mint(key, { org_id: 'acme' }, { sub: 'alice' })}`;
    const c = new Client(ing);
    try {
      // acme's gRPC call from 127.0.0.1: headers now, its message held back.
      const session = http2.connect(`http://${ing.grpcAddress}`);
      session.on('error', () => {});
      await new Promise<void>((r, j) => {
        session.once('connect', () => r());
        session.once('error', j);
      });
      const call = session.request({ ':method': 'POST', ':path': LOGS_EXPORT, 'content-type': 'application/grpc', te: 'trailers', authorization: alice });
      call.on('error', () => {});
      let status = -1;
      const closed = new Promise<void>((r) => call.on('close', () => r()));
      call.on('response', (h) => h['grpc-status'] !== undefined && (status = Number(h['grpc-status'])));
      call.on('trailers', (h) => (status = Number(h['grpc-status'])));
      call.on('data', () => {});
      await new Promise<void>((r, j) => session.ping((e) => (e === null ? r() : j(e))));
      await sleep(100);
      // Meanwhile another client, from 127.0.0.3, is refused (no credentials).
      expect(await postFrom('127.0.0.3', ing.url, logsProto(['x']), {})).toBe(401);
      // Now acme's message: admitted, its first admission audited.
      const msg = Buffer.from(logsProto(['first']));
      const prefix = Buffer.alloc(5);
      prefix.writeUInt32BE(msg.length, 1);
      call.end(Buffer.concat([prefix, msg]));
      await closed;
      session.close();
      expect(status).toBe(grpc.status.OK);
      let ev = await eventually(file, (e) => e.some((x) => x['event'] === 'tenant_first_admission') && e.some((x) => x['event'] === 'lane_first_admission'), 'the first admissions');
      const first = ev.find((x) => x['event'] === 'tenant_first_admission')!;
      expect(first).toMatchObject({ tenant: 'acme', subject: 'alice' });
      expect(String(first['remote'])).toMatch(/127\.0\.0\.1/);
      expect(ev.find((x) => x['reason'] === 'SIGLAKE_UNAUTHENTICATED')).toMatchObject({ event: 'refusal', tenant: null, subject: null, remote: expect.stringMatching(/127\.0\.0\.3/) });
      // The lane's first admission names who stored (it had subject and peer null).
      expect(ev.find((x) => x['event'] === 'lane_first_admission')).toMatchObject({ tenant: 'acme', subject: 'alice', signal: 'logs', index: null, remote: expect.stringMatching(/127\.0\.0\.1/) });

      // Refusals after admission, each with acme's tenant and alice as subject:
      expect((await c.send('http', 'logs', 'x', { authorization: alice }, logsProto(['y'.repeat(5000)]))).status).toBe(413);
      expect((await c.send('http', 'logs', 'x', { authorization: alice }, logsProto(['z']), 'text/csv')).status).toBe(415);
      expect((await c.send('grpc', 'logs', 'x', { authorization: alice }, logsProto(['y'.repeat(5000)]))).code).toBe(grpc.status.RESOURCE_EXHAUSTED);
      expect((await c.send('http', 'logs', 'x', { authorization: alice }, new Uint8Array([0xff, 0xff]))).status).toBe(400);
      // --max-tenants 1: a second tenant (routed by header) is at_capacity, on gRPC too.
      const bob = `Bearer ${await mint(key, { org_id: 'other' }, { sub: 'bob' })}`;
      expect((await c.send('grpc', 'traces', 'x', { authorization: bob })).code).toBe(grpc.status.PERMISSION_DENIED);
      // Each of acme's requests is in its outcome counts (the 413s, the 415 and the 400 were missing).
      expect(await ing.metric('siglake_tenant_requests_total{tenant="acme",outcome="accepted"}')).toBe(1);
      expect(await ing.metric('siglake_tenant_requests_total{tenant="acme",outcome="refused"}')).toBe(4);
      ev = await eventually(file, (e) => e.filter((x) => x['event'] === 'refusal').length >= 6, 'six refusals');
      const refusals = ev.filter((x) => x['event'] === 'refusal').map((x) => [x['tenant'], x['subject'], x['reason']]);
      expect(refusals).toEqual([
        [null, null, 'SIGLAKE_UNAUTHENTICATED'],
        ['acme', 'alice', 'SIGLAKE_BODY_TOO_LARGE'],
        ['acme', 'alice', 'SIGLAKE_UNSUPPORTED_MEDIA'],
        ['acme', 'alice', 'SIGLAKE_BODY_TOO_LARGE'],
        ['acme', 'alice', 'SIGLAKE_BAD_BODY'],
        ['default', 'bob', 'at_capacity'],
      ]);
    } finally {
      c.close();
      expect(await ing.stop()).toBe(0);
    }
  });

  it('audits refusals without declared tenants too (the file stayed empty)', async () => {
    const dir = tempDir('siglake-audit-plain-');
    const file = path.join(dir, 'audit.jsonl');
    const ing = await startIngester({ args: ['--auth-bearer-tokens', 'tok-plain-1', '--audit-file', file] });
    try {
      expect((await post(ing.url, '/v1/logs', logsProto(['a']), { contentType: 'application/x-protobuf' })).status).toBe(401);
      const denied = await post(ing.url, '/v1/logs', logsProto(['b']), { contentType: 'application/x-protobuf', headers: { authorization: 'Bearer tok-plain-1', 'x-scope-orgid': 'acme' } });
      expect(denied.status).toBe(403);
      const ev = await eventually(file, (e) => e.length >= 2, 'two refusals');
      expect(ev.map((x) => [x['event'], x['reason']])).toEqual([
        ['refusal', 'SIGLAKE_UNAUTHENTICATED'],
        ['refusal', 'header_not_trusted'],
      ]);
      expect(fs.readFileSync(file, 'utf8')).not.toContain('tok-plain-1');
      expect(await ing.metric('siglake_audit_events_dropped_total')).toBe(0);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
  });
});

describe('first admissions are audited for the request that stored', () => {
  it("without a tenants file, a lane's first stored request is audited, with that request's subject and peer (it never was: the event went through the declared tenants)", async () => {
    const dir = tempDir('siglake-audit-lane-');
    const key = await makeKeyPair('ES256', 'k-lane');
    const jwks = writeJwksFile(dir, [key.jwk]);
    const file = path.join(dir, 'audit.jsonl');
    const ing = await startIngester({ args: ['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks, '--audit-file', file] });
    const mallory = `Bearer ${await mint(key, {}, { sub: 'mallory' })}`;
    const alice = `Bearer ${await mint(key, {}, { sub: 'alice' })}`;
    const bob = `Bearer ${await mint(key, {}, { sub: 'bob' })}`;
    const c = new Client(ing);
    try {
      // A bad body opens the logs lane and is refused: no lane admission for it.
      expect((await c.send('http', 'logs', 'x', { authorization: mallory }, new Uint8Array([0xff, 0xff]))).status).toBe(400);
      // alice's request, from another loopback address, is the lane's first stored one; bob's second is not a first.
      expect(await postFrom('127.0.0.3', ing.url, logsProto(['first']), { authorization: alice })).toBe(200);
      expect((await c.send('http', 'logs', 'second', { authorization: bob })).status).toBe(200);
      // bob opens the traces lane, over gRPC.
      expect((await c.send('grpc', 'traces', 'span', { authorization: bob })).code).toBe(grpc.status.OK);
      const ev = await eventually(file, (e) => e.filter((x) => x['event'] === 'lane_first_admission').length >= 2, 'two lane admissions');
      await sleep(200); // nothing more comes
      const lanes = events(file).filter((x) => x['event'] === 'lane_first_admission');
      expect(lanes).toHaveLength(2);
      expect(lanes[0]).toMatchObject({ tenant: 'default', subject: 'alice', reason: null, signal: 'logs', index: null, remote: expect.stringMatching(/127\.0\.0\.3/) });
      expect(lanes[1]).toMatchObject({ tenant: 'default', subject: 'bob', reason: null, signal: 'traces', index: null, remote: expect.stringMatching(/127\.0\.0\.1/) });
      expect(ev.filter((x) => x['event'] === 'refusal').map((x) => [x['subject'], x['reason']])).toEqual([['mallory', 'SIGLAKE_BAD_BODY']]);
    } finally {
      c.close();
      expect(await ing.stop()).toBe(0);
    }
  });
});

describe("a declared tenant's first admission", () => {
  it('is its first stored request: requests refused after the header checks (413, 400) are not, and do not use it up', async () => {
    const dir = tempDir('siglake-audit-tenant-first-');
    const key = await makeKeyPair('ES256', 'k-first');
    const jwks = writeJwksFile(dir, [key.jwk]);
    const tenants = path.join(dir, 'tenants.yaml');
    fs.writeFileSync(tenants, 'tenants:\n  - id: acme\n    subjects: { claims: { org_id: acme } }\n');
    const file = path.join(dir, 'audit.jsonl');
    const ing = await startIngester({
      args: ['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks, '--tenants-file', tenants, '--audit-file', file, '--max-request-bytes', '4096'],
    });
    const mallory = `Bearer ${await mint(key, { org_id: 'acme' }, { sub: 'mallory' })}`;
    const alice = `Bearer ${await mint(key, { org_id: 'acme' }, { sub: 'alice' })}`;
    const c = new Client(ing);
    try {
      // mallory's requests pass the header checks and are refused: a bad body, a body too large (on both transports;
      // the first verifies the token, so the 413s find it verified and are refused after admission).
      expect((await c.send('http', 'logs', 'x', { authorization: mallory }, new Uint8Array([0xff, 0xff]))).status).toBe(400);
      expect((await c.send('http', 'logs', 'x', { authorization: mallory }, logsProto(['y'.repeat(5000)]))).status).toBe(413);
      expect((await c.send('grpc', 'logs', 'x', { authorization: mallory }, logsProto(['y'.repeat(5000)]))).code).toBe(grpc.status.RESOURCE_EXHAUSTED);
      expect((await c.send('grpc', 'traces', 'x', { authorization: mallory }, new Uint8Array([0xff, 0xff]))).code).toBe(grpc.status.INVALID_ARGUMENT);
      await eventually(file, (e) => e.filter((x) => x['event'] === 'refusal').length >= 4, 'four refusals');
      // alice's, from another loopback address, is acme's first stored request; her second is no first.
      expect(await postFrom('127.0.0.3', ing.url, logsProto(['first']), { authorization: alice })).toBe(200);
      expect((await c.send('grpc', 'logs', 'second', { authorization: alice })).code).toBe(grpc.status.OK);
      await eventually(file, (e) => e.some((x) => x['event'] === 'tenant_first_admission' && x['subject'] === 'alice'), "alice's first admission");
      await sleep(200); // nothing more comes
      const ev = events(file);
      const firsts = ev.filter((x) => x['event'] === 'tenant_first_admission');
      expect(firsts).toEqual([expect.objectContaining({ tenant: 'acme', subject: 'alice', reason: null, remote: expect.stringMatching(/127\.0\.0\.3/) })]);
      // Written after the refusals, as the lane's is.
      const at = ev.indexOf(firsts[0]!);
      expect(ev.slice(0, at).map((x) => [x['event'], x['subject'], x['reason']])).toEqual([
        ['refusal', 'mallory', 'SIGLAKE_BAD_BODY'],
        ['refusal', 'mallory', 'SIGLAKE_BODY_TOO_LARGE'],
        ['refusal', 'mallory', 'SIGLAKE_BODY_TOO_LARGE'],
        ['refusal', 'mallory', 'SIGLAKE_BAD_BODY'],
      ]);
      expect(ev[at + 1]).toMatchObject({ event: 'lane_first_admission', tenant: 'acme', subject: 'alice', signal: 'logs' });
    } finally {
      c.close();
      expect(await ing.stop()).toBe(0);
    }
  });
});

describe('audit file that refuses writes', () => {
  it('one that cannot be opened stops start-up with exit 2, naming the setting and its source (it was a stack trace, exit 1)', () => {
    const dir = tempDir('siglake-audit-open-');
    const r = runCli(['ingest', '--http-listen', '127.0.0.1:0', '--grpc-listen', '127.0.0.1:0', '--wal-dir', path.join(dir, 'wal'), '--audit-file', path.join(dir, 'no', 'audit.jsonl')]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^siglake: invalid audit\.file \(flag --audit-file\): cannot open .*audit\.jsonl \(ENOENT\)\n$/);
  });

  it('counts every event lost, and says so at warn', async () => {
    const dir = tempDir('siglake-audit-full-');
    const tenants = path.join(dir, 'tenants.yaml');
    fs.writeFileSync(tenants, 'tenants:\n  - id: acme\n    subjects: { claims: { org_id: acme } }\n');
    const ing = await startIngester({ args: ['--auth-bearer-tokens', 'tok-audit-1', '--tenants-file', tenants, '--audit-file', '/dev/full'] });
    try {
      // 60 refusals at once (no credentials: 401), each one audit event.
      const replies = await Promise.all(Array.from({ length: 60 }, () => post(ing.url, '/v1/logs', logsProto(['x']), { contentType: 'application/x-protobuf' })));
      expect(replies.map((r) => r.status)).toEqual(Array(60).fill(401));
      await until(async () => (await ing.metric('siglake_audit_events_dropped_total')) === 60, 10_000, 'every lost event counted');
      const warned = ing.logs.filter((l) => l.msg.startsWith('audit file write failed'));
      expect(warned.length).toBeGreaterThanOrEqual(1);
      expect(warned.length).toBeLessThanOrEqual(2); // throttled: one line per 10 s
      expect(String(warned[0]!['err'])).toMatch(/ENOSPC/);
      expect(JSON.stringify(ing.logs)).not.toContain('tok-audit-1');
    } finally {
      expect(await ing.stop()).toBe(0);
    }
  });
});
