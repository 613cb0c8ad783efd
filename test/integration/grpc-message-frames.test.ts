// A gRPC message's framing and its bytes while it arrives, against the real
// process over node:http2 (exact frames) and grpc-js (a real client). Found by
// a red-team review of the gRPC port (docs/reliability.md, findings 61–63):
// a message still being received was counted nowhere in
// --ingest-max-inflight-mib; malformed framing (a compressed flag without an
// encoding, a flag byte of 2, bytes after the one message of a unary call) was
// stored; and some refusals grpc-js sends itself came without an ErrorInfo,
// with a code the contract does not give them, uncounted.

import http2 from 'node:http2';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOGS_EXPORT, RawGrpcClient } from '../helpers/grpc-client.js';
import { startIngester, type RunningIngester } from '../helpers/ingester.js';
import { logsProto } from '../helpers/otlp-bodies.js';
import { decodeStatusProto, errorInfoOf } from '../helpers/rpc-status.js';
import { walBytes } from '../helpers/tenancy-client.js';

const MiB = 1024 * 1024;

interface Answer {
  http: number;
  code: number;
  errorCode: string | undefined;
  retryAfter: string | undefined;
}

/** A gRPC call over its own HTTP/2 connection: exact headers, exact body bytes; `end` false leaves the stream open. */
function h2Call(address: string, body: Buffer | Buffer[], opts: { headers?: Record<string, string>; end?: boolean } = {}): { answered: Promise<Answer>; close(): void } {
  const session = http2.connect(`http://${address}`);
  session.on('error', () => undefined);
  const req = session.request({ ':method': 'POST', ':path': LOGS_EXPORT, 'content-type': 'application/grpc', te: 'trailers', ...opts.headers }, { endStream: false });
  req.on('error', () => undefined);
  req.on('data', () => undefined);
  const answered = new Promise<Answer>((resolve) => {
    const a: Answer = { http: 0, code: -1, errorCode: undefined, retryAfter: undefined };
    const take = (h: http2.IncomingHttpHeaders) => {
      if (h[':status'] !== undefined) a.http = Number(h[':status']);
      if (h['grpc-status'] !== undefined) a.code = Number(h['grpc-status']);
      if (h['retry-after'] !== undefined) a.retryAfter = String(h['retry-after']);
      const bin = h['grpc-status-details-bin'];
      if (bin !== undefined) a.errorCode = errorInfoOf(decodeStatusProto(Buffer.from(String(bin), 'base64'))).reason;
      if (a.code !== -1) resolve(a);
    };
    req.on('response', take);
    req.on('trailers', take);
    req.on('close', () => resolve(a));
  });
  if (Array.isArray(body)) {
    // One DATA frame each: the next goes once the server has had time to read the last.
    void (async () => {
      for (const part of body) {
        req.write(part);
        await new Promise((r) => setTimeout(r, 100));
      }
      if (opts.end !== false) req.end();
    })();
  } else {
    if (body.length > 0) req.write(body);
    if (opts.end !== false) req.end();
  }
  return {
    answered,
    close: () => {
      req.close(http2.constants.NGHTTP2_CANCEL);
      session.destroy();
    },
  };
}

/** The 5-byte gRPC prefix of a message: its flag byte and the length it declares. */
function prefix(flag: number, length: number): Buffer {
  const p = Buffer.alloc(5);
  p[0] = flag;
  p.writeUInt32BE(length, 1);
  return p;
}

const framed = (msg: Uint8Array, flag = 0): Buffer => Buffer.concat([prefix(flag, msg.length), msg]);

async function until(cond: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const requests = (m: Map<string, number>, status: number): number => m.get(`siglake_ingest_requests_total{endpoint="otlp",status="${status}"}`) ?? 0;

describe('bytes of a gRPC message still being received (--ingest-max-inflight-mib 8)', () => {
  let ing: RunningIngester;
  beforeAll(async () => {
    ing = await startIngester({ args: ['--compactor=false', '--ingest-max-inflight-mib', '8'] });
  });
  afterAll(async () => {
    await ing?.stop();
  });

  it('regression (grpc-inflight-unbounded): a 6 MiB message counts from its length prefix; a second is refused UNAVAILABLE SIGLAKE_INFLIGHT_FULL; a cancel gives the bytes back', async () => {
    const inflight = async () => (await ing.metric('siglake_ingest_inflight_bytes')) ?? -1;
    // All but the last byte of a 6 MiB message, then nothing.
    const a = h2Call(ing.grpcAddress, Buffer.concat([prefix(0, 6 * MiB), Buffer.alloc(6 * MiB - 1)]), { end: false });
    await until(async () => (await inflight()) >= 6 * MiB, 5000, 'the stalled message counted in flight').catch(async (e: unknown) => {
      throw new Error(`${String(e)}: siglake_ingest_inflight_bytes = ${await inflight()}`);
    });
    // A second one: 12 MiB would be in flight, past the bound of 8.
    const b = h2Call(ing.grpcAddress, Buffer.concat([prefix(0, 6 * MiB), Buffer.alloc(1024)]), { end: false });
    const refused = await Promise.race([b.answered, new Promise<undefined>((r) => setTimeout(() => r(undefined), 5000))]);
    b.close();
    expect(refused, 'the second message is refused at its length prefix').toMatchObject({ code: 14, errorCode: 'SIGLAKE_INFLIGHT_FULL', retryAfter: '1' });
    const m = await ing.metrics();
    expect(m.get('siglake_ingest_inflight_bytes_rejected_total')).toBe(1);
    expect(requests(m, 503)).toBe(1);
    expect(await inflight()).toBe(6 * MiB);
    // The client gives up: its bytes come back at once.
    a.close();
    await until(async () => (await inflight()) === 0, 5000, 'the cancelled message released');
    // A whole 6 MiB message from grpc-js: accepted, counted once, and nothing left in flight after.
    const client = new RawGrpcClient(ing.grpcAddress);
    try {
      const r = await client.export('logs', logsProto(['x'.repeat(6 * MiB)]));
      expect(r.code, r.details).toBe(0);
    } finally {
      client.close();
    }
    expect(await inflight()).toBe(0);
  });
});

describe('malformed gRPC framing', () => {
  let ing: RunningIngester;
  beforeAll(async () => {
    ing = await startIngester({ args: ['--compactor=false'] });
  });
  afterAll(async () => {
    await ing?.stop();
  });

  const msg = Buffer.from(logsProto(['framing']));
  for (const [name, body, headers] of [
    ['compressed flag 1 without a grpc-encoding', framed(msg, 1), {}],
    ['compressed flag 1 with grpc-encoding identity', framed(msg, 1), { 'grpc-encoding': 'identity' }],
    ['flag byte 0x02', framed(msg, 2), {}],
    ['a message, then 2 bytes of a second length prefix', Buffer.concat([framed(msg), Buffer.from([0, 0])]), {}],
    ['two messages on a unary call', Buffer.concat([framed(msg), framed(msg)]), {}],
  ] as const) {
    it(`regression (grpc-framing-stored): ${name} → INVALID_ARGUMENT SIGLAKE_BAD_BODY, counted 400, nothing stored`, async () => {
      const before = await ing.metrics();
      const wal = walBytes(ing.walDir);
      const r = await h2Call(ing.grpcAddress, body, { headers }).answered;
      expect(r).toMatchObject({ code: 3, errorCode: 'SIGLAKE_BAD_BODY' });
      const after = await ing.metrics();
      expect(requests(after, 400) - requests(before, 400)).toBe(1);
      expect(requests(after, 200)).toBe(requests(before, 200));
      await new Promise((r) => setTimeout(r, 200));
      expect(walBytes(ing.walDir)).toBe(wal);
    });
  }

  it('regression (grpc-framing-stored): bytes after the message in a later DATA frame → refused, its half-close never reaches the handler', async () => {
    const before = await ing.metrics();
    const wal = walBytes(ing.walDir);
    const session = http2.connect(`http://${ing.grpcAddress}`);
    session.on('error', () => undefined);
    const req = session.request({ ':method': 'POST', ':path': LOGS_EXPORT, 'content-type': 'application/grpc', te: 'trailers' }, { endStream: false });
    req.on('error', () => undefined);
    req.on('data', () => undefined);
    let status = -1;
    let reason: string | undefined;
    const done = new Promise<void>((resolve) => {
      const take = (h: http2.IncomingHttpHeaders) => {
        if (h['grpc-status'] !== undefined) status = Number(h['grpc-status']);
        const bin = h['grpc-status-details-bin'];
        if (bin !== undefined) reason = errorInfoOf(decodeStatusProto(Buffer.from(String(bin), 'base64'))).reason;
      };
      req.on('response', take);
      req.on('trailers', take);
      req.on('close', () => resolve());
    });
    req.write(framed(msg));
    await new Promise((r) => setTimeout(r, 300));
    req.end(Buffer.from([0, 0, 0]));
    await done;
    session.destroy();
    expect({ status, reason }).toEqual({ status: 3, reason: 'SIGLAKE_BAD_BODY' });
    const after = await ing.metrics();
    expect(requests(after, 400) - requests(before, 400)).toBe(1);
    expect(requests(after, 200)).toBe(requests(before, 200));
    await new Promise((r) => setTimeout(r, 200));
    expect(walBytes(ing.walDir)).toBe(wal);
  });

  it('well-formed framing still passes: gzip with the compressed flag, and a prefix split over DATA frames', async () => {
    const before = requests(await ing.metrics(), 200);
    expect((await h2Call(ing.grpcAddress, framed(zlib.gzipSync(msg), 1), { headers: { 'grpc-encoding': 'gzip' } }).answered).code).toBe(0);
    const whole = framed(msg, 0);
    expect((await h2Call(ing.grpcAddress, [whole.subarray(0, 1), whole.subarray(1, 3), whole.subarray(3, 8), whole.subarray(8)]).answered).code).toBe(0);
    expect(requests(await ing.metrics(), 200) - before).toBe(2);
  });
});

describe('refusals grpc-js sends itself carry the contract code and ErrorInfo, and are counted', () => {
  let ing: RunningIngester;
  beforeAll(async () => {
    ing = await startIngester({ args: ['--compactor=false'] });
  });
  afterAll(async () => {
    await ing?.stop();
  });
  const body = framed(Buffer.from(logsProto(['grpc-js-refusal'])));

  it('regression (grpc-uncounted-refusals): a content type that is not application/grpc → HTTP 415 with grpc-status INVALID_ARGUMENT SIGLAKE_UNSUPPORTED_MEDIA, counted 415', async () => {
    const before = await ing.metrics();
    const r = await h2Call(ing.grpcAddress, body, { headers: { 'content-type': 'application/json' } }).answered;
    // :status stays 415, so that a client which is not gRPC never reads a success.
    expect(r).toMatchObject({ http: 415, code: 3, errorCode: 'SIGLAKE_UNSUPPORTED_MEDIA' });
    const after = await ing.metrics();
    expect(requests(after, 415) - requests(before, 415)).toBe(1);
    expect(requests(after, 200)).toBe(requests(before, 200));
  });

  it('regression (grpc-content-subtype-read-as-protobuf): application/grpc+json, grpc-web and grpcfoo → 415 SIGLAKE_UNSUPPORTED_MEDIA, nothing stored; +proto and parameters accepted', async () => {
    for (const type of ['application/grpc+json', 'application/grpc-web', 'application/grpc-web+proto', 'application/grpcfoo']) {
      const before = await ing.metrics();
      const wal = walBytes(ing.walDir);
      const r = await h2Call(ing.grpcAddress, body, { headers: { 'content-type': type } }).answered;
      expect([type, r.http, r.code, r.errorCode]).toEqual([type, 415, 3, 'SIGLAKE_UNSUPPORTED_MEDIA']);
      const after = await ing.metrics();
      expect(requests(after, 415) - requests(before, 415)).toBe(1);
      expect(requests(after, 200)).toBe(requests(before, 200));
      expect(walBytes(ing.walDir)).toBe(wal);
    }
    for (const type of ['application/grpc', 'application/grpc+proto', 'application/grpc; charset=utf-8', 'application/grpc+proto;x=1']) {
      const r = await h2Call(ing.grpcAddress, body, { headers: { 'content-type': type } }).answered;
      expect([type, r.code]).toEqual([type, 0]);
    }
  });

  it('regression (grpc-non-post-method-served): a call whose :method is not POST → HTTP 405, INVALID_ARGUMENT SIGLAKE_BAD_HEADER, counted 400, nothing stored', async () => {
    for (const method of ['PUT', 'PATCH', 'DELETE']) {
      const before = await ing.metrics();
      const wal = walBytes(ing.walDir);
      const r = await h2Call(ing.grpcAddress, body, { headers: { ':method': method } }).answered;
      expect([method, r.http, r.code, r.errorCode]).toEqual([method, 405, 3, 'SIGLAKE_BAD_HEADER']);
      const after = await ing.metrics();
      expect(requests(after, 400) - requests(before, 400)).toBe(1);
      expect(requests(after, 200)).toBe(requests(before, 200));
      expect(walBytes(ing.walDir)).toBe(wal);
    }
  });

  it('regression (grpc-uncounted-refusals): a grpc-timeout that does not parse → INVALID_ARGUMENT SIGLAKE_BAD_HEADER (not INTERNAL), counted 400, nothing stored', async () => {
    const before = await ing.metrics();
    const wal = walBytes(ing.walDir);
    const r = await h2Call(ing.grpcAddress, body, { headers: { 'grpc-timeout': 'xyz' } }).answered;
    expect(r).toMatchObject({ code: 3, errorCode: 'SIGLAKE_BAD_HEADER' });
    await new Promise((r) => setTimeout(r, 200));
    const after = await ing.metrics();
    expect(requests(after, 400) - requests(before, 400)).toBe(1);
    expect(requests(after, 200)).toBe(requests(before, 200));
    expect(walBytes(ing.walDir)).toBe(wal);
  });

  it('regression (grpc-uncounted-refusals): two messages on a unary call, each in its own DATA frame → INVALID_ARGUMENT SIGLAKE_BAD_BODY, counted 400', async () => {
    const before = await ing.metrics();
    const r = await h2Call(ing.grpcAddress, [body, body]).answered;
    expect(r).toMatchObject({ code: 3, errorCode: 'SIGLAKE_BAD_BODY' });
    await new Promise((r) => setTimeout(r, 200));
    const after = await ing.metrics();
    expect(requests(after, 400) - requests(before, 400)).toBe(1);
    expect(requests(after, 200)).toBe(requests(before, 200));
  });
});
