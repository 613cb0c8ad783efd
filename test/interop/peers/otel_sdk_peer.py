"""The OpenTelemetry Python SDK exporting to Siglake; prints one JSON object.

Usage: otel_sdk_peer.py --protocol http|grpc --endpoint URL_OR_HOST:PORT
                        --prefix MARKER_PREFIX [--count N] [--gzip]
                        [--header k=v ...] [--token JWT]

Emits N log records (through the stdlib logging bridge) and N spans with the
real SDK and the real OTLP exporters (opentelemetry-exporter-otlp-proto-http
or -grpc), each batch through an exporter wrapper that records what the
exporter reported, and prints which markers were acknowledged (export result
SUCCESS) and which were not.
"""

import argparse
import json
import logging
import sys

from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor

try:  # 1.45 names them LogRecordExporter / LogRecordExportResult; older releases LogExporter / LogExportResult
    from opentelemetry.sdk._logs.export import LogRecordExporter as LogExporter
    from opentelemetry.sdk._logs.export import LogRecordExportResult as LogExportResult
except ImportError:
    from opentelemetry.sdk._logs.export import LogExporter, LogExportResult
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult


class Recording:
    """Delegates to the real exporter and remembers, per marker, whether it succeeded."""

    def __init__(self, inner, marker_of, ok):
        self.inner, self.marker_of, self.ok = inner, marker_of, ok
        self.acked, self.failed = [], []

    def export(self, batch):
        result = self.inner.export(batch)
        markers = [self.marker_of(item) for item in batch]
        (self.acked if result == self.ok else self.failed).extend(markers)
        return result

    def shutdown(self):
        self.inner.shutdown()

    def force_flush(self, timeout_millis=30000):
        return True


class RecordingLogs(Recording, LogExporter):
    pass


class RecordingSpans(Recording, SpanExporter):
    pass


def log_marker(data):
    record = getattr(data, "log_record", data)
    return str(record.body)


def exporters(a):
    headers = dict(h.split("=", 1) for h in a.header)
    if a.token:
        headers["authorization"] = f"Bearer {a.token}"
    if a.protocol == "http":
        from opentelemetry.exporter.otlp.proto.http import Compression
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        comp = Compression.Gzip if a.gzip else Compression.NoCompression
        base = a.endpoint.rstrip("/")
        return (
            OTLPLogExporter(endpoint=f"{base}/v1/logs", headers=headers, compression=comp, timeout=10),
            OTLPSpanExporter(endpoint=f"{base}/v1/traces", headers=headers, compression=comp, timeout=10),
        )
    import grpc
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    comp = grpc.Compression.Gzip if a.gzip else grpc.Compression.NoCompression
    md = tuple((k.lower(), v) for k, v in headers.items())
    return (
        OTLPLogExporter(endpoint=a.endpoint, insecure=True, headers=md, compression=comp, timeout=10),
        OTLPSpanExporter(endpoint=a.endpoint, insecure=True, headers=md, compression=comp, timeout=10),
    )


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--protocol", choices=["http", "grpc"], required=True)
    p.add_argument("--endpoint", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--count", type=int, default=5)
    p.add_argument("--gzip", action="store_true")
    p.add_argument("--header", action="append", default=[])
    p.add_argument("--token")
    a = p.parse_args()

    log_exp, span_exp = exporters(a)
    resource = Resource.create({"service.name": f"py-{a.protocol}"})
    logs = RecordingLogs(log_exp, log_marker, LogExportResult.SUCCESS)
    spans = RecordingSpans(span_exp, lambda s: s.name, SpanExportResult.SUCCESS)

    provider = LoggerProvider(resource=resource)
    provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    logger = logging.getLogger(f"siglake.interop.{a.prefix}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(LoggingHandler(level=logging.INFO, logger_provider=provider))
    for i in range(a.count):
        logger.info(f"{a.prefix}-log-{i}", extra={"k": "v" if i % 2 == 0 else "w"})
    provider.shutdown()

    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = tracer_provider.get_tracer("siglake-interop", "1.0.0")
    for i in range(a.count):
        with tracer.start_as_current_span(f"{a.prefix}-span-{i}", attributes={"k": "v"}):
            pass
    tracer_provider.shutdown()

    json.dump(
        {"logs": {"acked": logs.acked, "failed": logs.failed}, "traces": {"acked": spans.acked, "failed": spans.failed}},
        sys.stdout,
    )
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
