// Raw HTTP/2 frames at the gRPC port, from a client with no credentials.
// Found by a red-team review (stop 47): grpc-js answers a stream without an
// application/grpc content type (415), or for an unknown path, from the
// session's 'stream' event; when the same write also held a connection error
// (a HEADERS frame on stream 0), Node had torn the session down first, and
// grpc-js's respond() on the destroyed stream threw out of an event emitter:
// 69 bytes ended `siglake ingest`, every tenant with it. So did a flood of
// ~1,100 such streams in one write.

import hpack from 'hpack.js';
import fs from 'node:fs';
import net from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { LOGS_EXPORT } from '../helpers/grpc-client.js';
import { startIngester, type RunningIngester } from '../helpers/ingester.js';
import { logsProto } from '../helpers/otlp-bodies.js';
import { decodeStatusProto, errorInfoOf } from '../helpers/rpc-status.js';
import { walBytes } from '../helpers/tenancy-client.js';

const running: RunningIngester[] = [];
afterEach(async () => {
  for (const i of running.splice(0)) await i.stop();
});

function frame(type: number, flags: number, stream: number, payload: Buffer): Buffer {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(stream, 5);
  return Buffer.concat([h, payload]);
}

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
const SETTINGS = frame(4, 0, 0, Buffer.alloc(0));
const HEADERS = 1;
const END_STREAM_HEADERS = 0x5;
/** HPACK: :method POST, :scheme http, :authority "x" (literal), :path "/x" (literal); no content-type. */
const NO_CONTENT_TYPE = Buffer.from([0x83, 0x86, 0x41, 1, 0x78, 0x44, 2, 0x2f, 0x78]);
/** HPACK: the same, :path "/nope" and content-type application/grpc: an unknown method. */
const UNKNOWN_PATH = Buffer.concat([Buffer.from([0x83, 0x86, 0x41, 1, 0x78, 0x44, 5]), Buffer.from('/nope'), Buffer.from([0x0f, 0x10, 16]), Buffer.from('application/grpc')]);

async function blast(port: number, bytes: Buffer): Promise<void> {
  const s = net.connect(port, '127.0.0.1');
  s.on('error', () => undefined);
  s.on('data', () => undefined);
  await new Promise<void>((r) => s.on('connect', () => r()));
  s.write(bytes);
  // Long enough for the session to be torn down and grpc-js's queued 'stream' events to run.
  await new Promise((r) => setTimeout(r, 800));
  s.destroy();
}

async function stillServes(ing: RunningIngester, token?: string): Promise<void> {
  expect(ing.exitCode, ing.stderr).toBeNull();
  expect((await fetch(`${ing.url}/readyz`)).status).toBe(200);
  const r = await fetch(`${ing.url}/v1/logs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) },
    body: JSON.stringify({ resourceLogs: [{ scopeLogs: [{ logRecords: [{ body: { stringValue: 'after' } }] }] }] }),
  });
  expect(r.status).toBe(200);
}

describe('the gRPC port under raw HTTP/2 frames', () => {
  for (const [name, block] of [
    ['no content type', NO_CONTENT_TYPE],
    ['an unknown path', UNKNOWN_PATH],
  ] as const) {
    it(`a stream grpc-js answers itself (${name}) and a connection error in one write: the ingester lives on`, async () => {
      const ing = await startIngester({ args: ['--compactor=false', '--auth-bearer-tokens', 's3cret'] });
      running.push(ing);
      for (let i = 0; i < 3; i++) {
        await blast(ing.grpcPort, Buffer.concat([PREFACE, SETTINGS, frame(HEADERS, END_STREAM_HEADERS, 1, block), frame(HEADERS, END_STREAM_HEADERS, 0, block)]));
      }
      await stillServes(ing, 's3cret');
    });
  }

  it('1,200 such streams in one write: the ingester lives on', async () => {
    const ing = await startIngester({ args: ['--compactor=false'] });
    running.push(ing);
    const parts = [PREFACE, SETTINGS];
    // The first stream's literals enter the dynamic table (:authority 63, :path 62): the rest index them.
    for (let i = 0; i < 1200; i++) parts.push(frame(HEADERS, END_STREAM_HEADERS, 1 + 2 * i, i === 0 ? NO_CONTENT_TYPE : Buffer.from([0x83, 0x86, 0xbf, 0xbe])));
    await blast(ing.grpcPort, Buffer.concat(parts));
    await stillServes(ing);
  });
});

/** HPACK literal without indexing (or with incremental indexing), new name, no Huffman. */
function literal(name: string, value: string, index = false): Buffer {
  const n = Buffer.from(name, 'latin1');
  const v = Buffer.from(value, 'latin1');
  return Buffer.concat([Buffer.from([index ? 0x40 : 0x00, n.length]), n, Buffer.from([v.length]), v]);
}

/** A gRPC message frame: flag 0, 4-byte length, the message. */
function grpcMessage(msg: Uint8Array): Buffer {
  const p = Buffer.alloc(5);
  p.writeUInt32BE(msg.length, 1);
  return Buffer.concat([p, msg]);
}

/** A gRPC message frame compressed with gzip: flag 1, 4-byte length, the gzip bytes. */
function gzipMessage(msg: Uint8Array): Buffer {
  const z = gzipSync(msg);
  const p = Buffer.alloc(5);
  p[0] = 1;
  p.writeUInt32BE(z.length, 1);
  return Buffer.concat([p, z]);
}

/** Every header the server sent on `stream` (HEADERS frames of all streams decoded in order, to keep the table). */
function serverHeaders(bytes: Buffer, stream: number): Record<string, string> {
  const dec = hpack.decompressor.create({ table: { maxSize: 4096 } });
  const out: Record<string, string> = {};
  let off = 0;
  while (bytes.length - off >= 9) {
    const len = bytes.readUIntBE(off, 3);
    if (bytes.length - off - 9 < len) break;
    const type = bytes[off + 3]!;
    const id = bytes.readUInt32BE(off + 5) & 0x7fffffff;
    if (type === HEADERS) {
      dec.write(bytes.subarray(off + 9, off + 9 + len));
      dec.execute();
      for (let h = dec.read(); h !== null; h = dec.read()) if (id === stream) out[h.name] = h.value;
    }
    off += 9 + len;
  }
  return out;
}

describe('the header tap past its bound (MAX_REMEMBERED, 4,096 streams)', () => {
  it('regression (tap-evict): a call whose X-Scope-OrgID HTTP/2 drops, then 4,096 more such streams in one write → INVALID_ARGUMENT SIGLAKE_BAD_HEADER, nothing stored for default', async () => {
    // 8,192 streams a connection: nghttp2 opens every one (none refused), so the
    // tap's record of stream 1 is evicted before grpc-js asks for it.
    const ing = await startIngester({
      args: ['--compactor=false', '--auth-bearer-tokens', 'tokA', '--trust-tenant-header', '--grpc-max-streams-per-connection', '8192'],
    });
    running.push(ing);
    const walBefore = walBytes(ing.walDir);
    const call = Buffer.concat([
      Buffer.from([0x83, 0x86]),
      literal(':authority', 'x'),
      literal(':path', LOGS_EXPORT),
      literal('content-type', 'application/grpc'),
      literal('te', 'trailers'),
      literal('authorization', 'Bearer tokA'),
      literal('x-scope-orgid', ' evil'),
    ]);
    const parts = [PREFACE, SETTINGS, frame(HEADERS, 0x4, 1, call), frame(0, 0x1, 1, grpcMessage(logsProto(['smuggled-into-default'])))];
    // Streams 3, 5, …: :method POST, :scheme http, :path / and a dropped X-Scope-OrgID (indexed
    // after the first); grpc-js answers each 415 without a call, so none claims its record.
    for (let i = 0; i < 4096; i++) {
      const block = i === 0 ? Buffer.concat([Buffer.from([0x83, 0x86, 0x84]), literal(':authority', 'x', true), literal('x-scope-orgid', ' bad', true)]) : Buffer.from([0x83, 0x86, 0x84, 0xbf, 0xbe]);
      parts.push(frame(HEADERS, END_STREAM_HEADERS, 3 + 2 * i, block));
    }
    const s = net.connect(ing.grpcPort, '127.0.0.1');
    s.on('error', () => undefined);
    const got: Buffer[] = [];
    s.on('data', (d: Buffer) => got.push(d));
    await new Promise<void>((r) => s.on('connect', () => r()));
    s.write(Buffer.concat(parts));
    let answer: Record<string, string> = {};
    for (let t = Date.now(); Date.now() - t < 10_000; await new Promise((r) => setTimeout(r, 100))) {
      answer = serverHeaders(Buffer.concat(got), 1);
      if (answer['grpc-status'] !== undefined) break;
    }
    s.destroy();
    expect(answer['grpc-status'], JSON.stringify(answer)).toBe('3'); // INVALID_ARGUMENT
    expect(errorInfoOf(decodeStatusProto(Buffer.from(answer['grpc-status-details-bin'] ?? '', 'base64'))).reason).toBe('SIGLAKE_BAD_HEADER');
    const m = await ing.metrics();
    expect(m.get('siglake_ingest_requests_total{endpoint="otlp",status="400"}')).toBe(1);
    expect(m.get('siglake_ingest_requests_total{endpoint="otlp",status="200"}') ?? 0).toBe(0);
    await new Promise((r) => setTimeout(r, 300));
    expect(walBytes(ing.walDir)).toBe(walBefore);
    await stillServes(ing, 'tokA');
  });
});

describe('HTTP/1.1 at the gRPC port', () => {
  it('curl or an OTLP/HTTP exporter pointed at it gets a 505 naming the OTLP/HTTP port, not HTTP/2 bytes; nothing stored', async () => {
    const ing = await startIngester({});
    running.push(ing);
    const walBefore = walBytes(ing.walDir);
    const body = JSON.stringify({ resourceLogs: [{ scopeLogs: [{ logRecords: [{ body: { stringValue: 'wrong-port' } }] }] }] });
    for (const request of [
      'GET / HTTP/1.1\r\nhost: x\r\n\r\n',
      `POST /v1/logs HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
      // An h2c upgrade (gRPC takes prior knowledge only).
      'GET / HTTP/1.1\r\nhost: x\r\nconnection: Upgrade, HTTP2-Settings\r\nupgrade: h2c\r\nhttp2-settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n',
    ]) {
      const s = net.connect(ing.grpcPort, '127.0.0.1');
      const got: Buffer[] = [];
      s.on('data', (d: Buffer) => got.push(d));
      const closed = new Promise<void>((r) => s.on('close', () => r()));
      await new Promise<void>((r) => s.on('connect', () => r()));
      s.write(request);
      await closed;
      const text = Buffer.concat(got).toString('utf8');
      expect(text.split('\r\n')[0], text).toBe('HTTP/1.1 505 HTTP Version Not Supported');
      expect(text).toContain('this is the OTLP/gRPC port: it speaks HTTP/2 only (gRPC). Send OTLP/HTTP (/v1/logs, /v1/traces) to the OTLP/HTTP port (default 4318).');
    }
    expect(walBytes(ing.walDir)).toBe(walBefore);
    await stillServes(ing);
  });
});

describe('HTTP/1.1 clients at the gRPC port that never close', () => {
  it('are cut within seconds of the 505: no descriptor is held for them', async () => {
    const ing = await startIngester({});
    running.push(ing);
    const fds = () => fs.readdirSync(`/proc/${ing.child.pid}/fd`).length;
    const before = fds();
    const sockets: net.Socket[] = [];
    const closed: Promise<void>[] = [];
    for (let i = 0; i < 40; i++) {
      // Half-open allowed: the client keeps its side open after the server's FIN, and trickles bytes.
      const s = net.connect({ port: ing.grpcPort, host: '127.0.0.1', allowHalfOpen: true });
      s.on('error', () => undefined);
      s.on('data', () => undefined);
      closed.push(new Promise<void>((r) => s.on('close', () => r())));
      await new Promise<void>((r) => s.on('connect', () => r()));
      s.write('POST /v1/logs HTTP/1.1\r\nhost: x\r\ncontent-length: 1000000\r\n\r\n');
      sockets.push(s);
    }
    const trickle = setInterval(() => {
      for (const s of sockets) if (!s.destroyed) s.write('x');
    }, 200);
    try {
      await Promise.race([Promise.all(closed), new Promise((r) => setTimeout(r, 8_000))]);
      expect(sockets.filter((s) => !s.destroyed), 'every socket closed by the server').toEqual([]);
      expect(fds()).toBeLessThanOrEqual(before + 2);
    } finally {
      clearInterval(trickle);
      for (const s of sockets) s.destroy();
    }
    await stillServes(ing);
  });
});

describe('the --grpc-max-streams pool and gzip messages (what an OpenTelemetry Collector sends)', () => {
  it('regression (grpc-pool-preempts-arrived-gzip): a call whose whole gzip message arrived keeps its slot; the other tenant’s call is refused instead', async () => {
    // One write: two calls of `busy`, each with its whole gzip message, fill a pool of 2;
    // then a call of `other`, under its fair share (1 of 2). grpc-js decompresses a gzip
    // message on the thread pool before the acceptor sees it: `busy`'s calls looked as if
    // still waiting for their message, and the oldest was taken (UNAVAILABLE) though its
    // client had sent it all.
    const ing = await startIngester({ args: ['--compactor=false', '--trust-tenant-header', '--grpc-max-streams', '2'] });
    running.push(ing);
    const call = (stream: number, tenant: string, text: string): Buffer[] => [
      frame(
        HEADERS,
        0x4,
        stream,
        Buffer.concat([
          Buffer.from([0x83, 0x86]),
          literal(':authority', 'x'),
          literal(':path', LOGS_EXPORT),
          literal('content-type', 'application/grpc'),
          literal('te', 'trailers'),
          literal('grpc-encoding', 'gzip'),
          literal('x-scope-orgid', tenant),
        ]),
      ),
      frame(0, 0x1, stream, gzipMessage(logsProto([text]))),
    ];
    const s = net.connect(ing.grpcPort, '127.0.0.1');
    s.on('error', () => undefined);
    const got: Buffer[] = [];
    s.on('data', (d: Buffer) => got.push(d));
    await new Promise<void>((r) => s.on('connect', () => r()));
    s.write(Buffer.concat([PREFACE, SETTINGS, ...call(1, 'busy', 'busy-1'), ...call(3, 'busy', 'busy-3'), ...call(5, 'other', 'other-5')]));
    const answers: Record<number, Record<string, string>> = {};
    for (let t = Date.now(); Date.now() - t < 10_000; await new Promise((r) => setTimeout(r, 100))) {
      for (const id of [1, 3, 5]) answers[id] = serverHeaders(Buffer.concat(got), id);
      if ([1, 3, 5].every((id) => answers[id]!['grpc-status'] !== undefined)) break;
    }
    s.destroy();
    const reason = (id: number) => errorInfoOf(decodeStatusProto(Buffer.from(answers[id]!['grpc-status-details-bin'] ?? '', 'base64'))).reason;
    expect(answers[1]!['grpc-status'], JSON.stringify(answers)).toBe('0');
    expect(answers[3]!['grpc-status'], JSON.stringify(answers)).toBe('0');
    expect(answers[5]!['grpc-status'], JSON.stringify(answers)).toBe('14'); // UNAVAILABLE
    expect(reason(5)).toBe('SIGLAKE_TOO_MANY_STREAMS');
    const m = await ing.metrics();
    expect(m.get('siglake_grpc_streams_preempted_total')).toBe(0);
    expect(m.get('siglake_grpc_streams_refused_total')).toBe(1);
    expect(m.get('siglake_ingest_requests_total{endpoint="otlp",status="200"}')).toBe(2);
    expect(m.get('siglake_grpc_streams_open')).toBe(0);
    await stillServes(ing);
  });
});

describe('the --grpc-max-streams pool and a call that ended in the read that brings a late call', () => {
  // A pool of 2 held by two stalled calls of `hog` (headers only). Then one write: the headers of a
  // call of `other` (under its fair share, 1 of 2), then a frame that ends hog's oldest call. Node
  // emits the new stream a tick later, and grpc-js reports the old call's end (its onCancel, which
  // gives its slot back) a tick after that: the late call found the ended call still holding its
  // slot, "waiting for its message", and took it, counting a preemption and a pool refusal for a
  // call that was answered otherwise or abandoned.
  async function lateCallAfter(ending: Buffer): Promise<{ ing: RunningIngester; answers: Record<number, Record<string, string>>; m: Map<string, number> }> {
    const ing = await startIngester({ args: ['--compactor=false', '--trust-tenant-header', '--grpc-max-streams', '2', '--request-timeout-secs', '60'] });
    running.push(ing);
    const headers = (stream: number, tenant: string): Buffer =>
      frame(
        HEADERS,
        0x4,
        stream,
        Buffer.concat([
          Buffer.from([0x83, 0x86]),
          literal(':authority', 'x'),
          literal(':path', LOGS_EXPORT),
          literal('content-type', 'application/grpc'),
          literal('te', 'trailers'),
          literal('x-scope-orgid', tenant),
        ]),
      );
    const s = net.connect(ing.grpcPort, '127.0.0.1');
    s.on('error', () => undefined);
    const got: Buffer[] = [];
    s.on('data', (d: Buffer) => got.push(d));
    await new Promise<void>((r) => s.on('connect', () => r()));
    try {
      s.write(Buffer.concat([PREFACE, SETTINGS, headers(1, 'hog'), headers(3, 'hog')]));
      for (let t = Date.now(); (await ing.metrics()).get('siglake_grpc_streams_open') !== 2; await new Promise((r) => setTimeout(r, 50))) {
        if (Date.now() - t > 10_000) throw new Error('the two hog calls never held the pool');
      }
      s.write(Buffer.concat([headers(5, 'other'), ending]));
      // Settled: the ended call is counted (as what it was answered, aborted, or refused by the pool) and the pool holds 2 again.
      const settled = async (): Promise<boolean> => {
        const m = await ing.metrics();
        const ended =
          (m.get('siglake_ingest_requests_total{endpoint="otlp",status="400"}') ?? 0) +
          (m.get('siglake_ingest_requests_total{endpoint="otlp",status="413"}') ?? 0) +
          (m.get('siglake_ingest_requests_total{endpoint="otlp",status="503"}') ?? 0) +
          (m.get('siglake_ingest_aborted_total{endpoint="otlp"}') ?? 0);
        return ended >= 1 && m.get('siglake_grpc_streams_open') === 2;
      };
      for (let t = Date.now(); !(await settled()); await new Promise((r) => setTimeout(r, 50))) {
        if (Date.now() - t > 10_000) throw new Error('the ended call was never counted');
      }
      const bytes = Buffer.concat(got);
      // Read while the other two calls are still open (closing the connection aborts them).
      const m = await ing.metrics();
      return { ing, m, answers: { 1: serverHeaders(bytes, 1), 3: serverHeaders(bytes, 3), 5: serverHeaders(bytes, 5) } };
    } finally {
      s.destroy();
    }
  }

  /**
   * After the call that ended (stream 1): the late call got the slot it gave up, nobody was
   * preempted or refused by the pool, no 503 counted, and hog's newer call (3) and the late call
   * (5) are still open, unanswered; the ingester still serves.
   */
  async function nothingTakenNorRefused({ ing, m, answers }: Awaited<ReturnType<typeof lateCallAfter>>): Promise<void> {
    expect(m.get('siglake_grpc_streams_preempted_total')).toBe(0);
    expect(m.get('siglake_grpc_streams_refused_total')).toBe(0);
    expect(m.get('siglake_ingest_requests_total{endpoint="otlp",status="503"}') ?? 0).toBe(0);
    expect(m.get('siglake_grpc_streams_open')).toBe(2);
    expect(answers[3]!['grpc-status'], JSON.stringify(answers)).toBeUndefined();
    expect(answers[5]!['grpc-status'], JSON.stringify(answers)).toBeUndefined();
    await stillServes(ing);
  }

  it('regression (grpc-pool-preempts-answered-call): a call refused for its message is not taken as well: no preemption counted, nothing live refused', async () => {
    const badFlag = Buffer.from([2, 0, 0, 0, 1, 0]);
    const lated = await lateCallAfter(frame(0, 0, 1, badFlag));
    const { answers, m } = lated;
    const reason = errorInfoOf(decodeStatusProto(Buffer.from(answers[1]!['grpc-status-details-bin'] ?? '', 'base64'))).reason;
    expect(answers[1]!['grpc-status'], JSON.stringify(answers)).toBe('3'); // INVALID_ARGUMENT
    expect(reason).toBe('SIGLAKE_BAD_BODY');
    expect(m.get('siglake_ingest_requests_total{endpoint="otlp",status="400"}')).toBe(1);
    await nothingTakenNorRefused(lated);
  });

  it('regression (grpc-pool-preempts-answered-call, grpc-js): a call grpc-js refused itself (its message over the size cap) is not taken as well', async () => {
    const huge = Buffer.from([0, 0x7f, 0xff, 0xff, 0xff]);
    const lated = await lateCallAfter(frame(0, 0, 1, huge));
    const { answers, m } = lated;
    const reason = errorInfoOf(decodeStatusProto(Buffer.from(answers[1]!['grpc-status-details-bin'] ?? '', 'base64'))).reason;
    expect(answers[1]!['grpc-status'], JSON.stringify(answers)).toBe('8'); // RESOURCE_EXHAUSTED
    expect(reason).toBe('SIGLAKE_BODY_TOO_LARGE');
    expect(m.get('siglake_ingest_requests_total{endpoint="otlp",status="413"}')).toBe(1);
    await nothingTakenNorRefused(lated);
  });

  it('regression (grpc-pool-preempts-abandoned-call): a call its client reset is counted aborted only, never refused 503 by the pool as well', async () => {
    const cancel = Buffer.alloc(4);
    cancel.writeUInt32BE(8); // CANCEL
    const lated = await lateCallAfter(frame(3 /* RST_STREAM */, 0, 1, cancel));
    const { m } = lated;
    expect(m.get('siglake_ingest_aborted_total{endpoint="otlp"}')).toBe(1);
    await nothingTakenNorRefused(lated);
  });
});
