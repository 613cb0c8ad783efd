// The OTLP and google.rpc protos of proto/, loaded at run time with protobufjs'
// reflection. For tests, the load generator and offline tools; the ingest hot
// path never decodes with it (see wire-validator.ts and json-decoder.ts).

import { existsSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import { ConfigError } from '../errors.js';
import type { Signal } from './schema.js';

const ENTRY_FILES = [
  'opentelemetry/proto/collector/logs/v1/logs_service.proto',
  'opentelemetry/proto/collector/trace/v1/trace_service.proto',
  'google/rpc/status.proto',
];

const REQUEST_TYPE: Readonly<Record<Signal, string>> = {
  logs: 'opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest',
  traces: 'opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest',
};

/** How decoded messages become plain objects: 64-bit integers as decimal strings, bytes as Buffers. */
export const PLAIN_OBJECT_OPTIONS: protobuf.IConversionOptions = { longs: String, enums: Number };

export interface RpcStatus {
  code: number;
  message: string;
  details?: { typeUrl: string; value: Uint8Array }[];
}

export class ProtoRoot {
  readonly root: protobuf.Root;
  readonly #requests: Readonly<Record<Signal, protobuf.Type>>;
  readonly #status: protobuf.Type;

  private constructor(root: protobuf.Root) {
    this.root = root;
    this.#requests = {
      logs: root.lookupType(REQUEST_TYPE.logs),
      traces: root.lookupType(REQUEST_TYPE.traces),
    };
    this.#status = root.lookupType('google.rpc.Status');
  }

  /**
   * The proto/ directory of the package: the nearest ancestor of this module's
   * directory that has one (src/otlp under vitest, dist/otlp when built).
   */
  static protoDir(): string {
    let dir = dirname(fileURLToPath(import.meta.url));
    for (;;) {
      const candidate = join(dir, 'proto');
      if (existsSync(join(candidate, ENTRY_FILES[0]))) return candidate;
      const up = dirname(dir);
      if (up === dir) throw new ConfigError(`no proto/ directory above ${dirname(fileURLToPath(import.meta.url))}`);
      dir = up;
    }
  }

  /** Parse the protos synchronously. Each call builds a fresh Root: keep the instance. */
  static load(protoDir: string = ProtoRoot.protoDir()): ProtoRoot {
    const root = new protobuf.Root();
    root.resolvePath = (_origin: string, target: string) => (isAbsolute(target) ? target : join(protoDir, target));
    root.loadSync(ENTRY_FILES, { keepCase: false });
    root.resolveAll();
    return new ProtoRoot(root);
  }

  /** The protobufjs type of a fully qualified message name. */
  type(fullName: string): protobuf.Type {
    return this.root.lookupType(fullName);
  }

  requestType(signal: Signal): protobuf.Type {
    return this.#requests[signal];
  }

  /**
   * Encode an Export*ServiceRequest given as a plain object in protobufjs'
   * camelCase form (bytes as Uint8Array or base64, 64-bit integers as strings or numbers).
   */
  encodeRequest(signal: Signal, request: Record<string, unknown>): Uint8Array {
    const type = this.#requests[signal];
    return type.encode(type.fromObject(request)).finish();
  }

  /** Decode an Export*ServiceRequest into a plain object (`options` default to PLAIN_OBJECT_OPTIONS). */
  decodeRequest(
    signal: Signal,
    bytes: Uint8Array,
    options: protobuf.IConversionOptions = PLAIN_OBJECT_OPTIONS,
  ): Record<string, unknown> {
    const type = this.#requests[signal];
    return type.toObject(type.decode(bytes), options);
  }

  encodeLogsRequest(request: Record<string, unknown>): Uint8Array {
    return this.encodeRequest('logs', request);
  }

  decodeLogsRequest(bytes: Uint8Array, options?: protobuf.IConversionOptions): Record<string, unknown> {
    return this.decodeRequest('logs', bytes, options);
  }

  encodeTraceRequest(request: Record<string, unknown>): Uint8Array {
    return this.encodeRequest('traces', request);
  }

  decodeTraceRequest(bytes: Uint8Array, options?: protobuf.IConversionOptions): Record<string, unknown> {
    return this.decodeRequest('traces', bytes, options);
  }

  /** Encode a google.rpc.Status (the body of every refusal). */
  encodeStatus(status: RpcStatus): Uint8Array {
    // protobufjs bundles its own google/protobuf/any.proto, whose names keep their snake_case.
    const details = (status.details ?? []).map((d) => ({ type_url: d.typeUrl, value: d.value }));
    return this.#status.encode(this.#status.fromObject({ code: status.code, message: status.message, details })).finish();
  }

  decodeStatus(bytes: Uint8Array): RpcStatus {
    const o = this.#status.toObject(this.#status.decode(bytes), { defaults: true }) as {
      code: number;
      message: string;
      details: { type_url: string; value: Uint8Array }[];
    };
    return { code: o.code, message: o.message, details: o.details.map((d) => ({ typeUrl: d.type_url, value: d.value })) };
  }
}
