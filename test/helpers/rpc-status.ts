// The stable code of a refusal, as a client reads it: the google.rpc.ErrorInfo
// detail (reason = SIGLAKE_ code, domain = siglake) of the google.rpc.Status in
// an HTTP refusal body (protobuf or OTLP/JSON) or in gRPC's
// grpc-status-details-bin trailer. Decoded with protobufjs from the
// repository's proto/ files, independently of the encoder under test.

import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { expect } from 'vitest';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const ERROR_INFO_URL = 'type.googleapis.com/google.rpc.ErrorInfo';
export const RETRY_INFO_URL = 'type.googleapis.com/google.rpc.RetryInfo';

const root = new protobuf.Root();
root.resolvePath = (_origin, target) => (path.isAbsolute(target) ? target : path.join(REPO, 'proto', target));
root.loadSync(['google/rpc/status.proto', 'google/rpc/error_details.proto'], { keepCase: true });
root.resolveAll();
const StatusType = root.lookupType('google.rpc.Status');
const ErrorInfoType = root.lookupType('google.rpc.ErrorInfo');
const RetryInfoType = root.lookupType('google.rpc.RetryInfo');

export interface ErrorInfo {
  reason: string;
  domain: string;
  metadata: Record<string, string>;
}

/** A google.rpc.Status with its details unpacked: every ErrorInfo, and the RetryInfo's seconds. */
export interface DecodedStatus {
  code: number;
  message: string;
  errorInfos: ErrorInfo[];
  /** RetryInfo.retry_delay in whole seconds; undefined without a RetryInfo. */
  retrySecs: number | undefined;
  /** The type of every detail, in order. */
  detailTypes: string[];
}

/** A google.rpc.Status in protobuf (an HTTP body, or grpc-status-details-bin). */
export function decodeStatusProto(bytes: Uint8Array): DecodedStatus {
  const o = StatusType.toObject(StatusType.decode(bytes), { defaults: true, longs: Number }) as {
    code: number;
    message: string;
    details: { type_url: string; value: Uint8Array }[];
  };
  const out: DecodedStatus = { code: o.code, message: o.message, errorInfos: [], retrySecs: undefined, detailTypes: [] };
  for (const d of o.details) {
    out.detailTypes.push(d.type_url);
    if (d.type_url === ERROR_INFO_URL) {
      const e = ErrorInfoType.toObject(ErrorInfoType.decode(d.value), { defaults: true, objects: true }) as ErrorInfo;
      out.errorInfos.push({ reason: e.reason, domain: e.domain, metadata: { ...e.metadata } });
    } else if (d.type_url === RETRY_INFO_URL) {
      const r = RetryInfoType.toObject(RetryInfoType.decode(d.value), { longs: Number, defaults: true }) as {
        retry_delay?: { seconds?: number };
      };
      out.retrySecs = Number(r.retry_delay?.seconds ?? 0);
    }
  }
  return out;
}

/** A google.rpc.Status in OTLP/JSON: details are Any objects carrying `@type`. */
export function decodeStatusJson(body: Uint8Array): DecodedStatus {
  const o = JSON.parse(Buffer.from(body).toString('utf8')) as {
    code: number;
    message: string;
    details?: Record<string, unknown>[];
  };
  const out: DecodedStatus = { code: o.code, message: o.message, errorInfos: [], retrySecs: undefined, detailTypes: [] };
  for (const d of o.details ?? []) {
    const type = String(d['@type']);
    out.detailTypes.push(type);
    if (type === ERROR_INFO_URL) {
      out.errorInfos.push({
        reason: String(d['reason']),
        domain: String(d['domain']),
        metadata: { ...((d['metadata'] as Record<string, string> | undefined) ?? {}) },
      });
    } else if (type === RETRY_INFO_URL) {
      const m = /^(\d+)s$/.exec(String(d['retryDelay']));
      out.retrySecs = m === null ? Number.NaN : Number(m[1]);
    }
  }
  return out;
}

/** The Status of an HTTP refusal body in its content type; undefined for text/plain. */
export function httpStatusOf(contentType: string, body: Uint8Array): DecodedStatus | undefined {
  if (contentType.startsWith('application/json')) return decodeStatusJson(body);
  if (contentType.startsWith('application/x-protobuf') || contentType.startsWith('application/protobuf')) return decodeStatusProto(body);
  return undefined;
}

/** The Status a gRPC refusal carries in grpc-status-details-bin; undefined without one. */
export function grpcStatusOf(metadata: grpc.Metadata): DecodedStatus | undefined {
  const bin = metadata.get('grpc-status-details-bin');
  if (bin.length === 0) return undefined;
  return decodeStatusProto(bin[0] as Buffer);
}

/** The one ErrorInfo of a Status (checked: exactly one, domain `siglake`). */
export function errorInfoOf(st: DecodedStatus | undefined): ErrorInfo {
  expect(st, 'a google.rpc.Status with the refusal').toBeDefined();
  expect(st!.errorInfos, 'exactly one google.rpc.ErrorInfo').toHaveLength(1);
  const info = st!.errorInfos[0]!;
  expect(info.domain).toBe('siglake');
  return info;
}

/** The SIGLAKE_ code of an HTTP refusal (protobuf or JSON body). */
export function httpCode(r: { contentType: string; body: Uint8Array }): string {
  return errorInfoOf(httpStatusOf(r.contentType, r.body)).reason;
}

/** The SIGLAKE_ code of a gRPC refusal, from grpc-status-details-bin (whose Status must match the call's). */
export function grpcCode(r: { code: number; details: string; metadata: grpc.Metadata }): string {
  const st = grpcStatusOf(r.metadata);
  expect(st?.code, 'grpc-status-details-bin code equals the call status').toBe(r.code);
  return errorInfoOf(st).reason;
}
