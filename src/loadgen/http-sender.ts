// OTLP/HTTP requests over node:http with a keep-alive agent that holds one
// socket per connection of the thread. Headers of a lane are built once; the
// per-request work is the request object and the Content-Length. Transport
// failures are counted by their error code ("error:ECONNRESET"), a request
// that outlives --timeout-ms as "timeout".

import http from 'node:http';
import type { PooledBody } from './body-pool.js';
import type { LaneTarget } from './lane-plan.js';
import type { RequestSender, SendDone } from './load-client.js';

export interface HttpSenderOptions {
  /** Base URL, http://host:port. */
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

export class HttpSender implements RequestSender {
  readonly #o: HttpSenderOptions;
  readonly #agent: http.Agent;
  readonly #host: string;
  readonly #port: number;
  readonly #base: string;
  readonly #laneHeaders = new Map<number, Record<string, string>>();

  constructor(opts: HttpSenderOptions) {
    this.#o = opts;
    const url = new URL(opts.target);
    this.#host = url.hostname;
    this.#port = Number(url.port || 80);
    this.#base = url.pathname.replace(/\/$/, '');
    this.#agent = new http.Agent({ keepAlive: true, maxSockets: opts.connections, maxFreeSockets: opts.connections, scheduling: 'fifo' });
  }

  #headersOf(target: LaneTarget): Record<string, string> {
    let h = this.#laneHeaders.get(target.lane);
    if (h === undefined) {
      h = { 'content-type': this.#o.encoding === 'json' ? 'application/json' : 'application/x-protobuf' };
      if (this.#o.gzip) h['content-encoding'] = 'gzip';
      if (target.authorization !== undefined) h['authorization'] = target.authorization;
      if (target.orgId !== undefined) h['x-scope-orgid'] = target.orgId;
      if (target.index !== undefined) h['x-siglake-index'] = target.index;
      for (const [k, v] of this.#o.headers) h[k] = v;
      this.#laneHeaders.set(target.lane, h);
    }
    return h;
  }

  send(_conn: number, target: LaneTarget, body: PooledBody, done: SendDone): void {
    let finished = false;
    const finish = (status: string, ok: boolean, detail: Buffer | string | undefined): void => {
      if (finished) return;
      finished = true;
      done(status, ok, detail);
    };
    const req = http.request(
      {
        agent: this.#agent,
        host: this.#host,
        port: this.#port,
        method: 'POST',
        path: `${this.#base}/v1/${body.signal}`,
        headers: { ...this.#headersOf(target), 'content-length': String(body.wire.length) },
      },
      (res) => {
        const status = res.statusCode ?? 0;
        if (status === 200) {
          res.on('end', () => finish('200', true, undefined));
          res.resume();
          return;
        }
        const chunks: Buffer[] = [];
        let kept = 0;
        res.on('data', (c: Buffer) => {
          if (kept < DETAIL_BYTES) {
            chunks.push(c);
            kept += c.length;
          }
        });
        res.on('end', () => {
          const ct = res.headers['content-type'] ?? '';
          const detail = Buffer.concat(chunks).subarray(0, DETAIL_BYTES);
          finish(String(status), false, ct.includes('protobuf') ? detail : detail.toString('utf8'));
        });
        res.on('error', (e: NodeJS.ErrnoException) => finish(`error:${e.code ?? 'response'}`, false, e.message));
      },
    );
    req.setTimeout(this.#o.timeoutMs, () => {
      finish('timeout', false, `no answer in ${this.#o.timeoutMs} ms`);
      req.destroy();
    });
    req.on('error', (e: NodeJS.ErrnoException) => finish(`error:${e.code ?? 'request'}`, false, e.message));
    req.end(body.wire);
  }

  close(): Promise<void> {
    this.#agent.destroy();
    return Promise.resolve();
  }
}
