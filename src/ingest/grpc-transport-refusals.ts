// grpc-js refuses some calls itself, before a handler or an interceptor sees
// them: a message over grpc.max_receive_message_length, or one that inflates
// past it (RESOURCE_EXHAUSTED). Those statuses would reach the client without
// the google.rpc.ErrorInfo every refusal carries (contract §6). This wraps the
// server call's sendStatus once per process and adds the Status with the
// ErrorInfo (SIGLAKE_BODY_TOO_LARGE) to a RESOURCE_EXHAUSTED that has none. A
// status that already carries grpc-status-details-bin (every refusal of ours)
// is left alone; the cost on an OK call is one comparison.

import { createRequire } from 'node:module';
import * as grpc from '@grpc/grpc-js';
import { IngestError } from '../errors.js';
import { grpcStatusDetails } from './responses.js';

const DETAILS = 'grpc-status-details-bin';
const patched = Symbol.for('siglake.grpcTransportRefusals');
/** Set on a call grpc-js refused itself (RESOURCE_EXHAUSTED, the 413 of contract §6). */
const refusedHere = Symbol.for('siglake.grpcTransportRefused');

/**
 * Whether grpc-js refused this call itself for its size (the call an
 * interceptor is given): its refusal is counted as the 413 it is, and the
 * half-close that follows is not refused again as a short message.
 */
export function refusedForSize(call: object): boolean {
  return (call as { [refusedHere]?: true })[refusedHere] === true;
}

const tooLarge = new IngestError('SIGLAKE_BODY_TOO_LARGE', 'request message too large (--max-request-bytes)');

interface StatusLike {
  code: number;
  details?: string;
  metadata?: grpc.Metadata | null;
}

type SendStatus = (this: unknown, status: StatusLike) => void;

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
    if (status.code === grpc.status.RESOURCE_EXHAUSTED && !(status.metadata?.get(DETAILS).length ?? 0)) {
      (this as { [refusedHere]?: true })[refusedHere] = true;
      const metadata = status.metadata?.clone() ?? new grpc.Metadata();
      const st = new IngestError('SIGLAKE_BODY_TOO_LARGE', status.details ?? tooLarge.message);
      metadata.set(DETAILS, grpcStatusDetails(status.details === undefined ? tooLarge : st));
      original.call(this, { ...status, metadata });
      return;
    }
    original.call(this, status);
  };
  proto[patched] = true;
}
