// grpc-js refuses some calls itself, before a handler or an interceptor sees
// them: a message over grpc.max_receive_message_length, or one that inflates
// past it (RESOURCE_EXHAUSTED); a compressed message that does not inflate
// (INTERNAL "Failed to decompress message"); a grpc-encoding it does not know
// (UNIMPLEMENTED). Those statuses would reach the client without the
// google.rpc.ErrorInfo every refusal carries (contract §6), and the last two
// with codes the contract does not give them: INTERNAL is for our bugs (an
// exporter drops it), and a bad body or an unsupported encoding is
// INVALID_ARGUMENT (400, 415). This wraps the server call's sendStatus once
// per process: a RESOURCE_EXHAUSTED with no details gets the ErrorInfo
// SIGLAKE_BODY_TOO_LARGE; the decompression failure becomes INVALID_ARGUMENT
// SIGLAKE_BAD_BODY and the unknown encoding INVALID_ARGUMENT
// SIGLAKE_UNSUPPORTED_MEDIA; a grpc-timeout it cannot parse (INTERNAL) becomes
// INVALID_ARGUMENT SIGLAKE_BAD_HEADER, and a second message on a unary call
// (UNIMPLEMENTED) INVALID_ARGUMENT SIGLAKE_BAD_BODY. The call remembers the refusal, so the acceptor
// counts it as the status it is. A status that already carries
// grpc-status-details-bin (every refusal of ours) is left alone; the cost on
// an OK call is one comparison.

import { createRequire } from 'node:module';
import * as grpc from '@grpc/grpc-js';
import type { IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import { IngestError } from '../errors.js';
import { grpcStatusDetails } from './responses.js';
import { unknownGrpcMethod, unsupportedGrpcMethod, type UnsupportedSignal } from './unsupported-signals.js';

const DETAILS = 'grpc-status-details-bin';
const patched = Symbol.for('siglake.grpcTransportRefusals');
/** Set on a call grpc-js refused itself: the refusal, as ours. */
const refusedHere = Symbol.for('siglake.grpcTransportRefused');

/**
 * The refusal grpc-js sent itself on this call (the call an interceptor is
 * given), as the IngestError it stands for; undefined when none. The acceptor
 * counts it as that status, once, and does not refuse the half-close that
 * follows again as a short message.
 */
export function transportRefusal(call: object): IngestError | undefined {
  return (call as { [refusedHere]?: IngestError })[refusedHere];
}

/** Marks `call` as refused by the transport with `e` (read back by transportRefusal()). */
export function markTransportRefusal(call: object, e: IngestError): void {
  (call as { [refusedHere]?: IngestError })[refusedHere] = e;
}

const tooLarge = new IngestError('SIGLAKE_BODY_TOO_LARGE', 'request message too large (--max-request-bytes)');
const notInflating = new IngestError('SIGLAKE_BAD_BODY', 'the compressed message does not decompress (grpc-encoding)');
const secondMessage = new IngestError('SIGLAKE_BAD_BODY', 'bad body: a second message on a unary call');
const badTimeout = new IngestError('SIGLAKE_BAD_HEADER', 'bad header: grpc-timeout is not 1 to 8 digits and a unit (H, M, S, m, u, n)');
/** The refusal of a stream without an application/grpc content type (contract §6: 415 / INVALID_ARGUMENT). */
export const notGrpcContentType = new IngestError(
  'SIGLAKE_UNSUPPORTED_MEDIA',
  'unsupported content type: use application/grpc (or application/grpc+proto): OTLP/gRPC messages are protobuf',
);

/**
 * The refusal of a stream whose :method is not POST, which gRPC requires (grpc-js serves any): the
 * HTTP status stays 405, as grpc-go answers it, with grpc-status INVALID_ARGUMENT (counted 400).
 */
export const notPost = new IngestError('SIGLAKE_BAD_HEADER', 'bad header: a gRPC call\'s :method must be POST');

/**
 * Whether a stream's content type is gRPC with protobuf messages: `application/grpc` or
 * `application/grpc+proto`, either followed by parameters (`;…`). grpc-js takes anything that
 * starts with `application/grpc`: `application/grpc+json` (a JSON message, read as protobuf:
 * a 400 or, for bytes that happen to parse, stored), `application/grpc-web` (another framing)
 * and `application/grpcfoo` (no gRPC content type at all, RFC: a subtype follows `+`).
 */
export function isGrpcProtoContentType(type: string): boolean {
  const semi = type.indexOf(';');
  const base = (semi === -1 ? type : type.slice(0, semi)).trim().toLowerCase();
  return base === 'application/grpc' || base === 'application/grpc+proto';
}

interface StatusLike {
  code: number;
  details?: string;
  metadata?: grpc.Metadata | null;
}

type SendStatus = (this: unknown, status: StatusLike) => void;

/** The refusal a detail-less grpc-js status stands for; undefined for any other status. */
function ourRefusal(status: StatusLike): IngestError | undefined {
  if (status.metadata?.get(DETAILS).length) return undefined;
  switch (status.code) {
    case grpc.status.RESOURCE_EXHAUSTED:
      return status.details === undefined ? tooLarge : new IngestError('SIGLAKE_BODY_TOO_LARGE', status.details);
    case grpc.status.INTERNAL:
      if (status.details === 'Failed to decompress message') return notInflating;
      // grpc-js's answer to a grpc-timeout it cannot parse: a bad header, not our bug.
      return status.details?.startsWith('Invalid grpc-timeout value') === true ? badTimeout : undefined;
    case grpc.status.UNIMPLEMENTED: {
      // grpc-message-frames.ts refuses any byte after the first message; this is the fallback.
      if (status.details?.startsWith('Received a second request message') === true) return secondMessage;
      const m = /^Received message compressed with unsupported encoding "(.{0,64})/.exec(status.details ?? '');
      if (m === null) return undefined;
      const name = m[1]!.replace(/[^\x21-\x7e]/g, '?').replace(/"$/, '');
      return new IngestError('SIGLAKE_UNSUPPORTED_MEDIA', `unsupported grpc-encoding "${name}": use gzip, deflate or identity`);
    }
    default:
      return undefined;
  }
}

/** Installs the wrapper once per process. */
export function installGrpcTransportRefusals(): void {
  const require = createRequire(import.meta.url);
  const mod = require('@grpc/grpc-js/build/src/server-interceptors.js') as {
    BaseServerInterceptingCall?: { prototype: { sendStatus: SendStatus; [patched]?: true } };
  };
  const proto = mod.BaseServerInterceptingCall?.prototype;
  if (proto === undefined || proto[patched] === true || typeof proto.sendStatus !== 'function') return;
  const original = proto.sendStatus;
  proto.sendStatus = function (this: unknown, status: StatusLike): void {
    if (status.code === grpc.status.OK) {
      original.call(this, status);
      return;
    }
    const refusal = ourRefusal(status);
    if (refusal === undefined) {
      original.call(this, status);
      return;
    }
    (this as { [refusedHere]?: IngestError })[refusedHere] = refusal;
    const metadata = status.metadata?.clone() ?? new grpc.Metadata();
    metadata.set(DETAILS, grpcStatusDetails(refusal));
    original.call(this, { ...status, code: refusal.grpcCode, details: refusal.message, metadata });
  };
  proto[patched] = true;
}

type VerifyContentType = (this: unknown, stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => boolean;
/** Set on a grpc.Server: told of each stream refused for its content type or :method (its :path and the refusal), to count it. */
export const ON_CONTENT_TYPE_REFUSED = Symbol.for('siglake.grpcContentTypeRefused');
const contentTypePatched = Symbol.for('siglake.grpcContentTypeRefusal');

/**
 * grpc-js answers a stream whose content type does not start with application/grpc with a
 * bare HTTP 415, and takes any that does (isGrpcProtoContentType: +json, -web…) as protobuf. Every
 * content type but application/grpc and application/grpc+proto (and a :method other than POST,
 * HTTP 405 with SIGLAKE_BAD_HEADER, which grpc-js serves as if it were one) gets a bare HTTP 415 from the session's 'stream' event: no grpc-status, no
 * ErrorInfo, counted nowhere. This answers it with the HTTP status kept at
 * 415 (a client that is not gRPC, or reads only :status, never sees a
 * success) and, in the same trailers-only header block, grpc-status
 * INVALID_ARGUMENT with the google.rpc.Status of SIGLAKE_UNSUPPORTED_MEDIA
 * (contract §6), and tells the server's ON_CONTENT_TYPE_REFUSED hook.
 * Installed once per process, before the dead-stream guard wraps it.
 */
export function installGrpcContentTypeRefusal(): void {
  const proto = grpc.Server.prototype as unknown as { _verifyContentType?: VerifyContentType; [contentTypePatched]?: true };
  const verify = proto._verifyContentType;
  if (proto[contentTypePatched] === true || typeof verify !== 'function') return;
  proto._verifyContentType = function (this: unknown, stream, headers): boolean {
    const type = headers['content-type'];
    const method = headers[':method'];
    // grpc-js's own check (startsWith, case-sensitive) still runs on what passes ours.
    const e =
      method !== 'POST'
        ? notPost
        : typeof type === 'string' && isGrpcProtoContentType(type) && type.startsWith('application/grpc')
          ? undefined
          : notGrpcContentType;
    if (e === undefined) return verify.call(this, stream, headers);
    stream.respond(
      {
        ':status': e === notPost ? 405 : 415,
        'content-type': 'application/grpc',
        'grpc-status': String(e.grpcCode),
        'grpc-message': encodeURI(e.message),
        [DETAILS]: grpcStatusDetails(e).toString('base64'),
      },
      { endStream: true },
    );
    (this as { [ON_CONTENT_TYPE_REFUSED]?: (path: string | undefined, e: IngestError) => void })[ON_CONTENT_TYPE_REFUSED]?.(headers[':path'], e);
    return false;
  };
  proto[contentTypePatched] = true;
}

interface UnimplementedStatus {
  code?: number;
  details?: string;
  metadata?: grpc.Metadata;
}
type RespondWithError = (this: unknown, err: UnimplementedStatus, stream: ServerHttp2Stream, channelz?: unknown) => void;
/** Set on a grpc.Server: told of each call to a signal Siglake does not store, to count it. */
export const ON_SIGNAL_UNSUPPORTED = Symbol.for('siglake.grpcSignalUnsupported');
const unimplementedPatched = Symbol.for('siglake.grpcUnimplementedRefusal');
const NO_METHOD = 'The server does not implement the method ';

/**
 * grpc-js answers a call to a method no service has with UNIMPLEMENTED from
 * the session's 'stream' event, before any interceptor: no ErrorInfo. A call
 * to the metrics or profiles Export (a signal Siglake does not store) keeps
 * UNIMPLEMENTED, the code an exporter treats as final, and gets the
 * google.rpc.Status of SIGLAKE_SIGNAL_UNSUPPORTED with a message naming the
 * services this port serves; the server's ON_SIGNAL_UNSUPPORTED hook counts
 * it. Any other unknown method keeps UNIMPLEMENTED too, with the
 * google.rpc.Status of SIGLAKE_UNKNOWN_PATH naming the services (uncounted:
 * no endpoint to count it under). Installed once per process.
 */
export function installGrpcUnimplementedRefusal(): void {
  const proto = grpc.Server.prototype as unknown as { _respondWithError?: RespondWithError; [unimplementedPatched]?: true };
  const respond = proto._respondWithError;
  if (proto[unimplementedPatched] === true || typeof respond !== 'function') return;
  proto._respondWithError = function (this: unknown, err, stream, channelz): void {
    const path = err.code === grpc.status.UNIMPLEMENTED && err.metadata === undefined && err.details?.startsWith(NO_METHOD) ? err.details.slice(NO_METHOD.length) : undefined;
    if (path === undefined) {
      respond.call(this, err, stream, channelz);
      return;
    }
    const signal = unsupportedGrpcMethod(path);
    const e = signal?.grpc ?? unknownGrpcMethod(path);
    const metadata = new grpc.Metadata();
    metadata.set(DETAILS, grpcStatusDetails(e));
    // grpc-message is percent-encoded by the caller of respond (grpc-js sends details as given).
    respond.call(this, { code: e.grpcCode, details: encodeURI(e.message), metadata }, stream, channelz);
    if (signal !== undefined) (this as { [ON_SIGNAL_UNSUPPORTED]?: (s: UnsupportedSignal) => void })[ON_SIGNAL_UNSUPPORTED]?.(signal);
  };
  proto[unimplementedPatched] = true;
}
