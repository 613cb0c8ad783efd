#!/usr/bin/env node
// The OpenTelemetry Collector as a performance peer (issue 13, item 7): the
// same Collector binary the interop suite builds (test/interop/install.sh:
// core v0.165.0) receives the same OTLP/HTTP load as `siglake ingest`, in the
// same run, from the same load tool (`siglake loadgen`, closed loop, same
// seed, same body size), and each Siglake row gets its ratio to
//
//   otelcol → nop         the OTLP receiver feeding the nop exporter: what
//                         the Collector costs before it does anything
//   otelcol → durable     the OTLP receiver feeding an exporter whose
//                         sending_queue is persistent (file_storage, fsync):
//                         the Collector's durable path. The exporter points at
//                         a closed port and never drains, so the row measures
//                         accepting into the durable queue (acknowledged after
//                         the enqueue, like Siglake's batch mode after fdatasync).
//
//   node native-bench/otelcol-peer.mjs [--sizes 1k,256k]
//   env: BENCH_SECS (5), BENCH_CONNECTIONS (64), BENCH_DIR (os.tmpdir()),
//        SIGLAKE_INTEROP_CACHE (where install.sh put otelcol/otelcol-interop)
//
// Prints one table and writes native-bench/results/otelcol-<time>.json.
// Needs `npm run build` and `bash test/interop/install.sh` first.

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { freePort, stopChild } from './proc.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..');
const CLI = path.join(REPO, 'dist', 'cli.js');
const CACHE = process.env.SIGLAKE_INTEROP_CACHE ?? path.join(os.homedir(), '.cache', 'siglake-interop');
const OTELCOL = path.join(CACHE, 'otelcol', 'otelcol-interop');
const SECS = Number(process.env.BENCH_SECS ?? 5);
const CONNS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const BENCH_DIR = process.env.BENCH_DIR ?? os.tmpdir();
const BYTES = { '1k': 1024, '256k': 256 * 1024 };

const { values: args } = parseArgs({ options: { sizes: { type: 'string', default: '1k,256k' } } });
const sizes = args.sizes.split(',').map((s) => s.trim());
for (const s of sizes) if (BYTES[s] === undefined) throw new Error(`--sizes: ${s} is not one of ${Object.keys(BYTES).join(', ')}`);
if (!existsSync(CLI)) throw new Error('dist/cli.js is missing: npm run build');
if (!existsSync(OTELCOL)) throw new Error(`${OTELCOL} is missing: bash test/interop/install.sh`);

const log = (s) => process.stderr.write(`${s}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Resolves once POST /v1/logs with an empty request answers 200. */
async function waitReady(port, child) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}`);
    try {
      const r = await fetch(`http://127.0.0.1:${port}/v1/logs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      await r.arrayBuffer();
      if (r.status === 200) return;
    } catch {
      /* not listening yet */
    }
    if (Date.now() > deadline) throw new Error('server did not answer in time');
    await sleep(200);
  }
}

function collectorConfig(kind, port, dir, closedPort) {
  const metricsOff = `  telemetry:\n    logs: {level: error}\n    metrics: {level: none}\n`;
  if (kind === 'nop') {
    return `receivers:\n  otlp:\n    protocols:\n      http: {endpoint: "127.0.0.1:${port}", max_request_body_size: 67108864}\nexporters:\n  nop: {}\nservice:\n${metricsOff}  pipelines:\n    logs: {receivers: [otlp], exporters: [nop]}\n`;
  }
  return `receivers:
  otlp:
    protocols:
      http: {endpoint: "127.0.0.1:${port}", max_request_body_size: 67108864}
exporters:
  otlp_http/nowhere:
    endpoint: "http://127.0.0.1:${closedPort}"
    sending_queue:
      enabled: true
      num_consumers: 1
      queue_size: 100000000
      sizer: requests
      storage: file_storage
    retry_on_failure: {enabled: true, initial_interval: 1h, max_interval: 1h, max_elapsed_time: 0s}
extensions:
  file_storage:
    directory: "${dir}"
    fsync: true
service:
  extensions: [file_storage]
${metricsOff}  pipelines:
    logs: {receivers: [otlp], exporters: [otlp_http/nowhere]}
`;
}

async function startTarget(kind, dir) {
  const port = await freePort();
  let child;
  if (kind === 'siglake') {
    child = spawn(process.execPath, [CLI, 'ingest', '--http-listen', `127.0.0.1:${port}`, '--grpc-listen', '127.0.0.1:0', '--wal-dir', path.join(dir, 'wal'), '--wal-fsync', 'batch', '--log-level', 'warn'], { stdio: 'ignore' });
  } else {
    const config = path.join(dir, 'otelcol.yaml');
    mkdirSync(path.join(dir, 'queue'), { recursive: true });
    writeFileSync(config, collectorConfig(kind, port, path.join(dir, 'queue'), await freePort()));
    child = spawn(OTELCOL, ['--config', config], { stdio: 'ignore' });
  }
  await waitReady(port, child);
  return { port, child };
}

function loadgen(port, size) {
  const out = path.join(mkdtempSync(path.join(os.tmpdir(), 'siglake-otelcol-peer-')), 'load.json');
  const r = spawnSync(
    process.execPath,
    [CLI, 'loadgen', '--target', `http://127.0.0.1:${port}`, '--signal', 'logs', '--body-bytes', String(BYTES[size]), '--connections', String(CONNS), '--threads', '1', '--duration', String(SECS), '--warmup', '1', '--seed', '1', '--no-progress', '--quiet', '--out', out],
    { encoding: 'utf8', timeout: (SECS + 120) * 1000 },
  );
  if (!existsSync(out)) throw new Error(`loadgen failed: ${r.stderr}`);
  const j = JSON.parse(readFileSync(out, 'utf8'));
  rmSync(path.dirname(out), { recursive: true, force: true });
  return j;
}

const KINDS = [
  ['siglake', 'siglake ingest, HTTP, batch fsync'],
  ['nop', 'otelcol: otlp receiver → nop'],
  ['durable', 'otelcol: otlp receiver → persistent queue (file_storage, fsync)'],
];

const results = [];
for (const size of sizes) {
  for (const [kind, label] of KINDS) {
    const dir = mkdtempSync(path.join(BENCH_DIR, `siglake-otelcol-peer-${kind}-`));
    log(`== ${size} ${label}`);
    const t = await startTarget(kind, dir);
    try {
      const j = loadgen(t.port, size);
      const ok = j.statusCounts?.['200'] ?? 0;
      // Accepted requests only: a target that refused under load would otherwise rate well.
      const row = { size, kind, label, rps: j.rates.okPerSec, mbps: j.rates.mbPerSec, p50: j.latencyMs.p50, p99: j.latencyMs.p99, statusCounts: j.statusCounts, ok };
      results.push(row);
      log(`    ${row.rps.toFixed(0)} req/s, p50 ${row.p50} ms, p99 ${row.p99} ms, statuses ${JSON.stringify(j.statusCounts)}`);
    } finally {
      await stopChild(t.child);
      rmSync(dir, { recursive: true, force: true });
    }
  }
}

const fmt = (v, d = 0) => (Number.isFinite(v) ? v.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d }) : '-');
const lines = ['| body | target | req/s | p50 ms | p99 ms | siglake ÷ this |', '| --- | --- | --- | --- | --- | --- |'];
for (const r of results) {
  const s = results.find((x) => x.size === r.size && x.kind === 'siglake');
  lines.push(`| ${r.size === '1k' ? '1 KiB' : '256 KiB'} | ${r.label} | ${fmt(r.rps)} | ${fmt(r.p50, 2)} | ${fmt(r.p99, 2)} | ${r.kind === 'siglake' ? '' : fmt(s.rps / r.rps, 2)} |`);
}
process.stdout.write(`${lines.join('\n')}\n\n(${SECS} s per row after 1 s of warm-up, ${CONNS} connections, siglake loadgen --threads 1; ${os.cpus().length} cores, load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')})\n`);
const resultsDir = path.join(HERE, 'results');
mkdirSync(resultsDir, { recursive: true });
const stamp = new Date().toISOString().replace(/[:.]/g, '-');
writeFileSync(path.join(resultsDir, `otelcol-${stamp}.json`), JSON.stringify({ when: new Date().toISOString(), secs: SECS, connections: CONNS, results }, null, 2) + '\n');
