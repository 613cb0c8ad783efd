// Every refusal and failure the ingester can answer with has a stable code.
// Callers match on `code`, never on the message. One table maps a code to
// the HTTP status and the gRPC status code a client sees (contract §6).

export const GrpcCode = {
  OK: 0,
  INVALID_ARGUMENT: 3,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
  DEADLINE_EXCEEDED: 4,
} as const;

export type ErrorCode =
  | 'SIGLAKE_MEM_BREAKER'
  | 'SIGLAKE_RATE_LIMITED'
  | 'SIGLAKE_UNAUTHENTICATED'
  | 'SIGLAKE_TENANT_DENIED'
  | 'SIGLAKE_BAD_HEADER'
  | 'SIGLAKE_LANE_CAP'
  | 'SIGLAKE_QUEUE_FULL'
  | 'SIGLAKE_BODY_TOO_LARGE'
  | 'SIGLAKE_UNSUPPORTED_MEDIA'
  | 'SIGLAKE_BAD_BODY'
  | 'SIGLAKE_WAL_WRITE'
  | 'SIGLAKE_REQUEST_TIMEOUT'
  | 'SIGLAKE_UNAVAILABLE'
  // x-siglake-index names no index of the tenant (src/indexes).
  | 'SIGLAKE_UNKNOWN_INDEX';

interface CodeRow {
  http: number;
  grpc: number;
  /** Whether the refusal carries `Retry-After: 1` (503s that clear by themselves). */
  retryAfterOne: boolean;
}

export const CODE_TABLE: Readonly<Record<ErrorCode, CodeRow>> = {
  SIGLAKE_MEM_BREAKER: { http: 503, grpc: GrpcCode.UNAVAILABLE, retryAfterOne: true },
  SIGLAKE_RATE_LIMITED: { http: 429, grpc: GrpcCode.RESOURCE_EXHAUSTED, retryAfterOne: false },
  SIGLAKE_UNAUTHENTICATED: { http: 401, grpc: GrpcCode.UNAUTHENTICATED, retryAfterOne: false },
  SIGLAKE_TENANT_DENIED: { http: 403, grpc: GrpcCode.PERMISSION_DENIED, retryAfterOne: false },
  SIGLAKE_BAD_HEADER: { http: 400, grpc: GrpcCode.INVALID_ARGUMENT, retryAfterOne: false },
  SIGLAKE_LANE_CAP: { http: 503, grpc: GrpcCode.UNAVAILABLE, retryAfterOne: false },
  SIGLAKE_QUEUE_FULL: { http: 503, grpc: GrpcCode.UNAVAILABLE, retryAfterOne: true },
  SIGLAKE_BODY_TOO_LARGE: { http: 413, grpc: GrpcCode.RESOURCE_EXHAUSTED, retryAfterOne: false },
  SIGLAKE_UNSUPPORTED_MEDIA: { http: 415, grpc: GrpcCode.INVALID_ARGUMENT, retryAfterOne: false },
  SIGLAKE_BAD_BODY: { http: 400, grpc: GrpcCode.INVALID_ARGUMENT, retryAfterOne: false },
  SIGLAKE_WAL_WRITE: { http: 500, grpc: GrpcCode.INTERNAL, retryAfterOne: false },
  // The body did not arrive whole within --request-timeout-secs.
  SIGLAKE_REQUEST_TIMEOUT: { http: 408, grpc: GrpcCode.DEADLINE_EXCEEDED, retryAfterOne: false },
  // Shutting down, or a shard restarting: the client may retry elsewhere.
  SIGLAKE_UNAVAILABLE: { http: 503, grpc: GrpcCode.UNAVAILABLE, retryAfterOne: true },
  // The tenant has no index of that name: create it first (docs/indexes.md).
  SIGLAKE_UNKNOWN_INDEX: { http: 400, grpc: GrpcCode.INVALID_ARGUMENT, retryAfterOne: false },
};

/** The six labels of siglake_ingest_tenant_denied_total (contract §8). */
export const TENANT_DENIED_REASONS = [
  'header_not_trusted',
  'claim_missing',
  'claim_invalid',
  'header_mismatch',
  'not_allowed',
  'at_capacity',
] as const;
export type TenantDeniedReason = (typeof TENANT_DENIED_REASONS)[number];

/**
 * A refusal or failure on the ingest path. Instances for constant refusals are
 * built once and reused, so refusing a flood allocates nothing.
 */
export class IngestError extends Error {
  readonly code: ErrorCode;
  readonly httpStatus: number;
  readonly grpcCode: number;
  /** Label for siglake_ingest_tenant_denied_total when code is SIGLAKE_TENANT_DENIED. */
  readonly reason: TenantDeniedReason | undefined;
  /** Whole seconds for Retry-After; 0 means no header. */
  readonly retryAfterSecs: number;

  constructor(code: ErrorCode, message: string, opts: { reason?: TenantDeniedReason; retryAfterSecs?: number } = {}) {
    super(message);
    this.name = 'IngestError';
    const row = CODE_TABLE[code];
    this.code = code;
    this.httpStatus = row.http;
    this.grpcCode = row.grpc;
    this.reason = opts.reason;
    this.retryAfterSecs = opts.retryAfterSecs ?? (row.retryAfterOne ? 1 : 0);
  }
}

/** Build a tenant denial; the message names the reason label, never a token. */
export function tenantDenied(reason: TenantDeniedReason, detail: string): IngestError {
  return new IngestError('SIGLAKE_TENANT_DENIED', `tenant denied (${reason}): ${detail}`, { reason });
}

/**
 * A body that is not a valid OTLP export request (400), too large (413) or in an
 * unsupported encoding (415). Thrown by the decoders in src/otlp.
 */
export class BodyError extends IngestError {
  constructor(code: 'SIGLAKE_BAD_BODY' | 'SIGLAKE_BODY_TOO_LARGE' | 'SIGLAKE_UNSUPPORTED_MEDIA', message: string) {
    super(code, message);
    this.name = 'BodyError';
  }
}

/** Errors of the configuration: start-up stops with exit code 2. */
export class ConfigError extends Error {
  readonly code = 'SIGLAKE_CONFIG';
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** A WAL segment that breaks the format at a known place. Repair cuts exactly there. */
export class CorruptionError extends Error {
  readonly code = 'SIGLAKE_WAL_CORRUPT';
  constructor(
    readonly segment: string,
    readonly offset: number,
    readonly why: string,
  ) {
    super(`${segment} at offset ${offset}: ${why}`);
    this.name = 'CorruptionError';
  }
}
