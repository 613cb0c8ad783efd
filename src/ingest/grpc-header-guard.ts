// Two things grpc-js does with request headers that would cross the tenancy
// boundary if left alone:
//
// - It silently drops a metadata value that is not printable ASCII (say an
//   X-Scope-OrgID with a Cyrillic look-alike letter), so the handler would see
//   no header and route the request to `default`. The guard wraps
//   Metadata.fromHttp2Headers and marks such metadata, so the acceptor answers
//   400 / INVALID_ARGUMENT instead.
// - It logs the dropped value, which for `authorization` is a token. The
//   logger installed here keeps the header name and withholds the value.
//
// Node's HTTP/2 layer also folds a repeated header into one "a, b" value; the
// acceptor treats a comma in a routing header as a second header (a comma is
// never part of a valid identifier).

import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../log.js';

/** Set on metadata whose routing header held bytes grpc-js dropped. */
export const INVALID_ROUTING_HEADER = 'x-siglake-invalid-routing-header';

const ROUTING_HEADERS = ['x-scope-orgid', 'x-siglake-index'];
const PRINTABLE = /^[\x20-\x7e]*$/;

type FromHeaders = (headers: Record<string, string | string[] | undefined>) => grpc.Metadata;
const guarded = Symbol.for('siglake.grpcHeaderGuard');

/** Installs the guard and the redacting logger once per process. */
export function installGrpcHeaderGuard(log: Logger): void {
  const M = grpc.Metadata as unknown as { fromHttp2Headers: FromHeaders; [guarded]?: true };
  if (M[guarded] === true) return;
  const original = M.fromHttp2Headers.bind(grpc.Metadata) as FromHeaders;
  M.fromHttp2Headers = (headers) => {
    const md = original(headers);
    for (const key of ROUTING_HEADERS) {
      const v = headers[key];
      if (v === undefined) continue;
      for (const s of Array.isArray(v) ? v : [v]) {
        if (!PRINTABLE.test(s)) md.set(INVALID_ROUTING_HEADER, key);
      }
    }
    return md;
  };
  M[guarded] = true;

  const withhold = (args: unknown[]): string =>
    args
      .map(String)
      .join(' ')
      .replace(/(metadata entry [^:\s]+):[^]*$/, '$1: [value withheld]');
  grpc.setLogger({
    error: (...args: unknown[]) => log.warn({ source: 'grpc-js' }, withhold(args)),
    info: () => {},
    debug: () => {},
  } as unknown as Partial<Console>);
}
