// OTLP/HTTP requests written straight to keep-alive TCP connections, one
// request in flight per connection, as wrk does. node:http's client spent
// about 70 µs of CPU a request (15,600 requests/s on a core against the uWS
// discard server), so a generator on the cores it shares with the server
// measured itself; this path spends about 10 µs (docs/performance.md, "The
// loadgen's HTTP path"). A request's head is built once per lane and body and
// goes out with the body in one corked write; responses are read by
// `ResponseReader`. Transport failures are counted by their error code
// ("error:ECONNRESET"; a connection closed under a request is ECONNRESET,
// "socket hang up", as node:http named it), a request that outlives
// --timeout-ms as "timeout" (its connection is closed and made again; so is
// one still unanswered when the run ends and abandon() is called), and a
// response that is not HTTP/1.x as "error:EPROTO".

import net from 'node:net';
import { performance } from 'node:perf_hooks';
import type { PooledBody } from './body-pool.js';
import { ResponseFormatError, ResponseReader, type WireResponse } from './http-response-reader.js';
import type { LaneTarget } from './lane-plan.js';
import type { RequestSender, SendDone } from './load-client.js';

export interface HttpSenderOptions {
  /** Base URL, http://host:port[/path]. */
  target: string;
  connections: number;
  encoding: 'protobuf' | 'json';
  gzip: boolean;
  /** Extra headers for every request. */
  headers: [string, string][];
  timeoutMs: number;
}

/** Most of a refusal's body kept for the report. */
const DETAIL_BYTES = 1024;

/** One connection and the request it carries. */
interface Conn {
  socket: net.Socket | undefined;
  reader: ResponseReader;
  /** The request in flight: its completion, and when it times out (performance.now()). */
  done: SendDone | undefined;
  deadline: number;
  /** The socket's error, reported when it closes. */
  error: NodeJS.ErrnoException | undefined;
}

export class HttpSender implements RequestSender {
  readonly #o: HttpSenderOptions;
  readonly #host: string;
  readonly #port: number;
  readonly #hostHeader: string;
  readonly #base: string;
  readonly #conns: Conn[] = [];
  /** Per lane, the request head of each body it sends (path and Content-Length differ by body). */
  readonly #heads = new Map<number, Map<PooledBody, Buffer>>();
  #sweeper: NodeJS.Timeout | undefined;

  constructor(opts: HttpSenderOptions) {
    this.#o = opts;
    const url = new URL(opts.target);
    this.#host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    this.#port = Number(url.port || 80);
    this.#hostHeader = url.host;
    this.#base = url.pathname.replace(/\/$/, '');
  }

  #headOf(target: LaneTarget, body: PooledBody): Buffer {
    let heads = this.#heads.get(target.lane);
    if (heads === undefined) {
      heads = new Map();
      this.#heads.set(target.lane, heads);
    }
    let head = heads.get(body);
    if (head === undefined) {
      const o = this.#o;
      const h: [string, string][] = [
        ['Host', this.#hostHeader],
        ['Content-Type', o.encoding === 'json' ? 'application/json' : 'application/x-protobuf'],
      ];
      if (o.gzip) h.push(['Content-Encoding', 'gzip']);
      if (target.authorization !== undefined) h.push(['Authorization', target.authorization]);
      if (target.orgId !== undefined) h.push(['X-Scope-OrgID', target.orgId]);
      if (target.index !== undefined) h.push(['X-Siglake-Index', target.index]);
      for (const [k, v] of o.headers) h.push([k, v]);
      h.push(['Content-Length', String(body.wire.length)]);
      head = Buffer.from(`POST ${this.#base}/v1/${body.signal} HTTP/1.1\r\n${h.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`, 'latin1');
      heads.set(body, head);
    }
    return head;
  }

  send(conn: number, target: LaneTarget, body: PooledBody, done: SendDone): void {
    const c = (this.#conns[conn] ??= { socket: undefined, reader: new ResponseReader(DETAIL_BYTES), done: undefined, deadline: 0, error: undefined });
    if (c.done !== undefined) throw new Error(`connection ${conn} already carries a request`);
    const socket = c.socket ?? this.#connect(c);
    c.done = done;
    c.deadline = performance.now() + this.#o.timeoutMs;
    if (this.#sweeper === undefined) {
      this.#sweeper = setInterval(() => this.#sweep(), Math.max(5, Math.min(1000, this.#o.timeoutMs / 10)));
      this.#sweeper.unref();
    }
    socket.cork();
    socket.write(this.#headOf(target, body));
    socket.write(body.wire);
    socket.uncork();
  }

  #connect(c: Conn): net.Socket {
    const socket = net.connect({ host: this.#host, port: this.#port, noDelay: true });
    c.socket = socket;
    c.error = undefined;
    c.reader.reset();
    socket.on('data', (data: Buffer) => {
      if (c.socket !== socket) return;
      let res: WireResponse | undefined;
      try {
        if (c.done === undefined) throw new ResponseFormatError(`${data.length} bytes with no request in flight`);
        res = c.reader.feed(data);
      } catch (e) {
        this.#drop(c, 'error:EPROTO', (e as Error).message);
        return;
      }
      if (res === undefined) return;
      if (res.close) this.#close(c);
      this.#answered(c, res);
    });
    socket.on('error', (e: NodeJS.ErrnoException) => {
      // A socket already replaced (closed after its answer) is not this connection's.
      if (c.socket === socket) c.error ??= e;
    });
    socket.on('close', () => {
      if (c.socket !== socket) return;
      c.socket = undefined;
      if (c.done === undefined) return;
      const res = c.reader.end();
      c.reader.reset();
      if (res !== undefined) {
        this.#answered(c, res);
      } else {
        const e = c.error;
        this.#finish(c, `error:${e?.code ?? 'ECONNRESET'}`, false, e?.message ?? 'socket hang up');
      }
    });
    return socket;
  }

  /** The request in flight on `c` was answered: a refusal keeps its body (a protobuf Status, or text). */
  #answered(c: Conn, res: WireResponse): void {
    const ok = res.status === 200;
    this.#finish(c, String(res.status), ok, ok ? undefined : res.contentType.includes('protobuf') ? res.body : res.body.toString('utf8'));
  }

  /** Ends the request in flight on `c` and hands its connection back. */
  #finish(c: Conn, status: string, ok: boolean, detail: Buffer | string | undefined): void {
    const done = c.done!;
    c.done = undefined;
    done(status, ok, detail);
  }

  /** Closes `c`'s socket; its close event is then no longer this connection's. */
  #close(c: Conn): void {
    const s = c.socket;
    c.socket = undefined;
    c.reader.reset();
    s?.destroy();
  }

  /** The request in flight on `c` fails with `status`; the connection is closed (the next request makes a new one). */
  #drop(c: Conn, status: string, message: string): void {
    this.#close(c);
    if (c.done !== undefined) this.#finish(c, status, false, message);
  }

  #sweep(): void {
    const now = performance.now();
    for (const c of this.#conns) {
      if (c !== undefined && c.done !== undefined && now >= c.deadline) this.#drop(c, 'timeout', `no answer in ${this.#o.timeoutMs} ms`);
    }
  }

  abandon(message: string): void {
    for (const c of this.#conns) if (c !== undefined && c.done !== undefined) this.#drop(c, 'timeout', message);
  }

  close(): Promise<void> {
    clearInterval(this.#sweeper);
    this.#sweeper = undefined;
    for (const c of this.#conns) if (c !== undefined) this.#close(c);
    return Promise.resolve();
  }
}
