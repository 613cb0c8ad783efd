// The coordinator's half of contract query §5: send the caller's request,
// with its own Authorization and the shard token, to the tenant's shard on
// /api/v1/sql/shard, and give back the shard's answer unchanged (status,
// content type, Retry-After, X-Siglake-* headers and body, a 403 included).
// A shard that cannot be reached, or does not answer within the query
// timeout plus a margin, is a 502.

import { QueryError } from './query-error.js';
import { pickShard } from './rendezvous.js';

export interface ForwardedAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
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

  async forward(
    tenant: string,
    req: { body: Buffer; contentType: string | undefined; accept: string | undefined; authorization: string | undefined },
  ): Promise<ForwardedAnswer> {
    const shard = this.shardOf(tenant);
    const headers: Record<string, string> = { 'x-siglake-shard-token': this.#token };
    if (req.authorization !== undefined) headers['authorization'] = req.authorization;
    if (req.contentType !== undefined) headers['content-type'] = req.contentType;
    if (req.accept !== undefined) headers['accept'] = req.accept;
    let res: Response;
    let body: Buffer;
    try {
      res = await fetch(`${shard}/api/v1/sql/shard`, {
        method: 'POST',
        headers,
        body: req.body,
        signal: AbortSignal.timeout(this.#timeoutMs),
        redirect: 'manual',
      });
      body = Buffer.from(await res.arrayBuffer());
    } catch (e) {
      const why = (e as { cause?: { code?: string } }).cause?.code ?? (e as Error).name;
      throw new QueryError('SIGLAKE_SHARD_UNAVAILABLE', `the query shard did not answer (${why})`);
    }
    const out: Record<string, string> = {};
    for (const h of PASSED_BACK) {
      const v = res.headers.get(h);
      if (v !== null) out[h] = v;
    }
    return { status: res.status, headers: out, body };
  }
}
