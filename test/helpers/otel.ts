// Real OpenTelemetry SDK records, exported by the real OTLP exporters
// (protobuf over HTTP, and gRPC) to a running ingester.

import { Metadata } from '@grpc/grpc-js';
import { ExportResultCode } from '@opentelemetry/core';
import { OTLPLogExporter as GrpcLogExporter } from '@opentelemetry/exporter-logs-otlp-grpc';
import { OTLPLogExporter as ProtoLogExporter } from '@opentelemetry/exporter-logs-otlp-proto';
import { OTLPTraceExporter as GrpcTraceExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as ProtoTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  InMemoryLogRecordExporter,
  LoggerProvider,
  SimpleLogRecordProcessor,
  type ReadableLogRecord,
} from '@opentelemetry/sdk-logs';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';

export type Transport = 'http' | 'grpc';

/** Log records made by the real SDK, one per body. */
export async function makeLogRecords(bodies: string[], service = 'test-service'): Promise<ReadableLogRecord[]> {
  const memory = new InMemoryLogRecordExporter();
  const provider = new LoggerProvider({
    resource: resourceFromAttributes({ 'service.name': service }),
    processors: [new SimpleLogRecordProcessor({ exporter: memory })],
  });
  const logger = provider.getLogger('siglake-tests', '1.0.0');
  for (const body of bodies) logger.emit({ body, severityText: 'INFO', severityNumber: 9, attributes: { k: 'v' } });
  await provider.forceFlush();
  const records = memory.getFinishedLogRecords();
  await provider.shutdown();
  return records;
}

/** Ended spans made by the real SDK, one per name. */
export async function makeSpans(names: string[], service = 'test-service'): Promise<ReadableSpan[]> {
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': service }),
    spanProcessors: [new SimpleSpanProcessor(memory)],
  });
  const tracer = provider.getTracer('siglake-tests', '1.0.0');
  for (const name of names) tracer.startSpan(name, { attributes: { k: 'v' } }).end();
  await provider.forceFlush();
  const spans = memory.getFinishedSpans();
  await provider.shutdown();
  return spans;
}

export interface ExportOutcome {
  ok: boolean;
  error?: Error & { code?: number; data?: string };
}

export interface ExportTarget {
  url: string; // http://127.0.0.1:port
  grpcAddress: string; // 127.0.0.1:port
  headers?: Record<string, string>;
}

function metadataOf(headers: Record<string, string> | undefined): Metadata {
  const md = new Metadata();
  for (const [k, v] of Object.entries(headers ?? {})) md.set(k, v);
  return md;
}

interface Exporter<T> {
  export(items: T[], cb: (r: { code: number; error?: Error }) => void): void;
  shutdown(): Promise<void>;
}

async function run<T>(exporter: Exporter<T>, items: T[]): Promise<ExportOutcome> {
  const outcome = await new Promise<ExportOutcome>((resolve) =>
    exporter.export(items, (r) =>
      resolve(r.code === ExportResultCode.SUCCESS ? { ok: true } : { ok: false, error: r.error as ExportOutcome['error'] }),
    ),
  );
  await exporter.shutdown();
  return outcome;
}

export function exportLogs(target: ExportTarget, transport: Transport, records: ReadableLogRecord[]): Promise<ExportOutcome> {
  const exporter =
    transport === 'http'
      ? new ProtoLogExporter({ url: `${target.url}/v1/logs`, headers: target.headers ?? {}, timeoutMillis: 10_000 })
      : new GrpcLogExporter({ url: `http://${target.grpcAddress}`, metadata: metadataOf(target.headers), timeoutMillis: 10_000 });
  return run(exporter as unknown as Exporter<ReadableLogRecord>, records);
}

export function exportSpans(target: ExportTarget, transport: Transport, spans: ReadableSpan[]): Promise<ExportOutcome> {
  const exporter =
    transport === 'http'
      ? new ProtoTraceExporter({ url: `${target.url}/v1/traces`, headers: target.headers ?? {}, timeoutMillis: 10_000 })
      : new GrpcTraceExporter({ url: `http://${target.grpcAddress}`, metadata: metadataOf(target.headers), timeoutMillis: 10_000 });
  return run(exporter as unknown as Exporter<ReadableSpan>, spans);
}
