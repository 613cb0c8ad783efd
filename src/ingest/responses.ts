// What a client receives: empty Export*ServiceResponse bodies, and refusal
// bodies as a google.rpc.Status in the request's encoding (contract §6), each
// carrying a google.rpc.ErrorInfo whose reason is the SIGLAKE_ code. The same
// Status, as protobuf, is the gRPC `grpc-status-details-bin` trailer.
// Constant refusals are encoded once and cached per error object.

import { ERROR_DOMAIN, IngestError, type ErrorCode } from '../errors.js';
import { LogThrottle, type Logger } from '../log.js';

/** How a response is encoded; PROTOBUF_ALT is protobuf for a request sent as `application/protobuf`, answered in kind. */
export const Encoding = { PROTOBUF: 0, JSON: 1, TEXT: 2, PROTOBUF_ALT: 3 } as const;
export type EncodingCode = (typeof Encoding)[keyof typeof Encoding];

export const CONTENT_TYPES = ['application/x-protobuf', 'application/json', 'text/plain; charset=utf-8', 'application/protobuf'] as const;

/** Refusals both transports make before a request reaches a worker. */
export const DRAINING = new IngestError('SIGLAKE_DRAINING', 'ingester shutting down: retry on another instance');
/** An admission check threw something that is not a refusal (a bug; the cause is logged, never sent). */
export const ADMISSION_FAILED = new IngestError(
  'SIGLAKE_ADMISSION_FAILED',
  'internal error during admission: the request was not stored',
);

/** Empty Export*ServiceResponse: zero protobuf bytes, or `{}`. */
export const EMPTY_RESPONSE: readonly Uint8Array[] = [new Uint8Array(0), new TextEncoder().encode('{}'), new Uint8Array(0), new Uint8Array(0)];

const STATUS_LINES: Record<number, string> = {
  200: '200 OK',
  400: '400 Bad Request',
  401: '401 Unauthorized',
  403: '403 Forbidden',
  404: '404 Not Found',
  405: '405 Method Not Allowed',
  408: '408 Request Timeout',
  413: '413 Payload Too Large',
  415: '415 Unsupported Media Type',
  429: '429 Too Many Requests',
  431: '431 Request Header Fields Too Large',
  500: '500 Internal Server Error',
  501: '501 Not Implemented',
  503: '503 Service Unavailable',
};

export function statusLine(status: number): string {
  return STATUS_LINES[status] ?? `${status} Unknown`;
}

function varint(out: number[], v: number): void {
  while (v > 0x7f) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
}

function lengthDelimited(out: number[], field: number, bytes: Uint8Array | number[]): void {
  varint(out, (field << 3) | 2);
  varint(out, bytes.length);
  for (let i = 0; i < bytes.length; i++) out.push(bytes[i]!);
}

const utf8 = new TextEncoder();

const ERROR_INFO_URL = 'type.googleapis.com/google.rpc.ErrorInfo';
const RETRY_INFO_URL = 'type.googleapis.com/google.rpc.RetryInfo';

/** google.rpc.RetryInfo { retry_delay: Duration { seconds } }. */
export function encodeRetryInfo(seconds: number): Uint8Array {
  const duration: number[] = [];
  if (seconds > 0) {
    varint(duration, 1 << 3);
    varint(duration, seconds);
  }
  const out: number[] = [];
  lengthDelimited(out, 1, duration);
  return Uint8Array.from(out);
}

/** google.rpc.ErrorInfo { reason, domain, metadata } (metadata: map<string, string>, field 3). */
export function encodeErrorInfo(reason: string, metadata: Readonly<Record<string, string>> = {}): Uint8Array {
  const out: number[] = [];
  lengthDelimited(out, 1, utf8.encode(reason));
  lengthDelimited(out, 2, utf8.encode(ERROR_DOMAIN));
  for (const [k, v] of Object.entries(metadata)) {
    const entry: number[] = [];
    lengthDelimited(entry, 1, utf8.encode(k));
    lengthDelimited(entry, 2, utf8.encode(v));
    lengthDelimited(out, 3, entry);
  }
  return Uint8Array.from(out);
}

function anyOf(out: number[], typeUrl: string, value: Uint8Array): void {
  const any: number[] = [];
  lengthDelimited(any, 1, utf8.encode(typeUrl));
  lengthDelimited(any, 2, value);
  lengthDelimited(out, 3, any);
}

/** ErrorInfo.metadata of a refusal: its closed-set label (a denial's or a 401's reason), when it has one. */
function errorMetadata(err: IngestError): Record<string, string> {
  return err.label !== undefined ? { reason: err.label } : {};
}

/** RetryInfo goes with a rate limit or a spent budget only (contract §6); other 503s carry the header or metadata alone. */
function retryInfoSecs(err: IngestError): number {
  return err.code === 'SIGLAKE_RATE_LIMITED' || err.code === 'SIGLAKE_BUDGET_EXHAUSTED' ? err.retryAfterSecs : 0;
}

/**
 * google.rpc.Status { code, message, details } as protobuf: an ErrorInfo
 * (reason = the SIGLAKE_ code, domain = siglake), then for a rate limit a RetryInfo.
 */
export function encodeStatusProto(err: IngestError): Uint8Array {
  const out: number[] = [];
  varint(out, 1 << 3);
  varint(out, err.grpcCode);
  if (err.message !== '') lengthDelimited(out, 2, utf8.encode(err.message));
  anyOf(out, ERROR_INFO_URL, encodeErrorInfo(err.code, errorMetadata(err)));
  const retry = retryInfoSecs(err);
  if (retry > 0) anyOf(out, RETRY_INFO_URL, encodeRetryInfo(retry));
  return Uint8Array.from(out);
}

/** google.rpc.Status as OTLP/JSON (lowerCamelCase, each Any with its @type). */
export function encodeStatusJson(err: IngestError): Uint8Array {
  const details: Record<string, unknown>[] = [
    { '@type': ERROR_INFO_URL, reason: err.code, domain: ERROR_DOMAIN, metadata: errorMetadata(err) },
  ];
  const retry = retryInfoSecs(err);
  if (retry > 0) details.push({ '@type': RETRY_INFO_URL, retryDelay: `${retry}s` });
  return utf8.encode(JSON.stringify({ code: err.grpcCode, message: err.message, details }));
}

// Per error object: [protobuf, JSON, text, protobuf again (application/protobuf)] bodies, then the gRPC status details.
const cache = new WeakMap<IngestError, (Uint8Array | undefined)[]>();
const GRPC_DETAILS = 4;

function cached(err: IngestError, slot: number, make: () => Uint8Array): Uint8Array {
  let entry = cache.get(err);
  if (entry === undefined) {
    entry = [];
    cache.set(err, entry);
  }
  return (entry[slot] ??= make());
}

/** The refusal body of `err` in `encoding`, cached on the error object. */
export function refusalBody(err: IngestError, encoding: EncodingCode): Uint8Array {
  return cached(err, encoding, () =>
    encoding === Encoding.PROTOBUF || encoding === Encoding.PROTOBUF_ALT
      ? encodeStatusProto(err)
      : encoding === Encoding.JSON
        ? encodeStatusJson(err)
        : utf8.encode(err.message + '\n'),
  );
}

/** The `grpc-status-details-bin` trailer of `err`: its google.rpc.Status, cached on the error object. */
export function grpcStatusDetails(err: IngestError): Buffer {
  const bytes = cached(err, GRPC_DETAILS, () => Buffer.from(encodeStatusProto(err)));
  return bytes as Buffer;
}

/** The refusal a thrown value stands for: itself when it is one, else SIGLAKE_ADMISSION_FAILED. */
export function asRefusal(err: unknown): IngestError {
  return err instanceof IngestError ? err : ADMISSION_FAILED;
}

/**
 * Logs one refusal at its code's level (contract §6 table in src/errors.ts).
 * `cause` is the thrown value behind SIGLAKE_ADMISSION_FAILED; only its message is logged.
 */
const refusalThrottle = new LogThrottle();

export function logRefusal(log: Logger, err: IngestError, endpoint: number, cause?: unknown): void {
  // debug lines are off in production; a warn or error that repeats on every
  // request (a full disk) is written once a second per code, with a count.
  let suppressed = 0;
  if (err.logLevel !== 'debug') {
    suppressed = refusalThrottle.take(err.code);
    if (suppressed < 0) return;
  }
  const fields: Record<string, unknown> = { code: err.code, status: err.httpStatus, endpoint };
  if (suppressed > 0) fields['suppressed'] = suppressed;
  if (cause !== undefined && cause !== err) fields['err'] = (cause as Error)?.message ?? String(cause);
  log[err.logLevel](fields, err.message);
}

const byCode = new Map<ErrorCode, IngestError>();

/** The error behind a worker's answer, carrying the worker's own message when it gave one. */
export function errorForCompletion(code: ErrorCode, message: string | undefined): IngestError {
  if (message !== undefined) return new IngestError(code, message);
  let e = byCode.get(code);
  if (e === undefined) {
    e = new IngestError(code, `request refused (${code})`);
    byCode.set(code, e);
  }
  return e;
}
