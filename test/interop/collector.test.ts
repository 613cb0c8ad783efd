// The OpenTelemetry Collector (built by install.sh from its v0.165.0 Go
// modules) forwards load to the real `siglake ingest` through `otlp_http`
// (logs) and `otlp_grpc` (traces), each with a persistent sending_queue
// (file_storage) and retry_on_failure, while Siglake refuses part of it: a
// rate limit (429 + Retry-After), a tiny lane queue (503 + Retry-After), a
// memory breaker (503 + Retry-After), restarts, one oversized batch (413) and
// one invalid batch (400). Between the Collector's otlp_http
// exporter and Siglake sits a recording proxy that only passes bytes through
// and notes each attempt (body digest, status, Retry-After, time).
//
// The ledger: every record the Collector accepted ends in Siglake's WAL
// (at-least-once; duplicates are counted and reported), the Collector waits
// at least Retry-After before it resends a refused batch, and never resends a
// 413 or 400. The Collector's own otelcol_exporter_* metrics are printed next
// to Siglake's counters.

import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { invalidUtf8LogsProto } from '../helpers/otlp-bodies.js';
import { CLI, parseMetrics, startIngester, tempDir, walDump, type RunningIngester } from '../helpers/ingester.js';
import { INTEROP_CACHE, requireInstalled, runProcess } from './helpers.js';
import { freePort } from '../helpers/free-port.js';

const OTELCOL = path.join(INTEROP_CACHE, 'otelcol', 'otelcol-interop');
/** The bytes invalidUtf8LogsProto() puts in its log body. */
const INVALID_UTF8 = Buffer.from([0xff, 0xfe, 0xc0, 0x80]);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 180_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(250);
  }
}

interface Attempt {
  digest: string;
  /** The body holds this test's unique markers (loadgen repeats its bodies, so its digests are not batch identities). */
  marked: boolean;
  status: number; // 0: Siglake unreachable (the proxy dropped the connection)
  retryAfterSecs?: number;
  at: number;
}

/** Passes OTLP/HTTP requests through to Siglake unchanged and records each attempt. */
class RecordingProxy {
  readonly attempts: Attempt[] = [];
  private server!: http.Server;
  port = 0;

  constructor(private readonly target: () => number) {}

  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        let plain = body;
        try {
          if (req.headers['content-encoding'] === 'gzip') plain = gunzipSync(body);
        } catch {
          /* digest the bytes as sent */
        }
        const digest = createHash('sha256').update(plain).digest('hex');
        const marked = plain.includes('col-log-') || plain.includes('oversized-batch-marker') || plain.includes(INVALID_UTF8);
        const at = Date.now();
        const up = http.request(
          { host: '127.0.0.1', port: this.target(), method: req.method, path: req.url, headers: req.headers },
          (upRes) => {
            const out: Buffer[] = [];
            upRes.on('data', (c: Buffer) => out.push(c));
            upRes.on('end', () => {
              const ra = upRes.headers['retry-after'];
              this.attempts.push({ digest, marked, status: upRes.statusCode ?? 0, at, ...(ra !== undefined ? { retryAfterSecs: Number(ra) } : {}) });
              res.writeHead(upRes.statusCode ?? 502, upRes.headers);
              res.end(Buffer.concat(out));
            });
          },
        );
        up.on('error', () => {
          this.attempts.push({ digest, marked, status: 0, at });
          req.socket.destroy();
        });
        up.end(body);
      });
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as net.AddressInfo).port;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}

function collectorConfig(p: { http: number; grpc: number; metrics: number; proxy: number; siglakeGrpc: number; queueDir: string }): string {
  const queueAndRetry = `
    sending_queue:
      enabled: true
      num_consumers: 6
      queue_size: 10000
      storage: file_storage
    retry_on_failure:
      enabled: true
      initial_interval: 20ms
      max_interval: 100ms
      max_elapsed_time: 600s`;
  return `
receivers:
  otlp:
    protocols:
      http: {endpoint: "127.0.0.1:${p.http}"}
      grpc: {endpoint: "127.0.0.1:${p.grpc}"}
exporters:
  otlp_http/siglake:
    endpoint: "http://127.0.0.1:${p.proxy}"
    headers: {x-scope-orgid: collector-http}
    compression: gzip${queueAndRetry}
  otlp_grpc/siglake:
    endpoint: "127.0.0.1:${p.siglakeGrpc}"
    tls: {insecure: true}
    headers: {x-scope-orgid: collector-grpc}${queueAndRetry}
extensions:
  file_storage:
    directory: "${p.queueDir}"
    fsync: true
service:
  extensions: [file_storage]
  telemetry:
    logs: {level: error}
    metrics:
      level: detailed
      readers:
        - pull:
            exporter:
              prometheus: {host: "127.0.0.1", port: ${p.metrics}}
  pipelines:
    logs: {receivers: [otlp], exporters: [otlp_http/siglake]}
    traces: {receivers: [otlp], exporters: [otlp_grpc/siglake]}
`;
}

const anyValue = (s: string) => ({ stringValue: s });

function logsJson(markers: string[]): string {
  return JSON.stringify({
    resourceLogs: [
      {
        resource: { attributes: [{ key: 'service.name', value: anyValue('via-collector') }] },
        scopeLogs: [{ scope: { name: 'interop' }, logRecords: markers.map((m) => ({ timeUnixNano: String(BigInt(Date.now()) * 1_000_000n), severityNumber: 9, body: anyValue(m) })) }],
      },
    ],
  });
}

function tracesJson(markers: string[]): string {
  return JSON.stringify({
    resourceSpans: [
      {
        resource: { attributes: [{ key: 'service.name', value: anyValue('via-collector') }] },
        scopeSpans: [
          {
            scope: { name: 'interop' },
            spans: markers.map((m) => {
              const t = BigInt(Date.now()) * 1_000_000n;
              return {
                traceId: createHash('md5').update(m).digest('hex'),
                spanId: createHash('md5').update(m).digest('hex').slice(0, 16),
                name: m,
                kind: 1,
                startTimeUnixNano: String(t),
                endTimeUnixNano: String(t + 1000n),
              };
            }),
          },
        ],
      },
    ],
  });
}

/** `name{labels}` → value, with the labels parsed, for one metric family prefix. */
function family(metrics: Map<string, number>, prefix: string): Array<{ name: string; labels: string; value: number }> {
  const out: Array<{ name: string; labels: string; value: number }> = [];
  for (const [k, v] of metrics) {
    if (!k.startsWith(prefix)) continue;
    const brace = k.indexOf('{');
    out.push({ name: brace < 0 ? k : k.slice(0, brace), labels: brace < 0 ? '' : k.slice(brace), value: v });
  }
  return out;
}

/** The sum of a Collector counter over the series whose labels contain `match`. */
function sumOf(metrics: Map<string, number>, name: string, match: string): number {
  return family(metrics, name)
    .filter((s) => (s.name === name || s.name === `${name}_total`) && s.labels.includes(match))
    .reduce((a, s) => a + s.value, 0);
}

describe('OpenTelemetry Collector v0.165.0 → siglake ingest, through refusals and a restart', () => {
  const dir = tempDir('siglake-interop-otelcol-');
  const dataDir = path.join(dir, 'siglake');
  let siglake: RunningIngester | undefined;
  let collector: ChildProcess | undefined;
  let proxy: RecordingProxy;
  const ports = { http: 0, grpc: 0, metrics: 0, siglakeHttp: 0, siglakeGrpc: 0 };
  /** Markers the Collector answered 200 for: what it accepted. */
  const accepted = { logs: [] as string[], traces: [] as string[] };
  const BIG = 'oversized-batch-marker';
  let collectorTook400Body = false;
  let memBreakerShed = 0;
  const siglakeRequests = new Map<string, number>();
  let collectorMetrics = new Map<string, number>();
  let wal: ReturnType<typeof walDump> = [];
  let loadgen: { code: number | null; stdout: string; stderr: string } | undefined;

  const siglakeArgs = () => [
    '--http-listen',
    `127.0.0.1:${ports.siglakeHttp}`,
    '--grpc-listen',
    `127.0.0.1:${ports.siglakeGrpc}`,
    '--trust-tenant-header',
    '--compactor=false',
    '--rate-limit-per-sec',
    '20',
    '--rate-limit-burst',
    '10',
    '--ingest-queue-capacity',
    '1',
    '--max-request-bytes',
    String(256 * 1024),
  ];

  /** Siglake's request counters, summed over the two lives of the process. */
  const addRequests = async (ing: RunningIngester) => {
    for (const s of family(await ing.metrics(), 'siglake_ingest_requests_total')) siglakeRequests.set(s.labels, (siglakeRequests.get(s.labels) ?? 0) + s.value);
  };

  async function sendToCollector(kind: 'logs' | 'traces', body: string | Uint8Array, contentType = 'application/json'): Promise<number> {
    const r = await fetch(`http://127.0.0.1:${ports.http}/v1/${kind}`, { method: 'POST', headers: { 'content-type': contentType }, body });
    await r.arrayBuffer();
    return r.status;
  }

  async function sendMarkers(from: number, to: number): Promise<void> {
    const jobs: Array<() => Promise<void>> = [];
    for (let i = from; i < to; i++) {
      const logs = Array.from({ length: 5 }, (_, j) => `col-log-${i}-${j}`);
      const spans = Array.from({ length: 5 }, (_, j) => `col-span-${i}-${j}`);
      jobs.push(async () => {
        if ((await sendToCollector('logs', logsJson(logs))) === 200) accepted.logs.push(...logs);
      });
      jobs.push(async () => {
        if ((await sendToCollector('traces', tracesJson(spans))) === 200) accepted.traces.push(...spans);
      });
    }
    // Four requests in flight at a time.
    const running = new Set<Promise<void>>();
    for (const job of jobs) {
      const p = job().finally(() => running.delete(p));
      running.add(p);
      if (running.size >= 4) await Promise.race(running);
    }
    await Promise.all(running);
  }

  beforeAll(async () => {
    requireInstalled(OTELCOL);
    for (const k of Object.keys(ports) as Array<keyof typeof ports>) ports[k] = await freePort();
    fs.mkdirSync(dataDir, { recursive: true });
    siglake = await startIngester({ dataDir, args: siglakeArgs() });
    proxy = new RecordingProxy(() => ports.siglakeHttp);
    await proxy.start();
    const queueDir = path.join(dir, 'queue');
    fs.mkdirSync(queueDir);
    const config = path.join(dir, 'otelcol.yaml');
    fs.writeFileSync(config, collectorConfig({ http: ports.http, grpc: ports.grpc, metrics: ports.metrics, proxy: proxy.port, siglakeGrpc: ports.siglakeGrpc, queueDir }));
    collector = spawn('nice', ['-n', '5', OTELCOL, '--config', config], { stdio: ['ignore', 'ignore', 'pipe'] });
    let collectorErr = '';
    collector.stderr!.setEncoding('utf8').on('data', (c: string) => (collectorErr = (collectorErr + c).slice(-20_000)));
    await until(`the Collector's receiver (stderr: ${collectorErr})`, async () => ((await sendToCollector('logs', logsJson([]))) === 200 ? true : undefined), 60_000);

    // The load: markers over OTLP/HTTP into the Collector, `siglake loadgen` over OTLP/gRPC beside them.
    const lg = runProcess(process.execPath, [
      CLI,
      'loadgen',
      '--protocol',
      'grpc',
      '--target',
      `127.0.0.1:${ports.grpc}`,
      '--signal',
      'mixed',
      '--requests',
      '200',
      '--connections',
      '2',
      '--threads',
      '1',
      '--body-bytes',
      '2048',
    ]);
    await sendMarkers(0, 30);
    // A restart of Siglake in the middle of the load: the Collector queues and retries.
    await addRequests(siglake);
    expect(await siglake.stop()).toBe(0);
    await sendMarkers(30, 45);
    // Down until the Collector has tried to send and found nobody (a stop can be quicker than its next export).
    await until('the Collector to find Siglake down', async () => (proxy.attempts.some((a) => a.status === 0) ? true : undefined), 60_000);
    siglake = await startIngester({ dataDir, args: siglakeArgs() });
    await sendMarkers(45, 70);
    // A life whose memory breaker is tripped from the start (its limit is below any process's RSS):
    // every request is shed with 503 + Retry-After; then a restart without it drains the backlog.
    await addRequests(siglake);
    expect(await siglake.stop()).toBe(0);
    siglake = await startIngester({ dataDir, args: [...siglakeArgs(), '--mem-breaker-limit-mib', '1'] });
    await sendMarkers(70, 80);
    const shedding = siglake;
    memBreakerShed = await until('the memory breaker to shed', async () => {
      const v = (await shedding.metric('siglake_ingest_mem_breaker_rejected_total')) ?? 0;
      return v > 0 ? v : undefined;
    }, 60_000);
    await addRequests(siglake);
    expect(await siglake.stop()).toBe(0);
    siglake = await startIngester({ dataDir, args: siglakeArgs() });
    // One oversized batch: the Collector accepts it; Siglake answers 413.
    expect(await sendToCollector('logs', logsJson([`${BIG}-${'x'.repeat(300 * 1024)}`]))).toBe(200);
    // A batch Siglake refuses with 400 (invalid UTF-8), if the Collector lets it through.
    collectorTook400Body = (await sendToCollector('logs', invalidUtf8LogsProto(), 'application/x-protobuf')) === 200;
    loadgen = await lg;

    // Drained: each exporter has sent or given up on everything its receiver accepted.
    collectorMetrics = await until('the Collector to drain its queues', async () => {
      const r = await fetch(`http://127.0.0.1:${ports.metrics}/metrics`);
      const m = parseMetrics(await r.text());
      const logsIn = sumOf(m, 'otelcol_receiver_accepted_log_records', '');
      const spansIn = sumOf(m, 'otelcol_receiver_accepted_spans', '');
      const logsOut = sumOf(m, 'otelcol_exporter_sent_log_records', '') + sumOf(m, 'otelcol_exporter_send_failed_log_records', '');
      const spansOut = sumOf(m, 'otelcol_exporter_sent_spans', '') + sumOf(m, 'otelcol_exporter_send_failed_spans', '');
      const queued = sumOf(m, 'otelcol_exporter_queue_size', '');
      return logsIn > 0 && logsIn === logsOut && spansIn === spansOut && queued === 0 ? m : undefined;
    }, 400_000);
    await addRequests(siglake);
    expect(await siglake.stop()).toBe(0);
    siglake = undefined;
    wal = walDump(path.join(dataDir, 'wal'));
  }, 900_000);

  afterAll(async () => {
    collector?.kill('SIGTERM');
    await proxy?.close();
    await siglake?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const texts = (tenant: string, table: string) => wal.filter((l) => l.tenant === tenant && l.table === table).flatMap((l) => l.texts);
  const records = (tenant: string, table: string) => wal.filter((l) => l.tenant === tenant && l.table === table).reduce((a, l) => a + l.records, 0);

  it('the load ran and Siglake refused part of it (rate limit, queue, memory breaker, restarts)', () => {
    expect(loadgen!.code, loadgen!.stderr).toBe(0);
    expect(memBreakerShed).toBeGreaterThan(0);
    const refused = [...siglakeRequests].filter(([labels]) => /status="(429|503)"/.test(labels)).reduce((a, [, v]) => a + v, 0);
    expect(refused).toBeGreaterThan(0);
    expect(proxy.attempts.some((a) => a.status === 0)).toBe(true); // the restart: Siglake unreachable for a while
  });

  it('every record the Collector accepted is in the WAL of its tenant (at least once)', () => {
    const logs = texts('collector-http', 'logs');
    const spans = texts('collector-grpc', 'traces');
    const logSet = new Set(logs);
    const spanSet = new Set(spans);
    expect(accepted.logs.length).toBe(80 * 5);
    expect(accepted.traces.length).toBe(80 * 5);
    expect(accepted.logs.filter((m) => !logSet.has(m))).toEqual([]);
    expect(accepted.traces.filter((m) => !spanSet.has(m))).toEqual([]);
    // The loadgen's records too, by count: everything the receiver accepted, less what was refused for good.
    const m = collectorMetrics;
    const failedLogs = sumOf(m, 'otelcol_exporter_send_failed_log_records', '');
    expect(records('collector-http', 'logs')).toBeGreaterThanOrEqual(sumOf(m, 'otelcol_receiver_accepted_log_records', '') - failedLogs);
    expect(records('collector-grpc', 'traces')).toBeGreaterThanOrEqual(sumOf(m, 'otelcol_receiver_accepted_spans', ''));
    expect(sumOf(m, 'otelcol_exporter_send_failed_spans', '')).toBe(0);
    // Nothing else: no other tenant, no oversized record.
    expect([...new Set(wal.map((l) => l.tenant))].sort()).toEqual(['collector-grpc', 'collector-http']);
    expect(logs.some((t) => t.startsWith(BIG))).toBe(false);
  });

  it('the oversized batch was refused once with 413 and never resent; a 400 is never resent either', () => {
    const counts = new Map<string, Attempt[]>();
    for (const a of proxy.attempts.filter((x) => x.marked)) counts.set(a.digest, [...(counts.get(a.digest) ?? []), a]);
    const final = [...counts.values()].filter((as) => as.some((a) => a.status === 413 || a.status === 400));
    expect(final.filter((as) => as.some((a) => a.status === 413))).toHaveLength(1);
    // A batch may be refused with 429 first (the rate limit is checked before the size); once it is
    // answered 413 or 400, that is its last attempt.
    for (const as of final) {
      as.sort((x, y) => x.at - y.at);
      const finalAt = as.findIndex((a) => a.status === 413 || a.status === 400);
      expect(finalAt, `a batch answered ${as[finalAt]!.status} was resent: ${as.map((a) => a.status).join(',')}`).toBe(as.length - 1);
    }
    const sig413 = [...siglakeRequests].filter(([l]) => l.includes('status="413"')).reduce((a, [, v]) => a + v, 0);
    expect(sig413).toBe(1);
    if (collectorTook400Body) {
      expect(final.filter((as) => as.at(-1)!.status === 400)).toHaveLength(1);
      expect(sumOf(collectorMetrics, 'otelcol_exporter_send_failed_log_records', '')).toBe(2);
    } else {
      expect(sumOf(collectorMetrics, 'otelcol_exporter_send_failed_log_records', '')).toBe(1);
    }
  });

  it('after a 429 or 503 with Retry-After, the Collector waits at least that long before resending the batch', () => {
    const byDigest = new Map<string, Attempt[]>();
    for (const a of proxy.attempts.filter((x) => x.marked)) byDigest.set(a.digest, [...(byDigest.get(a.digest) ?? []), a]);
    let checked = 0;
    const early: string[] = [];
    for (const as of byDigest.values()) {
      as.sort((x, y) => x.at - y.at);
      for (let i = 0; i + 1 < as.length; i++) {
        const a = as[i]!;
        if ((a.status === 429 || a.status === 503) && a.retryAfterSecs !== undefined) {
          checked++;
          // 50 ms of slack for the clock readings on either side of the proxy.
          if (as[i + 1]!.at - a.at < a.retryAfterSecs * 1000 - 50) early.push(`${a.status} Retry-After ${a.retryAfterSecs}s, resent after ${as[i + 1]!.at - a.at} ms`);
        }
      }
    }
    expect(checked).toBeGreaterThan(0);
    expect(early).toEqual([]);
  });

  it('reports the Collector’s view next to Siglake’s', () => {
    const rows: string[] = [];
    for (const s of family(collectorMetrics, 'otelcol_exporter_')) {
      if (/queue_capacity|_bucket|_sum|_count/.test(s.name)) continue;
      rows.push(`collector ${s.name}${s.labels} ${s.value}`);
    }
    for (const s of family(collectorMetrics, 'otelcol_receiver_accepted_')) rows.push(`collector ${s.name}${s.labels} ${s.value}`);
    for (const [labels, v] of siglakeRequests) if (v > 0) rows.push(`siglake siglake_ingest_requests_total${labels} ${v}`);
    const dupLogs = texts('collector-http', 'logs').filter((t) => t.startsWith('col-log-')).length - accepted.logs.length;
    const dupSpans = texts('collector-grpc', 'traces').filter((t) => t.startsWith('col-span-')).length - accepted.traces.length;
    rows.push(`siglake WAL records collector-http/logs ${records('collector-http', 'logs')} (marker duplicates ${dupLogs})`);
    rows.push(`siglake WAL records collector-grpc/traces ${records('collector-grpc', 'traces')} (marker duplicates ${dupSpans})`);
    const statuses = new Map<number, number>();
    for (const a of proxy.attempts) statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
    rows.push(`siglake siglake_ingest_mem_breaker_rejected_total (the breaker's life) ${memBreakerShed}`);
    rows.push(`proxy attempts by status ${JSON.stringify(Object.fromEntries(statuses))}`);
    console.log(`\n${rows.join('\n')}\n`);
    expect(rows.length).toBeGreaterThan(4);
  });
});
