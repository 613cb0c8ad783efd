// Shared by the tenancy integration tests (tenancy-routing, tenancy-auth): one
// client that sends the same record over OTLP/HTTP or OTLP/gRPC and reads the
// answer as one Reply, the checks of an accepted or refused request against the
// siglake_ingest_tenant_denied_total counters, and what is left in the WAL.

import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import { TENANT_DENIED_REASONS, type TenantDeniedReason } from '../../src/errors.js';
import { LOGS_EXPORT, RawGrpcClient, TRACES_EXPORT, grpc } from './grpc-client.js';
import { ManualUpload, post } from './http.js';
import { listFiles, walDump, type RunningIngester } from './ingester.js';
import { logsProto, tracesProto } from './otlp-bodies.js';
import { errorInfoOf, grpcStatusOf, httpStatusOf } from './rpc-status.js';

export const TRANSPORTS = ['http', 'grpc'] as const;
export type Transport = (typeof TRANSPORTS)[number];
export type Signal = 'logs' | 'traces';

/** The reason labels of siglake_ingest_tenant_denied_total, in the order src/errors.ts lists them. */
export const DENIAL_REASONS = TENANT_DENIED_REASONS;
export type Reason = TenantDeniedReason;

/** The gRPC code of each HTTP status of contract §6 used in these tests. */
export const GRPC_OF: Record<number, number> = {
  200: grpc.status.OK,
  400: grpc.status.INVALID_ARGUMENT,
  401: grpc.status.UNAUTHENTICATED,
  403: grpc.status.PERMISSION_DENIED,
  415: grpc.status.INVALID_ARGUMENT,
  503: grpc.status.UNAVAILABLE,
};

export interface Reply {
  transport: Transport;
  /** HTTP status (HTTP only). */
  status: number;
  /** gRPC status code (gRPC only). */
  code: number;
  /** The google.rpc.Status message (HTTP) or grpc-message (gRPC); '' on success. */
  message: string;
  /** Retry-After header or retry-after metadata, null when absent. */
  retryAfter: string | null;
  /** HTTP only: the google.rpc.Status code of a refusal body (absent for text/plain). */
  bodyCode?: number;
  /** The refusal's SIGLAKE_ code (its google.rpc.ErrorInfo reason); absent on success and for text/plain. */
  errorCode?: string;
  /** ErrorInfo.metadata.reason: a denial's reason label, a 401's reason. */
  label?: string;
}

/** An export request holding one record (a log line or a span) with `text`. */
export function bodyFor(signal: Signal, text: string): Uint8Array {
  return signal === 'logs' ? logsProto([text]) : tracesProto([text]);
}

export class Client {
  readonly rpc: RawGrpcClient;
  constructor(readonly ing: RunningIngester) {
    this.rpc = new RawGrpcClient(ing.grpcAddress);
  }

  async send(
    transport: Transport,
    signal: Signal,
    text: string,
    headers: Record<string, string> = {},
    body: Uint8Array = bodyFor(signal, text),
    contentType = 'application/x-protobuf',
  ): Promise<Reply> {
    if (transport === 'http') {
      const r = await post(this.ing.url, `/v1/${signal}`, body, { headers, contentType });
      return { transport, status: r.status, code: -1, retryAfter: r.headers.get('retry-after'), ...refusalOf(r.status, r.contentType, r.body) };
    }
    const r = await this.rpc.export(signal, body, headers);
    const ra = r.metadata.get('retry-after');
    return { transport, status: -1, code: r.code, message: r.details, retryAfter: ra.length > 0 ? String(ra[0]) : null, ...grpcRefusalOf(r) };
  }

  /** A gRPC call with hand-made metadata (several values for one key). */
  sendMetadata(signal: Signal, body: Uint8Array, md: grpc.Metadata): Promise<Reply> {
    return new Promise((resolve) => {
      this.rpc.client.makeUnaryRequest<Buffer, Buffer>(
        signal === 'logs' ? LOGS_EXPORT : TRACES_EXPORT,
        (b) => b,
        (b) => b,
        Buffer.from(body),
        md,
        { deadline: Date.now() + 15_000 },
        (err) => {
          const base = { transport: 'grpc' as const, status: -1, retryAfter: null };
          if (!err) resolve({ ...base, code: 0, message: '' });
          else resolve({ ...base, code: err.code, message: err.details, ...grpcRefusalOf({ code: err.code, metadata: err.metadata }) });
        },
      );
    });
  }

  /** The denial counter of every reason; each series must exist from start-up. */
  async denials(): Promise<Record<Reason, number>> {
    const m = await this.ing.metrics();
    const out = {} as Record<Reason, number>;
    for (const r of DENIAL_REASONS) {
      const v = m.get(`siglake_ingest_tenant_denied_total{reason="${r}"}`);
      expect(v, `series for reason ${r} exists from start-up`).toBeTypeOf('number');
      out[r] = v!;
    }
    return out;
  }

  close(): void {
    this.rpc.close();
  }
}

/** The message, google.rpc.Status code and ErrorInfo of an HTTP answer's body; '' for a 200. */
export function refusalOf(
  status: number,
  contentType: string,
  body: Uint8Array,
): { message: string; bodyCode?: number; errorCode?: string; label?: string } {
  if (status === 200) return { message: '' };
  const st = httpStatusOf(contentType, body);
  if (st === undefined) return { message: Buffer.from(body).toString('utf8') };
  const info = errorInfoOf(st);
  return { message: st.message, bodyCode: st.code, errorCode: info.reason, label: info.metadata['reason'] };
}

/** The ErrorInfo of a gRPC refusal (from grpc-status-details-bin); nothing for OK. */
function grpcRefusalOf(r: { code: number; metadata?: grpc.Metadata }): { errorCode?: string; label?: string } {
  if (r.code === grpc.status.OK) return {};
  const st = grpcStatusOf(r.metadata ?? new grpc.Metadata());
  expect(st?.code, 'grpc-status-details-bin carries the call status').toBe(r.code);
  const info = errorInfoOf(st);
  return { errorCode: info.reason, label: info.metadata['reason'] };
}

/** The HTTP status that goes with each code of contract §6 used in these tests. */
const STATUS_OF_CODE: Record<string, number> = {
  SIGLAKE_BAD_HEADER: 400,
  SIGLAKE_BAD_BODY: 400,
  SIGLAKE_UNAUTHENTICATED: 401,
  SIGLAKE_TENANT_DENIED: 403,
  SIGLAKE_UNSUPPORTED_MEDIA: 415,
  SIGLAKE_UNAVAILABLE: 503,
  SIGLAKE_LANE_CAP: 503,
};

/**
 * Raw HTTP/1.1 POST over a socket: header lines exactly as given (duplicates,
 * any bytes). A connection closed or left unanswered for 1.5 s reads as status 0.
 */
export async function rawHttpPost(ing: RunningIngester, signal: Signal, body: Uint8Array, headers: Record<string, string>): Promise<Reply> {
  const up = new ManualUpload(ing.httpPort, `/v1/${signal}`, body.length, headers);
  let timer: NodeJS.Timeout | undefined;
  const noAnswer = (why: string): Reply => ({ transport: 'http', status: 0, code: -1, message: why, retryAfter: null });
  try {
    await up.connected;
    up.write(body);
    const r = await Promise.race([
      up.response,
      new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), 1500);
      }),
    ]);
    if (r === undefined) return noAnswer('no response within 1.5 s');
    const ct = String(r.headers['content-type'] ?? '');
    const ra = r.headers['retry-after'];
    return { transport: 'http', status: r.status, code: -1, retryAfter: ra === undefined ? null : String(ra), ...refusalOf(r.status, ct, r.body) };
  } catch (e) {
    return noAnswer((e as Error).message);
  } finally {
    clearTimeout(timer);
    up.destroy();
  }
}

/**
 * The HTTP status (and the body's google.rpc.Status code), or the gRPC code
 * that goes with it; for a refusal, an ErrorInfo code that belongs to that status.
 */
export function expectStatus(r: Reply, httpStatus: number): void {
  if (r.transport === 'http') {
    expect(r.status, `HTTP status (${r.message})`).toBe(httpStatus);
    if (r.bodyCode !== undefined) expect(r.bodyCode, 'google.rpc.Status code of the body').toBe(GRPC_OF[httpStatus]);
  } else expect(r.code, `gRPC code (${r.message})`).toBe(GRPC_OF[httpStatus]);
  if (httpStatus !== 200 && r.errorCode !== undefined) {
    expect(STATUS_OF_CODE[r.errorCode], `status of ${r.errorCode}`).toBe(httpStatus);
  }
}

/** The refusal's SIGLAKE_ code (both transports; HTTP text/plain answers carry none and fail here). */
export function expectCode(r: Reply, code: string, label?: string): void {
  expect(r.errorCode, `ErrorInfo reason (${r.message})`).toBe(code);
  if (label !== undefined) expect(r.label, 'ErrorInfo metadata reason').toBe(label);
}

export function delta(before: Record<Reason, number>, after: Record<Reason, number>): Record<Reason, number> {
  const out = {} as Record<Reason, number>;
  for (const r of DENIAL_REASONS) out[r] = after[r] - before[r];
  return out;
}

/** 1 for `reason`, 0 for every other (all 0 for undefined). */
export function only(reason: Reason | undefined): Record<Reason, number> {
  const out = {} as Record<Reason, number>;
  for (const r of DENIAL_REASONS) out[r] = r === reason ? 1 : 0;
  return out;
}

/**
 * Sends one request with `send` and checks the refusal: the status or gRPC
 * code, its SIGLAKE_ code (given, or implied by a 401 or a 403, whose
 * ErrorInfo names the reason label), whatever `more` checks
 * of the reply, and exactly +1 on that reason's counter (no change on any
 * counter without a reason).
 */
export async function expectRefused(
  c: Client,
  send: () => Promise<Reply>,
  httpStatus: number,
  reasonOrCode?: Reason | `SIGLAKE_${string}`,
  more?: (r: Reply) => void,
): Promise<Reply> {
  const before = await c.denials();
  const r = await send();
  expectStatus(r, httpStatus);
  expect(r.message.length).toBeGreaterThan(0);
  const code = reasonOrCode?.startsWith('SIGLAKE_') ? reasonOrCode : undefined;
  const reason = code === undefined ? (reasonOrCode as Reason | undefined) : undefined;
  if (code !== undefined) expectCode(r, code);
  else if (httpStatus === 403) expectCode(r, 'SIGLAKE_TENANT_DENIED', reason);
  else if (httpStatus === 401) expectCode(r, 'SIGLAKE_UNAUTHENTICATED');
  else if (r.errorCode === undefined) expect(r.transport === 'http' && r.bodyCode === undefined, 'only a text/plain answer lacks a code').toBe(true);
  more?.(r);
  expect(delta(before, await c.denials())).toEqual(only(reason));
  return r;
}

/** Sends one request with `send` and checks it was accepted, with no denial counted. */
export async function expectAccepted(c: Client, send: () => Promise<Reply>): Promise<void> {
  const before = await c.denials();
  const r = await send();
  expectStatus(r, 200);
  expect(r.message).toBe('');
  expect(delta(before, await c.denials())).toEqual(only(undefined));
}

/** The tenant directories directly under the WAL root (and `logs`/`traces` of the default tenant), sorted. */
export function topDirs(walDir: string): string[] {
  if (!fs.existsSync(walDir)) return [];
  return fs
    .readdirSync(walDir, { withFileTypes: true })
    // Dot-directories (the commit journal's `.journal`) are the writer's own: no tenant can be named so.
    .filter((e) => e.isDirectory() && !e.name.startsWith('.'))
    .map((e) => e.name)
    .sort();
}

/** Total size of the files under `dir` (0 when absent). */
export function walBytes(dir: string): number {
  return listFiles(dir)
    // Tenants' bytes: the commit journal (`.journal/`, batch mode) holds every lane's records of a
    // round until a checkpoint deletes it, so it would make a tenant's bytes move with another's.
    .filter((f) => !f.endsWith('/') && !f.startsWith('.journal/'))
    .reduce((n, f) => n + fs.statSync(path.join(dir, f)).size, 0);
}

/** Every record text stored under `dir`, sorted. */
export function textsUnder(dir: string): string[] {
  return walDump(dir)
    .flatMap((l) => l.texts)
    .sort();
}
