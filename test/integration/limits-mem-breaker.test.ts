// Contract §4 step 1, §6, §8, §9, reliability.md "memory", docs/limits.md
// "Memory breaker", against the real process.
//
// `--mem-breaker-limit-mib 1 --mem-breaker-sample-secs 0.1`: any real Node
// process has an RSS far above 1 MiB, and the breaker samples once at
// construction, so it is open from the first request. Every ingest request, on
// both transports and both endpoints, whatever its body, headers or encoding,
// is shed first (step 1 comes before every other check) with 503 +
// `Retry-After: 1` / UNAVAILABLE + `retry-after: 1`; the admin endpoints keep
// answering; each refusal moves three counters by exactly one. Restarted on the
// same data directory with a limit far above its RSS, it accepts again.

import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RawGrpcClient, grpc } from '../helpers/grpc-client.js';
import { get, post } from '../helpers/http.js';
import { listFiles, startIngester, tempDir, walDump, type RunningIngester } from '../helpers/ingester.js';
import { decodeStatus, jsonBytes, logsJson, logsProto, tracesJson, tracesProto } from '../helpers/otlp-bodies.js';
import { grpcCode, httpCode } from '../helpers/rpc-status.js';

const BREAKER_ARGS = (limitMib: number) => ['--mem-breaker-limit-mib', String(limitMib), '--mem-breaker-sample-secs', '0.1'];

/** VmRSS of a process in bytes, from /proc/<pid>/status. */
function vmRssBytes(pid: number): number {
  const m = /^VmRSS:\s+(\d+)\s+kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (m === null) throw new Error('no VmRSS line');
  return Number(m[1]) * 1024;
}

interface Counters {
  breaker: number;
  rejected: number;
  logs503: number;
  traces503: number;
  logs200: number;
  traces200: number;
}

async function counters(ing: RunningIngester): Promise<Counters> {
  const m = await ing.metrics();
  return {
    breaker: m.get('siglake_ingest_mem_breaker_rejected_total')!,
    rejected: m.get('siglake_ingest_rejected_total{reason="mem_breaker"}')!,
    logs503: m.get('siglake_ingest_requests_total{endpoint="otlp",status="503"}') ?? 0,
    traces503: m.get('siglake_ingest_requests_total{endpoint="otlp_traces",status="503"}') ?? 0,
    logs200: m.get('siglake_ingest_requests_total{endpoint="otlp",status="200"}')!,
    traces200: m.get('siglake_ingest_requests_total{endpoint="otlp_traces",status="200"}')!,
  };
}

describe('memory breaker open (--mem-breaker-limit-mib 1)', () => {
  const dataDir = tempDir();
  let ing: RunningIngester;
  let rpc: RawGrpcClient;
  let refused = 0;
  beforeAll(async () => {
    ing = await startIngester({ dataDir, args: BREAKER_ARGS(1) });
    rpc = new RawGrpcClient(ing.grpcAddress);
  });
  afterAll(async () => {
    rpc.close();
    if (ing.exitCode === null) expect(await ing.stop()).toBe(0);
  });

  type Kind = { name: string; endpoint: 'logs' | 'traces'; send: () => Promise<void> };
  const httpKind = (name: string, path: '/v1/logs' | '/v1/traces', body: Uint8Array, contentType: string, headers: Record<string, string> = {}): Kind => ({
    name,
    endpoint: path === '/v1/logs' ? 'logs' : 'traces',
    send: async () => {
      const r = await post(ing.url, path, body, { contentType, headers });
      expect(r.status, name).toBe(503);
      expect(r.headers.get('retry-after'), name).toBe('1');
      if (contentType === 'application/x-protobuf' || contentType === 'application/json') {
        expect(r.contentType.startsWith(contentType), name).toBe(true);
        const st = decodeStatus(r.contentType, r.body);
        expect(st.code, name).toBe(grpc.status.UNAVAILABLE);
        expect(httpCode(r), name).toBe('SIGLAKE_MEM_BREAKER');
      } else {
        expect(Buffer.from(r.body).toString('utf8'), name).toMatch(/memory breaker/);
      }
    },
  });
  const grpcKind = (name: string, signal: 'logs' | 'traces', body: Uint8Array, headers: Record<string, string> = {}): Kind => ({
    name,
    endpoint: signal,
    send: async () => {
      const r = await rpc.export(signal, body, headers);
      expect(r.code, name).toBe(grpc.status.UNAVAILABLE);
      expect(grpcCode(r), name).toBe('SIGLAKE_MEM_BREAKER');
      expect(r.metadata.get('retry-after'), name).toEqual(['1']);
    },
  });

  it('sheds every ingest request with 503 + Retry-After: 1 / UNAVAILABLE + retry-after: 1, each counted exactly once', async () => {
    const kinds: Kind[] = [
      httpKind('HTTP logs protobuf', '/v1/logs', logsProto(['shed-1']), 'application/x-protobuf'),
      httpKind('HTTP logs JSON', '/v1/logs', jsonBytes(logsJson(['shed-2'])), 'application/json'),
      httpKind('HTTP traces protobuf', '/v1/traces', tracesProto(['shed-3']), 'application/x-protobuf'),
      httpKind('HTTP traces JSON', '/v1/traces', jsonBytes(tracesJson(['shed-4'])), 'application/json'),
      // Step 1 comes before every other check: a tenant header, an index, a bad content type.
      httpKind('HTTP logs with a tenant header and an index', '/v1/logs', logsProto(['shed-5']), 'application/x-protobuf', {
        'x-scope-orgid': 'someone',
        'x-siglake-index': 'idx',
      }),
      httpKind('HTTP traces with an unusable content type', '/v1/traces', tracesProto(['shed-6']), 'text/csv'),
      httpKind('HTTP logs with an empty body', '/v1/logs', new Uint8Array(0), 'application/x-protobuf'),
      grpcKind('gRPC logs', 'logs', logsProto(['shed-7'])),
      grpcKind('gRPC traces', 'traces', tracesProto(['shed-8'])),
      grpcKind('gRPC logs with an index', 'logs', logsProto(['shed-9']), { 'x-siglake-index': 'idx' }),
    ];
    let before = await counters(ing);
    expect(before).toEqual({ breaker: 0, rejected: 0, logs503: 0, traces503: 0, logs200: 0, traces200: 0 });
    for (const k of kinds) {
      await k.send();
      refused++;
      const after = await counters(ing);
      expect(after, k.name).toEqual({
        ...before,
        breaker: before.breaker + 1,
        rejected: before.rejected + 1,
        logs503: before.logs503 + (k.endpoint === 'logs' ? 1 : 0),
        traces503: before.traces503 + (k.endpoint === 'traces' ? 1 : 0),
      });
      before = after;
    }
    expect(before.breaker).toBe(kinds.length);
  });

  it('/metrics and /healthz still answer 200', async () => {
    const h = await get(ing.url, '/healthz');
    expect(h.status).toBe(200);
    const m = await get(ing.url, '/metrics');
    expect(m.status).toBe(200);
    expect(m.text).toContain('siglake_ingest_mem_breaker_rejected_total');
  });

  it('nothing reached the WAL, and no lane or tenant was created', async () => {
    expect(listFiles(ing.walDir)).toEqual([]);
    const m = await ing.metrics();
    expect(m.get('siglake_ingest_lanes')).toBe(0);
    expect(m.get('siglake_ingest_tenants_admitted')).toBe(0);
    expect(m.get('siglake_ingest_records_total{endpoint="otlp"}')).toBe(0);
    expect(m.get('siglake_ingest_records_total{endpoint="otlp_traces"}')).toBe(0);
    expect(m.get('siglake_wal_bytes_written_total')).toBe(0);
    for (const r of ['queue_full', 'lane_cap', 'rate_limited']) expect(m.get(`siglake_ingest_rejected_total{reason="${r}"}`)).toBe(0);
  });

  it('siglake_process_rss_bytes is the real RSS of the process (/proc/<pid>/status)', async () => {
    const pid = ing.child.pid!;
    const lo = vmRssBytes(pid);
    const reported = (await ing.metric('siglake_process_rss_bytes'))!;
    const hi = vmRssBytes(pid);
    expect(reported).toBeGreaterThan(1024 * 1024); // above the 1 MiB limit: why the breaker is open
    // RSS moves a little while the scrape runs; the gauge is read in between.
    expect(reported).toBeGreaterThanOrEqual(Math.min(lo, hi) * 0.8);
    expect(reported).toBeLessThanOrEqual(Math.max(lo, hi) * 1.2);
  });

  it('restarted on the same data directory with --mem-breaker-limit-mib 100000, requests are accepted again', async () => {
    rpc.close();
    expect(await ing.stop()).toBe(0);
    ing = await startIngester({ dataDir, args: BREAKER_ARGS(100_000) });
    rpc = new RawGrpcClient(ing.grpcAddress);
    expect((await post(ing.url, '/v1/logs', logsProto(['accepted-http']))).status).toBe(200);
    expect((await post(ing.url, '/v1/traces', jsonBytes(tracesJson(['accepted-http-json'])), { contentType: 'application/json' })).status).toBe(200);
    expect((await rpc.export('logs', logsProto(['accepted-grpc']))).code).toBe(grpc.status.OK);
    expect((await rpc.export('traces', tracesProto(['accepted-grpc-traces']))).code).toBe(grpc.status.OK);
    const c = await counters(ing);
    expect(c).toEqual({ breaker: 0, rejected: 0, logs503: 0, traces503: 0, logs200: 2, traces200: 2 });
    expect((await ing.metric('siglake_process_rss_bytes'))!).toBeGreaterThan(0);
    // Only what was accepted after the restart is in the WAL: none of the shed requests.
    const texts = walDump(ing.walDir).flatMap((l) => l.texts).sort();
    expect(texts).toEqual(['accepted-grpc', 'accepted-grpc-traces', 'accepted-http', 'accepted-http-json']);
    expect(refused).toBe(10);
  });
});
