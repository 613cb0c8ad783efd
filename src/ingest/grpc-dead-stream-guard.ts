// grpc-js answers some streams itself, outside any call object: one without
// an application/grpc content type (HTTP 415) and one for a path no service
// has (UNIMPLEMENTED). It does so from the HTTP/2 session's 'stream' event,
// which Node may deliver after the session was torn down: a client that puts
// the preface, a HEADERS frame for such a stream and a frame that is a
// connection error (a HEADERS on stream 0) in one write gets there. grpc-js
// then calls respond() on the destroyed stream, which throws
// ERR_HTTP2_INVALID_STREAM out of an event emitter: 69 bytes from anyone, no
// credentials needed, ended `siglake ingest` and every tenant with it (found
// by a red-team review, stop 47). This skips those answers for a stream that
// is gone, and keeps one that goes away under the answer from throwing: its
// client left, there is no one to answer. Installed once per process.

import * as grpc from '@grpc/grpc-js';
import type { ServerHttp2Stream } from 'node:http2';

const patched = Symbol.for('siglake.grpcDeadStreamGuard');

type VerifyContentType = (this: unknown, stream: ServerHttp2Stream, headers: unknown) => boolean;
type RespondWithError = (this: unknown, err: unknown, stream: ServerHttp2Stream, info?: unknown) => void;

interface ServerInternals {
  _verifyContentType?: VerifyContentType;
  _respondWithError?: RespondWithError;
  [patched]?: true;
}

const gone = (stream: ServerHttp2Stream): boolean => stream.destroyed || stream.closed || stream.session === undefined || stream.session.destroyed;

/** Installs the guard once per process; a grpc-js without these methods is left as it is. */
export function installGrpcDeadStreamGuard(): void {
  const proto = grpc.Server.prototype as unknown as ServerInternals;
  if (proto[patched] === true) return;
  const verify = proto._verifyContentType;
  if (typeof verify === 'function') {
    proto._verifyContentType = function (this: unknown, stream, headers): boolean {
      // false: grpc-js goes no further with the stream (it answered it, or it is gone).
      if (gone(stream)) return false;
      try {
        return verify.call(this, stream, headers);
      } catch {
        return false;
      }
    };
  }
  const respond = proto._respondWithError;
  if (typeof respond === 'function') {
    proto._respondWithError = function (this: unknown, err, stream, info): void {
      if (gone(stream)) return;
      try {
        respond.call(this, err, stream, info);
      } catch {
        // The stream went away under the answer: its client left.
      }
    };
  }
  proto[patched] = true;
}
