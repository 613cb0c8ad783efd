// OTLP signals Siglake does not store (metrics, profiles), sent to a real
// ingester the way a misconfigured Collector pipeline or SDK sends them: over
// OTLP/HTTP (POST /v1/metrics) and OTLP/gRPC (MetricsService/Export). The
// answer keeps the status an exporter treats as final (404, UNIMPLEMENTED: no
// retry) and carries the google.rpc.Status of every refusal, with ErrorInfo
// SIGLAKE_SIGNAL_UNSUPPORTED and a message naming what the port serves. It
// comes before admission (an unauthenticated call gets it too, never a 401),
// stores nothing, and is counted apart from the ingest requests.

import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RawGrpcClient, grpc } from '../helpers/grpc-client.js';
import { post } from '../helpers/http.js';
import { listFiles, startIngester, type RunningIngester } from '../helpers/ingester.js';
import { jsonBytes, logsProto, pbField } from '../helpers/otlp-bodies.js';
import { errorInfoOf, grpcStatusOf, httpStatusOf } from '../helpers/rpc-status.js';

const TOKEN = 'tok-unsupported-signals';
const METRICS_EXPORT = '/opentelemetry.proto.collector.metrics.v1.MetricsService/Export';
const PROFILES_EXPORT = '/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export';

/** ExportMetricsServiceRequest { resource_metrics { scope_metrics { metrics { name: "requests" } } } }. */
const METRICS_BODY = new Uint8Array(pbField(1, pbField(2, pbField(2, pbField(1, Buffer.from('requests'))))));
const METRICS_JSON = jsonBytes({ resourceMetrics: [{ scopeMetrics: [{ metrics: [{ name: 'requests' }] }] }] });

describe('OTLP signals Siglake does not store: metrics and profiles', () => {
  let ing: RunningIngester;
  let grpcClient: RawGrpcClient;
  let walBefore: string[];
  beforeAll(async () => {
    // Authentication on, so that the order (path before credentials) is visible.
    ing = await startIngester({ args: ['--auth-bearer-tokens', TOKEN, '--max-request-bytes', String(1024 * 1024)] });
    grpcClient = new RawGrpcClient(ing.grpcAddress);
    walBefore = listFiles(ing.walDir);
  });
  afterAll(async () => {
    grpcClient?.close();
    if (ing) expect(await ing.stop()).toBe(0);
  });

  it('HTTP POST /v1/metrics: 404 with a google.rpc.Status (protobuf and JSON) naming SIGLAKE_SIGNAL_UNSUPPORTED, with or without credentials', async () => {
    for (const headers of [{}, { authorization: `Bearer ${TOKEN}` }, { authorization: 'Bearer wrong' }] as Record<string, string>[]) {
      const proto = await post(ing.url, '/v1/metrics', METRICS_BODY, { headers });
      expect(proto.status).toBe(404);
      expect(proto.contentType).toBe('application/x-protobuf');
      expect(proto.headers.get('retry-after')).toBeNull();
      const st = httpStatusOf(proto.contentType, proto.body)!;
      expect(errorInfoOf(st).reason).toBe('SIGLAKE_SIGNAL_UNSUPPORTED');
      expect(st.code).toBe(grpc.status.UNIMPLEMENTED);
      expect(st.message).toMatch(/^Siglake stores logs and traces only, not metrics/);
      expect(st.message).toContain('POST /v1/logs and POST /v1/traces');

      const json = await post(ing.url, '/v1/metrics', METRICS_JSON, { contentType: 'application/json', headers });
      expect(json.status).toBe(404);
      expect(json.contentType).toBe('application/json');
      expect(errorInfoOf(httpStatusOf(json.contentType, json.body)).reason).toBe('SIGLAKE_SIGNAL_UNSUPPORTED');
    }
    // A content type that is not OTLP: the same 404, its message as a text line.
    const text = await post(ing.url, '/v1/metrics', METRICS_BODY, { contentType: 'text/plain' });
    expect(text.status).toBe(404);
    expect(Buffer.from(text.body).toString()).toMatch(/^Siglake stores logs and traces only, not metrics.*\n$/);
    // Profiles (OTLP v1development) likewise.
    const profiles = await post(ing.url, '/v1development/profiles', new Uint8Array([0x0a, 0x00]));
    expect(profiles.status).toBe(404);
    expect(errorInfoOf(httpStatusOf(profiles.contentType, profiles.body)).reason).toBe('SIGLAKE_SIGNAL_UNSUPPORTED');
    expect(httpStatusOf(profiles.contentType, profiles.body)!.message).toMatch(/not profiles/);
    expect(listFiles(ing.walDir)).toEqual(walBefore);
  });

  it('gRPC MetricsService/Export: UNIMPLEMENTED with grpc-status-details-bin naming SIGLAKE_SIGNAL_UNSUPPORTED, with or without credentials', async () => {
    for (const headers of [{}, { authorization: `Bearer ${TOKEN}` }, { authorization: 'Bearer wrong' }] as Record<string, string>[]) {
      const r = await grpcClient.call(METRICS_EXPORT, METRICS_BODY, headers);
      expect(r.code).toBe(grpc.status.UNIMPLEMENTED);
      expect(r.details).toMatch(/^Siglake stores logs and traces only, not metrics/);
      expect(r.details).toContain('opentelemetry.proto.collector.logs.v1.LogsService/Export and opentelemetry.proto.collector.trace.v1.TraceService/Export');
      expect(r.metadata.get('retry-after')).toEqual([]);
      const st = grpcStatusOf(r.metadata)!;
      expect(st.code).toBe(grpc.status.UNIMPLEMENTED);
      expect(st.message).toBe(r.details);
      expect(errorInfoOf(st).reason).toBe('SIGLAKE_SIGNAL_UNSUPPORTED');
    }
    const profiles = await grpcClient.call(PROFILES_EXPORT, new Uint8Array([0x0a, 0x00]));
    expect(profiles.code).toBe(grpc.status.UNIMPLEMENTED);
    expect(errorInfoOf(grpcStatusOf(profiles.metadata)).reason).toBe('SIGLAKE_SIGNAL_UNSUPPORTED');
    expect(listFiles(ing.walDir)).toEqual(walBefore);
  });

  it('regression (unknown-path-without-errorinfo): any other method or OTLP path → UNIMPLEMENTED / 404 with SIGLAKE_UNKNOWN_PATH naming what the port serves', async () => {
    for (const method of ['/nope.v1.Nope/Export', '/opentelemetry.proto.collector.logs.v1.LogsService/Exports']) {
      const r = await grpcClient.call(method, METRICS_BODY);
      expect(r.code).toBe(grpc.status.UNIMPLEMENTED);
      expect(r.details).toBe(
        `no such method ${method}: this port serves opentelemetry.proto.collector.logs.v1.LogsService/Export and opentelemetry.proto.collector.trace.v1.TraceService/Export (OTLP/gRPC)`,
      );
      expect(errorInfoOf(grpcStatusOf(r.metadata)).reason).toBe('SIGLAKE_UNKNOWN_PATH');
    }
    // An exporter given a wrong URL (a typo, a path prefix the port does not have) reads why, in its encoding.
    for (const [path, type] of [['/v1/log', 'application/x-protobuf'], ['/otlp/v1/logs', 'application/json']] as const) {
      const r = await post(ing.url, path, METRICS_BODY, { contentType: type });
      expect([path, r.status, r.contentType]).toEqual([path, 404, type]);
      const st = httpStatusOf(r.contentType, r.body)!;
      expect(errorInfoOf(st).reason).toBe('SIGLAKE_UNKNOWN_PATH');
      expect(st.message).toBe('no such path: this port serves POST /v1/logs and POST /v1/traces (OTLP/HTTP)');
    }
    // Anything else keeps the plain answer.
    const plain = await fetch(`${ing.url}/favicon.ico`);
    expect([plain.status, await plain.text()]).toEqual([404, 'not found\n']);
    expect(listFiles(ing.walDir)).toEqual(walBefore);
  });

  it('a metrics batch larger than a socket buffer still gets the 404 (not a reset), and the connection stays usable', async () => {
    const big = Buffer.alloc(4 * 1024 * 1024, 0x61);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const send = (path: string, body: Buffer, headers: Record<string, string> = {}) =>
      new Promise<{ status: number; body: Buffer }>((resolve, reject) => {
        const req = http.request(
          { host: '127.0.0.1', port: ing.httpPort, method: 'POST', path, agent, headers: { 'content-type': 'application/x-protobuf', 'content-length': String(body.length), ...headers } },
          (res) => {
            const parts: Buffer[] = [];
            res.on('data', (c: Buffer) => parts.push(c));
            res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(parts) }));
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    try {
      const r = await send('/v1/metrics', big);
      expect(r.status).toBe(404);
      expect(errorInfoOf(httpStatusOf('application/x-protobuf', r.body)).reason).toBe('SIGLAKE_SIGNAL_UNSUPPORTED');
      // Same kept-alive connection: a real logs request after it is stored.
      const ok = await send('/v1/logs', Buffer.from(logsProto(['after-metrics'])), { authorization: `Bearer ${TOKEN}` });
      expect(ok.status).toBe(200);
    } finally {
      agent.destroy();
    }
  });

  it('stores nothing and is counted as what it is, not as an ingest request', async () => {
    const m = await ing.metrics();
    // 3 × 2 (protobuf, JSON) + 1 text + 1 large; 3 gRPC.
    expect(m.get('siglake_ingest_signal_unsupported_total{signal="metrics",transport="http"}')).toBe(8);
    expect(m.get('siglake_ingest_signal_unsupported_total{signal="metrics",transport="grpc"}')).toBe(3);
    expect(m.get('siglake_ingest_signal_unsupported_total{signal="profiles",transport="http"}')).toBe(1);
    expect(m.get('siglake_ingest_signal_unsupported_total{signal="profiles",transport="grpc"}')).toBe(1);
    const statuses = [...m.keys()].filter((k) => k.startsWith('siglake_ingest_requests_total{') && m.get(k)! > 0);
    // The one logs request of the previous test, and nothing else (no 401, no 404).
    expect(statuses).toEqual(['siglake_ingest_requests_total{endpoint="otlp",status="200"}']);
    for (const [k, v] of m) if (k.startsWith('siglake_ingest_rejected_total') || k.startsWith('siglake_ingest_tenant_denied_total')) expect(v, k).toBe(0);
    expect(m.get('siglake_ingest_tenants_admitted')).toBe(1);
    // Only the logs lane of that request (and the commit journal of its round) is in the WAL root.
    const added = listFiles(ing.walDir).filter((f) => !walBefore.includes(f));
    expect(added.every((f) => f.startsWith('logs/') || f.startsWith('.journal/')), added.join(', ')).toBe(true);
    expect(added.filter((f) => f.startsWith('logs/'))).toEqual(['logs/', 'logs/00000001.seg']);
  });
});
