// The refusal codes as a client decodes them: every code of the table, in each
// encoding the ingester answers with (protobuf body, OTLP/JSON body, gRPC
// grpc-status-details-bin), decoded by protobufjs from proto/ (test/helpers/
// rpc-status.ts), independently of the hand-written encoder; and the table's
// rows as contract §6 states them.

import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CODE_TABLE, ERROR_CODES, IngestError, codeOfWireId, tenantDenied, walFailureCode, wireIdOf } from '../../src/errors.js';
import { AuthError } from '../../src/auth/auth-error.js';
import { Encoding, errorForCompletion, grpcStatusDetails, refusalBody } from '../../src/ingest/responses.js';
import { REPO } from '../helpers/ingester.js';
import { ERROR_INFO_URL, RETRY_INFO_URL, decodeStatusJson, decodeStatusProto, errorInfoOf } from '../helpers/rpc-status.js';

const GRPC = { INVALID_ARGUMENT: 3, DEADLINE_EXCEEDED: 4, PERMISSION_DENIED: 7, RESOURCE_EXHAUSTED: 8, UNIMPLEMENTED: 12, INTERNAL: 13, UNAVAILABLE: 14, UNAUTHENTICATED: 16 };

describe('refusal codes', () => {
  it('every code reaches the client as ErrorInfo{reason, domain: siglake} in protobuf, JSON and grpc-status-details-bin', () => {
    for (const code of ERROR_CODES) {
      const err = new IngestError(code, `refused: ${code}`);
      for (const st of [
        decodeStatusProto(refusalBody(err, Encoding.PROTOBUF)),
        decodeStatusJson(refusalBody(err, Encoding.JSON)),
        decodeStatusProto(grpcStatusDetails(err)),
      ]) {
        expect(st.code, code).toBe(CODE_TABLE[code].grpc);
        expect(st.message).toBe(`refused: ${code}`);
        expect(errorInfoOf(st)).toEqual({ reason: code, domain: 'siglake', metadata: {} });
        expect(st.detailTypes).toEqual([ERROR_INFO_URL]);
      }
      // A request whose content type was unusable gets text, no Status.
      expect(Buffer.from(refusalBody(err, Encoding.TEXT)).toString('utf8')).toBe(`refused: ${code}\n`);
    }
  });

  it('a rate limit carries its RetryInfo after the ErrorInfo; the JSON form uses the @type of the OTLP/JSON mapping', () => {
    const err = new IngestError('SIGLAKE_RATE_LIMITED', 'rate limited: retry in 7 s', { retryAfterSecs: 7 });
    for (const st of [decodeStatusProto(refusalBody(err, Encoding.PROTOBUF)), decodeStatusProto(grpcStatusDetails(err))]) {
      expect(st.detailTypes).toEqual([ERROR_INFO_URL, RETRY_INFO_URL]);
      expect(st.retrySecs).toBe(7);
    }
    const json = JSON.parse(Buffer.from(refusalBody(err, Encoding.JSON)).toString('utf8')) as { details: unknown[] };
    expect(json.details).toEqual([
      { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'SIGLAKE_RATE_LIMITED', domain: 'siglake', metadata: {} },
      { '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '7s' },
    ]);
  });

  it("a 403's and a 401's reason travel as ErrorInfo.metadata.reason", () => {
    const denied = tenantDenied('not_allowed', 'tenant acme is not in --allowed-tenants');
    expect(errorInfoOf(decodeStatusProto(refusalBody(denied, Encoding.PROTOBUF))).metadata).toEqual({ reason: 'not_allowed' });
    expect(errorInfoOf(decodeStatusJson(refusalBody(denied, Encoding.JSON))).metadata).toEqual({ reason: 'not_allowed' });
    const expired = new AuthError('expired');
    expect(errorInfoOf(decodeStatusProto(grpcStatusDetails(expired)))).toEqual({
      reason: 'SIGLAKE_UNAUTHENTICATED',
      domain: 'siglake',
      metadata: { reason: 'expired' },
    });
  });

  it('the table holds the rows of contract §6', () => {
    const row = (code: keyof typeof CODE_TABLE) => {
      const r = CODE_TABLE[code];
      return [r.http, r.grpc, r.retryAfterSecs];
    };
    expect(row('SIGLAKE_BAD_BODY')).toEqual([400, GRPC.INVALID_ARGUMENT, 0]);
    expect(row('SIGLAKE_BAD_HEADER')).toEqual([400, GRPC.INVALID_ARGUMENT, 0]);
    expect(row('SIGLAKE_UNAUTHENTICATED')).toEqual([401, GRPC.UNAUTHENTICATED, 0]);
    expect(row('SIGLAKE_TENANT_DENIED')).toEqual([403, GRPC.PERMISSION_DENIED, 0]);
    expect(row('SIGLAKE_BODY_TOO_LARGE')).toEqual([413, GRPC.RESOURCE_EXHAUSTED, 0]);
    expect(row('SIGLAKE_UNSUPPORTED_MEDIA')).toEqual([415, GRPC.INVALID_ARGUMENT, 0]);
    expect(row('SIGLAKE_RATE_LIMITED')).toEqual([429, GRPC.RESOURCE_EXHAUSTED, 0]); // its own Retry-After, on the error
    expect(row('SIGLAKE_QUEUE_FULL')).toEqual([503, GRPC.UNAVAILABLE, 1]);
    expect(row('SIGLAKE_MEM_BREAKER')).toEqual([503, GRPC.UNAVAILABLE, 1]);
    expect(row('SIGLAKE_LANE_CAP')).toEqual([503, GRPC.UNAVAILABLE, 0]);
    expect(row('SIGLAKE_WAL_DISK')).toEqual([503, GRPC.UNAVAILABLE, 5]);
    expect(row('SIGLAKE_REQUEST_TIMEOUT')).toEqual([408, GRPC.DEADLINE_EXCEEDED, 0]);
    // A signal Siglake does not store: the answers an exporter treats as final for an unknown path or method.
    expect(row('SIGLAKE_SIGNAL_UNSUPPORTED')).toEqual([404, GRPC.UNIMPLEMENTED, 0]);
    expect(row('SIGLAKE_UNKNOWN_PATH')).toEqual([404, GRPC.UNIMPLEMENTED, 0]);
    // Everything the ingester cannot blame on the client or the environment is a 500 / INTERNAL.
    for (const code of ['SIGLAKE_WAL_WRITE', 'SIGLAKE_UNKNOWN_LANE', 'SIGLAKE_DECODER_CRASH', 'SIGLAKE_WORKER_DIED', 'SIGLAKE_ADMISSION_FAILED'] as const) {
      expect(row(code)).toEqual([500, GRPC.INTERNAL, 0]);
      expect(CODE_TABLE[code].log).toBe('error');
    }
  });

  it('the disk refusing a write is SIGLAKE_WAL_DISK; any other writer failure SIGLAKE_WAL_WRITE', () => {
    for (const errno of ['ENOSPC', 'EDQUOT', 'EROFS', 'EIO', 'EACCES']) expect(walFailureCode(errno)).toBe('SIGLAKE_WAL_DISK');
    for (const errno of ['EBADF', 'EINVAL', 'EMFILE', undefined]) expect(walFailureCode(errno)).toBe('SIGLAKE_WAL_WRITE');
  });

  it("a completion's wire number names exactly one code, 0 is accepted, and the worker's message is kept", () => {
    const seen = new Set<number>();
    for (const code of ERROR_CODES) {
      const id = wireIdOf(code);
      expect(id).toBeGreaterThan(0);
      expect(seen.has(id)).toBe(false);
      seen.add(id);
      expect(codeOfWireId(id)).toBe(code);
    }
    expect(codeOfWireId(0)).toBeUndefined();
    expect(codeOfWireId(ERROR_CODES.length + 1)).toBeUndefined();
    const e = errorForCompletion('SIGLAKE_BAD_BODY', 'invalid protobuf: field 9 is 5 bytes');
    expect([e.code, e.httpStatus, e.message]).toEqual(['SIGLAKE_BAD_BODY', 400, 'invalid protobuf: field 9 is 5 bytes']);
    expect(errorForCompletion('SIGLAKE_WORKER_DIED', undefined).httpStatus).toBe(500);
  });

  it('docs/runbooks.md has one heading per code, and the table links to each', () => {
    const doc = fs.readFileSync(path.join(REPO, 'docs/runbooks.md'), 'utf8');
    const headings = [...doc.matchAll(/^### (SIGLAKE_[A-Z_]+)$/gm)].map((m) => m[1]);
    expect(headings).toEqual([...ERROR_CODES]);
    for (const code of ERROR_CODES) expect(doc).toContain(`[${code}](#${code.toLowerCase()})`);
  });
});
