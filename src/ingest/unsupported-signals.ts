// OTLP signals Siglake does not store. Siglake keeps logs and traces only; an
// OpenTelemetry Collector pipeline (or an SDK) that sends metrics or profiles
// to it by mistake must get an answer it acts on correctly and a person can
// read: 404 on OTLP/HTTP and UNIMPLEMENTED on OTLP/gRPC, which exporters treat
// as final (no retry, the Collector's otlphttp exporter drops on 404), each
// with the google.rpc.Status every refusal carries (ErrorInfo
// SIGLAKE_SIGNAL_UNSUPPORTED) and a message naming what this port serves.
//
// The answer comes before any admission check (breaker, rate buckets,
// authentication, tenant): it depends on the path alone, as a 404 for any
// other path does, and an admission answer would be wrong for it: a 503 or a
// 429 tells the exporter to retry a request no retry can make succeed, and a
// 401 sends its operator to fix credentials only to meet the 404 next. It
// takes nothing a tenant owns (no token, no slot, no lane, no byte of the WAL).
// It is counted in siglake_ingest_signal_unsupported_total{signal,transport},
// not in siglake_ingest_requests_total, whose endpoints are the two signals
// stored (contract §8).

import type { Registry } from 'prom-client';
import { IngestError } from '../errors.js';
import { ComputedMetric } from '../metrics/scraped.js';

export const LOGS_GRPC_METHOD = '/opentelemetry.proto.collector.logs.v1.LogsService/Export';
export const TRACES_GRPC_METHOD = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';

const SERVES_HTTP = 'this port serves POST /v1/logs and POST /v1/traces (OTLP/HTTP)';
const SERVES_GRPC = `this port serves ${LOGS_GRPC_METHOD.slice(1)} and ${TRACES_GRPC_METHOD.slice(1)} (OTLP/gRPC)`;

export interface UnsupportedSignal {
  readonly name: 'metrics' | 'profiles';
  /** The OTLP/HTTP path its exporters post to. */
  readonly httpPath: string;
  /** The OTLP/gRPC method its exporters call. */
  readonly grpcMethod: string;
  readonly http: IngestError;
  readonly grpc: IngestError;
}

function signal(name: 'metrics' | 'profiles', httpPath: string, grpcMethod: string): UnsupportedSignal {
  const what = `Siglake stores logs and traces only, not ${name}: send ${name} to a ${name} backend`;
  return {
    name,
    httpPath,
    grpcMethod,
    http: new IngestError('SIGLAKE_SIGNAL_UNSUPPORTED', `${what}; ${SERVES_HTTP}`),
    grpc: new IngestError('SIGLAKE_SIGNAL_UNSUPPORTED', `${what}; ${SERVES_GRPC}`),
  };
}

/** The OTLP signals refused, with the paths and methods their exporters use (OTLP 1.x; profiles as of v1development). */
export const UNSUPPORTED_SIGNALS: readonly UnsupportedSignal[] = [
  signal('metrics', '/v1/metrics', '/opentelemetry.proto.collector.metrics.v1.MetricsService/Export'),
  signal('profiles', '/v1development/profiles', '/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export'),
];

const TRANSPORTS = ['http', 'grpc'] as const;
export type Transport = (typeof TRANSPORTS)[number];

/** The answer to a path the OTLP/HTTP port does not serve, for a request with an OTLP content type. */
export const UNKNOWN_HTTP_PATH = new IngestError('SIGLAKE_UNKNOWN_PATH', `no such path: ${SERVES_HTTP}`);

/** The answer to a gRPC method no service of the port has; the path echoed as printable ASCII, at most 128 characters. */
export function unknownGrpcMethod(path: string): IngestError {
  const shown = path.slice(0, 128).replace(/[^\x20-\x7e]/g, '?');
  return new IngestError('SIGLAKE_UNKNOWN_PATH', `no such method ${shown}: ${SERVES_GRPC}`);
}

/** The unsupported signal a gRPC method path names, if any. */
export function unsupportedGrpcMethod(path: string | undefined): UnsupportedSignal | undefined {
  return UNSUPPORTED_SIGNALS.find((s) => s.grpcMethod === path);
}

/** siglake_ingest_signal_unsupported_total{signal, transport}: every series exists at zero from start-up. */
export class UnsupportedSignalCounter {
  readonly #counts = new Float64Array(UNSUPPORTED_SIGNALS.length * TRANSPORTS.length);

  constructor(registry: Registry) {
    registry.registerMetric(
      new ComputedMetric(
        'siglake_ingest_signal_unsupported_total',
        'Requests for an OTLP signal Siglake does not store (metrics, profiles), answered 404 / UNIMPLEMENTED SIGLAKE_SIGNAL_UNSUPPORTED before admission; not in siglake_ingest_requests_total.',
        'counter',
        () =>
          UNSUPPORTED_SIGNALS.flatMap((s, i) =>
            TRANSPORTS.map((transport, t) => ({ value: this.#counts[i * TRANSPORTS.length + t]!, labels: { signal: s.name, transport } })),
          ),
      ) as never,
    );
  }

  count(s: UnsupportedSignal, transport: Transport): void {
    this.#counts[UNSUPPORTED_SIGNALS.indexOf(s) * TRANSPORTS.length + TRANSPORTS.indexOf(transport)]! += 1;
  }
}
