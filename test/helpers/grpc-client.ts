// A raw OTLP/gRPC client with identity (de)serializers: the test chooses the
// exact request bytes and sees the exact status code, details and trailing
// metadata the server sends.

import * as grpc from '@grpc/grpc-js';
import { errorInfoOf, decodeStatusProto } from './rpc-status.js';

export const LOGS_EXPORT = '/opentelemetry.proto.collector.logs.v1.LogsService/Export';
export const TRACES_EXPORT = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';

export interface GrpcReply {
  /** grpc.status code; 0 is OK. */
  code: number;
  details: string;
  /** Trailing metadata of a refusal (empty on success). */
  metadata: grpc.Metadata;
  /** The response message bytes on success. */
  response?: Buffer;
}

const identity = (b: Buffer): Buffer => b;

export class RawGrpcClient {
  readonly client: grpc.Client;

  constructor(address: string, options: grpc.ChannelOptions = {}) {
    this.client = new grpc.Client(address, grpc.credentials.createInsecure(), {
      'grpc.max_send_message_length': -1,
      ...options,
    });
  }

  export(
    signal: 'logs' | 'traces',
    body: Uint8Array,
    headers: Record<string, string> = {},
    deadlineMs = 15_000,
  ): Promise<GrpcReply> {
    return this.call(signal === 'logs' ? LOGS_EXPORT : TRACES_EXPORT, body, headers, deadlineMs);
  }

  /** One unary call of `method` (any path: one the server has or not). */
  call(method: string, body: Uint8Array, headers: Record<string, string> = {}, deadlineMs = 15_000): Promise<GrpcReply> {
    const md = new grpc.Metadata();
    for (const [k, v] of Object.entries(headers)) md.set(k, v);
    return new Promise((resolve) => {
      this.client.makeUnaryRequest<Buffer, Buffer>(
        method,
        identity,
        identity,
        Buffer.from(body),
        md,
        { deadline: Date.now() + deadlineMs },
        (err, value) => {
          if (err) {
            resolve({ code: err.code, details: err.details, metadata: err.metadata ?? new grpc.Metadata() });
          } else {
            resolve({ code: grpc.status.OK, details: '', metadata: new grpc.Metadata(), response: value ?? Buffer.alloc(0) });
          }
        },
      );
    });
  }

  close(): void {
    this.client.close();
  }
}

export { grpc };

/**
 * One gRPC call made by hand over node:http2, for messages the grpc-js client
 * will not send as given (a pre-compressed body with the compressed flag set).
 * Resolves with grpc-status and grpc-message from the trailers (or headers),
 * and the SIGLAKE_ code of grpc-status-details-bin when a refusal carries one.
 */
export async function rawGrpcCall(
  address: string,
  method: string,
  message: Uint8Array,
  opts: { compressed?: boolean; headers?: Record<string, string> } = {},
): Promise<{ code: number; message: string; httpStatus: number; errorCode: string | undefined }> {
  const http2 = await import('node:http2');
  const session = http2.connect(`http://${address}`);
  session.on('error', () => {});
  try {
    return await new Promise((resolve, reject) => {
      const req = session.request({
        ':method': 'POST',
        ':path': method,
        'content-type': 'application/grpc',
        te: 'trailers',
        ...(opts.compressed ? { 'grpc-encoding': 'gzip', 'grpc-accept-encoding': 'identity,gzip' } : {}),
        ...opts.headers,
      });
      let httpStatus = 0;
      let code = -1;
      let msg = '';
      let errorCode: string | undefined;
      const take = (h: Record<string, unknown>) => {
        if (h['grpc-status'] !== undefined) code = Number(h['grpc-status']);
        if (h['grpc-message'] !== undefined) msg = decodeURIComponent(String(h['grpc-message']));
        const bin = h['grpc-status-details-bin'];
        if (bin !== undefined) errorCode = errorInfoOf(decodeStatusProto(Buffer.from(String(bin), 'base64'))).reason;
      };
      req.on('response', (h) => {
        httpStatus = Number(h[':status']);
        take(h);
      });
      req.on('trailers', (h) => take(h));
      req.on('data', () => {});
      req.on('error', reject);
      req.on('close', () => resolve({ code, message: msg, httpStatus, errorCode }));
      const prefix = Buffer.alloc(5);
      prefix[0] = opts.compressed ? 1 : 0;
      prefix.writeUInt32BE(message.length, 1);
      req.end(Buffer.concat([prefix, Buffer.from(message)]));
    });
  } finally {
    session.close();
  }
}

/**
 * A gRPC call whose message never finishes arriving: the request headers and
 * part of a length-prefixed message go out, then nothing. `answered` resolves
 * with the status the server ends it with (grpc-status, and the SIGLAKE_ code
 * of grpc-status-details-bin); call `close()` to end it.
 */
export async function openStalledGrpcCall(
  address: string,
  method: string,
): Promise<{ close(): void; answered: Promise<{ code: number; errorCode: string | undefined }> }> {
  const http2 = await import('node:http2');
  const session = http2.connect(`http://${address}`);
  session.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    session.once('connect', () => resolve());
    session.once('error', reject);
  });
  const req = session.request({ ':method': 'POST', ':path': method, 'content-type': 'application/grpc', te: 'trailers' });
  req.on('error', () => {});
  req.on('data', () => {});
  const answered = new Promise<{ code: number; errorCode: string | undefined }>((resolve) => {
    let code = -1;
    let errorCode: string | undefined;
    // The server ends the call while this side's half stays open: the status
    // is final once grpc-status arrives (in trailers, or trailers-only headers).
    const take = (h: Record<string, unknown>) => {
      if (h['grpc-status'] !== undefined) code = Number(h['grpc-status']);
      const bin = h['grpc-status-details-bin'];
      if (bin !== undefined) errorCode = errorInfoOf(decodeStatusProto(Buffer.from(String(bin), 'base64'))).reason;
      if (code !== -1) resolve({ code, errorCode });
    };
    req.on('response', (h) => take(h));
    req.on('trailers', (h) => take(h));
    req.on('close', () => resolve({ code, errorCode }));
  });
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(1000, 1);
  req.write(Buffer.concat([prefix, Buffer.alloc(10)]));
  // A PING answered means the server has read every frame sent before it:
  // the call exists there before the caller goes on (to a signal, say).
  await new Promise<void>((resolve, reject) => {
    session.ping((err) => (err === null ? resolve() : reject(err)));
  });
  return {
    answered,
    close() {
      req.destroy();
      session.destroy();
    },
  };
}
