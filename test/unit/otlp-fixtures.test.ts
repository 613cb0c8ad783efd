import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FixtureGenerator } from '../../src/otlp/fixtures.js';
import { ProtoRoot } from '../../src/otlp/proto-root.js';
import { validateExportRequest } from '../../src/otlp/wire-validator.js';

const root = ProtoRoot.load();
type Obj = Record<string, unknown>;

/** Every AnyValue member name used anywhere in a decoded request. */
function valueKinds(v: unknown, out = new Set<string>()): Set<string> {
  if (Array.isArray(v)) for (const e of v) valueKinds(e, out);
  else if (v !== null && typeof v === 'object') {
    for (const [k, e] of Object.entries(v)) {
      if (k.endsWith('Value') && k !== 'value') out.add(k);
      valueKinds(e, out);
    }
  }
  return out;
}

describe('FixtureGenerator', () => {
  it('is deterministic per seed and varies between seeds and calls', () => {
    const a = new FixtureGenerator(77, root);
    const b = new FixtureGenerator(77, root);
    for (const signal of ['logs', 'traces'] as const) {
      const fa = a.request(signal, { targetBytes: 4096, allValueKinds: true });
      const fb = b.request(signal, { targetBytes: 4096, allValueKinds: true });
      expect(Buffer.from(fa.protobuf).equals(Buffer.from(fb.protobuf))).toBe(true);
      expect(Buffer.from(fa.json).equals(Buffer.from(fb.json))).toBe(true);
      const nextA = a.request(signal, { targetBytes: 4096, allValueKinds: true });
      const nextB = b.request(signal, { targetBytes: 4096, allValueKinds: true });
      expect(Buffer.from(nextA.protobuf).equals(Buffer.from(nextB.protobuf))).toBe(true);
      expect(Buffer.from(nextA.protobuf).equals(Buffer.from(fa.protobuf))).toBe(false);
    }
    const other = new FixtureGenerator(78, root).logs();
    expect(Buffer.from(other.protobuf).equals(Buffer.from(new FixtureGenerator(77, root).logs().protobuf))).toBe(false);
  });

  it.each([
    ['logs', 1024],
    ['logs', 256 * 1024],
    ['traces', 1024],
    ['traces', 256 * 1024],
  ] as const)('makes %s requests of about %i bytes', (signal, targetBytes) => {
    const gen = new FixtureGenerator(5, root);
    for (let i = 0; i < 4; i++) {
      // Each resource carries ~600 bytes of attributes: several only fit the larger target.
      const resources = targetBytes >= 65536 ? 1 + i : 1;
      const f = gen.request(signal, { targetBytes, resources });
      // Within half a record of the target (records here are 300-900 bytes).
      expect(Math.abs(f.protobuf.length - targetBytes)).toBeLessThan(targetBytes >= 65536 ? targetBytes * 0.01 : 700);
      expect(validateExportRequest(signal, f.protobuf)).toBe(f.records);
      expect(JSON.parse(new TextDecoder().decode(f.json))).toEqual(f.otlpJson);
      const groups = f.otlpJson[signal === 'logs' ? 'resourceLogs' : 'resourceSpans'] as Obj[];
      expect(groups).toHaveLength(resources);
    }
  });

  it('makes log bodies of the configured size', () => {
    const gen = new FixtureGenerator(6, root);
    for (const size of [32, 200, 2000]) {
      const f = gen.logs({ targetBytes: 64 * 1024, logBodyBytes: size });
      const bodies = (f.otlpJson.resourceLogs as { scopeLogs: { logRecords: { body: { stringValue: string } }[] }[] }[])[0].scopeLogs[0].logRecords.map(
        (r) => Buffer.byteLength(r.body.stringValue),
      );
      const mean = bodies.reduce((s, n) => s + n, 0) / bodies.length;
      expect(mean).toBeGreaterThan(size * 0.75);
      expect(mean).toBeLessThan(size * 1.25 + 60);
      expect(Math.max(...bodies)).toBeLessThanOrEqual(Math.max(size * 1.5, 120));
    }
  });

  it('fills realistic fields: resources, scopes, severities, ids, span trees, events', () => {
    const gen = new FixtureGenerator(9, root);
    const logs = root.decodeLogsRequest(gen.logs({ targetBytes: 32 * 1024 }).protobuf, { longs: String, bytes: String }) as {
      resourceLogs: { resource: { attributes: { key: string }[] }; scopeLogs: { scope: { name: string; version: string }; logRecords: Obj[] }[] }[];
    };
    const rl = logs.resourceLogs[0];
    expect(rl.resource.attributes.map((a) => a.key)).toEqual(expect.arrayContaining(['service.name', 'host.name', 'service.version']));
    expect(rl.scopeLogs[0].scope.name.length).toBeGreaterThan(0);
    const recs = rl.scopeLogs[0].logRecords;
    expect(new Set(recs.map((r) => r.severityNumber)).size).toBeGreaterThan(2);
    const withTrace = recs.filter((r) => r.traceId !== undefined);
    expect(withTrace.length).toBeGreaterThan(0);
    for (const r of withTrace) {
      expect(Buffer.from(r.traceId as string, 'base64')).toHaveLength(16);
      expect(Buffer.from(r.spanId as string, 'base64')).toHaveLength(8);
    }
    const traces = root.decodeTraceRequest(gen.traces({ targetBytes: 64 * 1024 }).protobuf, { longs: String, bytes: String }) as {
      resourceSpans: { scopeSpans: { spans: Obj[] }[] }[];
    };
    const spans = traces.resourceSpans[0].scopeSpans[0].spans;
    expect(new Set(spans.map((s) => s.kind)).size).toBeGreaterThan(2);
    expect(spans.some((s) => s.parentSpanId !== undefined)).toBe(true);
    expect(spans.some((s) => Array.isArray(s.events))).toBe(true);
    for (const s of spans) expect(BigInt(s.endTimeUnixNano as string)).toBeGreaterThan(BigInt(s.startTimeUnixNano as string));
  });

  it('uses every AnyValue kind when asked to', () => {
    const gen = new FixtureGenerator(10, root);
    for (const signal of ['logs', 'traces'] as const) {
      const f = gen.request(signal, { targetBytes: 4096, allValueKinds: true });
      const kinds = valueKinds(root.decodeRequest(signal, f.protobuf));
      expect([...kinds].sort()).toEqual(['arrayValue', 'boolValue', 'bytesValue', 'doubleValue', 'intValue', 'kvlistValue', 'stringValue']);
    }
  });
});

describe('ProtoRoot', () => {
  it('finds proto/ above the module and loads the export and status types', () => {
    const dir = ProtoRoot.protoDir();
    expect(existsSync(join(dir, 'opentelemetry/proto/collector/logs/v1/logs_service.proto'))).toBe(true);
    expect(root.requestType('logs').fullName).toBe('.opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest');
    expect(root.requestType('traces').fullName).toBe('.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest');
  });

  it('round-trips a google.rpc.Status', () => {
    const bytes = root.encodeStatus({ code: 3, message: 'invalid protobuf: truncated tag at offset 0' });
    expect(root.decodeStatus(bytes)).toEqual({ code: 3, message: 'invalid protobuf: truncated tag at offset 0', details: [] });
    const detail = { typeUrl: 'type.googleapis.com/google.rpc.RetryInfo', value: Uint8Array.from([0x0a, 0x02, 0x08, 0x01]) };
    const withDetail = root.decodeStatus(root.encodeStatus({ code: 8, message: 'rate limited', details: [detail] }));
    expect(withDetail.details?.[0].typeUrl).toBe(detail.typeUrl);
    expect(Buffer.from(withDetail.details?.[0].value ?? []).equals(Buffer.from(detail.value))).toBe(true);
  });

  it('round-trips export requests of both signals', () => {
    const logs = { resourceLogs: [{ scopeLogs: [{ logRecords: [{ timeUnixNano: '1700000000000000001', body: { stringValue: 'x' } }] }] }] };
    expect(root.decodeLogsRequest(root.encodeLogsRequest(logs))).toEqual(logs);
    const traces = { resourceSpans: [{ scopeSpans: [{ spans: [{ name: 'n', kind: 2, startTimeUnixNano: '1' }] }] }] };
    expect(root.decodeTraceRequest(root.encodeTraceRequest(traces))).toEqual(traces);
  });
});
