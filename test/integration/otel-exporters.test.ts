// The real OpenTelemetry exporters (protobuf over HTTP, and gRPC) send logs and
// traces; `siglake wal dump` must give back exactly what was acknowledged.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIngester, walDump, type RunningIngester } from '../helpers/ingester.js';
import { exportLogs, exportSpans, makeLogRecords, makeSpans, type Transport } from '../helpers/otel.js';

describe('OTel exporters into the WAL', () => {
  let ing: RunningIngester;
  beforeAll(async () => {
    ing = await startIngester();
  });
  afterAll(async () => {
    expect(await ing.stop()).toBe(0);
  });

  for (const transport of ['http', 'grpc'] as Transport[]) {
    it(`logs over ${transport} land record for record`, async () => {
      const bodies = Array.from({ length: 25 }, (_, i) => `${transport}-log-${i}-${'x'.repeat(i)}`);
      const out = await exportLogs({ url: ing.url, grpcAddress: ing.grpcAddress }, transport, await makeLogRecords(bodies));
      expect(out.error?.message).toBeUndefined();
      expect(out.ok).toBe(true);
      const texts = walDump(ing.walDir)
        .filter((l) => l.type === 'logs')
        .flatMap((l) => l.texts)
        .filter((t) => t.startsWith(`${transport}-log-`));
      expect(texts).toEqual(bodies);
    });

    it(`traces over ${transport} land span for span`, async () => {
      const names = Array.from({ length: 12 }, (_, i) => `${transport}-span-${i}`);
      const out = await exportSpans({ url: ing.url, grpcAddress: ing.grpcAddress }, transport, await makeSpans(names));
      expect(out.ok).toBe(true);
      const lines = walDump(ing.walDir).filter((l) => l.type === 'traces' && l.texts.some((t) => t.startsWith(`${transport}-span-`)));
      expect(lines.flatMap((l) => l.texts).sort()).toEqual([...names].sort());
      expect(lines.reduce((a, l) => a + l.records, 0)).toBe(names.length);
      expect(lines.every((l) => l.tenant === 'default' && l.table === 'traces')).toBe(true);
    });
  }

  it('counts what it wrote', async () => {
    const m = await ing.metrics();
    expect(m.get('siglake_ingest_records_total{endpoint="otlp"}')).toBe(50);
    expect(m.get('siglake_ingest_records_total{endpoint="otlp_traces"}')).toBe(24);
    expect(m.get('siglake_ingest_requests_total{endpoint="otlp",status="200"}')).toBe(2);
    expect(m.get('siglake_ingest_requests_total{endpoint="otlp_traces",status="200"}')).toBe(2);
    expect(m.get('siglake_wal_bytes_written_total')).toBeGreaterThan(0);
    expect(m.get('siglake_wal_fsync_seconds_count')).toBeGreaterThan(0);
  });
});
