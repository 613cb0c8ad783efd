// Every refusal and failure the ingester can answer with has a stable code.
// Callers match on `code`, never on the message. One table maps a code to
// the HTTP status, the gRPC status code and the Retry-After a client sees
// (contract §6), and to the level a refusal is logged at. The code reaches the
// client as the `reason` of a google.rpc.ErrorInfo (domain `siglake`) in every
// refusal's google.rpc.Status; docs/runbooks.md has one heading per code.

export const GrpcCode = {
  OK: 0,
  INVALID_ARGUMENT: 3,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
  DEADLINE_EXCEEDED: 4,
  UNIMPLEMENTED: 12,
} as const;

/** Where a code's runbook entry lives (docs/runbooks.md, one heading per code). */
export const RUNBOOK = 'docs/runbooks.md';

/** How loud a refusal of a code is logged by the acceptor that answers it. */
export type LogLevel = 'debug' | 'warn' | 'error';

interface CodeRow {
  http: number;
  grpc: number;
  /**
   * Seconds for `Retry-After` (HTTP) and `retry-after` metadata (gRPC); 0 means
   * none. A rate limit computes its own and carries it on the error.
   */
  retryAfterSecs: number;
  /** The level the answering acceptor logs one refusal at (debug: the client's doing, counted in metrics). */
  log: LogLevel;
}

/**
 * The one table: code → HTTP status, gRPC code, Retry-After, log level
 * (contract §6). The order is the wire order of the completion record: a
 * code's number on the completion ring is its position here plus one (0 is
 * "accepted"), so new codes are appended, never inserted.
 */
export const CODE_TABLE = {
  SIGLAKE_MEM_BREAKER: { http: 503, grpc: GrpcCode.UNAVAILABLE, retryAfterSecs: 1, log: 'debug' },
  SIGLAKE_RATE_LIMITED: { http: 429, grpc: GrpcCode.RESOURCE_EXHAUSTED, retryAfterSecs: 0, log: 'debug' },
  SIGLAKE_UNAUTHENTICATED: { http: 401, grpc: GrpcCode.UNAUTHENTICATED, retryAfterSecs: 0, log: 'debug' },
  SIGLAKE_TENANT_DENIED: { http: 403, grpc: GrpcCode.PERMISSION_DENIED, retryAfterSecs: 0, log: 'debug' },
  SIGLAKE_BAD_HEADER: { http: 400, grpc: GrpcCode.INVALID_ARGUMENT, retryAfterSecs: 0, log: 'debug' },
  // No Retry-After: the cap does not clear by waiting (contract §6).
  SIGLAKE_LANE_CAP: { http: 503, grpc: GrpcCode.UNAVAILABLE, retryAfterSecs: 0, log: 'warn' },
  SIGLAKE_QUEUE_FULL: { http: 503, grpc: GrpcCode.UNAVAILABLE, retryAfterSecs: 1, log: 'debug' },
  SIGLAKE_BODY_TOO_LARGE: { http: 413, grpc: GrpcCode.RESOURCE_EXHAUSTED, retryAfterSecs: 0, log: 'debug' },
  SIGLAKE_UNSUPPORTED_MEDIA: { http: 415, grpc: GrpcCode.INVALID_ARGUMENT, retryAfterSecs: 0, log: 'debug' },
  SIGLAKE_BAD_BODY: { http: 400, grpc: GrpcCode.INVALID_ARGUMENT, retryAfterSecs: 0, log: 'debug' },
  // The WAL writer failed for a reason other than the disk refusing: a bug.
  SIGLAKE_WAL_WRITE: { http: 500, grpc: GrpcCode.INTERNAL, retryAfterSecs: 0, log: 'error' },
  // The body did not arrive whole within --request-timeout-secs.
  SIGLAKE_REQUEST_TIMEOUT: { http: 408, grpc: GrpcCode.DEADLINE_EXCEEDED, retryAfterSecs: 0, log: 'debug' },
  // The identity provider's keys cannot be fetched: the credentials may be fine.
  SIGLAKE_UNAVAILABLE: { http: 503, grpc: GrpcCode.UNAVAILABLE, retryAfterSecs: 1, log: 'warn' },
  // Shutting down: the client retries on another instance.
  SIGLAKE_DRAINING: { http: 503, grpc: GrpcCode.UNAVAILABLE, retryAfterSecs: 1, log: 'debug' },
  // The disk refused the write (ENOSPC, EDQUOT, EROFS, EIO, EACCES; and from the WAL writer ENOTDIR, a
  // file where a tenant's or lane's directory lives, src/wal/wal-write-error.ts): the environment, retryable.
  SIGLAKE_WAL_DISK: { http: 503, grpc: GrpcCode.UNAVAILABLE, retryAfterSecs: 5, log: 'warn' },
  // A worker got a request for a lane it was never told about: a bug in the shard protocol.
  SIGLAKE_UNKNOWN_LANE: { http: 500, grpc: GrpcCode.INTERNAL, retryAfterSecs: 0, log: 'error' },
  // The body decoder threw something other than a refusal of the body: a bug.
  SIGLAKE_DECODER_CRASH: { http: 500, grpc: GrpcCode.INTERNAL, retryAfterSecs: 0, log: 'error' },
  // The writer worker died with the request in flight; the shard restarts.
  SIGLAKE_WORKER_DIED: { http: 500, grpc: GrpcCode.INTERNAL, retryAfterSecs: 0, log: 'error' },
  // An admission check threw something that is not a refusal: a bug.
  SIGLAKE_ADMISSION_FAILED: { http: 500, grpc: GrpcCode.INTERNAL, retryAfterSecs: 0, log: 'error' },
  // --grpc-max-streams gRPC calls are open already: refused before the message is read.
  SIGLAKE_TOO_MANY_STREAMS: { http: 503, grpc: GrpcCode.UNAVAILABLE, retryAfterSecs: 1, log: 'debug' },
  // Bodies being received or queued hold --ingest-max-inflight-mib already.
  SIGLAKE_INFLIGHT_FULL: { http: 503, grpc: GrpcCode.UNAVAILABLE, retryAfterSecs: 1, log: 'debug' },
  // A request head with more header fields than the HTTP server parses (RFC 6585 §5).
  SIGLAKE_TOO_MANY_HEADERS: { http: 431, grpc: GrpcCode.INVALID_ARGUMENT, retryAfterSecs: 0, log: 'debug' },
  // A Transfer-Encoding other than exactly `chunked` (RFC 9112 §6.1).
  SIGLAKE_TRANSFER_ENCODING: { http: 501, grpc: GrpcCode.INVALID_ARGUMENT, retryAfterSecs: 0, log: 'debug' },
  // Declared tenants (declared-tenants.md): the principal matches two tenants.
  SIGLAKE_TENANT_AMBIGUOUS: { http: 403, grpc: GrpcCode.PERMISSION_DENIED, retryAfterSecs: 0, log: 'debug' },
  // An index outside the declared tenant's `indexes` subset.
  SIGLAKE_INDEX_NOT_IN_TENANT: { http: 403, grpc: GrpcCode.PERMISSION_DENIED, retryAfterSecs: 0, log: 'debug' },
  // A day/month budget (index, tenant or server) is spent: Retry-After to the period's end, carried on the error.
  SIGLAKE_BUDGET_EXHAUSTED: { http: 429, grpc: GrpcCode.RESOURCE_EXHAUSTED, retryAfterSecs: 0, log: 'debug' },
  // The tenant has no index of that name: create it first (docs/indexes.md).
  SIGLAKE_UNKNOWN_INDEX: { http: 400, grpc: GrpcCode.INVALID_ARGUMENT, retryAfterSecs: 0, log: 'debug' },
  // An OTLP signal Siglake does not store (metrics, profiles): 404 / UNIMPLEMENTED, the answers an
  // exporter treats as final (no retry), before any admission check (src/ingest/unsupported-signals.ts).
  SIGLAKE_SIGNAL_UNSUPPORTED: { http: 404, grpc: GrpcCode.UNIMPLEMENTED, retryAfterSecs: 0, log: 'debug' },
  // A path (HTTP, with an OTLP content type) or gRPC method the port does not serve at all.
  SIGLAKE_UNKNOWN_PATH: { http: 404, grpc: GrpcCode.UNIMPLEMENTED, retryAfterSecs: 0, log: 'debug' },
} as const satisfies Record<string, CodeRow>;

export type ErrorCode = keyof typeof CODE_TABLE;

/** Every code, in wire order. */
export const ERROR_CODES = Object.keys(CODE_TABLE) as readonly ErrorCode[];

const WIRE_IDS = new Map<ErrorCode, number>(ERROR_CODES.map((c, i) => [c, i + 1]));

/** The code's number in a completion record (1…); 0 means accepted. */
export function wireIdOf(code: ErrorCode): number {
  return WIRE_IDS.get(code)!;
}

/** The code a completion record names; undefined for 0 (accepted) or a number no code has. */
export function codeOfWireId(id: number): ErrorCode | undefined {
  return id > 0 ? ERROR_CODES[id - 1] : undefined;
}

/** `domain` of every google.rpc.ErrorInfo the ingester sends. */
export const ERROR_DOMAIN = 'siglake';

/** errno codes that mean the disk refused a write (contract §4 step 13): SIGLAKE_WAL_DISK, not a bug. */
const DISK_ERRNOS: ReadonlySet<string> = new Set(['ENOSPC', 'EDQUOT', 'EROFS', 'EIO', 'EACCES']);

/** The code of a WAL write that failed with `errno`. */
export function walFailureCode(errno: string | undefined): 'SIGLAKE_WAL_DISK' | 'SIGLAKE_WAL_WRITE' {
  return errno !== undefined && DISK_ERRNOS.has(errno) ? 'SIGLAKE_WAL_DISK' : 'SIGLAKE_WAL_WRITE';
}

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
  /**
   * A closed-set word that refines the code (a denial's reason label, a 401's
   * reason): sent as ErrorInfo.metadata.reason, safe in logs and labels.
   */
  readonly label: string | undefined;
  /** Whole seconds for Retry-After; 0 means no header. */
  readonly retryAfterSecs: number;
  readonly logLevel: LogLevel;

  constructor(
    code: ErrorCode,
    message: string,
    opts: { reason?: TenantDeniedReason; label?: string; retryAfterSecs?: number } = {},
  ) {
    super(message);
    this.name = 'IngestError';
    const row = CODE_TABLE[code];
    this.code = code;
    this.httpStatus = row.http;
    this.grpcCode = row.grpc;
    this.reason = opts.reason;
    this.label = opts.label ?? opts.reason;
    this.retryAfterSecs = opts.retryAfterSecs ?? row.retryAfterSecs;
    this.logLevel = row.log;
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
  /** The YAML key of the setting whose value is refused, when one is (see ofSetting). */
  readonly settingKey: string | undefined;
  /** Why, without the key. */
  readonly detail: string;

  constructor(message: string, settingKey?: string, detail?: string) {
    super(message);
    this.name = 'ConfigError';
    this.settingKey = settingKey;
    this.detail = detail ?? message;
  }

  /**
   * A setting's value refused by the component that uses it (a JWKS file's
   * keys, a tenant list): `<key>: <why>`. The CLI adds where the value came
   * from (config/load.ts withSource) from `settingKey`, not from the text.
   */
  static ofSetting(key: string, why: string): ConfigError {
    return new ConfigError(`${key}: ${why}`, key, why);
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
