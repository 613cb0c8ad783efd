// The loadgen's own HTTP/1.1 client: the response reader fed responses split
// at every byte, in each framing a server may choose, and refusing what is not
// HTTP/1.x; then the sender against real node:http and node:net servers: the
// bytes a server receives, refusal bodies, connections the server closes,
// early answers, timeouts and garbage.

import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { PooledBody } from '../../src/loadgen/body-pool.js';
import { ResponseFormatError, ResponseReader, type WireResponse } from '../../src/loadgen/http-response-reader.js';
import { HttpSender } from '../../src/loadgen/http-sender.js';
import type { LaneTarget } from '../../src/loadgen/lane-plan.js';

/** Feeds `wire` to a fresh reader in pieces of `step` bytes; the responses it returned, and at which piece. */
function readAll(wire: string | Buffer, step: number, keep = 1024): { responses: WireResponse[]; at: number[] } {
  const r = new ResponseReader(keep);
  const bytes = typeof wire === 'string' ? Buffer.from(wire, 'latin1') : wire;
  const responses: WireResponse[] = [];
  const at: number[] = [];
  for (let i = 0; i < bytes.length; i += step) {
    const got = r.feed(bytes.subarray(i, Math.min(bytes.length, i + step)));
    if (got !== undefined) {
      responses.push(got);
      at.push(Math.min(bytes.length, i + step));
    }
  }
  return { responses, at };
}

const STEPS = [1, 2, 3, 7, 64, 100_000];

describe('ResponseReader', () => {
  it('Content-Length: ends exactly at the last body byte, whatever the split', () => {
    const wire = 'HTTP/1.1 429 Too Many Requests\r\nContent-Type: Text/Plain\r\nContent-Length: 11\r\nRetry-After: 2\r\n\r\nslow down!!';
    for (const step of STEPS) {
      const { responses, at } = readAll(wire, step);
      expect(responses.map((x) => [x.status, x.contentType, x.close, x.body.toString()])).toEqual([[429, 'text/plain', false, 'slow down!!']]);
      expect(at).toEqual([wire.length]);
    }
  });

  it('chunked: chunk extensions, a chunk split over reads and trailers; the body is the chunks joined', () => {
    const wire = 'HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1A\r\n, the lane queue is full..\r\n0\r\nX-Trailer: t\r\n\r\n';
    for (const step of STEPS) {
      const { responses, at } = readAll(wire, step);
      expect(responses.map((x) => [x.status, x.close, x.body.toString()])).toEqual([[503, false, 'hello, the lane queue is full..']]);
      expect(at).toEqual([wire.length]);
    }
  });

  it('skips 1xx interim answers, reads 204 and Content-Length 0 as empty, and keeps only the first bytes of a body', () => {
    const wire = 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n';
    for (const step of STEPS) expect(readAll(wire, step).responses.map((x) => [x.status, x.body.length])).toEqual([[200, 0]]);
    expect(readAll('HTTP/1.1 204 No Content\r\n\r\n', 5).responses.map((x) => x.status)).toEqual([204]);
    const big = `HTTP/1.1 400 Bad Request\r\nContent-Length: 5000\r\n\r\n${'e'.repeat(5000)}`;
    for (const step of [1, 999, 100_000]) {
      const { responses, at } = readAll(big, step, 1024);
      expect(responses.map((x) => x.body.toString())).toEqual(['e'.repeat(1024)]);
      expect(at).toEqual([big.length]);
    }
  });

  it('one reader reads one response after another off a connection', () => {
    const r = new ResponseReader(64);
    // A 200's body is read past, not kept.
    expect(r.feed(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok'))).toMatchObject({ status: 200, body: Buffer.alloc(0) });
    expect(r.midResponse).toBe(false);
    expect(r.feed(Buffer.from('HTTP/1.1 413 Payload Too Large\r\nContent-Le'))).toBeUndefined();
    expect(r.midResponse).toBe(true);
    expect(r.feed(Buffer.from('ngth: 3\r\nConnection: close\r\n\r\nbig'))).toMatchObject({ status: 413, close: true });
  });

  it('Connection: close and HTTP/1.0 end the connection; a body without framing ends with it', () => {
    expect(readAll('HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n', 3).responses[0]!.close).toBe(true);
    expect(readAll('HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n', 3).responses[0]!.close).toBe(false);
    expect(readAll('HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 0\r\n\r\n', 3).responses[0]!.close).toBe(true);
    const r = new ResponseReader(64);
    expect(r.feed(Buffer.from('HTTP/1.1 502 Bad Gateway\r\n\r\nupstream '))).toBeUndefined();
    expect(r.feed(Buffer.from('gone'))).toBeUndefined();
    expect(r.end()).toMatchObject({ status: 502, close: true });
    expect(r.end()).toBeUndefined();
    // Cut off inside a Content-Length body: nothing to return.
    const cut = new ResponseReader(64);
    expect(cut.feed(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc'))).toBeUndefined();
    expect(cut.end()).toBeUndefined();
  });

  it('refuses what is not an HTTP/1.x response', () => {
    const bad: [string, RegExp][] = [
      ['SSH-2.0-OpenSSH_9.2\r\n\r\n', /not an HTTP\/1\.x status line/],
      ['HTTP/2 200\r\n\r\n', /not an HTTP\/1\.x status line/],
      ['HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n', /bad Content-Length/],
      ['HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab', /bad Content-Length/],
      ['HTTP/1.1 200 OK\r\nno colon here\r\n\r\n', /header line without a name/],
      ['HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nabc', /1 bytes after the end of the response/],
      ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n', /bad chunk size/],
      ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n', /chunk data longer than its size/],
      ['HTTP/1.1 101 Switching Protocols\r\n\r\n', /101/],
    ];
    for (const [wire, why] of bad) {
      expect(() => readAll(wire, 100_000), wire).toThrow(ResponseFormatError);
      expect(() => readAll(wire, 100_000), wire).toThrow(why);
    }
    expect(() => new ResponseReader(0).feed(Buffer.alloc(70 * 1024, 'a'))).toThrow(/head longer than 65536 bytes/);
  });
});

const body = (wire: Buffer, signal: 'logs' | 'traces' = 'logs'): PooledBody => ({ signal, wire, rawBytes: wire.length, records: 1 });
const lane = (n: number, extra: Partial<LaneTarget> = {}): LaneTarget => ({
  lane: n,
  tenant: undefined,
  orgId: undefined,
  index: undefined,
  authorization: undefined,
  bodies: [],
  cursor: 0,
  ...extra,
});

/** Sends one request and resolves with what `done` was given. */
function sendOne(s: HttpSender, conn: number, t: LaneTarget, b: PooledBody): Promise<[string, boolean, Buffer | string | undefined]> {
  return new Promise((resolve) => s.send(conn, t, b, (status, ok, detail) => resolve([status, ok, detail])));
}

const servers: net.Server[] = [];
const senders: HttpSender[] = [];
afterEach(async () => {
  for (const s of senders.splice(0)) await s.close();
  for (const s of servers.splice(0)) {
    (s as http.Server).closeAllConnections?.();
    s.close();
  }
});

async function listen<T extends net.Server>(server: T): Promise<string> {
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function sender(target: string, extra: { timeoutMs?: number; headers?: [string, string][]; gzip?: boolean } = {}): HttpSender {
  const s = new HttpSender({ target, connections: 4, encoding: 'protobuf', gzip: extra.gzip ?? false, headers: extra.headers ?? [], timeoutMs: extra.timeoutMs ?? 10_000 });
  senders.push(s);
  return s;
}

describe('HttpSender against real servers', () => {
  it('sends the lane headers, the path under the base and the body bytes; answers keep the connection', async () => {
    const seen: { method: string; url: string; headers: http.IncomingHttpHeaders; body: Buffer; socket: number }[] = [];
    const sockets = new Map<net.Socket, number>();
    const url = await listen(
      http.createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          if (!sockets.has(req.socket)) sockets.set(req.socket, sockets.size);
          seen.push({ method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks), socket: sockets.get(req.socket)! });
          res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
        });
      }),
    );
    const s = sender(`${url}/base/`, { headers: [['X-Extra', 'yes']], gzip: true });
    const payload = Buffer.from(Array.from({ length: 3000 }, (_, i) => i & 0xff));
    const t = lane(3, { orgId: 'tenant-a', index: 'idx', authorization: 'Bearer abc' });
    expect(await sendOne(s, 0, t, body(payload))).toEqual(['200', true, undefined]);
    expect(await sendOne(s, 0, t, body(payload.subarray(0, 10), 'traces'))).toEqual(['200', true, undefined]);
    expect(await sendOne(s, 1, lane(4), body(payload.subarray(0, 1)))).toEqual(['200', true, undefined]);
    expect(seen.map((x) => [x.method, x.url, x.body.length, x.socket])).toEqual([
      ['POST', '/base/v1/logs', 3000, 0],
      ['POST', '/base/v1/traces', 10, 0],
      ['POST', '/base/v1/logs', 1, 1],
    ]);
    expect(seen[0]!.body.equals(payload)).toBe(true);
    expect(seen[0]!.headers).toMatchObject({
      host: url.slice('http://'.length),
      'content-type': 'application/x-protobuf',
      'content-encoding': 'gzip',
      'content-length': '3000',
      authorization: 'Bearer abc',
      'x-scope-orgid': 'tenant-a',
      'x-siglake-index': 'idx',
      'x-extra': 'yes',
    });
    expect(seen[2]!.headers['x-scope-orgid']).toBeUndefined();
  });

  it('a refusal keeps its body: protobuf as bytes, text as a string, chunked or not', async () => {
    const url = await listen(
      http.createServer((req, res) => {
        req.resume();
        req.on('end', () => {
          if (req.url === '/v1/logs') {
            res.writeHead(429, { 'content-type': 'application/x-protobuf', 'content-length': 3 }).end(Buffer.from([8, 8, 0]));
          } else {
            res.writeHead(503, { 'content-type': 'text/plain' });
            res.write('lane queue ');
            setTimeout(() => res.end('full'), 20);
          }
        });
      }),
    );
    const s = sender(url);
    const [status, ok, detail] = await sendOne(s, 0, lane(0), body(Buffer.from('x')));
    expect([status, ok, Buffer.isBuffer(detail) && [...detail]]).toEqual(['429', false, [8, 8, 0]]);
    expect(await sendOne(s, 0, lane(0), body(Buffer.from('x'), 'traces'))).toEqual(['503', false, 'lane queue full']);
  });

  it('a connection the server closes: after Connection: close the next request opens another; closed under a request it is ECONNRESET', async () => {
    let connections = 0;
    let n = 0;
    const server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        n++;
        if (n === 1) res.writeHead(200, { connection: 'close', 'content-length': 0 }).end();
        else if (n === 2) res.writeHead(200, { 'content-length': 0 }).end();
        else req.socket.destroy();
      });
    });
    server.on('connection', () => connections++);
    const s = sender(await listen(server));
    expect(await sendOne(s, 0, lane(0), body(Buffer.from('a')))).toEqual(['200', true, undefined]);
    expect(await sendOne(s, 0, lane(0), body(Buffer.from('b')))).toEqual(['200', true, undefined]);
    expect(connections).toBe(2);
    expect(await sendOne(s, 0, lane(0), body(Buffer.from('c')))).toEqual(['error:ECONNRESET', false, 'socket hang up']);
    expect(await sendOne(s, 0, lane(0), body(Buffer.from('d')))).toEqual(['error:ECONNRESET', false, 'socket hang up']);
    expect(connections).toBe(3);
  });

  it('an answer that comes before the body is sent (a 413 and a close) counts as that answer, not as a broken pipe', async () => {
    const url = await listen(
      net.createServer((sock) => {
        sock.once('data', () => sock.end('HTTP/1.1 413 Payload Too Large\r\nContent-Type: text/plain\r\nContent-Length: 8\r\nConnection: close\r\n\r\ntoo big!'));
        sock.on('error', () => {});
      }),
    );
    const s = sender(url);
    expect(await sendOne(s, 0, lane(0), body(Buffer.alloc(32 * 1024 * 1024, 1)))).toEqual(['413', false, 'too big!']);
  });

  it('no answer within --timeout-ms is a timeout; the connection is made again for the next request', async () => {
    let connections = 0;
    const url = await listen(
      net.createServer((sock) => {
        connections++;
        const me = connections;
        sock.on('error', () => {});
        sock.on('data', () => {
          if (me > 1) sock.write('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n');
        });
      }),
    );
    const s = sender(url, { timeoutMs: 100 });
    const t0 = Date.now();
    expect(await sendOne(s, 0, lane(0), body(Buffer.from('x')))).toEqual(['timeout', false, 'no answer in 100 ms']);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(100);
    expect(await sendOne(s, 0, lane(0), body(Buffer.from('y')))).toEqual(['200', true, undefined]);
    expect(connections).toBe(2);
  });

  it('garbage instead of a response is EPROTO; nothing listening is ECONNREFUSED', async () => {
    const url = await listen(
      net.createServer((sock) => {
        sock.on('error', () => {});
        sock.once('data', () => sock.write('SSH-2.0-OpenSSH_9.2\r\n\r\n'));
      }),
    );
    const s = sender(url);
    const [status, ok, detail] = await sendOne(s, 0, lane(0), body(Buffer.from('x')));
    expect([status, ok]).toEqual(['error:EPROTO', false]);
    expect(detail).toMatch(/not an HTTP\/1\.x status line: "SSH-2\.0/);
    const probe = net.createServer();
    const dead = await listen(probe);
    probe.close();
    await once(probe, 'close');
    const [st2, , d2] = await sendOne(sender(dead), 0, lane(0), body(Buffer.from('x')));
    expect(st2).toBe('error:ECONNREFUSED');
    expect(d2).toMatch(/ECONNREFUSED/);
  });
});
