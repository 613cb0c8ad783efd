// OTLP/gRPC on @grpc/grpc-js: LogsService/Export and TraceService/Export with
// identity (de)serializers, so the acceptor passes the encoded message through
// without decoding it. grpc-js enforces the message size cap and inflates
// grpc-encoding gzip itself. Same admission as HTTP; refusals map to the gRPC
// codes of contract §6 with `retry-after` metadata and, for rate limits, a
// google.rpc.RetryInfo in grpc-status-details-bin.

import * as grpc from '@grpc/grpc-js';
import net from 'node:net';
import { GrpcCode, IngestError } from '../errors.js';
import { Signal } from '../lanes/frames.js';
import type { Lane } from '../lanes/lane-table.js';
import type { AcceptorOptions } from './acceptor-options.js';
import type { IngestHeaders } from './admission.js';
import type { PendingRequest } from './dispatcher.js';
import { INVALID_ROUTING_HEADER, installGrpcHeaderGuard } from './grpc-header-guard.js';
import { DRAINING, encodeStatusProto, errorForStatus, INTERNAL } from './responses.js';

const identity = (b: Buffer): Buffer => b;

/** The HTTP server (uWS) closes a connection idle this long; the gRPC port does the same. */
const IDLE_SESSION_MS = 10_000;

/**
 * grpc-js calls the handler only once a call's whole message arrived, so a
 * call whose message stalls would hold its stream (and the bytes buffered so
 * far) forever. This interceptor ends such a call with DEADLINE_EXCEEDED
 * after the same bound HTTP bodies have (--request-timeout-secs).
 */
function receiveDeadline(timeoutMs: number): grpc.ServerInterceptor {
  return (_method, call) => {
    let timer: NodeJS.Timeout | undefined;
    const clear = () => {
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
    };
    return new grpc.ServerInterceptingCall(
      call,
      new grpc.ResponderBuilder()
        .withStart((next) => {
          timer = setTimeout(() => {
            timer = undefined;
            call.sendStatus({
              code: grpc.status.DEADLINE_EXCEEDED,
              details: 'request message not received in time (--request-timeout-secs)',
            });
          }, timeoutMs);
          timer.unref();
          next(
            new grpc.ServerListenerBuilder()
              .withOnReceiveMessage((message, nextMessage) => {
                clear();
                nextMessage(message);
              })
              .withOnCancel(clear)
              .build(),
          );
        })
        .withSendStatus((status, nextStatus) => {
          clear();
          nextStatus(status);
        })
        .build(),
    );
  };
}
const EMPTY = Buffer.alloc(0);

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

class GrpcIngest implements PendingRequest {
  cancelled = false;
  constructor(
    readonly acceptor: GrpcAcceptor,
    readonly endpoint: number,
    readonly callback: grpc.sendUnaryData<Buffer>,
  ) {}
  complete(status: number, records: number, message: string | undefined): void {
    this.acceptor.answer(this, status, records, message);
  }
}

export class GrpcAcceptor {
  readonly #o: AcceptorOptions;
  readonly #server: grpc.Server;
  #listener: net.Server | undefined;
  #injector: grpc.ConnectionInjector | undefined;
  #port = 0;

  constructor(opts: AcceptorOptions) {
    this.#o = opts;
    installGrpcHeaderGuard(opts.log);
    this.#server = new grpc.Server({
      'grpc.max_receive_message_length': opts.maxRequestBytes,
      'grpc.max_send_message_length': 1024 * 1024,
      // Close HTTP/2 sessions with no call for as long as the HTTP port keeps
      // an idle connection (GOAWAY: clients reconnect when they need to).
      'grpc.max_connection_idle_ms': IDLE_SESSION_MS,
      interceptors: [receiveDeadline(opts.requestTimeoutSecs * 1000)],
    });
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
    this.#injector = injector;
    const listener = net.createServer({ noDelay: true }, (socket) => {
      // Until its first bytes the connection is ours: one that never speaks is
      // cut. Once HTTP/2 owns the socket, grpc-js's idle timer (GOAWAY after
      // IDLE_SESSION_MS without a call) and the receive deadline take over.
      socket.setTimeout(IDLE_SESSION_MS, () => socket.destroy());
      socket.once('data', (first: Buffer) => {
        socket.setTimeout(0);
        socket.pause();
        socket.unshift(first);
        injector.injectConnection(socket);
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

  forceShutdown(): void {
    this.#listener?.close();
    this.#injector?.destroy();
    this.#server.forceShutdown();
  }

  #ingest(call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>, endpoint: number): void {
    const state = new GrpcIngest(this, endpoint, cb);
    call.on('cancelled', () => {
      state.cancelled = true;
    });
    if (this.#o.isDraining()) {
      this.#refuse(state, DRAINING);
      return;
    }
    const md = call.metadata;
    const org = single(md, 'x-scope-orgid');
    const idx = single(md, 'x-siglake-index');
    const headers: IngestHeaders = {
      authorization: single(md, 'authorization').value,
      orgId: org.value,
      orgIdCount: org.count,
      index: idx.value,
      indexCount: idx.count,
      headerError: md.get(INVALID_ROUTING_HEADER).length > 0 ? invalidRoutingHeader : undefined,
      // [declared tenants] the peer for the audit stream, read only while it is on.
      remote: this.#o.admission.auditing ? call.getPeer() : undefined,
    };
    let admitted: Lane | Promise<Lane>;
    try {
      admitted = this.#o.admission.admit(endpoint === 0 ? 'logs' : 'traces', headers);
    } catch (e) {
      this.#refuse(state, e);
      return;
    }
    const flags = endpoint === 0 ? Signal.LOGS : Signal.TRACES;
    const body = call.request;
    if (admitted instanceof Promise) {
      admitted.then(
        (lane) => this.#o.dispatcher.dispatch(lane, flags, body, state),
        (err: unknown) => this.#refuse(state, err),
      );
    } else {
      this.#o.dispatcher.dispatch(admitted, flags, body, state);
    }
  }

  #refuse(state: GrpcIngest, err: unknown): void {
    const e = err instanceof IngestError ? err : INTERNAL;
    if (!(err instanceof IngestError)) {
      this.#o.log.error({ err: (err as Error)?.message }, 'unexpected error during admission');
    }
    this.#o.metrics.request(state.endpoint, e.httpStatus);
    this.#send(state, e);
  }

  answer(state: GrpcIngest, status: number, records: number, message: string | undefined): void {
    this.#o.metrics.request(state.endpoint, status);
    if (status === 200) this.#o.metrics.records(state.endpoint, records);
    if (status === 200) {
      state.callback(null, EMPTY);
      return;
    }
    this.#send(state, errorForStatus(status, message));
  }

  #send(state: GrpcIngest, e: IngestError): void {
    const metadata = new grpc.Metadata();
    if (e.retryAfterSecs > 0) metadata.set('retry-after', String(e.retryAfterSecs));
    if (e.code === 'SIGLAKE_RATE_LIMITED' || e.code === 'SIGLAKE_BUDGET_EXHAUSTED') {
      metadata.set(
        'grpc-status-details-bin',
        Buffer.from(encodeStatusProto(GrpcCode.RESOURCE_EXHAUSTED, e.message, e.retryAfterSecs)),
      );
    }
    state.callback({ code: e.grpcCode, details: e.message, metadata });
  }
}
