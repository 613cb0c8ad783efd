// Three OpenTelemetry Collectors (v0.165.0, built by install.sh), each sending
// for its own tenant through its otlp_grpc exporter, against one `siglake
// ingest` whose --grpc-max-streams pool is far smaller than the heavy
// Collector's sending_queue.num_consumers. The pool refuses calls
// (SIGLAKE_TOO_MANY_STREAMS, UNAVAILABLE) and may take a stalled call's slot
// for a light tenant; the exporter retries both. The ledger: every record a
// Collector's receiver accepted ends in the WAL of its tenant, none is lost,
// duplicates are only what a retry implies, and the pool's gauge is back at 0
// once the Collectors stopped.

import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseMetrics, startIngester, tempDir, walDump, type RunningIngester } from '../helpers/ingester.js';
import { INTEROP_CACHE, requireInstalled } from './helpers.js';
import { freePort } from '../helpers/free-port.js';
import { untilValue } from '../helpers/wait.js';

const OTELCOL = path.join(INTEROP_CACHE, 'otelcol', 'otelcol-interop');
/** Polls `fn` (a rejection counts as no value yet) until it answers; throws naming `what` after `timeoutMs`. */
const until = <T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 120_000): Promise<T> =>
  untilValue(what, () => fn().catch(() => undefined), timeoutMs);

function sumOf(metrics: Map<string, number>, name: string): number {
  let n = 0;
  for (const [k, v] of metrics) {
    const base = k.includes('{') ? k.slice(0, k.indexOf('{')) : k;
    if (base === name || base === `${name}_total`) n += v;
  }
  return n;
}

interface Peer {
  tenant: string;
  consumers: number;
  batches: number;
  concurrency: number;
  http: number;
  metrics: number;
  proc?: ChildProcess;
  log: string;
  accepted: string[];
  final?: Map<string, number>;
}

function config(p: Peer, siglakeGrpc: number): string {
  return `
receivers:
  otlp:
    protocols:
      http: {endpoint: "127.0.0.1:${p.http}"}
exporters:
  otlp_grpc/siglake:
    endpoint: "127.0.0.1:${siglakeGrpc}"
    tls: {insecure: true}
    headers: {x-scope-orgid: ${p.tenant}}
    sending_queue:
      enabled: true
      num_consumers: ${p.consumers}
      queue_size: 100000
    retry_on_failure:
      enabled: true
      initial_interval: 20ms
      max_interval: 200ms
      max_elapsed_time: 120s
service:
  telemetry:
    logs: {level: info, encoding: json}
    metrics:
      level: detailed
      readers:
        - pull:
            exporter:
              prometheus: {host: "127.0.0.1", port: ${p.metrics}}
  pipelines:
    logs: {receivers: [otlp], exporters: [otlp_grpc/siglake]}
`;
}

function logsJson(markers: string[]): string {
  return JSON.stringify({
    resourceLogs: [
      {
        resource: { attributes: [{ key: 'service.name', value: { stringValue: 'pool' } }] },
        scopeLogs: [{ scope: { name: 'pool' }, logRecords: markers.map((m) => ({ timeUnixNano: String(BigInt(Date.now()) * 1_000_000n), severityNumber: 9, body: { stringValue: m } })) }],
      },
    ],
  });
}

async function send(p: Peer): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < p.batches) {
      const i = next++;
      const markers = Array.from({ length: 4 }, (_, j) => `${p.tenant}-${i}-${j}`);
      const r = await fetch(`http://127.0.0.1:${p.http}/v1/logs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: logsJson(markers) });
      await r.arrayBuffer();
      if (r.status === 200) p.accepted.push(...markers);
    }
  };
  await Promise.all(Array.from({ length: p.concurrency }, worker));
}

describe('three Collectors (one heavy) against a small --grpc-max-streams pool', () => {
  const dir = tempDir('siglake-interop-pool-');
  let siglake: RunningIngester | undefined;
  const peers: Peer[] = [
    { tenant: 'heavy', consumers: 64, batches: 600, concurrency: 48, http: 0, metrics: 0, log: '', accepted: [] },
    { tenant: 'light-a', consumers: 2, batches: 60, concurrency: 2, http: 0, metrics: 0, log: '', accepted: [] },
    { tenant: 'light-b', consumers: 2, batches: 60, concurrency: 2, http: 0, metrics: 0, log: '', accepted: [] },
  ];
  let during = new Map<string, number>();
  let after = new Map<string, number>();
  let wal: ReturnType<typeof walDump> = [];

  beforeAll(async () => {
    requireInstalled(OTELCOL);
    const grpcPort = await freePort();
    siglake = await startIngester({
      dataDir: dir,
      args: ['--grpc-listen', `127.0.0.1:${grpcPort}`, '--trust-tenant-header', '--compactor=false', '--grpc-max-streams', '4'],
    });
    for (const p of peers) {
      p.http = await freePort();
      p.metrics = await freePort();
      const file = path.join(dir, `${p.tenant}.yaml`);
      fs.writeFileSync(file, config(p, grpcPort));
      p.proc = spawn('nice', ['-n', '5', OTELCOL, '--config', file], { stdio: ['ignore', 'ignore', 'pipe'] });
      p.proc.stderr!.setEncoding('utf8').on('data', (c: string) => (p.log += c));
    }
    for (const p of peers) {
      await until(`the ${p.tenant} Collector's receiver`, async () => {
        const r = await fetch(`http://127.0.0.1:${p.http}/v1/logs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: logsJson([]) });
        await r.arrayBuffer();
        return r.status === 200 ? true : undefined;
      });
    }
    await Promise.all(peers.map(send));
    for (const p of peers) {
      p.final = await until(`the ${p.tenant} Collector to drain`, async () => {
        const m = parseMetrics(await (await fetch(`http://127.0.0.1:${p.metrics}/metrics`)).text());
        const accepted = sumOf(m, 'otelcol_receiver_accepted_log_records');
        const out = sumOf(m, 'otelcol_exporter_sent_log_records') + sumOf(m, 'otelcol_exporter_send_failed_log_records');
        return accepted === p.accepted.length && out === accepted && sumOf(m, 'otelcol_exporter_queue_size') === 0 ? m : undefined;
      });
    }
    during = await siglake.metrics();
    for (const p of peers) {
      p.proc!.kill('SIGTERM');
      await new Promise((r) => p.proc!.once('exit', r));
    }
    after = await siglake.metrics();
    expect(await siglake.stop()).toBe(0);
    siglake = undefined;
    wal = walDump(path.join(dir, 'wal'));
  }, 300_000);

  afterAll(async () => {
    for (const p of peers) p.proc?.kill('SIGKILL');
    await siglake?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('reports', () => {
    const rows: string[] = [];
    for (const [k, v] of during) if (/grpc_streams|ingest_requests_total|ingest_records_total/.test(k)) rows.push(`siglake ${k} ${v}`);
    rows.push(`siglake after stop: siglake_grpc_streams_open ${after.get('siglake_grpc_streams_open')}`);
    for (const p of peers) {
      for (const [k, v] of p.final!) if (/otelcol_exporter_(sent|send_failed)_log|otelcol_receiver_accepted_log/.test(k)) rows.push(`${p.tenant} ${k} ${v}`);
      const retried = p.log.split('\n').filter((l) => l.includes('Will retry the request'));
      rows.push(`${p.tenant} Collector log "Will retry the request" ${retried.length}; first: ${retried[0] ?? '-'}`);
      const texts = wal.filter((l) => l.tenant === p.tenant).flatMap((l) => l.texts);
      rows.push(`${p.tenant} accepted ${p.accepted.length} stored ${texts.length} distinct ${new Set(texts).size}`);
    }
    console.log(`\n${rows.join('\n')}\n`);
  });

  it('every record a Collector accepted is in the WAL of its tenant once, and the exporter dropped none', () => {
    for (const p of peers) {
      expect(p.accepted.length).toBe(p.batches * 4);
      const texts = wal.filter((l) => l.tenant === p.tenant).flatMap((l) => l.texts);
      const stored = new Set(texts);
      expect(p.accepted.filter((m) => !stored.has(m)), p.tenant).toEqual([]);
      // A refused call (pool full, or its slot taken) is answered before its message is handled, so
      // its retry stores nothing twice; only an answer lost after the write could (none is, here).
      expect(texts.length, p.tenant).toBe(p.accepted.length);
      expect(sumOf(p.final!, 'otelcol_exporter_send_failed_log_records'), p.tenant).toBe(0);
      expect(sumOf(p.final!, 'otelcol_exporter_sent_log_records'), p.tenant).toBe(p.accepted.length);
    }
    // Nothing landed under another tenant.
    expect([...new Set(wal.map((l) => l.tenant))].sort()).toEqual(['heavy', 'light-a', 'light-b']);
  });

  it('the pool refused calls UNAVAILABLE, the exporter logged them as retried, and its gauge is back at 0', () => {
    expect(sumOf(during, 'siglake_grpc_streams_refused')).toBeGreaterThan(0);
    // Each refusal a 503 (UNAVAILABLE) in the request counter; nothing else refused.
    expect(during.get('siglake_ingest_requests_total{endpoint="otlp",status="503"}')).toBe(sumOf(during, 'siglake_grpc_streams_refused'));
    const retried = peers.flatMap((p) => p.log.split('\n')).filter((l) => l.includes('Will retry the request') && l.includes('code = Unavailable') && l.includes('--grpc-max-streams'));
    expect(retried.length).toBeGreaterThan(0);
    expect(peers.flatMap((p) => p.log.split('\n')).filter((l) => l.includes('Dropping data'))).toEqual([]);
    expect(after.get('siglake_grpc_streams_open')).toBe(0);
  });
});
