// grpc-js reads a call's message whole, in its own buffers, before any
// interceptor or handler sees a byte of it: a message still being received was
// counted nowhere. Forty calls each sending all but the last byte of a 15 MiB
// message took RSS from 121 to 735 MiB while --ingest-max-inflight-mib said 8
// and siglake_ingest_inflight_bytes said 0 (found by a red-team review). The
// contract (§6) bounds bytes in flight, bodies still being received included.
//
// This follows the gRPC framing of every call's DATA as it reaches grpc-js (a
// wrapper around BaseServerInterceptingCall.handleDataFrame, installed once
// per process, like grpc-transport-refusals.ts): when a message's 5-byte
// length prefix has arrived, the call's sink (set by the acceptor's
// interceptor) takes that many bytes of the in-flight bound, or refuses the
// call as HTTP refuses a body the bound cannot hold, before the message is
// buffered. The acceptor gives the bytes back when the call ends, or hands
// them to the request once grpc-js delivers the message.
//
// It also refuses framing grpc-js would take (INVALID_ARGUMENT
// SIGLAKE_BAD_BODY, contract §6, counted 400), each of which was stored: a
// flag byte other than 0 or 1 (grpc-js reads any non-1 as uncompressed), a
// compressed flag on a call with no grpc-encoding or `identity` (grpc-js
// passed the bytes on as they were), and any byte after the one message of a
// unary call (a second message got a detail-less UNIMPLEMENTED, uncounted; a
// partial second length prefix was dropped and the first message stored).
//
// A refused call reads nothing more: its later DATA is dropped and its
// half-close never reaches the handler, so nothing of it is stored.

import { createRequire } from 'node:module';
import * as grpc from '@grpc/grpc-js';
import { IngestError } from '../errors.js';
import { grpcStatusDetails } from './responses.js';
import { markTransportRefusal } from './grpc-transport-refusals.js';

/** The acceptor's view of a call's messages, set on the call its interceptor is given. */
export const MESSAGE_SINK = Symbol.for('siglake.grpcMessageSink');
const STATE = Symbol.for('siglake.grpcMessageFrames');
const patched = Symbol.for('siglake.grpcMessageFramesPatched');

export interface MessageSink {
  /** A message's length prefix arrived: `bytes` follow. Undefined when they were taken; else the refusal. */
  messageStarts(bytes: number): IngestError | undefined;
  /**
   * The message's last byte arrived (grpc-js has yet to decompress and
   * deliver it: a gzip message, the OTLP exporters' default, waits a round
   * of the thread pool).
   */
  messageArrived(): void;
  /** Refuses the call (answered and counted by the acceptor). */
  refuse(e: IngestError): void;
}

const badFlag = (flag: number): IngestError =>
  new IngestError('SIGLAKE_BAD_BODY', `bad body: gRPC message flag byte ${flag} (0: uncompressed, 1: compressed)`);
const compressedWithoutEncoding = new IngestError(
  'SIGLAKE_BAD_BODY',
  'bad body: a gRPC message flagged compressed on a call without a grpc-encoding (or with identity)',
);
const secondMessage = new IngestError('SIGLAKE_BAD_BODY', 'bad body: bytes after the one message of a unary call');

const FLAG = 0;
const SIZE = 1;
const BODY = 2;
/** Nothing more is checked (grpc-js refuses a message over its size cap itself). */
const OFF = 3;

interface Frames {
  phase: number;
  sizeLeft: number;
  size: number;
  bodyLeft: number;
  /** Whole messages read (a unary call carries one). */
  messages: number;
  /** Refused: later DATA and the half-close go nowhere. */
  stopped: boolean;
}

interface CallInternals {
  maxReceiveMessageSize: number;
  incomingEncoding: string;
  sendStatus(status: { code: number; details: string; metadata: grpc.Metadata }): void;
  [MESSAGE_SINK]?: MessageSink;
  [STATE]?: Frames;
}

/** Walks `data` through the call's framing; the refusal the call gets, if any. */
function scan(call: CallInternals, st: Frames, data: Buffer): IngestError | undefined {
  let i = 0;
  while (i < data.length && st.phase !== OFF) {
    if (st.phase === FLAG) {
      if (st.messages > 0) return secondMessage;
      const flag = data[i++]!;
      if (flag > 1) return badFlag(flag);
      if (flag === 1 && call.incomingEncoding === 'identity') return compressedWithoutEncoding;
      st.phase = SIZE;
      st.sizeLeft = 4;
      st.size = 0;
    } else if (st.phase === SIZE) {
      st.size = st.size * 256 + data[i++]!;
      if (--st.sizeLeft > 0) continue;
      const max = call.maxReceiveMessageSize;
      if (max !== -1 && st.size > max) {
        // grpc-js refuses it (RESOURCE_EXHAUSTED, SIGLAKE_BODY_TOO_LARGE) without buffering it.
        st.phase = OFF;
        break;
      }
      const e = call[MESSAGE_SINK]?.messageStarts(st.size);
      if (e !== undefined) return e;
      st.bodyLeft = st.size;
      st.phase = BODY;
      if (st.size === 0) {
        st.phase = FLAG;
        st.messages++;
        call[MESSAGE_SINK]?.messageArrived();
      }
    } else {
      const n = Math.min(st.bodyLeft, data.length - i);
      i += n;
      st.bodyLeft -= n;
      if (st.bodyLeft === 0) {
        st.phase = FLAG;
        st.messages++;
        call[MESSAGE_SINK]?.messageArrived();
      }
    }
  }
  return undefined;
}

function refuseCall(call: CallInternals, e: IngestError): void {
  const sink = call[MESSAGE_SINK];
  if (sink !== undefined) {
    sink.refuse(e);
    return;
  }
  // No interceptor saw the call: answered here, and counted by whoever reads transportRefusal().
  markTransportRefusal(call, e);
  const metadata = new grpc.Metadata();
  if (e.retryAfterSecs > 0) metadata.set('retry-after', String(e.retryAfterSecs));
  metadata.set('grpc-status-details-bin', grpcStatusDetails(e));
  call.sendStatus({ code: e.grpcCode, details: e.message, metadata });
}

/** Installs the wrapper once per process; a grpc-js without these methods is left as it is. */
export function installGrpcMessageFrames(): void {
  const require = createRequire(import.meta.url);
  const mod = require('@grpc/grpc-js/build/src/server-interceptors.js') as {
    BaseServerInterceptingCall?: {
      prototype: {
        handleDataFrame?: (this: CallInternals, data: Buffer) => void;
        handleEndEvent?: (this: CallInternals) => void;
        checkCancelled?: (this: CallInternals) => boolean;
        [patched]?: true;
      };
    };
  };
  const proto = mod.BaseServerInterceptingCall?.prototype;
  if (proto === undefined || proto[patched] === true) return;
  const onData = proto.handleDataFrame;
  const onEnd = proto.handleEndEvent;
  const cancelled = proto.checkCancelled;
  if (typeof onData !== 'function' || typeof onEnd !== 'function' || typeof cancelled !== 'function') return;
  proto.handleDataFrame = function (this: CallInternals, data: Buffer): void {
    const st = (this[STATE] ??= { phase: FLAG, sizeLeft: 0, size: 0, bodyLeft: 0, messages: 0, stopped: false });
    if (st.stopped) return;
    if (!cancelled.call(this)) {
      const e = scan(this, st, data);
      if (e !== undefined) {
        st.stopped = true;
        refuseCall(this, e);
        return;
      }
    }
    onData.call(this, data);
  };
  proto.handleEndEvent = function (this: CallInternals): void {
    if (this[STATE]?.stopped === true) return;
    onEnd.call(this);
  };
  proto[patched] = true;
}
