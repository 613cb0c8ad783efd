// What a client receives: empty Export*ServiceResponse bodies, and refusal
// bodies as a google.rpc.Status in the request's encoding (contract §6).
// Constant refusals are encoded once and cached per error object.

import { IngestError } from '../errors.js';

export const Encoding = { PROTOBUF: 0, JSON: 1, TEXT: 2 } as const;
export type EncodingCode = (typeof Encoding)[keyof typeof Encoding];

export const CONTENT_TYPES = ['application/x-protobuf', 'application/json', 'text/plain; charset=utf-8'] as const;

/** Refusals both transports make before a request reaches a worker. */
export const DRAINING = new IngestError('SIGLAKE_UNAVAILABLE', 'ingester shutting down: retry on another instance');
export const INTERNAL = new IngestError('SIGLAKE_WAL_WRITE', 'write failed: the request was not stored');

/** Empty Export*ServiceResponse: zero protobuf bytes, or `{}`. */
export const EMPTY_RESPONSE: readonly Uint8Array[] = [new Uint8Array(0), new TextEncoder().encode('{}'), new Uint8Array(0)];

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
  500: '500 Internal Server Error',
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

/** google.rpc.Status { code, message, details } as protobuf. */
export function encodeStatusProto(grpcCode: number, message: string, retryAfterSecs = 0): Uint8Array {
  const out: number[] = [];
  if (grpcCode !== 0) {
    varint(out, 1 << 3);
    varint(out, grpcCode);
  }
  if (message !== '') lengthDelimited(out, 2, utf8.encode(message));
  if (retryAfterSecs > 0) {
    const any: number[] = [];
    lengthDelimited(any, 1, utf8.encode('type.googleapis.com/google.rpc.RetryInfo'));
    lengthDelimited(any, 2, encodeRetryInfo(retryAfterSecs));
    lengthDelimited(out, 3, any);
  }
  return Uint8Array.from(out);
}

/** google.rpc.Status as OTLP/JSON (lowerCamelCase, Any with @type). */
export function encodeStatusJson(grpcCode: number, message: string, retryAfterSecs = 0): Uint8Array {
  const status: Record<string, unknown> = { code: grpcCode, message };
  if (retryAfterSecs > 0) {
    status['details'] = [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: `${retryAfterSecs}s` }];
  }
  return utf8.encode(JSON.stringify(status));
}

const cache = new WeakMap<IngestError, Uint8Array[]>();

/** The refusal body of `err` in `encoding`, cached on the error object. */
export function refusalBody(err: IngestError, encoding: EncodingCode): Uint8Array {
  let bodies = cache.get(err);
  if (bodies === undefined) {
    bodies = [];
    cache.set(err, bodies);
  }
  let body = bodies[encoding];
  if (body === undefined) {
    const retry = err.code === 'SIGLAKE_RATE_LIMITED' ? err.retryAfterSecs : 0;
    body =
      encoding === Encoding.PROTOBUF
        ? encodeStatusProto(err.grpcCode, err.message, retry)
        : encoding === Encoding.JSON
          ? encodeStatusJson(err.grpcCode, err.message, retry)
          : utf8.encode(err.message + '\n');
    bodies[encoding] = body;
  }
  return body;
}

/** The error behind a worker's answer, carrying the worker's own message when it gave one. */
export function errorForStatus(status: number, message: string | undefined): IngestError {
  const code =
    status === 400
      ? 'SIGLAKE_BAD_BODY'
      : status === 413
        ? 'SIGLAKE_BODY_TOO_LARGE'
        : status === 415
          ? 'SIGLAKE_UNSUPPORTED_MEDIA'
          : status === 503
            ? 'SIGLAKE_UNAVAILABLE'
            : 'SIGLAKE_WAL_WRITE';
  if (message !== undefined) return new IngestError(code, message);
  return code === 'SIGLAKE_WAL_WRITE' ? INTERNAL : new IngestError(code, `request refused (${status})`);
}
