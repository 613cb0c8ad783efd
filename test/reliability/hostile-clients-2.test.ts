// Hostile and careless clients, second pass (issue 11, docs/reliability.md
// "Hostile clients, second pass"): each case is one defect found from outside,
// checked against the real process, with what a client relies on: the status
// or gRPC code, the counters, and what is (not) on disk.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOGS_EXPORT, grpc, rawGrpcCall } from '../helpers/grpc-client.js';
import { CLI, runCli, tempDir, type RunningIngester } from '../helpers/ingester.js';
import { logsProto } from '../helpers/otlp-bodies.js';
import { decodeStatusProto, errorInfoOf } from '../helpers/rpc-status.js';
import { sleep } from '../helpers/wait.js';
import {
  Client,
  TRANSPORTS,
  delta,
  expectAccepted,
  expectRefused,
  only,
  rawHttpPost,
  textsUnder,
  topDirs,
  walBytes,
  type Reply,
} from '../helpers/tenancy-client.js';
import { MiB, ProcSampler } from './lib/proc.js';
import { httpHead, rawRequest } from './lib/raw-clients.js';
import { recordFigures, scaled } from './lib/scale.js';

/** Polls `cond` until it holds or `timeoutMs` passes (then fails naming `what`). */
async function until(cond: () => Promise<boolean> | boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
import { startWalIngester } from './lib/wal-ingester.js';

const figures: Record<string, unknown> = {};
const live = new Set<RunningIngester>();

afterAll(async () => {
  for (const ing of live) await ing.kill9();
  recordFigures('hostile-clients-2', figures);
});

async function start(args: string[]): Promise<RunningIngester> {
  const ing = await startWalIngester({ args });
  live.add(ing);
  return ing;
}

/** One gRPC call over node:http2 with header fields exactly as given (arrays: several fields). */
async function rawGrpc(ing: RunningIngester, body: Uint8Array, headers: Record<string, string | string[]>): Promise<Reply> {
  const r = await rawGrpcCall(ing.grpcAddress, LOGS_EXPORT, body, { headers: headers as Record<string, string> });
  return { transport: 'grpc', status: -1, code: r.code, message: r.message, retryAfter: null, errorCode: r.errorCode };
}

async function stop(ing: RunningIngester): Promise<void> {
  expect(ing.exitCode).toBeNull();
  expect(await ing.stop()).toBe(0);
  live.delete(ing);
}

describe('default mode with bearer tokens (--auth-bearer-tokens tok-acme,tok-beta)', () => {
  let ing: RunningIngester;
  let c: Client;
  beforeAll(async () => {
    ing = await start(['--auth-bearer-tokens', 'tok-acme,tok-beta']);
    c = new Client(ing);
  });
  afterAll(async () => {
    c?.close();
    if (ing) await stop(ing);
  });

  it('regression (two-authorization-headers, item 9): two Authorization headers → 400 / INVALID_ARGUMENT on both transports, nothing stored', async () => {
    const walBefore = walBytes(ing.walDir);
    const body = logsProto(['two-authorizations-http']);
    const http = await expectRefused(
      c,
      () => rawHttpPost(ing, 'logs', body, { Authorization: 'Bearer tok-acme', authorization: 'Bearer tok-beta' }),
      400,
      'SIGLAKE_BAD_HEADER',
    );
    expect(http.message).toMatch(/Authorization/);
    // Neither grpc-js nor node:http2 sends two authorization fields; Node's HTTP/2
    // server folds two into "a, b", which is what goes out here by hand.
    const rpc = await expectRefused(
      c,
      () => rawGrpc(ing, logsProto(['two-authorizations-grpc']), { authorization: 'Bearer tok-acme, Bearer tok-beta' }),
      400,
      'SIGLAKE_BAD_HEADER',
    );
    expect(rpc.message).toMatch(/Authorization/);
    // One credential is still fine on both.
    for (const t of TRANSPORTS) await expectAccepted(c, () => c.send(t, 'logs', `one-authorization-${t}`, { authorization: 'Bearer tok-beta' }));
    expect(walBytes(ing.walDir)).toBeGreaterThan(walBefore);
    expect(textsUnder(path.join(ing.walDir, 'logs')).filter((t) => t.startsWith('two-authorizations'))).toEqual([]);
    figures['twoAuthorizationHeaders'] = { http: http.status, grpc: rpc.code };
  });

  it('regression (comma-list-org-id, item 10): X-Scope-OrgID: acme,beta → 400 / INVALID_ARGUMENT on both transports, no denial counted', async () => {
    const outcomes: Record<string, number> = {};
    for (const t of TRANSPORTS) {
      const r = await expectRefused(
        c,
        () => c.send(t, 'logs', `comma-org-${t}`, { authorization: 'Bearer tok-acme', 'x-scope-orgid': 'acme,beta' }),
        400,
        'SIGLAKE_BAD_HEADER',
      );
      outcomes[t] = t === 'http' ? r.status : r.code;
    }
    // With a space after the comma, as a proxy folds two fields.
    await expectRefused(
      c,
      () => rawHttpPost(ing, 'logs', logsProto(['comma-space-org']), { Authorization: 'Bearer tok-acme', 'X-Scope-OrgID': 'acme, beta' }),
      400,
    );
    figures['commaListOrgId'] = outcomes;
    expect(topDirs(ing.walDir).filter((d) => d !== 'logs')).toEqual([]);
  });
});

describe('--rate-limit-per-sec alone (--trust-tenant-header --rate-limit-per-sec 0.01 --rate-limit-burst 3)', () => {
  let ing: RunningIngester;
  let c: Client;
  beforeAll(async () => {
    ing = await start(['--trust-tenant-header', '--rate-limit-per-sec', '0.01', '--rate-limit-burst', '3']);
    c = new Client(ing);
  });
  afterAll(async () => {
    c?.close();
    if (ing) await stop(ing);
  });

  it('regression (one-global-bucket, item 8): tenant a spending its bucket never refuses tenant b', async () => {
    const a: number[] = [];
    for (let i = 0; i < 5; i++) a.push((await c.send('http', 'logs', `rate-a-${i}`, { 'x-scope-orgid': 'a' })).status);
    expect(a).toEqual([200, 200, 200, 429, 429]);
    const b: boolean[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await c.send(i % 2 ? 'grpc' : 'http', 'logs', `rate-b-${i}`, { 'x-scope-orgid': 'b' });
      b.push(r.transport === 'http' ? r.status === 200 : r.code === grpc.status.OK);
    }
    expect(b).toEqual([true, true, true]);
    expect(textsUnder(path.join(ing.walDir, 'b')).sort()).toEqual(['rate-b-0', 'rate-b-1', 'rate-b-2']);
    figures['tenantRateAlone'] = { a, bAccepted: 3 };
  });
});

/** An HTTP/2 session to the gRPC port, and calls on it made by hand (header fields exactly as given). */
async function h2Session(address: string, opts: http2.SessionOptions = {}): Promise<http2.ClientHttp2Session> {
  const session = http2.connect(`http://${address}`, opts);
  session.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    session.once('remoteSettings', () => resolve());
    session.once('error', reject);
  });
  return session;
}

interface H2Call {
  /** The grpc-status the server answered with (-1: the stream closed without one). */
  ended: Promise<number>;
  /** The ErrorInfo reason of its grpc-status-details-bin, once answered with one. */
  errorCode(): string | undefined;
  close(): void;
}

/** A call that sends a message prefix declaring `declared` bytes and then `send` of them (all of it when equal). */
function h2Call(session: http2.ClientHttp2Session, headers: Record<string, string>, declared: number, send: Uint8Array, endStream = false): H2Call {
  const req = session.request({ ':method': 'POST', ':path': LOGS_EXPORT, 'content-type': 'application/grpc', te: 'trailers', ...headers });
  req.on('error', () => {});
  req.on('data', () => {});
  let reason: string | undefined;
  const ended = new Promise<number>((resolve) => {
    const take = (h: Record<string, unknown>) => {
      const bin = h['grpc-status-details-bin'];
      if (bin !== undefined) reason = errorInfoOf(decodeStatusProto(Buffer.from(String(bin), 'base64'))).reason;
      if (h['grpc-status'] !== undefined) resolve(Number(h['grpc-status']));
    };
    req.on('response', take);
    req.on('trailers', take);
    req.on('close', () => resolve(-1));
  });
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(declared >>> 0, 1);
  const bytes = Buffer.concat([prefix, Buffer.from(send)]);
  if (declared === send.length || endStream) req.end(bytes);
  else req.write(bytes);
  return { ended, errorCode: () => reason, close: () => req.destroy() };
}

describe('gRPC routing headers that HTTP/2 drops (item 1)', () => {
  // nghttp2 drops a value with leading or trailing whitespace, a control
  // character or DEL before grpc-js sees it: the call looked header-less.
  const DROPPED: Array<[string, string]> = [
    ['trailing space', 'acme '],
    ['leading space', ' evil'],
    ['inner and trailing space', 'a b '],
    ['DEL', 'ac\u007fme'],
    ['tab at the end', 'acme\t'],
  ];

  for (const mode of ['trusted-header', 'default'] as const) {
    it(`regression (grpc-dropped-routing-header, ${mode} mode): every such X-Scope-OrgID and x-siglake-index → INVALID_ARGUMENT, nothing stored, no denial`, async () => {
      const ing = await start(mode === 'trusted-header' ? ['--trust-tenant-header'] : []);
      const c = new Client(ing);
      try {
        const session = await h2Session(ing.grpcAddress);
        const outcomes: Record<string, number> = {};
        const before = await c.denials();
        for (const [what, value] of DROPPED) {
          for (const header of ['x-scope-orgid', 'x-siglake-index']) {
            const body = logsProto([`dropped-${header}-${what}`]);
            const call = h2Call(session, header === 'x-siglake-index' ? { 'x-scope-orgid': mode === 'default' ? 'default' : 'acme', [header]: value } : { [header]: value }, body.length, body);
            outcomes[`${header} ${what}`] = await call.ended;
          }
        }
        // NUL (and CR, LF) make nghttp2 reset the stream itself: refused too, never OK.
        for (const header of ['x-scope-orgid', 'x-siglake-index']) {
          const body = logsProto([`dropped-${header}-nul`]);
          const code = await h2Call(session, { [header]: 'ac\u0000me' }, body.length, body).ended;
          expect(code === grpc.status.INVALID_ARGUMENT || code === -1, `${header} with NUL: ${code}`).toBe(true);
          outcomes[`${header} NUL (reset or INVALID_ARGUMENT)`] = code;
        }
        session.close();
        expect(Object.entries(outcomes).filter(([k, v]) => !k.includes('NUL') && v !== grpc.status.INVALID_ARGUMENT)).toEqual([]);
        expect(delta(before, await c.denials())).toEqual(only(undefined));
        // Neither default's nor acme's lanes hold any of it.
        expect(topDirs(ing.walDir)).toEqual([]);
        // Good calls still land where they say (the tap keeps HPACK's dynamic table in step).
        const good: Record<string, string> = mode === 'trusted-header' ? { 'x-scope-orgid': 'acme' } : {};
        await expectAccepted(c, () => c.send('grpc', 'logs', 'dropped-after-good', good));
        expect(textsUnder(path.join(ing.walDir, ...(mode === 'trusted-header' ? ['acme'] : []), 'logs'))).toEqual(['dropped-after-good']);
        figures[`grpcDroppedRoutingHeader_${mode}`] = outcomes;
      } finally {
        c.close();
        await stop(ing);
      }
    });
  }
});

describe('gRPC: a dropped routing header is refused at the step HTTP refuses it', () => {
  // Contract §4: the breaker, the global bucket and authentication come before
  // the routing headers. A call that HTTP/2 stripped of its X-Scope-OrgID was
  // refused before all of them (400 where HTTP said 401 or 503).
  it('regression (grpc-header-check-before-auth): no credentials → UNAUTHENTICATED; a good token → INVALID_ARGUMENT', async () => {
    const ing = await start(['--auth-bearer-tokens', 'tok-acme', '--trust-tenant-header']);
    try {
      const session = await h2Session(ing.grpcAddress);
      const body = logsProto(['dropped-before-auth']);
      expect(await h2Call(session, { 'x-scope-orgid': ' evil' }, body.length, body).ended).toBe(grpc.status.UNAUTHENTICATED);
      expect(await h2Call(session, { authorization: 'Bearer nope', 'x-scope-orgid': ' evil' }, body.length, body).ended).toBe(grpc.status.UNAUTHENTICATED);
      expect(await h2Call(session, { authorization: 'Bearer tok-acme', 'x-scope-orgid': ' evil' }, body.length, body).ended).toBe(grpc.status.INVALID_ARGUMENT);
      session.close();
      const m = await ing.metrics();
      expect(m.get('siglake_ingest_requests_total{endpoint="otlp",status="401"}')).toBe(2);
      expect(m.get('siglake_ingest_requests_total{endpoint="otlp",status="400"}')).toBe(1);
      expect(topDirs(ing.walDir)).toEqual([]);
    } finally {
      await stop(ing);
    }
  });
});

describe('gRPC calls are authenticated on their headers, and streams are bounded (item 4)', () => {
  it('regression (grpc-unauthenticated-buffering): a call without credentials is refused UNAUTHENTICATED before its message arrives', async () => {
    const ing = await start(['--auth-bearer-tokens', 'tok-acme', '--request-timeout-secs', '30']);
    try {
      const session = await h2Session(ing.grpcAddress);
      // 15 MB declared, 64 KiB sent, the rest never: before the fix grpc-js
      // waited for the whole message, so the answer was DEADLINE_EXCEEDED 30 s later.
      const calls = Array.from({ length: 8 }, () => h2Call(session, {}, 15_000_000, new Uint8Array(64 * 1024)));
      const codes = await Promise.all(calls.map((x) => x.ended));
      expect(codes).toEqual(Array(8).fill(grpc.status.UNAUTHENTICATED));
      const withToken = h2Call(session, { authorization: 'Bearer tok-acme' }, 5, new Uint8Array(5));
      // A good token is admitted and its (5-byte, invalid) message read: a body error, not an auth one.
      expect(await withToken.ended).toBe(grpc.status.INVALID_ARGUMENT);
      session.close();
      const m = await ing.metrics();
      expect(m.get('siglake_ingest_requests_total{endpoint="otlp",status="401"}')).toBe(8);
      figures['grpcUnauthenticatedStalled'] = codes;
    } finally {
      await stop(ing);
    }
  });

  it('load: unauthenticated gRPC calls that declare 15 MB and stall, many per connection, hold bounded memory and descriptors', async () => {
    const CONNS = scaled(8, 20);
    const PER_CONN = scaled(20, 100);
    const ing = await start(['--auth-bearer-tokens', 'tok-acme', '--request-timeout-secs', '60']);
    const sampler = new ProcSampler(ing.child.pid!, 100, false);
    const sessions: http2.ClientHttp2Session[] = [];
    const calls: H2Call[] = [];
    try {
      const before = sampler.sample();
      // The client may queue far more than its default 10 MB per session.
      for (let i = 0; i < CONNS; i++) sessions.push(await h2Session(ing.grpcAddress, { maxSessionMemory: 4096 }));
      // Each call pushes 1 MiB of its 15 MB at once: before the fix grpc-js buffered
      // what arrived (48 such calls took RSS from 95 to 826 MiB).
      const chunk = new Uint8Array(1024 * 1024);
      for (const s of sessions) for (let k = 0; k < PER_CONN; k++) calls.push(h2Call(s, {}, 15_000_000, chunk));
      const codes = await Promise.all(calls.map((x) => x.ended));
      const after = sampler.sample();
      sampler.stop();
      const refusedBeforeMessage = codes.filter((c) => c === grpc.status.UNAUTHENTICATED).length;
      figures['grpcUnauthenticatedLoad'] = {
        connections: CONNS,
        callsPerConnection: PER_CONN,
        unauthenticated: refusedBeforeMessage,
        other: codes.length - refusedBeforeMessage,
        rssBeforeMiB: Math.round(before.rss / MiB),
        maxRssMiB: Math.round(sampler.maxRss / MiB),
        fdsBefore: before.fds,
        maxFds: sampler.maxFds,
        fdsAfter: after.fds,
      };
      // Calls past the per-connection SETTINGS bound wait in the client; every one ends refused.
      expect(codes.filter((c) => c !== grpc.status.UNAUTHENTICATED)).toEqual([]);
      // Nothing near 15 MB per call was buffered: far below what the calls declared.
      expect(sampler.maxRss - before.rss).toBeLessThan(256 * MiB);
      expect(sampler.maxFds).toBeLessThan(before.fds + CONNS + 50);
    } finally {
      sampler.stop();
      for (const x of calls) x.close();
      for (const s of sessions) s.destroy();
      await stop(ing);
    }
  }, 300_000);

  it('regression (grpc-unbounded-streams): SETTINGS_MAX_CONCURRENT_STREAMS is announced, and calls past --grpc-max-streams are refused UNAVAILABLE and counted', async () => {
    const ing = await start(['--grpc-max-streams', '20', '--grpc-max-streams-per-connection', '8', '--request-timeout-secs', '30']);
    const sessions: http2.ClientHttp2Session[] = [];
    try {
      for (let i = 0; i < 5; i++) sessions.push(await h2Session(ing.grpcAddress));
      expect(sessions.map((s) => s.remoteSettings.maxConcurrentStreams)).toEqual(Array(5).fill(8));
      // 5 connections × 6 stalled calls: 20 held, 10 refused at once.
      const calls: H2Call[] = [];
      for (const s of sessions) for (let k = 0; k < 6; k++) calls.push(h2Call(s, {}, 1000, new Uint8Array(10)));
      const refused = await Promise.all(
        calls.map((x) => Promise.race([x.ended, new Promise<number>((r) => setTimeout(() => r(-2), 5000))])),
      );
      expect(refused.filter((c) => c === grpc.status.UNAVAILABLE).length).toBe(10);
      expect(await ing.metric('siglake_grpc_streams_refused_total')).toBe(10);
      for (const x of calls) x.close();
      // Once they are gone, calls are admitted again.
      await until(async () => (await ing.metric('siglake_ingest_aborted_total{endpoint="otlp"}')) === 20, 30_000, 'the 20 abandoned calls to be released');
      const c = new Client(ing);
      await expectAccepted(c, () => c.send('grpc', 'logs', 'after-stream-bound'));
      c.close();
      figures['grpcStreamBound'] = { held: 20, refused: 10 };
    } finally {
      for (const s of sessions) s.destroy();
      await stop(ing);
    }
  });

  it('regression (grpc-stream-pool-one-tenant): a full --grpc-max-streams pool held by one tenant\'s stalled calls gives other tenants their fair share, taken from its oldest stalled calls', async () => {
    const ing = await start(['--trust-tenant-header', '--grpc-max-streams', '12', '--grpc-max-streams-per-connection', '50', '--request-timeout-secs', '60']);
    const hogSession = await h2Session(ing.grpcAddress);
    const fairSession = await h2Session(ing.grpcAddress);
    const answered = (x: H2Call) => Promise.race([x.ended, sleep(5000).then(() => -2)]);
    try {
      // The hog holds the whole pool with calls that never send their message.
      const hog: H2Call[] = [];
      for (let k = 0; k < 12; k++) {
        hog.push(h2Call(hogSession, { 'x-scope-orgid': 'hog' }, 1000, new Uint8Array(10)));
        await until(async () => (await ing.metric('siglake_grpc_streams_open')) === k + 1, 10_000, `hog call ${k + 1} to hold a slot`);
      }
      // Its own next call is refused: it holds all of its share (the whole pool, alone).
      const hog13 = h2Call(hogSession, { 'x-scope-orgid': 'hog' }, 1000, new Uint8Array(10));
      expect(await answered(hog13)).toBe(grpc.status.UNAVAILABLE);
      expect(hog13.errorCode()).toBe('SIGLAKE_TOO_MANY_STREAMS');
      // Another tenant's stalled calls take the hog's oldest, up to half the pool (two holders).
      const fair: H2Call[] = [];
      for (let k = 0; k < 6; k++) {
        fair.push(h2Call(fairSession, { 'x-scope-orgid': 'fair' }, 1000, new Uint8Array(10)));
        expect(await answered(hog[k]!)).toBe(grpc.status.UNAVAILABLE);
        expect(hog[k]!.errorCode()).toBe('SIGLAKE_TOO_MANY_STREAMS');
      }
      const fair7 = h2Call(fairSession, { 'x-scope-orgid': 'fair' }, 1000, new Uint8Array(10));
      expect(await answered(fair7)).toBe(grpc.status.UNAVAILABLE);
      // The hog's newer calls and all six of the fair tenant's are still open.
      const still = await Promise.all([...hog.slice(6), ...fair].map((x) => Promise.race([x.ended, sleep(300).then(() => -2)])));
      expect(still).toEqual(Array(12).fill(-2));
      expect(await ing.metric('siglake_grpc_streams_open')).toBe(12);
      // A third tenant's whole call is stored: it takes a slot from a holder above the new share (4).
      const c = new Client(ing);
      await expectAccepted(c, () => c.send('grpc', 'logs', 'third-tenant', { 'x-scope-orgid': 'third' }));
      c.close();
      expect(await ing.metric('siglake_grpc_streams_preempted_total')).toBe(7);
      // Refused by the pool: the hog's 13th, the fair tenant's 7th and the 7 calls that gave up their slot.
      expect(await ing.metric('siglake_grpc_streams_refused_total')).toBe(9);
      figures['grpcStreamPoolFairShare'] = { pool: 12, hogKept: 5, fairHeld: 6, preempted: 7 };
    } finally {
      hogSession.destroy();
      fairSession.destroy();
      await stop(ing);
    }
  });
});

describe('a gRPC call written, then cancelled before its answer (every journal fdatasync 2 s slower)', () => {
  // The slow fdatasync is the window, between the write and the answer, in which the client resets
  // the stream: long enough that a loaded machine still resets it within the window.
  const SYNC_DELAY_MS = 2000;
  let ing: RunningIngester;
  beforeAll(async () => {
    ing = await startWalIngester({ args: ['--trust-tenant-header'], env: { SIGLAKE_TEST_JOURNAL_SYNC_DELAY_MS: String(SYNC_DELAY_MS) } });
    live.add(ing);
  });
  afterAll(async () => {
    if (ing) await stop(ing);
  });

  it('is counted 499, not 200, and its records are stored (the client may retry: at least once)', async () => {
    const metric = async (name: string) => (await ing.metric(name)) ?? 0;
    const ok0 = await metric('siglake_ingest_requests_total{endpoint="otlp",status="200"}');
    const gone0 = await metric('siglake_ingest_requests_total{endpoint="otlp",status="499"}');
    const written0 = await metric('siglake_wal_bytes_written_total');
    const session = await h2Session(ing.grpcAddress);
    const body = logsProto(['cancelled-after-write']);
    const call = h2Call(session, { 'x-scope-orgid': 'acme' }, body.length, body);
    let answered = false;
    void call.ended.then(() => {
      answered = true;
    });
    // The message is in and written (the WAL's byte counter moves before the round's fdatasync);
    // its round waits on the slow fdatasync. Then the client resets the stream.
    await until(async () => (await metric('siglake_wal_bytes_written_total')) > written0, 10_000, 'the call to be written to the WAL');
    expect(answered, 'the call was answered before the client could reset it').toBe(false);
    call.close();
    await until(async () => (await metric('siglake_ingest_requests_total{endpoint="otlp",status="499"}')) === gone0 + 1, 10_000, 'the call counted 499');
    session.close();
    expect(await metric('siglake_ingest_requests_total{endpoint="otlp",status="200"}')).toBe(ok0);
    expect(textsUnder(path.join(ing.walDir, 'acme'))).toEqual(['cancelled-after-write']);
  });
});

describe('small ones (item 12)', () => {
  let ing: RunningIngester;
  beforeAll(async () => {
    ing = await start([]);
  });
  afterAll(async () => {
    if (ing) await stop(ing);
  });

  it('regression (grpc-short-message): a length prefix longer than what follows, then end of stream → INVALID_ARGUMENT, nothing stored', async () => {
    const session = await h2Session(ing.grpcAddress);
    const body = logsProto(['short-message-never-lands']);
    const code = await h2Call(session, {}, body.length + 100, body, true).ended;
    session.close();
    expect(code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(await ing.metric('siglake_ingest_requests_total{endpoint="otlp",status="400"}')).toBeGreaterThanOrEqual(1);
    expect(topDirs(ing.walDir)).toEqual([]);
    figures['grpcShortMessage'] = code;
  });

  it('regression (grpc-abandoned-counted-400): calls whose stream is reset or whose connection closes mid-message are counted aborted, not refused 400; nothing stored', async () => {
    const metric = async (name: string) => (await ing.metric(name)) ?? 0;
    const bad0 = await metric('siglake_ingest_requests_total{endpoint="otlp",status="400"}');
    const aborted0 = await metric('siglake_ingest_aborted_total{endpoint="otlp"}');
    const part = logsProto(['abandoned-never-lands']);
    // Four calls declaring 64 KiB and sending a part: two reset (RST_STREAM), two on a connection then closed.
    const resets = await h2Session(ing.grpcAddress);
    const reset = [h2Call(resets, {}, 64 * 1024, part), h2Call(resets, {}, 64 * 1024, part)];
    const closed = await h2Session(ing.grpcAddress);
    const cut = [h2Call(closed, {}, 64 * 1024, part), h2Call(closed, {}, 64 * 1024, part)];
    await sleep(200);
    for (const c of reset) c.close();
    closed.destroy();
    await until(async () => (await metric('siglake_ingest_aborted_total{endpoint="otlp"}')) >= aborted0 + 4, 5000, 'four calls counted aborted');
    await sleep(200);
    resets.close();
    expect(await metric('siglake_ingest_requests_total{endpoint="otlp",status="400"}')).toBe(bad0);
    expect(topDirs(ing.walDir)).toEqual([]);
    figures['grpcAbandonedCounted'] = { aborted: (await metric('siglake_ingest_aborted_total{endpoint="otlp"}')) - aborted0, refused400: 0 };
  });

  it('regression (pipelined-counted-200): requests stored but never answered are not counted as 200', async () => {
    const before = (await ing.metric('siglake_ingest_requests_total{endpoint="otlp",status="200"}')) ?? 0;
    const one = (name: string) => {
      const b = Buffer.from(logsProto([name]));
      return Buffer.concat([Buffer.from(`POST /v1/logs HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: ${b.length}\r\n\r\n`), b]);
    };
    const n = 4;
    const bytes = Buffer.concat(Array.from({ length: n }, (_, i) => one(`pipelined-${i}`)));
    const answered = await new Promise<number>((resolve) => {
      const sock = net.connect(ing.httpPort, '127.0.0.1', () => sock.write(bytes));
      let text = '';
      sock.on('data', (d) => (text += d.toString('latin1')));
      sock.on('error', () => {});
      const done = () => resolve([...text.matchAll(/HTTP\/1\.1 200/g)].length);
      sock.on('close', done);
      setTimeout(() => {
        sock.destroy();
        done();
      }, 3000);
    });
    await new Promise((r) => setTimeout(r, 500));
    const counted = ((await ing.metric('siglake_ingest_requests_total{endpoint="otlp",status="200"}')) ?? 0) - before;
    const stored = textsUnder(path.join(ing.walDir, 'logs')).filter((t) => t.startsWith('pipelined-')).length;
    const unanswered = ((await ing.metric('siglake_ingest_requests_total{endpoint="otlp",status="499"}')) ?? 0);
    figures['pipelined'] = { sent: n, stored, answered200: answered, counted200: counted, counted499: unanswered };
    // Every stored request is counted once: as the 200 it was answered with, or as 499 (never answered).
    expect(counted + unanswered).toBe(stored);
    expect(counted).toBe(answered);
  });

  it('regression (wal-verify-sealed): `siglake wal verify` takes the writer\'s .sealed marker as its own, not as an unexpected entry', async () => {
    const dir = tempDir();
    const other = await startWalIngester({ dataDir: dir });
    live.add(other);
    const c = new Client(other);
    await expectAccepted(c, () => c.send('http', 'logs', 'sealed-marker'));
    c.close();
    await stop(other);
    const marker = path.join(other.walDir, 'logs', '.sealed');
    expect(fs.existsSync(marker)).toBe(true);
    const r = runCli(['wal', 'verify', other.walDir]);
    expect(r.status).toBe(0);
    expect(r.stdout + r.stderr).not.toMatch(/unexpected entry/);
  });

  it('regression (json-logs-on-a-terminal): on a terminal the logs are readable lines, in a pipe JSON lines', async () => {
    // script(1) gives the process a pseudo-terminal for stdout.
    const dir = tempDir();
    const cmd = [process.execPath, CLI, 'ingest', '--http-listen', '127.0.0.1:0', '--grpc-listen', '127.0.0.1:0', '--wal-dir', path.join(dir, 'wal'), '--workers', '1']
      .map((a) => `'${a}'`)
      .join(' ');
    const child = spawn('script', ['-qfec', cmd, '/dev/null'], { cwd: dir, env: { ...process.env, NO_COLOR: '1', SIGLAKE_COMPACTOR: 'false' }, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
    try {
      await until(() => /listening/.test(out), 30_000, 'the ingester to log "listening" on the terminal');
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
    const line = out.split(/\r?\n/).find((l) => l.includes('listening'))!;
    expect(line).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO  siglake: listening {2}http=\d+ grpc=\d+/);
    expect(line.trim().startsWith('{')).toBe(false);
    // Through a pipe (every other test here) the lines stay JSON.
    expect(ing.logs.length).toBeGreaterThan(0);
    figures['prettyLogLine'] = line.replace(/\d+/g, 'N');
  });
});

/**
 * An upload that stops and closes: sends its head (declaring `declared` bytes)
 * and `send` bytes of body, waits until the server has read them, then resets.
 */
async function abortedUpload(port: number, path_: string, headers: Record<string, string>, declared: number, send: Uint8Array): Promise<void> {
  const sock = net.connect(port, '127.0.0.1');
  sock.on('error', () => {});
  await new Promise<void>((resolve) => sock.once('connect', () => resolve()));
  sock.write(httpHead(path_, { 'Content-Type': 'application/x-protobuf', 'Content-Length': declared, ...headers }));
  if (send.length > 0) sock.write(send);
  // A round trip to the server's side of the socket: its handler has run before the reset.
  await new Promise((r) => setTimeout(r, 15));
  sock.resetAndDestroy();
  await new Promise<void>((resolve) => (sock.closed ? resolve() : sock.once('close', () => resolve())));
}

async function inBatches(n: number, width: number, one: (i: number) => Promise<void>): Promise<void> {
  for (let i = 0; i < n; i += width) await Promise.all(Array.from({ length: Math.min(width, n - i) }, (_, k) => one(i + k)));
}

describe('aborted uploads release everything they held (item 2)', () => {
  const ABORTS = scaled(2000, 20_000, 'SIGLAKE_ABORTED_UPLOADS');
  it(`regression (aborted-uploads-leak-slots): ${ABORTS} uploads closed mid-way, at every stage, leave no queue slot, tenant slot or byte behind`, async () => {
    // A queue of 16 and 5 tenants: before the fix 16 aborted uploads filled the
    // lane for good, and 4 under new names took every tenant slot.
    const ing = await start(['--trust-tenant-header', '--max-tenants', '5', '--ingest-queue-capacity', '16', '--request-timeout-secs', '60']);
    const sampler = new ProcSampler(ing.child.pid!, 100, false);
    const c = new Client(ing);
    try {
      const body = Buffer.from(logsProto(['aborted-upload-never-acknowledged'], 'x'.repeat(4000)));
      const stages = ['headers only', 'part of the body', 'new tenant, part of the body', 'all but the last byte'] as const;
      const per: Record<string, number> = {};
      await inBatches(ABORTS, 50, async (i) => {
        const stage = stages[i % stages.length]!;
        per[stage] = (per[stage] ?? 0) + 1;
        const org = stage === 'new tenant, part of the body' ? { 'X-Scope-OrgID': `abort-${i}` } : { 'X-Scope-OrgID': 'acme' };
        const send = stage === 'headers only' ? Buffer.alloc(0) : stage === 'all but the last byte' ? body.subarray(0, body.length - 1) : body.subarray(0, 100);
        await abortedUpload(ing.httpPort, i % 2 ? '/v1/logs' : '/v1/traces', org, body.length, send);
      });
      // Everything is given back: acme's lanes take requests, a new tenant gets a slot.
      await until(async () => (await ing.metric('siglake_ingest_inflight_bytes')) === 0, 30_000, 'the aborted uploads to give back their bytes');
      for (const t of TRANSPORTS) await expectAccepted(c, () => c.send(t, 'logs', `after-aborts-acme-${t}`, { 'x-scope-orgid': 'acme' }));
      await expectAccepted(c, () => c.send('http', 'traces', 'after-aborts-acme-traces', { 'x-scope-orgid': 'acme' }));
      for (const t of ['real-1', 'real-2', 'real-3', 'real-4']) await expectAccepted(c, () => c.send('http', 'logs', `after-aborts-${t}`, { 'x-scope-orgid': t }));
      expect((await fetch(`${ing.url}/readyz`)).status).toBe(200);
      const m = await ing.metrics();
      const aborted = (m.get('siglake_ingest_aborted_total{endpoint="otlp"}') ?? 0) + (m.get('siglake_ingest_aborted_total{endpoint="otlp_traces"}') ?? 0);
      // Each one the server saw is counted (a reset that beats the head to the
      // server is never a request; a new tenant past the cap was answered 403).
      expect(aborted).toBeGreaterThan(0);
      expect(aborted).toBeLessThanOrEqual(ABORTS);
      expect(m.get('siglake_ingest_tenants_admitted')).toBe(5);
      expect(topDirs(ing.walDir).filter((d) => d.startsWith('abort-'))).toEqual([]);
      expect(textsUnder(path.join(ing.walDir, 'acme', 'logs')).filter((t) => t.startsWith('aborted-upload'))).toEqual([]);
      sampler.stop();
      figures['abortedUploads'] = { aborts: ABORTS, perStage: per, counted: aborted, maxRssMiB: Math.round(sampler.maxRss / MiB), maxFds: sampler.maxFds };
      expect(sampler.maxRss).toBeLessThan(768 * MiB);
    } finally {
      sampler.stop();
      c.close();
      await stop(ing);
    }
  }, 600_000);
});

describe('bytes in flight are bounded, and the breaker sees them (item 5)', () => {
  it('regression (inflight-bytes-unbounded): past --ingest-max-inflight-mib a request is refused 503 + Retry-After: 1 before its body is read', async () => {
    const ing = await start(['--ingest-max-inflight-mib', '8', '--request-timeout-secs', '60']);
    const c = new Client(ing);
    const socks: net.Socket[] = [];
    try {
      const declared = 2 * MiB;
      // Four stalled 2 MiB uploads hold the 8 MiB.
      for (let i = 0; i < 4; i++) {
        const sock = net.connect(ing.httpPort, '127.0.0.1');
        sock.on('error', () => {});
        await new Promise<void>((resolve) => sock.once('connect', () => resolve()));
        sock.write(httpHead('/v1/logs', { 'Content-Type': 'application/x-protobuf', 'Content-Length': declared }));
        sock.write(Buffer.alloc(10));
        socks.push(sock);
      }
      await until(async () => (await ing.metric('siglake_ingest_inflight_bytes')) === 4 * declared, 10_000, '8 MiB in flight');
      const r = await rawRequest(ing.httpPort, httpHead('/v1/logs', { 'Content-Type': 'application/x-protobuf', 'Content-Length': declared }), Buffer.alloc(0), { maxMs: 10_000 });
      expect(r.status).toBe(503);
      expect(r.text).toMatch(/retry-after: 1/i);
      expect(r.text).toContain('SIGLAKE_INFLIGHT_FULL');
      expect(await ing.metric('siglake_ingest_inflight_bytes_rejected_total')).toBe(1);
      // An ordinary small batch (≤ 64 KiB) is never locked out by large uploads holding the bound.
      await expectAccepted(c, () => c.send('http', 'logs', 'small-beside-inflight-bound'));
      for (const s of socks) s.resetAndDestroy();
      await until(async () => (await ing.metric('siglake_ingest_inflight_bytes')) === 0, 10_000, 'the stalled uploads to give back their bytes');
      await expectAccepted(c, () => c.send('http', 'logs', 'after-inflight-bound'));
      figures['inflightBound'] = { heldMiB: 8, refused: r.status };
    } finally {
      for (const s of socks) s.destroy();
      c.close();
      await stop(ing);
    }
  });

  it('regression (breaker-blind-to-uploads): with --mem-breaker-limit-mib, uploads in flight count toward the limit before RSS shows them', async () => {
    const LIMIT_MIB = 600;
    const ing = await start(['--mem-breaker-limit-mib', String(LIMIT_MIB), '--ingest-max-inflight-mib', '4096', '--request-timeout-secs', '60']);
    const sampler = new ProcSampler(ing.child.pid!, 100, false);
    const n = scaled(60, 200);
    const socks: net.Socket[] = [];
    try {
      const declared = 15 * MiB;
      const statuses: number[] = [];
      for (let i = 0; i < n; i++) {
        const r = await new Promise<number>((resolve) => {
          const sock = net.connect(ing.httpPort, '127.0.0.1');
          socks.push(sock);
          sock.on('error', () => resolve(-1));
          let got = '';
          sock.on('data', (d) => {
            got += d.toString('latin1');
            const m = /^HTTP\/1\.1 (\d{3})/.exec(got);
            if (m) resolve(Number(m[1]));
          });
          sock.once('connect', () => {
            sock.write(httpHead('/v1/logs', { 'Content-Type': 'application/x-protobuf', 'Content-Length': declared }));
            sock.write(Buffer.alloc(64 * 1024));
            // Held (no answer yet) after a short while: counted as held.
            setTimeout(() => resolve(0), 100);
          });
        });
        statuses.push(r);
      }
      const held = statuses.filter((s) => s === 0).length;
      const refused = statuses.filter((s) => s === 503).length;
      sampler.stop();
      figures['breakerSeesInflight'] = { uploads: n, held, refused503: refused, maxRssMiB: Math.round(sampler.maxRss / MiB), maxFds: sampler.maxFds, limitMiB: LIMIT_MIB };
      // The breaker refused while RSS itself stayed far below the limit: it counted the declared bytes.
      expect(refused).toBeGreaterThan(0);
      expect(sampler.maxRss).toBeLessThan(LIMIT_MIB * MiB);
      expect(held * declared).toBeLessThan(LIMIT_MIB * MiB);
      expect(await ing.metric('siglake_ingest_mem_breaker_rejected_total')).toBe(refused);
    } finally {
      sampler.stop();
      for (const s of socks) s.destroy();
      await stop(ing);
    }
  }, 120_000);
});

describe('Transfer-Encoding other than exactly chunked (item 11)', () => {
  it('regression (transfer-encoding-decoded-as-chunked): xchunked and "gzip, chunked" → 501, closed, nothing stored', async () => {
    const ing = await start([]);
    try {
      const outcomes: Record<string, number> = {};
      for (const te of ['xchunked', 'gzip, chunked', 'chunked, chunked']) {
        const b = Buffer.from(logsProto([`te-${te}`]));
        const chunked = Buffer.concat([Buffer.from(`${b.length.toString(16)}\r\n`), b, Buffer.from('\r\n0\r\n\r\n')]);
        const r = await rawRequest(ing.httpPort, httpHead('/v1/logs', { 'Content-Type': 'application/x-protobuf', 'Transfer-Encoding': te }), chunked, { maxMs: 10_000 });
        outcomes[te] = r.status;
      }
      figures['transferEncoding'] = outcomes;
      expect(outcomes).toEqual({ xchunked: 501, 'gzip, chunked': 501, 'chunked, chunked': 501 });
      expect(topDirs(ing.walDir)).toEqual([]);
      const r = await rawRequest(ing.httpPort, httpHead('/v1/logs', { 'Content-Type': 'application/x-protobuf', 'Transfer-Encoding': 'Chunked' }), Buffer.from('0\r\n\r\n'), { maxMs: 10_000 });
      expect(r.status).toBe(200);
    } finally {
      await stop(ing);
    }
  });
});

describe('an oversized Content-Length body gets the 413, not a reset (item 7, --max-request-bytes 1048576)', () => {
  let ing: RunningIngester;
  beforeAll(async () => {
    ing = await start(['--max-request-bytes', '1048576']);
  });
  afterAll(async () => {
    if (ing) await stop(ing);
  });

  it('regression (oversized-body-reset): plain http.request and fetch writing 5 MiB see 413 every time', async () => {
    const body = Buffer.alloc(5 * MiB, 0x0a);
    const tries = scaled(10, 100);
    const plain: string[] = [];
    for (let i = 0; i < tries; i++) {
      plain.push(
        await new Promise<string>((resolve) => {
          const req = http.request(
            { host: '127.0.0.1', port: ing.httpPort, method: 'POST', path: '/v1/logs', headers: { 'Content-Type': 'application/x-protobuf', 'Content-Length': body.length } },
            (res) => {
              res.resume();
              resolve(String(res.statusCode));
            },
          );
          req.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
          req.end(body);
        }),
      );
    }
    const viaFetch: string[] = [];
    for (let i = 0; i < tries; i++) {
      viaFetch.push(
        await fetch(`${ing.url}/v1/logs`, { method: 'POST', headers: { 'Content-Type': 'application/x-protobuf' }, body }).then(
          (r) => String(r.status),
          (e: Error) => `${e.message}: ${String((e.cause as Error | undefined)?.message)}`,
        ),
      );
    }
    figures['oversizedBody'] = { tries, plain: count(plain), fetch: count(viaFetch) };
    expect(plain).toEqual(Array(tries).fill('413'));
    expect(viaFetch).toEqual(Array(tries).fill('413'));
  });

  it('the drain cannot hold the server: a client that never stops writing gets the 413 and is closed, by time and by bytes', async () => {
    const head = httpHead('/v1/logs', { 'Content-Type': 'application/x-protobuf', 'Content-Length': 256 * MiB });
    // By time: a trickle (never idle long enough for the idle timeout) is cut.
    const trickle = await rawRequest(ing.httpPort, head, Buffer.alloc(64 * MiB), { piece: 1024, everyMs: 20, maxMs: 60_000 });
    expect(trickle.status).toBe(413);
    expect(trickle.text).toContain('SIGLAKE_BODY_TOO_LARGE');
    // By bytes: a fast writer is cut long before its 256 MiB are through.
    let written = 0;
    const fast = await new Promise<{ status: number; written: number }>((resolve) => {
      const sock = net.connect(ing.httpPort, '127.0.0.1');
      let got = '';
      const chunk = Buffer.alloc(256 * 1024);
      sock.on('data', (d) => (got += d.toString('latin1')));
      sock.on('error', () => {});
      sock.on('close', () => resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(got)?.[1] ?? -1), written }));
      sock.on('connect', () => {
        sock.write(head);
        const pump = () => {
          while (!sock.destroyed && written < 256 * MiB) {
            written += chunk.length;
            if (!sock.write(chunk)) {
              sock.once('drain', pump);
              return;
            }
          }
        };
        pump();
      });
    });
    figures['lingerBounds'] = { trickle: trickle.status, fastStatus: fast.status, fastWrittenMiB: Math.round(fast.written / MiB) };
    // Past the linger bytes the server answers and closes at once; a client still
    // blasting may see a reset then: the bound protects the server, not that client.
    expect(fast.written).toBeLessThan(128 * MiB);
    expect((await fetch(`${ing.url}/healthz`)).status).toBe(200);
  }, 120_000);
});

function count(xs: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const x of xs) out[x] = (out[x] ?? 0) + 1;
  return out;
}
