// OTLP/gRPC requests over @grpc/grpc-js with identity serializers: the pooled
// body bytes are the message. One channel per connection, each with its own
// subchannel pool so that every channel is its own TCP connection (grpc-js
// shares connections between channels to the same address by default).
// Statuses are counted by name ("OK", "UNAVAILABLE"...). With --gzip, grpc-js
// compresses each message itself (grpc-encoding gzip). A call abandoned at the
// end of the run (abandon(): cancelled) is counted as "timeout".

import * as grpc from '@grpc/grpc-js';
import type { PooledBody } from './body-pool.js';
import type { LaneTarget } from './lane-plan.js';
import type { RequestSender, SendDone } from './load-client.js';

export interface GrpcSenderOptions {
  /** host:port */
  target: string;
  connections: number;
  gzip: boolean;
  headers: [string, string][];
  timeoutMs: number;
}

const PATHS = {
  logs: '/opentelemetry.proto.collector.logs.v1.LogsService/Export',
  traces: '/opentelemetry.proto.collector.trace.v1.TraceService/Export',
} as const;

const identity = (b: Buffer): Buffer => b;

const STATUS_NAMES: readonly string[] = (() => {
  const names: string[] = [];
  for (const [name, code] of Object.entries(grpc.status)) if (typeof code === 'number') names[code] = name;
  return names;
})();

export class GrpcSender implements RequestSender {
  readonly #o: GrpcSenderOptions;
  readonly #clients: grpc.Client[] = [];
  readonly #metadata = new Map<number, grpc.Metadata>();
  /** Calls in flight, for abandon(). */
  readonly #calls = new Set<grpc.ClientUnaryCall>();
  /** Set by abandon(): the message its cancelled calls are counted with. */
  #abandoned: string | undefined;

  constructor(opts: GrpcSenderOptions) {
    this.#o = opts;
    for (let i = 0; i < opts.connections; i++) {
      this.#clients.push(
        new grpc.Client(opts.target, grpc.credentials.createInsecure(), {
          'grpc.use_local_subchannel_pool': 1,
          'grpc.max_send_message_length': -1,
          'grpc.max_receive_message_length': -1,
          ...(opts.gzip ? { 'grpc.default_compression_algorithm': 2 } : {}),
        }),
      );
    }
  }

  #metadataOf(target: LaneTarget): grpc.Metadata {
    let md = this.#metadata.get(target.lane);
    if (md === undefined) {
      md = new grpc.Metadata();
      if (target.authorization !== undefined) md.set('authorization', target.authorization);
      if (target.orgId !== undefined) md.set('x-scope-orgid', target.orgId);
      if (target.index !== undefined) md.set('x-siglake-index', target.index);
      for (const [k, v] of this.#o.headers) md.set(k, v);
      this.#metadata.set(target.lane, md);
    }
    return md;
  }

  send(conn: number, target: LaneTarget, body: PooledBody, done: SendDone): void {
    const call: grpc.ClientUnaryCall = this.#clients[conn].makeUnaryRequest<Buffer, Buffer>(
      PATHS[body.signal],
      identity,
      identity,
      body.wire,
      this.#metadataOf(target).clone(),
      { deadline: Date.now() + this.#o.timeoutMs },
      (err) => {
        this.#calls.delete(call);
        if (err === null) {
          done('OK', true, undefined);
          return;
        }
        if (err.code === grpc.status.CANCELLED && this.#abandoned !== undefined) {
          done('timeout', false, this.#abandoned);
          return;
        }
        const name = STATUS_NAMES[err.code] ?? `grpc:${err.code}`;
        done(name, false, err.details);
      },
    );
    this.#calls.add(call);
  }

  abandon(message: string): void {
    this.#abandoned = message;
    for (const call of [...this.#calls]) call.cancel();
  }

  close(): Promise<void> {
    for (const c of this.#clients) c.close();
    return Promise.resolve();
  }
}
