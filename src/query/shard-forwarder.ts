// The coordinator's half of contract query §5: send the caller's request,
// with its own Authorization and the shard token, to the tenant's shard on
// /api/v1/sql/shard, and give back the shard's answer unchanged (status,
// content type, Retry-After, X-Siglake-* headers and body, a 403 included).
// A shard that cannot be reached, or does not answer within the query
// timeout plus a margin, is a 502.
//
// The body is streamed through, never held whole: a tenant's large answer
// costs the coordinator a stream's buffers, not its size. A caller that
// hangs up aborts the request to the shard, whose query then stops as for a
// caller of its own (its connection closes).

import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { Readable } from 'node:stream';
import { QueryError } from './query-error.js';
import { pickShard } from './rendezvous.js';

export interface ForwardedAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  /** The shard's body as it arrives (empty when it has none). */
  readonly body: Readable;
}

const PASSED_BACK = ['content-type', 'retry-after', 'x-siglake-truncated', 'x-siglake-row-count'];
/** Time a shard gets beyond its own query timeout (queueing, transfer). */
const MARGIN_MS = 15_000;

export class ShardForwarder {
  readonly #shards: readonly string[];
  readonly #token: string;
  readonly #timeoutMs: number;

  constructor(shards: readonly string[], token: string, queryTimeoutSecs: number) {
    this.#shards = shards.map((s) => s.replace(/\/+$/, ''));
    this.#token = token;
    this.#timeoutMs = queryTimeoutSecs * 1000 + MARGIN_MS;
  }

  shardOf(tenant: string): string {
    return pickShard(tenant, this.#shards);
  }

  /** `signal`: the caller's hang-up (the request to the shard is aborted, mid-body too). */
  async forward(
    tenant: string,
    req: { body: Buffer; contentType: string | undefined; accept: string | undefined; authorization: string | undefined },
    signal?: AbortSignal,
  ): Promise<ForwardedAnswer> {
    const shard = this.shardOf(tenant);
    const headers: Record<string, string> = { 'x-siglake-shard-token': this.#token };
    if (req.authorization !== undefined) headers['authorization'] = req.authorization;
    if (req.contentType !== undefined) headers['content-type'] = req.contentType;
    if (req.accept !== undefined) headers['accept'] = req.accept;
    let res: IncomingMessage;
    try {
      res = await post(`${shard}/api/v1/sql/shard`, headers, req.body, this.#timeoutMs, signal);
    } catch (e) {
      // The caller hung up: not the shard's failure (the local path answers the same).
      if (signal?.aborted === true) throw new QueryError('SIGLAKE_UNAVAILABLE', 'query cancelled: the server is stopping or the caller hung up', { retryAfterSecs: 1 });
      const why = (e as NodeJS.ErrnoException).code ?? (e as Error).name;
      throw new QueryError('SIGLAKE_SHARD_UNAVAILABLE', `the query shard did not answer (${why})`);
    }
    const status = res.statusCode ?? 502;
    // The caller passed this coordinator's authentication already: a shard's 401 (a different
    // shard token, or other auth settings) or a redirect is the fleet's fault, not the caller's.
    // (Passed on, a wrong shard token looked like every user's login failing; a 3xx came without
    // its Location.)
    if (status === 401 || (status >= 300 && status < 400)) {
      res.resume();
      throw new QueryError(
        'SIGLAKE_SHARD_UNAVAILABLE',
        `the query shard refused this coordinator (${status}): give every node the same query.shardToken and authentication settings`,
      );
    }
    const out: Record<string, string> = {};
    for (const h of PASSED_BACK) {
      const v = res.headers[h];
      if (typeof v === 'string') out[h] = v;
    }
    return { status, headers: out, body: res };
  }
}

/**
 * One POST with node:http (or https): the answer's head, its body left to
 * stream. The socket is destroyed when `signal` aborts or `timeoutMs` passes,
 * before or during the body, so that the shard sees its caller gone (a
 * fetch() abort did not always close the connection). Redirects are not
 * followed.
 */
function post(url: string, headers: Record<string, string>, body: Buffer, timeoutMs: number, signal: AbortSignal | undefined): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = (u.protocol === 'https:' ? https : http).request(u, { method: 'POST', headers: { ...headers, 'content-length': String(body.length) } });
    const timer = setTimeout(() => req.destroy(Object.assign(new Error('the shard took longer than the query timeout'), { code: 'ETIMEDOUT' })), timeoutMs);
    const onAbort = () => req.destroy(Object.assign(new Error('the caller hung up'), { name: 'AbortError' }));
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    if (signal?.aborted === true) onAbort();
    req.on('error', (e) => {
      done();
      reject(e);
    });
    req.once('response', (res) => {
      // The timeout and the hang-up still cover the body; they end with it.
      res.once('close', done);
      res.once('error', () => undefined);
      resolve(res);
    });
    req.end(body);
  });
}
