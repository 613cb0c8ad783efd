// `siglake query` against callers that stall, hang up, or keep writing after
// a refusal, and against SIGTERM meanwhile: each request ends, the process
// exits within server.shutdownTimeoutSecs plus a few seconds, a refusal
// reads a bounded part of the body, and a caller's hang-up is its own (499),
// not a server failure (5xx). Every server here runs on an empty catalog:
// SELECT 1 and range() need no table.

import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { rawRequest as rawRequestOf } from '../helpers/http.js';
import { tempDir } from '../helpers/ingester.js';
import { AUDIENCE, ISSUER, makeKeyPair, mint } from '../helpers/jwt.js';
import { icebergFlags, startQuery, type RunningQuery } from '../helpers/query.js';
import { holdsWithin, sleep, until } from '../helpers/wait.js';

const running: RunningQuery[] = [];
const servers: http.Server[] = [];
const sockets: net.Socket[] = [];

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const q of running.splice(0)) await q.stop(5_000);
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

async function start(args: string[]): Promise<RunningQuery> {
  const dataDir = tempDir('siglake-query-hangups-');
  const q = await startQuery(dataDir, [...icebergFlags(dataDir), ...args]);
  running.push(q);
  return q;
}

const partialRequest = (port: number, head: string) => rawRequestOf(port, head, sockets);

/** Sends SIGTERM; the seconds until the process exited (Infinity past `withinMs`), and its code. */
async function sigterm(q: RunningQuery, withinMs: number): Promise<{ secs: number; code: number | null }> {
  const t0 = Date.now();
  q.child.kill('SIGTERM');
  const code = await Promise.race([q.exited, sleep(withinMs).then(() => 'late' as const)]);
  if (code === 'late') {
    q.child.kill('SIGKILL');
    return { secs: Infinity, code: null };
  }
  return { secs: (Date.now() - t0) / 1000, code };
}

const failedWarnings = (q: RunningQuery) => q.logs.filter((l) => l.msg === 'query failed');
const sqlStatus = async (q: RunningQuery, status: number) => (await q.metrics()).get(`siglake_query_requests_total{endpoint="sql",status="${status}"}`);

describe('siglake query: callers that stall or hang up, and SIGTERM', () => {
  it('regression (query-hangup-during-jwt-check-hangs-stop): a caller that hangs up while its JWT is checked is counted 499, and SIGTERM still exits', async () => {
    // The JWKS answers after 1.5 s; the caller hangs up during that fetch. Its request waited for
    // good on a body that would never come, and stop() waited for it: SIGTERM never completed.
    const key = await makeKeyPair('RS256', 'k1');
    let answered = 0;
    const jwks = http.createServer((_req, res) =>
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [key.jwk] }));
        answered++;
      }, 1500),
    );
    servers.push(jwks);
    await new Promise<void>((r) => jwks.listen(0, '127.0.0.1', r));
    const jwksUrl = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks.json`;
    const token = await mint(key);
    const q = await start(['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-url', jwksUrl, '--shutdown-timeout-secs', '1']);
    const caller = partialRequest(
      q.port,
      `POST /api/v1/sql HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"sql":`,
    );
    await sleep(300);
    caller.socket.destroy();
    await until(() => answered > 0, 10_000, 'the JWKS to answer');
    // Counted as the caller's hang-up, once its authentication is done (the old code never ended it).
    await holdsWithin(async () => (await sqlStatus(q, 499)) === 1, 5_000);
    expect(await sqlStatus(q, 499)).toBe(1);
    expect(await sqlStatus(q, 500)).toBe(0);
    // A caller that stays is served.
    const ok = await fetch(`${q.url}/api/v1/sql`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'text/plain' }, body: 'SELECT 1 AS x' });
    expect(ok.status, await ok.text()).toBe(200);
    // --shutdown-timeout-secs 1: the bound is generous for a loaded 2-core machine.
    const stopped = await sigterm(q, 15_000);
    expect(stopped.code).toBe(0);
    expect(stopped.secs).toBeLessThan(15);
    expect(failedWarnings(q)).toEqual([]);
  }, 60_000);

  it('regression (query-slow-body-holds-shutdown): a caller that stalls mid-body is answered 503 at the shutdown deadline, and the process exits', async () => {
    // Headers and 7 of 100 bytes, then nothing: SIGTERM waited on that body for ever.
    const q = await start(['--shutdown-timeout-secs', '2']);
    const caller = partialRequest(q.port, 'POST /api/v1/sql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"sql":');
    await sleep(300);
    const stopped = await sigterm(q, 20_000);
    expect(stopped.code).toBe(0);
    expect(stopped.secs).toBeLessThan(20);
    const got = caller.got();
    expect(got).toMatch(/^HTTP\/1\.1 503 /);
    expect(got).toMatch(/\r\nretry-after: 1\r\n/i);
    expect(got).toMatch(/\r\nconnection: close\r\n/i);
    expect(got).toContain('"SIGLAKE_UNAVAILABLE"');
    // A 5xx's warning says why (it said only the code and the endpoint).
    expect(failedWarnings(q).map((l) => [l['code'], l['err']])).toEqual([['SIGLAKE_UNAVAILABLE', 'the query server is shutting down']]);
  }, 60_000);

  it('regression (query-request-timeout-ignored): a body that stalls is answered 408 after --request-timeout-secs and its connection closed, counted 408', async () => {
    // `siglake query` refused --request-timeout-secs and left Node's 300 s default (checked every 30 s).
    const q = await start(['--request-timeout-secs', '2']);
    const caller = partialRequest(q.port, 'POST /api/v1/sql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"sql":');
    const t0 = Date.now();
    // Generous for a loaded 2-core machine: 2 s, checked every second.
    await Promise.race([caller.closed, sleep(15_000)]);
    expect((Date.now() - t0) / 1000).toBeLessThan(15);
    expect(caller.got()).toMatch(/^HTTP\/1\.1 408 /);
    await until(async () => (await sqlStatus(q, 408)) === 1, 10_000, 'the 408 to be counted');
    expect(await sqlStatus(q, 499)).toBe(0);
    // A caller that sends its request in time is served.
    const ok = await fetch(`${q.url}/api/v1/sql`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'SELECT 1 AS x' });
    expect(ok.status, await ok.text()).toBe(200);
  }, 60_000);

  it('regression (query-coordinator-stop-leaves-forwards): SIGTERM on a coordinator answers its forwarded query 503 at the shutdown deadline', async () => {
    // A shard that never answers; the coordinator's forward waited for query.timeoutSecs + 15 s
    // past SIGTERM, then answered 502.
    const shard = http.createServer(() => undefined);
    servers.push(shard);
    await new Promise<void>((r) => shard.listen(0, '127.0.0.1', r));
    const q = await start([
      '--query-shards',
      `http://127.0.0.1:${(shard.address() as AddressInfo).port}`,
      '--query-shard-token',
      'shard-secret',
      '--query-timeout-secs',
      '30',
      '--shutdown-timeout-secs',
      '1',
    ]);
    const t0 = Date.now();
    const pending = fetch(`${q.url}/api/v1/sql`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'SELECT 1' });
    await sleep(500);
    const stopped = await sigterm(q, 20_000);
    const answer = await pending;
    const text = await answer.text();
    expect(answer.status, text).toBe(503);
    expect(answer.headers.get('retry-after')).toBe('1');
    expect(JSON.parse(text).error.code).toBe('SIGLAKE_UNAVAILABLE');
    expect((Date.now() - t0) / 1000).toBeLessThan(20);
    expect(stopped.code).toBe(0);
  }, 90_000);

  it('regression (query-refusal-reads-whole-body): a refused request reads at most a bounded part of the body, then answers with Connection: close and ends the connection', async () => {
    // Declared 10 GB, no token: the 401 was answered, then the whole body read, for as long as the caller sent it.
    const q = await start(['--auth-bearer-tokens', 'tok1']);
    for (const [label, head] of [
      ['no token, Content-Length 10 GB', 'POST /api/v1/sql HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 10000000000\r\n\r\n'],
      ['token, chunked, over 1 MiB (413)', 'POST /api/v1/sql HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok1\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n'],
    ] as const) {
      const chunked = head.includes('chunked');
      const caller = partialRequest(q.port, head);
      let closed = false;
      void caller.closed.then(() => (closed = true));
      const chunk = Buffer.alloc(1 << 20, 0x41);
      const frame = chunked ? Buffer.concat([Buffer.from('100000\r\n'), chunk, Buffer.from('\r\n')]) : chunk;
      let sent = 0;
      const t0 = Date.now();
      // Up to 256 MiB over up to 20 s: the server closes long before either.
      while (!closed && sent < 256 * 1024 * 1024 && Date.now() - t0 < 20_000) {
        if (!caller.socket.write(frame)) await Promise.race([new Promise((r) => caller.socket.once('drain', r)), caller.closed, sleep(200)]);
        sent += chunk.length;
      }
      await Promise.race([caller.closed, sleep(5_000)]);
      expect(closed, label).toBe(true);
      expect(sent, label).toBeLessThan(256 * 1024 * 1024);
      const got = caller.got();
      expect(got, label).toMatch(chunked ? /^HTTP\/1\.1 413 / : /^HTTP\/1\.1 401 /);
      expect(got, label).toMatch(/\r\nconnection: close\r\n/i);
    }
    expect(await sqlStatus(q, 401)).toBe(1);
    expect(await sqlStatus(q, 413)).toBe(1);
  }, 90_000);

  it('regression (query-hangup-counted-5xx): a caller that hangs up mid-body or mid-query is counted 499, logged at debug, never a 5xx', async () => {
    // Mid-body it was a 500 SIGLAKE_QUERY_ENGINE (ERR_STREAM_PREMATURE_CLOSE), mid-query a 503, each with a warning.
    const q = await start(['--query-timeout-secs', '60']);
    const midBody = partialRequest(q.port, 'POST /api/v1/sql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"sql":');
    await sleep(200);
    midBody.socket.destroy();
    await until(async () => (await sqlStatus(q, 499)) === 1, 10_000, 'the mid-body hang-up to be counted');
    const sql = 'SELECT count(*) FROM range(1000000000000) a';
    const midQuery = partialRequest(q.port, `POST /api/v1/sql HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: ${sql.length}\r\n\r\n${sql}`);
    await until(async () => (await q.metrics()).get('siglake_query_running') === 1, 10_000, 'the query to run');
    midQuery.socket.destroy();
    await until(async () => (await sqlStatus(q, 499)) === 2, 20_000, 'the mid-query hang-up to be counted');
    const m = await q.metrics();
    for (const s of [500, 502, 503, 504]) expect(m.get(`siglake_query_requests_total{endpoint="sql",status="${s}"}`), String(s)).toBe(0);
    expect(m.get('siglake_query_running')).toBe(0);
    expect(failedWarnings(q)).toEqual([]);
  }, 60_000);
});
