// Every answer of the query server that is not a result: a stable code, the
// HTTP status it maps to, and a message (contract query §4 "Status codes").
// Bodies are `{"error": {"code": "SIGLAKE_…", "message": "…"}}`, plus
// `reason` on a tenant denial. Messages never carry a token.

export type QueryErrorCode =
  | 'SIGLAKE_BAD_BODY'
  | 'SIGLAKE_BAD_SQL'
  | 'SIGLAKE_SQL_REFUSED'
  | 'SIGLAKE_UNAUTHENTICATED'
  | 'SIGLAKE_TENANT_DENIED'
  | 'SIGLAKE_TENANT_AMBIGUOUS'
  | 'SIGLAKE_NOT_FOUND'
  | 'SIGLAKE_METHOD_NOT_ALLOWED'
  | 'SIGLAKE_BODY_TOO_LARGE'
  | 'SIGLAKE_UNSUPPORTED_MEDIA'
  | 'SIGLAKE_EXPECTATION_FAILED'
  | 'SIGLAKE_QUERY_CONCURRENCY'
  | 'SIGLAKE_QUERY_ENGINE'
  | 'SIGLAKE_SHARD_UNAVAILABLE'
  | 'SIGLAKE_UNAVAILABLE'
  | 'SIGLAKE_QUERY_TIMEOUT';

const STATUS: Readonly<Record<QueryErrorCode, number>> = {
  SIGLAKE_BAD_BODY: 400,
  SIGLAKE_BAD_SQL: 400,
  SIGLAKE_SQL_REFUSED: 400,
  SIGLAKE_UNAUTHENTICATED: 401,
  SIGLAKE_TENANT_DENIED: 403,
  SIGLAKE_TENANT_AMBIGUOUS: 403,
  SIGLAKE_NOT_FOUND: 404,
  SIGLAKE_METHOD_NOT_ALLOWED: 405,
  SIGLAKE_BODY_TOO_LARGE: 413,
  SIGLAKE_UNSUPPORTED_MEDIA: 415,
  SIGLAKE_EXPECTATION_FAILED: 417,
  SIGLAKE_QUERY_CONCURRENCY: 429,
  SIGLAKE_QUERY_ENGINE: 500,
  SIGLAKE_SHARD_UNAVAILABLE: 502,
  SIGLAKE_UNAVAILABLE: 503,
  SIGLAKE_QUERY_TIMEOUT: 504,
};

/** The three labels of siglake_query_tenant_denied_total (contract query §4). */
export const QUERY_DENIED_REASONS = ['missing', 'invalid', 'unlisted'] as const;
export type QueryDeniedReason = (typeof QUERY_DENIED_REASONS)[number];

export class QueryError extends Error {
  readonly code: QueryErrorCode;
  readonly httpStatus: number;
  readonly reason: QueryDeniedReason | undefined;
  /** Whole seconds for Retry-After; 0 means no header. */
  readonly retryAfterSecs: number;

  constructor(code: QueryErrorCode, message: string, opts: { reason?: QueryDeniedReason; retryAfterSecs?: number } = {}) {
    super(message);
    this.name = 'QueryError';
    this.code = code;
    this.httpStatus = STATUS[code];
    this.reason = opts.reason;
    this.retryAfterSecs = opts.retryAfterSecs ?? 0;
  }

  /** The JSON body of the refusal. */
  body(): string {
    const error: Record<string, string> = { code: this.code, message: this.message };
    if (this.reason !== undefined) error['reason'] = this.reason;
    return JSON.stringify({ error });
  }
}

/**
 * Any error thrown on the request path as a QueryError: the auth module's
 * refusals (IngestError-shaped: `code` + `httpStatus`) keep their code and
 * status; anything else is an engine failure.
 */
export function asQueryError(e: unknown): QueryError {
  if (e instanceof QueryError) return e;
  const x = e as { code?: unknown; httpStatus?: unknown; message?: unknown; retryAfterSecs?: unknown };
  if (x !== null && typeof x === 'object' && x.code === 'SIGLAKE_UNAUTHENTICATED') return new QueryError('SIGLAKE_UNAUTHENTICATED', String(x.message));
  if (x !== null && typeof x === 'object' && x.code === 'SIGLAKE_UNAVAILABLE') {
    return new QueryError('SIGLAKE_UNAVAILABLE', String(x.message), { retryAfterSecs: 1 });
  }
  return new QueryError('SIGLAKE_QUERY_ENGINE', `query failed: ${x !== null && typeof x === 'object' ? String(x.message) : String(e)}`);
}
