// OTLP/gRPC on @grpc/grpc-js: LogsService/Export and TraceService/Export with
// identity (de)serializers, so the acceptor passes the encoded message through
// without decoding it. grpc-js enforces the message size cap and inflates
// grpc-encoding gzip itself. Same admission as HTTP; refusals map to the gRPC
// codes of contract §6 with `retry-after` metadata and, for rate limits, a
// google.rpc.RetryInfo in grpc-status-details-bin.

import * as grpc from '@grpc/grpc-js';
import { GrpcCode, IngestError } from '../errors.js';
import { Signal } from '../lanes/frames.js';
import type { Lane } from '../lanes/lane-table.js';
import type { Logger } from '../log.js';
import type { IngestMetrics } from '../metrics/ingest-metrics.js';
import type { Admission, IngestHeaders } from './admission.js';
import type { Dispatcher, PendingRequest } from './dispatcher.js';
import { INVALID_ROUTING_HEADER, installGrpcHeaderGuard } from './grpc-header-guard.js';
import { encodeStatusProto, errorForStatus } from './responses.js';

export interface GrpcAcceptorOptions {
  host: string;
  port: number;
  maxRequestBytes: number;
  admission: Admission;
  dispatcher: Dispatcher;
  metrics: IngestMetrics;
  log: Logger;
  isDraining(): boolean;
}

const identity = (b: Buffer): Buffer => b;
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

const draining = new IngestError('SIGLAKE_UNAVAILABLE', 'ingester shutting down: retry on another instance');
const internal = new IngestError('SIGLAKE_WAL_WRITE', 'write failed: the request was not stored');

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
  readonly #o: GrpcAcceptorOptions;
  readonly #server: grpc.Server;
  #port = 0;

  constructor(opts: GrpcAcceptorOptions) {
    this.#o = opts;
    installGrpcHeaderGuard(opts.log);
    this.#server = new grpc.Server({
      'grpc.max_receive_message_length': opts.maxRequestBytes,
      'grpc.max_send_message_length': 1024 * 1024,
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

  listen(): Promise<number> {
    const { host, port } = this.#o;
    const addr = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
    return new Promise((resolve, reject) => {
      this.#server.bindAsync(addr, grpc.ServerCredentials.createInsecure(), (err, bound) => {
        if (err) {
          reject(new Error(`cannot listen on ${addr} for OTLP/gRPC: ${err.message}`));
          return;
        }
        this.#port = bound;
        resolve(bound);
      });
    });
  }

  /** Refuses new calls and resolves when the running ones have ended (or after `timeoutMs`). */
  shutdown(timeoutMs: number): Promise<void> {
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
    this.#server.forceShutdown();
  }

  #ingest(call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>, endpoint: number): void {
    const state = new GrpcIngest(this, endpoint, cb);
    call.on('cancelled', () => {
      state.cancelled = true;
    });
    if (this.#o.isDraining()) {
      this.#refuse(state, draining);
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
    const e = err instanceof IngestError ? err : internal;
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
    if (e.code === 'SIGLAKE_RATE_LIMITED') {
      metadata.set(
        'grpc-status-details-bin',
        Buffer.from(encodeStatusProto(GrpcCode.RESOURCE_EXHAUSTED, e.message, e.retryAfterSecs)),
      );
    }
    state.callback({ code: e.grpcCode, details: e.message, metadata });
  }
}
