// Raw HTTP for the ingest tests: exact statuses, headers and body bytes, plus
// the shapes of upload `fetch` cannot make (a body that stops, a body sent byte
// by byte, a chunked body without Content-Length).

import http from 'node:http';
import net from 'node:net';

export interface HttpReply {
  status: number;
  headers: Headers;
  contentType: string;
  body: Uint8Array;
}

export interface PostOptions {
  contentType?: string;
  headers?: Record<string, string>;
}

/** POST `body` to `url + path` with fetch (Content-Length set); the whole reply. */
export async function post(url: string, path: string, body: Uint8Array, opts: PostOptions = {}): Promise<HttpReply> {
  const headers: Record<string, string> = { 'content-type': opts.contentType ?? 'application/x-protobuf', ...opts.headers };
  const res = await fetch(url + path, { method: 'POST', body, headers });
  const buf = new Uint8Array(await res.arrayBuffer());
  return { status: res.status, headers: res.headers, contentType: res.headers.get('content-type') ?? '', body: buf };
}

export async function get(url: string, path: string): Promise<{ status: number; text: string }> {
  const res = await fetch(url + path);
  return { status: res.status, text: await res.text() };
}

export interface RawReply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/**
 * POST through node:http without Content-Length: the body goes out chunked,
 * one `chunk` at a time until `total` bytes or the server answers. Resolves with
 * the answer (which may come before the body is done).
 */
export function postChunked(
  port: number,
  path: string,
  chunk: Uint8Array,
  total: number,
  headers: Record<string, string> = {},
): Promise<RawReply & { sentWhenAnswered: number }> {
  return new Promise((resolve, reject) => {
    let answered = false;
    let sentWhenAnswered = 0;
    const req = http.request(
      { host: '127.0.0.1', port, method: 'POST', path, agent: false, headers: { 'content-type': 'application/x-protobuf', ...headers } },
      (res) => {
        answered = true;
        sentWhenAnswered = sent;
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts), sentWhenAnswered }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', (e) => {
      if (!answered) reject(e);
    });
    let sent = 0;
    // One chunk per event-loop turn, as a real streaming client: an early
    // answer is read as soon as it arrives (the server closes a connection
    // whose refused body keeps coming, and a client busy writing would only
    // see the reset).
    const pump = () => {
      if (answered) return;
      if (sent >= total) {
        req.end();
        return;
      }
      sent += chunk.length;
      if (req.write(chunk)) setImmediate(pump);
      else req.once('drain', pump);
    };
    pump();
  });
}

/**
 * An upload under the test's control over a plain socket: the request head
 * (with a declared Content-Length) goes out at once, body bytes when asked.
 */
export class ManualUpload {
  readonly socket: net.Socket;
  readonly connected: Promise<void>;
  /** Resolves with the response head and the body received until the socket closed or `responseComplete`. */
  readonly response: Promise<RawReply>;
  /** Resolves when the server closed the connection (or it errored). */
  readonly closed: Promise<void>;
  #buf = Buffer.alloc(0);
  closedAt = 0;
  respondedAt = 0;

  constructor(port: number, path: string, contentLength: number, headers: Record<string, string> = {}) {
    this.socket = net.connect(port, '127.0.0.1');
    this.socket.on('error', () => {});
    this.connected = new Promise((resolve) => this.socket.once('connect', () => resolve()));
    const head = [
      `POST ${path} HTTP/1.1`,
      'Host: 127.0.0.1',
      'Content-Type: application/x-protobuf',
      `Content-Length: ${contentLength}`,
      ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
      '',
      '',
    ].join('\r\n');
    this.socket.write(head);
    this.closed = new Promise((resolve) => this.socket.once('close', () => {
      this.closedAt = Date.now();
      resolve();
    }));
    this.response = new Promise((resolve, reject) => {
      const tryParse = (final: boolean): boolean => {
        const end = this.#buf.indexOf('\r\n\r\n');
        if (end < 0) return false;
        const lines = this.#buf.subarray(0, end).toString('latin1').split('\r\n');
        const status = Number(lines[0]!.split(' ')[1]);
        const headersOut: http.IncomingHttpHeaders = {};
        for (const l of lines.slice(1)) {
          const c = l.indexOf(':');
          headersOut[l.slice(0, c).trim().toLowerCase()] = l.slice(c + 1).trim();
        }
        const len = headersOut['content-length'] !== undefined ? Number(headersOut['content-length']) : -1;
        const body = this.#buf.subarray(end + 4);
        if (len >= 0 && body.length >= len) {
          resolve({ status, headers: headersOut, body: body.subarray(0, len) });
          return true;
        }
        if (final) {
          resolve({ status, headers: headersOut, body });
          return true;
        }
        return false;
      };
      let done = false;
      this.socket.on('data', (d: Buffer) => {
        if (this.respondedAt === 0) this.respondedAt = Date.now();
        this.#buf = Buffer.concat([this.#buf, d]);
        if (!done) done = tryParse(false);
      });
      this.socket.once('close', () => {
        if (!done && !tryParse(true)) reject(new Error('connection closed without a response'));
      });
    });
  }

  write(bytes: Uint8Array): boolean {
    if (this.socket.destroyed) return false;
    this.socket.write(bytes);
    return true;
  }

  destroy(): void {
    this.socket.destroy();
  }
}


/** Opens `n` TCP connections to the port that send nothing. */
export async function idleConnections(port: number, n: number): Promise<net.Socket[]> {
  return Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<net.Socket>((resolve, reject) => {
          const s = net.connect(port, '127.0.0.1', () => resolve(s));
          s.on('error', reject);
        }),
    ),
  );
}

/** A kept-alive plain socket for requests on one connection (to talk to a server that stopped listening). */
export class KeepAliveSocket {
  readonly socket: net.Socket;
  readonly ready: Promise<void>;
  #buf = Buffer.alloc(0);
  #waiter: ((r: { status: number; body: string; contentType: string; raw: Buffer } | null) => void) | undefined;

  constructor(port: number) {
    this.socket = net.connect(port, '127.0.0.1');
    this.socket.on('error', () => {});
    this.ready = new Promise((resolve) => this.socket.once('connect', () => resolve()));
    this.socket.on('data', (d: Buffer) => {
      this.#buf = Buffer.concat([this.#buf, d]);
      this.#parse();
    });
    this.socket.on('close', () => {
      this.#waiter?.(null);
      this.#waiter = undefined;
    });
  }

  #parse(): void {
    const end = this.#buf.indexOf('\r\n\r\n');
    if (end < 0 || this.#waiter === undefined) return;
    const head = this.#buf.subarray(0, end).toString('latin1');
    const m = /content-length:\s*(\d+)/i.exec(head);
    const len = m ? Number(m[1]) : 0;
    if (this.#buf.length < end + 4 + len) return;
    const status = Number(head.split(' ')[1]);
    const raw = Buffer.from(this.#buf.subarray(end + 4, end + 4 + len));
    const contentType = /content-type:\s*([^\r\n]*)/i.exec(head)?.[1] ?? '';
    this.#buf = this.#buf.subarray(end + 4 + len);
    const w = this.#waiter;
    this.#waiter = undefined;
    w({ status, body: raw.toString('utf8'), contentType, raw });
  }

  /** GET `path`; null when the connection closed instead of answering. */
  get(path: string): Promise<{ status: number; body: string } | null> {
    return new Promise((resolve) => {
      if (this.socket.destroyed) {
        resolve(null);
        return;
      }
      this.#waiter = resolve;
      this.socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    });
  }

  /** POST `body` to `path` on this connection; null when the connection closed instead of answering. */
  post(path: string, body: Uint8Array, contentType: string): Promise<{ status: number; contentType: string; raw: Buffer } | null> {
    return new Promise((resolve) => {
      if (this.socket.destroyed) {
        resolve(null);
        return;
      }
      this.#waiter = resolve;
      this.socket.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: ${contentType}\r\nContent-Length: ${body.length}\r\n\r\n`);
      this.socket.write(body);
    });
  }

  destroy(): void {
    this.socket.destroy();
  }
}

/**
 * A raw connection to 127.0.0.1:`port` that has sent `head` (and whatever
 * start of a body it holds), collecting what comes back; pushed on `track`
 * for the test's cleanup to destroy.
 */
export function rawRequest(port: number, head: string, track: net.Socket[]): { socket: net.Socket; got: () => string; closed: Promise<void> } {
  const socket = net.connect(port, '127.0.0.1');
  track.push(socket);
  let got = '';
  socket.on('data', (b) => (got += b.toString('latin1')));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((r) => socket.on('close', () => r()));
  socket.write(head);
  return { socket, got: () => got, closed };
}
