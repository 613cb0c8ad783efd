// Hostile and slow clients made by hand: HTTP uploads sent a byte at a time
// (with Content-Length or chunked), raw requests with oversized heads, idle
// TCP connections, idle HTTP/2 sessions, and gRPC calls whose message never
// finishes or declares a huge length.

import http2 from 'node:http2';
import net from 'node:net';

export interface RawOutcome {
  /** HTTP status of the answer; -1 when the connection closed without one. */
  status: number;
  /** The answer's head and body as text (latin1), for messages. */
  text: string;
  /** ms from the start until the connection closed. */
  closedAfterMs: number;
}

/**
 * Sends `head` and then `body` in pieces of `piece` bytes every `everyMs`,
 * over a fresh connection; resolves when the server closes it or `holdMs`
 * after the answer (keep-alive), with the answer parsed.
 */
export function rawRequest(
  port: number,
  head: string | Uint8Array,
  body: Uint8Array,
  opts: { piece?: number; everyMs?: number; chunked?: boolean; holdMs?: number; maxMs?: number } = {},
): Promise<RawOutcome> {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const sock = net.connect(port, '127.0.0.1');
    sock.setNoDelay(true);
    let got = Buffer.alloc(0);
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    const finish = () => {
      if (done) return;
      done = true;
      if (timer) clearTimeout(timer);
      const text = got.toString('latin1');
      const m = /^HTTP\/1\.1 (\d{3})/.exec(text);
      resolve({ status: m ? Number(m[1]) : -1, text, closedAfterMs: Date.now() - t0 });
      sock.destroy();
    };
    sock.on('data', (d: Buffer) => {
      got = Buffer.concat([got, d]);
      // A complete answer with a Content-Length: do not wait for a keep-alive close.
      const end = got.indexOf('\r\n\r\n');
      if (end >= 0) {
        const cl = /content-length:\s*(\d+)/i.exec(got.subarray(0, end).toString('latin1'));
        if (cl && got.length >= end + 4 + Number(cl[1]) && timer === undefined) timer = setTimeout(finish, opts.holdMs ?? 0);
      }
    });
    sock.on('close', finish);
    sock.on('error', () => finish());
    // A hang guard: an answer that never comes and a connection never closed end it as -1.
    const guard = setTimeout(finish, opts.maxMs ?? 60_000);
    sock.on('close', () => clearTimeout(guard));
    sock.on('connect', async () => {
      sock.write(typeof head === 'string' ? Buffer.from(head, 'latin1') : head);
      const piece = opts.piece ?? body.length;
      for (let off = 0; off < body.length && !done; off += piece) {
        const part = body.subarray(off, Math.min(off + piece, body.length));
        if (opts.chunked) sock.write(`${part.length.toString(16)}\r\n`), sock.write(part), sock.write('\r\n');
        else sock.write(part);
        if (opts.everyMs) await new Promise((r) => setTimeout(r, opts.everyMs));
      }
      if (opts.chunked && !done) sock.write('0\r\n\r\n');
    });
  });
}

export function httpHead(path: string, headers: Record<string, string | number>): string {
  return [`POST ${path} HTTP/1.1`, 'Host: 127.0.0.1', ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), '', ''].join('\r\n');
}

/** `n` TCP connections that send nothing; each records when the server closed it. */
export async function idleSockets(port: number, n: number): Promise<{ sockets: net.Socket[]; closed: () => number }> {
  let closed = 0;
  const sockets: net.Socket[] = [];
  const batch = 200;
  for (let i = 0; i < n; i += batch) {
    const part = await Promise.all(
      Array.from(
        { length: Math.min(batch, n - i) },
        () =>
          new Promise<net.Socket>((resolve, reject) => {
            const s = net.connect(port, '127.0.0.1', () => resolve(s));
            s.once('error', reject);
            s.on('close', () => closed++);
          }),
      ),
    );
    for (const s of part) s.on('error', () => {});
    sockets.push(...part);
  }
  return { sockets, closed: () => closed };
}

/** `n` HTTP/2 sessions that complete the handshake and open no stream. */
export async function idleHttp2Sessions(address: string, n: number): Promise<{ sessions: http2.ClientHttp2Session[]; closed: () => number }> {
  let closed = 0;
  const sessions = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<http2.ClientHttp2Session>((resolve, reject) => {
          const s = http2.connect(`http://${address}`);
          s.once('connect', () => resolve(s));
          s.once('error', reject);
          s.on('close', () => closed++);
        }),
    ),
  );
  for (const s of sessions) s.on('error', () => {});
  return { sessions, closed: () => closed };
}

/**
 * A gRPC call over HTTP/2 whose length-prefixed message declares
 * `declaredLength` bytes and sends `send` of them, then nothing more.
 * `ended` resolves (with the grpc-status seen, or -1) when the server closes the stream.
 */
export async function stalledGrpcCall(
  address: string,
  method: string,
  declaredLength: number,
  send: Uint8Array,
): Promise<{ ended: Promise<{ grpcStatus: number; afterMs: number }>; close(): void }> {
  const session = http2.connect(`http://${address}`);
  session.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    session.once('connect', () => resolve());
    session.once('error', reject);
  });
  const t0 = Date.now();
  const req = session.request({ ':method': 'POST', ':path': method, 'content-type': 'application/grpc', te: 'trailers' });
  req.on('error', () => {});
  req.on('data', () => {});
  let grpcStatus = -1;
  // Ended when the server sends a status (it may leave our half of the stream
  // open) or closes the stream.
  const ended = new Promise<{ grpcStatus: number; afterMs: number }>((resolve) => {
    const take = (h: Record<string, unknown>) => {
      if (h['grpc-status'] === undefined) return;
      grpcStatus = Number(h['grpc-status']);
      resolve({ grpcStatus, afterMs: Date.now() - t0 });
    };
    req.on('response', take);
    req.on('trailers', take);
    req.on('close', () => resolve({ grpcStatus, afterMs: Date.now() - t0 }));
  });
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(declaredLength >>> 0, 1);
  req.write(Buffer.concat([prefix, Buffer.from(send)]));
  return {
    ended,
    close() {
      req.destroy();
      session.destroy();
    },
  };
}
