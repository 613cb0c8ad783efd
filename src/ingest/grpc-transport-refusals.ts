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
// SIGLAKE_UNSUPPORTED_MEDIA. The call remembers the refusal, so the acceptor
// counts it as the status it is. A status that already carries
// grpc-status-details-bin (every refusal of ours) is left alone; the cost on
// an OK call is one comparison.

import { createRequire } from 'node:module';
import * as grpc from '@grpc/grpc-js';
import { IngestError } from '../errors.js';
import { grpcStatusDetails } from './responses.js';

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
      return status.details === 'Failed to decompress message' ? notInflating : undefined;
    case grpc.status.UNIMPLEMENTED: {
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
