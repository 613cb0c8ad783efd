// OTLP/gRPC on @grpc/grpc-js: LogsService/Export and TraceService/Export with
// identity (de)serializers, so the acceptor passes the encoded message through
// without decoding it. grpc-js enforces the message size cap and inflates
// grpc-encoding gzip itself. Same admission as HTTP; refusals map to the gRPC
// codes of contract §6 with `retry-after` metadata, and every refusal carries
// its google.rpc.Status in grpc-status-details-bin: an ErrorInfo with the
// SIGLAKE_ code and, for rate limits, a google.rpc.RetryInfo.

import * as grpc from '@grpc/grpc-js';
import net from 'node:net';
import { IngestError, type ErrorCode } from '../errors.js';
import { FLAG_BUDGET_EXHAUSTED, Signal } from '../shard/frames.js';
import type { Lane } from '../lanes/lane-table.js';
import type { AcceptorOptions } from './acceptor-options.js';
import type { Admitted, BudgetSink, IngestHeaders } from './admission.js';
import { auditNote, type AuditNote } from '../tenants/audit-log.js';
import type { BudgetRefusal } from '../tenants/declared-tenants.js';
import type { PendingRequest } from '../shard/dispatcher.js';
import { INVALID_ROUTING_HEADER, installGrpcHeaderGuard } from './grpc-header-guard.js';
import { peerOfCall, tapOfCall, tapSocket } from './grpc-header-tap.js';
import { installGrpcDeadStreamGuard } from './grpc-dead-stream-guard.js';
import {
  installGrpcContentTypeRefusal,
  installGrpcTransportRefusals,
  installGrpcUnimplementedRefusal,
  ON_CONTENT_TYPE_REFUSED,
  ON_SIGNAL_UNSUPPORTED,
  transportRefusal,
} from './grpc-transport-refusals.js';
import { installGrpcMessageFrames, MESSAGE_SINK, type MessageSink } from './grpc-message-frames.js';
import { Answers } from './answers.js';
import { StreamPool, type StreamSlot } from './grpc-stream-pool.js';
import { asRefusal, DRAINING, grpcStatusDetails, logRefusal } from './responses.js';
import type { UnsupportedSignal } from './unsupported-signals.js';

export interface GrpcAcceptorOptions extends AcceptorOptions {
  /** HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS of every connection. */
  maxStreamsPerConnection: number;
  /** Calls open at once over all connections; past it a call is refused before its message is read. */
  maxStreams: number;
}

const identity = (b: Buffer): Buffer => b;

/** The HTTP server (uWS) closes a connection idle this long; the gRPC port does the same. */
const IDLE_SESSION_MS = 10_000;

const EMPTY = Buffer.alloc(0);

/** Messages up to this are counted in flight but never refused by its bound (HTTP's SMALL_BODY_BYTES). */
const SMALL_MESSAGE_BYTES = 64 * 1024;

/**
 * What the admission interceptor hands the handler about a call, on the call's
 * metadata (the object grpc-js passes both): the bytes of the in-flight bound
 * its message took when its length prefix arrived, until the handler takes
 * them over, and what admitHeaders() decided. A property of the call's own
 * metadata, not entries in two WeakMaps keyed by it: those gave every call two
 * entries in long-lived tables, grown and rebuilt as calls came and went, and
 * the scavenger keeps a young table's values whether or not their keys live
 * (docs/performance.md, "Stop 51").
 */
interface CallRecord {
  bytes: number;
  admitted: Admitted | undefined;
}

const CALL_RECORD = Symbol('siglake.grpcCallRecord');

type RecordedMetadata = grpc.Metadata & { [CALL_RECORD]?: CallRecord };

/** Trailing metadata of a refusal: `retry-after` when it has one, and its google.rpc.Status with the ErrorInfo. */
function refusalMetadata(e: IngestError): grpc.Metadata {
  const metadata = new grpc.Metadata();
  if (e.retryAfterSecs > 0) metadata.set('retry-after', String(e.retryAfterSecs));
  metadata.set('grpc-status-details-bin', grpcStatusDetails(e));
  return metadata;
}

const requestTimeout = new IngestError('SIGLAKE_REQUEST_TIMEOUT', 'request message not received in time (--request-timeout-secs)');

function method(path: string): grpc.MethodDefinition<Buffer, Buffer> {
  return {
    path,
    requestStream: false,
    responseStream: false,
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
  };
}

const LOGS_SERVICE = { Export: method('/opentelemetry.proto.collector.logs.v1.LogsService/Export') };
const TRACE_SERVICE = { Export: method('/opentelemetry.proto.collector.trace.v1.TraceService/Export') };


function single(md: grpc.Metadata, key: string): { value: string | undefined; count: number } {
  const v = md.get(key);
  if (v.length === 0) return { value: undefined, count: 0 };
  const first = v[0]!;
  const value = typeof first === 'string' ? first : first.toString('latin1');
  // Node's HTTP/2 layer folds a repeated header into "a, b".
  return { value, count: value.includes(',') ? Math.max(2, v.length) : v.length };
}

const invalidRoutingHeader = new IngestError(
  'SIGLAKE_BAD_HEADER',
  'bad header: X-Scope-OrgID or x-siglake-index holds characters outside printable ASCII',
);
const droppedRoutingHeader = new IngestError(
  'SIGLAKE_BAD_HEADER',
  'bad header: X-Scope-OrgID or x-siglake-index has leading or trailing whitespace, a control character, DEL or an upper-case name, which HTTP/2 drops',
);
const shortMessage = new IngestError('SIGLAKE_BAD_BODY', 'bad body: the stream ended before the message its length prefix declared');
const tooManyStreams = new IngestError('SIGLAKE_TOO_MANY_STREAMS', 'too many gRPC calls open on this ingester (--grpc-max-streams): retry later');
const preemptedStream = new IngestError(
  'SIGLAKE_TOO_MANY_STREAMS',
  'too many gRPC calls open on this ingester (--grpc-max-streams): this call, still waiting for its message, gave its slot to a tenant under its fair share; retry later',
);

/** The facts admission needs, from a call's metadata. */
function headersOf(md: grpc.Metadata, audit: AuditNote | undefined, dropped: boolean): IngestHeaders {
  const org = single(md, 'x-scope-orgid');
  const idx = single(md, 'x-siglake-index');
  const authz = single(md, 'authorization');
  return {
    authorization: authz.value,
    authorizationCount: authz.count,
    orgId: org.value,
    orgIdCount: org.count,
    index: idx.value,
    indexCount: idx.count,
    headerError: dropped ? droppedRoutingHeader : md.get(INVALID_ROUTING_HEADER).length > 0 ? invalidRoutingHeader : undefined,
    audit,
  };
}

const noNote = (): undefined => undefined;

/** The grpc-js status of a refusal: code, message, retry-after metadata, RetryInfo for a rate limit. */
function statusOf(e: IngestError): grpc.StatusObject {
  return { code: e.grpcCode, details: e.message, metadata: refusalMetadata(e) };
}

class GrpcIngest implements PendingRequest, BudgetSink {
  /** [declared tenants] a budget admission found exhausted: the worker validates the message, then this 429 is sent. */
  budget: BudgetRefusal | undefined = undefined;
  /** Its audit note, while the audit stream is on (the one its metadata was admitted with). */
  audit: AuditNote | undefined = undefined;
  /** Bytes of its message this call holds of the in-flight bound. */
  reserved = 0;
  constructor(
    readonly acceptor: GrpcAcceptor,
    readonly endpoint: number,
    /** Its `cancelled` is set by grpc-js once the client went away (read at the answer: no listener a call). */
    readonly call: grpc.ServerUnaryCall<Buffer, Buffer>,
    readonly callback: grpc.sendUnaryData<Buffer>,
  ) {}
  complete(code: ErrorCode | undefined, records: number, message: string | undefined): void {
    this.acceptor.answer(this, code, records, message);
  }
}

export class GrpcAcceptor {
  readonly #o: GrpcAcceptorOptions;
  readonly #answers: Answers<GrpcIngest>;
  /** Calls between their headers and their status, over all connections, shared fairly by tenants. */
  readonly #pool: StreamPool;
  readonly #server: grpc.Server;
  #listener: net.Server | undefined;
  #port = 0;

  constructor(opts: GrpcAcceptorOptions) {
    this.#o = opts;
    this.#pool = new StreamPool(opts.maxStreams);
    opts.metrics.grpcStreamsOpen = () => this.#pool.open;
    this.#answers = new Answers<GrpcIngest>(
      opts.log,
      opts.metrics,
      {
        sendOk: (state) => state.callback(null, EMPTY),
        sendRefusal: (state, e) => state.callback(statusOf(e)),
      },
      (e, note) => opts.admission.refused(e, note),
    );
    installGrpcHeaderGuard(opts.log);
    installGrpcTransportRefusals();
    // Before the dead-stream guard, which wraps it (a stream already gone is not answered).
    installGrpcContentTypeRefusal();
    installGrpcUnimplementedRefusal();
    installGrpcDeadStreamGuard();
    installGrpcMessageFrames();
    this.#server = new grpc.Server({
      'grpc.max_receive_message_length': opts.maxRequestBytes,
      'grpc.max_send_message_length': 1024 * 1024,
      // Close HTTP/2 sessions with no call for as long as the HTTP port keeps
      // an idle connection (GOAWAY: clients reconnect when they need to).
      'grpc.max_connection_idle_ms': IDLE_SESSION_MS,
      'grpc.max_concurrent_streams': opts.maxStreamsPerConnection,
      // The admission interceptor first: it sees the call before anything reads its message.
      interceptors: [(method, call) => this.#admitOnMetadata(method, call)],
    });
    // A stream without an application/grpc content type (415) or whose :method is not POST (400), answered
    // before any call exists: counted as what it is when it named one of our methods (an unknown path is
    // counted nowhere).
    (this.#server as unknown as { [ON_CONTENT_TYPE_REFUSED]?: (path: string | undefined, e: IngestError) => void })[ON_CONTENT_TYPE_REFUSED] = (path, e) => {
      const endpoint = path === LOGS_SERVICE.Export.path ? 0 : path === TRACE_SERVICE.Export.path ? 1 : -1;
      if (endpoint < 0) return;
      logRefusal(opts.log, e, endpoint);
      opts.metrics.request(endpoint, e.httpStatus);
    };
    // A call to the metrics or profiles Export, answered UNIMPLEMENTED SIGLAKE_SIGNAL_UNSUPPORTED before
    // any interceptor (grpc-transport-refusals.ts): counted apart from the ingest requests.
    (this.#server as unknown as { [ON_SIGNAL_UNSUPPORTED]?: (s: UnsupportedSignal) => void })[ON_SIGNAL_UNSUPPORTED] = (signal) => {
      opts.unsupported.count(signal, 'grpc');
      opts.log.debug({ code: signal.grpc.code, status: signal.grpc.httpStatus, signal: signal.name, transport: 'grpc' }, signal.grpc.message);
    };
    this.#server.addService(LOGS_SERVICE, {
      Export: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => this.#ingest(call, cb, 0),
    });
    this.#server.addService(TRACE_SERVICE, {
      Export: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => this.#ingest(call, cb, 1),
    });
  }

  get port(): number {
    return this.#port;
  }

  /**
   * Listens on our own net.Server and hands each connection to grpc-js once it
   * has spoken, so a connection that never sends the HTTP/2 preface is closed
   * like an idle HTTP connection (grpc-js only watches established sessions).
   */
  listen(): Promise<number> {
    const { host, port } = this.#o;
    const injector = this.#server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
    const listener = net.createServer({ noDelay: true }, (socket) => {
      // Until its first bytes the connection is ours: one that never speaks is
      // cut. Once HTTP/2 owns the socket, grpc-js's idle timer (GOAWAY after
      // IDLE_SESSION_MS without a call) and the receive deadline take over.
      socket.setTimeout(IDLE_SESSION_MS, () => socket.destroy());
      socket.once('data', (first: Buffer) => {
        socket.setTimeout(0);
        if (isHttp1Request(first)) {
          // curl, a browser or an OTLP/HTTP exporter pointed at 4317: HTTP/2 would answer with a
          // binary SETTINGS and GOAWAY the client prints as garbage. Say which port to use. What
          // else it sends is read and dropped (a body left unread would reset the answer away),
          // and a client that never closes its side is cut after a short while: end() only
          // half-closes, and a socket held open would keep its descriptor for ever.
          socket.on('data', () => undefined);
          const cut = setTimeout(() => socket.destroy(), HTTP1_LINGER_MS);
          socket.once('close', () => clearTimeout(cut));
          socket.end(HTTP1_ON_GRPC_PORT);
          return;
        }
        // Every byte passes the header tap on its way to HTTP/2 (grpc-header-tap.ts).
        injector.injectConnection(tapSocket(socket, first) as unknown as net.Socket);
      });
      socket.on('error', () => socket.destroy());
    });
    this.#listener = listener;
    return new Promise((resolve, reject) => {
      listener.once('error', (err) => reject(new Error(`cannot listen on ${host}:${port} for OTLP/gRPC: ${err.message}`)));
      listener.listen(port, host, () => {
        this.#port = (listener.address() as net.AddressInfo).port;
        resolve(this.#port);
      });
    });
  }

  /** Refuses new calls and resolves when the running ones have ended (or after `timeoutMs`). */
  shutdown(timeoutMs: number): Promise<void> {
    // No new connections; tryShutdown lets the calls in flight finish first.
    this.#listener?.close();
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.#server.forceShutdown();
        resolve();
      }, timeoutMs);
      t.unref();
      this.#server.tryShutdown(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  /**
   * Runs on a call's headers, before grpc-js reads a byte of its message:
   * bounds the calls open at once, refuses a routing header HTTP/2 dropped,
   * and runs the header checks of admission (breaker, rate, authentication,
   * tenant) so that an unauthenticated call never gets its message buffered
   * (contract §6). A refused call is answered at once and its message is
   * never read.
   *
   * It also bounds the wait for the message: grpc-js calls the handler only
   * once a call's whole message arrived, so a call whose message stalls would
   * hold its stream (and the bytes buffered so far) forever. Past
   * --request-timeout-secs, the bound HTTP bodies have, the call ends with
   * DEADLINE_EXCEEDED. (One interceptor for both: each is a layer of call
   * objects per call.)
   */
  #admitOnMetadata(method: grpc.ServerMethodDefinition<unknown, unknown>, call: grpc.ServerInterceptingCallInterface): grpc.ServerInterceptingCall {
    const endpoint = method.path === TRACE_SERVICE.Export.path ? 1 : 0;
    const where = tapOfCall(call);
    let gotMessage = false;
    let refused = false;
    // Its status sent or the call cancelled: a late admission gives it no slot.
    let ended = false;
    const slot: StreamSlot = {
      counted: false,
      tenant: undefined,
      received: false,
      seat: -1,
      preempt: () => {
        // Over already, its end not reported yet (grpc-js reports it a tick after the answer or the
        // stream's end, and Node emits a new stream of the same read before that): answered (by us
        // or grpc-js) or abandoned, it is neither refused again nor counted as taken.
        if (refused || ended || transportRefusal(call) !== undefined) return false;
        if (where !== undefined && (where.stream.destroyed || where.stream.closed)) return false;
        this.#o.metrics.grpcStreamsRefused();
        refuse(preemptedStream);
        return true;
      },
    };
    const release = () => {
      ended = true;
      this.#pool.release(slot);
    };
    // Bytes of the in-flight bound its message holds while it arrives (given back at the call's end
    // unless the handler took them over), and its admission, for the handler (on its metadata).
    const record: CallRecord = { bytes: 0, admitted: undefined };
    const releaseHeld = () => {
      if (record.bytes === 0) return;
      this.#o.inflight.release(record.bytes);
      record.bytes = 0;
    };
    let timer: NodeJS.Timeout | undefined;
    const clear = () => {
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
    };
    // The call's note (its peer address while auditing), for its refusal's audit event and tenant count.
    let note: AuditNote | undefined;
    // No closure on the plain path (neither auditing nor declared tenants).
    const noteOf = this.#o.admission.notes ? (): AuditNote | undefined => (note ??= this.#noteOf(call)) : noNote;
    const refuse = (err: unknown) => {
      // Answered once: grpc-js may have refused the message itself meanwhile (countedTransport).
      if (refused) return;
      refused = true;
      releaseHeld();
      const e = asRefusal(err);
      logRefusal(this.#o.log, e, endpoint, err);
      this.#o.metrics.request(endpoint, e.httpStatus);
      this.#o.admission.refused(e, noteOf());
      call.sendStatus(statusOf(e));
    };
    // grpc-js refused the message itself (its size: 413; it does not inflate: 400; an unknown
    // grpc-encoding: 415) and answered it: counted as that, once, whichever of the half-close
    // and the close comes (a half-close was refused again as a short message and counted a 400;
    // a close alone left it uncounted).
    const countedTransport = (): boolean => {
      const e = refused ? undefined : transportRefusal(call);
      if (e === undefined) return false;
      refused = true;
      logRefusal(this.#o.log, e, endpoint, e);
      this.#o.metrics.request(endpoint, e.httpStatus);
      this.#o.admission.refused(e, noteOf());
      return true;
    };
    const sink: MessageSink = {
      // The message's length prefix arrived (grpc-message-frames.ts): its bytes are bounded before
      // grpc-js buffers them, as an HTTP body's declared length is (contract §6).
      messageStarts: (n) => {
        if (n <= SMALL_MESSAGE_BYTES) this.#o.inflight.force(n);
        else {
          const full = this.#o.inflight.reserve(n);
          if (full !== undefined) return full;
        }
        record.bytes += n;
        return undefined;
      },
      // Its whole message is here: the call is no longer stalled, and its slot is never taken for
      // another tenant (set here, not when grpc-js delivers the message: a gzip message, which a
      // Collector sends by default, is decompressed on the thread pool first, and every call a
      // Collector had sent whole was taken in that window).
      messageArrived: () => {
        slot.received = true;
      },
      refuse: (e) => refuse(e),
    };
    (call as { [MESSAGE_SINK]?: MessageSink })[MESSAGE_SINK] = sink;
    return new grpc.ServerInterceptingCall(
      call,
      new grpc.ResponderBuilder()
        .withStart((next) => {
          // A full pool: the call is admitted first, and gets a slot then only as its tenant's fair share allows.
          this.#pool.take(slot);
          timer = setTimeout(() => {
            timer = undefined;
            refuse(requestTimeout); // counted and logged, as HTTP's 408 is
          }, this.#o.requestTimeoutSecs * 1000);
          timer.unref();
          next(
            new grpc.ServerListenerBuilder()
              .withOnReceiveMetadata((md, nextMd) => {
                // Claimed first, whatever comes of the call: an entry left in the tap by a refused
                // call would count toward its bound (past which streams read as dropped).
                const dropped = where?.tap !== undefined && where.tap.take(where.stream.id!) !== undefined;
                if (this.#o.isDraining()) {
                  refuse(DRAINING);
                  return;
                }
                // A routing header HTTP/2 dropped is a raw header fault, refused where HTTP refuses
                // one (after the breaker, the global bucket and authentication, contract §4), never
                // read as absent.
                (md as RecordedMetadata)[CALL_RECORD] = record;
                let pre: Admitted | Promise<Admitted>;
                try {
                  // [declared tenants] the peer for the audit stream, read only while it is on.
                  pre = this.#o.admission.admitHeaders(headersOf(md, noteOf(), dropped));
                } catch (e) {
                  refuse(e);
                  return;
                }
                // Its slot is its tenant's from now on; a call that found the pool full gets one here or is refused.
                const seat = (a: Admitted): boolean => {
                  if (refused || ended) return false;
                  if (slot.counted) this.#pool.attribute(slot, a.tenant);
                  else if (!this.#pool.admitLate(slot, a.tenant, () => this.#o.metrics.grpcStreamsPreempted())) {
                    this.#o.metrics.grpcStreamsRefused();
                    refuse(tooManyStreams);
                    return false;
                  }
                  return true;
                };
                if (pre instanceof Promise) {
                  pre.then(
                    (a) => {
                      if (!seat(a)) return;
                      record.admitted = a;
                      nextMd(md);
                    },
                    (e: unknown) => refuse(e),
                  );
                  return;
                }
                if (!seat(pre)) return;
                record.admitted = pre;
                nextMd(md);
              })
              .withOnReceiveMessage((message, nextMessage) => {
                gotMessage = true;
                slot.received = true;
                clear();
                nextMessage(message);
              })
              .withOnReceiveHalfClose((nextHalfClose) => {
                // The client ended the stream inside a message (a length prefix longer than what
                // followed): grpc-js would answer UNIMPLEMENTED; it is a bad request (contract §6).
                if (!gotMessage && !refused) {
                  // A stream reset or a connection closed mid-message ends its readable side too:
                  // that call was abandoned (counted as aborted), not a bad request to answer.
                  if (where !== undefined && (where.stream.aborted || where.stream.destroyed)) return;
                  if (countedTransport()) return;
                  refuse(shortMessage);
                  return;
                }
                nextHalfClose();
              })
              // grpc-js reports every call's close as a cancel: one whose stream was
              // aborted (reset, or its connection lost, before the answer) was abandoned.
              .withOnCancel(() => {
                clear();
                release();
                releaseHeld();
                countedTransport();
                if (where !== undefined && where.stream.aborted) this.#o.metrics.aborted(endpoint);
              })
              .build(),
          );
        })
        .withSendStatus((status, nextStatus) => {
          clear();
          release();
          releaseHeld();
          nextStatus(status);
        })
        .build(),
    );
  }

  #ingest(call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>, endpoint: number): void {
    const state = new GrpcIngest(this, endpoint, call, cb);
    const record = (call.metadata as RecordedMetadata)[CALL_RECORD];
    const pre = record?.admitted;
    state.audit = pre !== undefined ? pre.audit : this.#noteOf(call);
    if (this.#o.isDraining()) {
      this.#refuse(state, DRAINING);
      return;
    }
    const signal = endpoint === 0 ? 'logs' : 'traces';
    let admitted: Lane | Promise<Lane>;
    try {
      // The header checks ran on the metadata already (#admitOnMetadata); what is left is the lane.
      admitted =
        pre !== undefined
          ? this.#o.admission.reserve(signal, pre, state)
          : // Every call passes #admitOnMetadata first (it took the tap's record of a dropped header).
            this.#o.admission.admit(signal, headersOf(call.metadata, state.audit, false), state);
    } catch (e) {
      this.#refuse(state, e);
      return;
    }
    const flags = endpoint === 0 ? Signal.LOGS : Signal.TRACES;
    const body = call.request;
    // Counted from its length prefix on (#admitOnMetadata's sink): the request takes those bytes
    // over, as many as the message has now (more once grpc-js inflated it), until the answer.
    const had = record?.bytes ?? 0;
    if (record !== undefined) record.bytes = 0;
    state.reserved = body.length;
    if (body.length > had) this.#o.inflight.force(body.length - had);
    else if (had > body.length) this.#o.inflight.release(had - body.length);
    // [declared tenants] a deferred budget refusal: the worker validates the message and refuses it.
    if (admitted instanceof Promise) {
      admitted.then(
        (lane) => this.#o.dispatcher.dispatch(lane, flags | (state.budget !== undefined ? FLAG_BUDGET_EXHAUSTED : 0), body, state),
        (err: unknown) => this.#refuse(state, err),
      );
    } else {
      this.#o.dispatcher.dispatch(admitted, flags | (state.budget !== undefined ? FLAG_BUDGET_EXHAUSTED : 0), body, state);
    }
  }

  /** A call's note (admission.notes: declared tenants or the audit stream), with its peer address while auditing. */
  #noteOf(call: unknown): AuditNote | undefined {
    const a = this.#o.admission;
    return a.notes ? auditNote(a.auditing ? peerOfCall(call) : undefined) : undefined;
  }

  #release(state: GrpcIngest): void {
    if (state.reserved === 0) return;
    this.#o.inflight.release(state.reserved);
    state.reserved = 0;
  }

  #refuse(state: GrpcIngest, err: unknown): void {
    this.#release(state);
    this.#answers.refuse(state, err);
  }

  /** Called by the dispatcher when the worker answered. */
  answer(state: GrpcIngest, code: ErrorCode | undefined, records: number, message: string | undefined): void {
    this.#release(state);
    if (code === undefined && state.call.cancelled) {
      // Written, but the client cancelled before the answer: not counted as a 200 it never saw (499).
      this.#o.metrics.request(state.endpoint, 499);
      this.#o.metrics.records(state.endpoint, records);
      state.callback(null, EMPTY);
      return;
    }
    if (code === 'SIGLAKE_BUDGET_EXHAUSTED' && state.budget !== undefined) {
      // [declared tenants] the message was valid and the budget exhausted (contract §4 step 12).
      this.#answers.refuse(state, this.#o.admission.budgetRefused(state.budget));
      return;
    }
    this.#answers.completed(state, code, records, message);
  }
}

/** How long an HTTP/1 client at the gRPC port may keep its side open after the 505. */
const HTTP1_LINGER_MS = 2_000;
const HTTP1_BODY = 'this is the OTLP/gRPC port: it speaks HTTP/2 only (gRPC). Send OTLP/HTTP (/v1/logs, /v1/traces) to the OTLP/HTTP port (default 4318).\n';
/** The answer to an HTTP/1.x request on the gRPC port: 505 HTTP Version Not Supported, naming the other port. */
const HTTP1_ON_GRPC_PORT = Buffer.from(
  `HTTP/1.1 505 HTTP Version Not Supported\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(HTTP1_BODY)}\r\nconnection: close\r\n\r\n${HTTP1_BODY}`,
);

/** The connection's first bytes start an HTTP/1.x request line (`GET /`, `POST /v1/logs`), not the HTTP/2 preface (`PRI * HTTP/2.0`). */
function isHttp1Request(first: Buffer): boolean {
  const n = Math.min(first.length, 16);
  let i = 0;
  while (i < n && first[i]! >= 0x41 && first[i]! <= 0x5a) i++; // an upper-case method token
  if (i < 3 || i >= n || first[i] !== 0x20) return false;
  return !(i === 3 && first[0] === 0x50 && first[1] === 0x52 && first[2] === 0x49); // PRI: HTTP/2
}
