// The soak of the reliability table (chaos suite only, not in CI):
// `siglake ingest` under `siglake loadgen` at about 70 % of the best rate
// this machine reaches, for 30 minutes, while the resident memory and the
// open file descriptors of the ingester are sampled from /proc. Flat is the
// bar: after a warm-up, neither may keep growing.
//
//   npm run test:soak                                 # 30 minutes
//   SIGLAKE_SOAK_SECS=300 npm run test:soak           # a shorter run
//
// Knobs (environment): SIGLAKE_SOAK_SECS (1800), SIGLAKE_SOAK_SAMPLE_SECS (5),
// SIGLAKE_SOAK_RATE_FRACTION (0.7), SIGLAKE_SOAK_PROBE_SECS (20, the closed-loop
// run that finds the best rate), SIGLAKE_SOAK_WORKERS (cores - 1),
// SIGLAKE_SOAK_COMPACTOR (true: the product default), SIGLAKE_SOAK_OUT (the
// output directory, default perf/results/tmp/soak-<time>), SIGLAKE_SOAK_KEEP=1
// (keep the data directory, gigabytes of WAL, instead of deleting it),
// SIGLAKE_SOAK_PROTOCOL (http, or grpc: the same load over OTLP/gRPC, 16
// connections of 4 concurrent calls each in the probe, 64 of 4 in the soak).
// Writes samples.csv (t, rss, fds, requests, ...), loadgen-probe.json,
// loadgen-soak.json and summary.json, prints a summary, and exits 1 when RSS or
// descriptors grew, the load saw errors, or the ingester did not exit 0.
//
// Runs as a plain script through perf/run-ts.mjs (vite transpiles the
// TypeScript): `node perf/run-ts.mjs test/reliability/soak.ts`.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CLI, REPO, parseMetrics, startIngester } from '../helpers/ingester.js';
import { fdCount, rssBytes, MiB } from './lib/proc.js';

const env = process.env;
const num = (name: string, dflt: number): number => {
  const v = env[name];
  if (v === undefined || v === '') return dflt;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name}=${v}: not a positive number`);
  return n;
};
const SECS = num('SIGLAKE_SOAK_SECS', 1800);
const SAMPLE_SECS = num('SIGLAKE_SOAK_SAMPLE_SECS', 5);
const FRACTION = num('SIGLAKE_SOAK_RATE_FRACTION', 0.7);
const PROBE_SECS = num('SIGLAKE_SOAK_PROBE_SECS', 20);
const WORKERS = num('SIGLAKE_SOAK_WORKERS', Math.max(1, os.cpus().length - 1));
const COMPACTOR = (env['SIGLAKE_SOAK_COMPACTOR'] ?? 'true') !== 'false';
const OUT = env['SIGLAKE_SOAK_OUT'] ?? path.join(REPO, 'perf', 'results', 'tmp', `soak-${new Date().toISOString().replace(/[:.]/g, '-')}`);
const TENANTS = 4;
const PROTOCOL = env['SIGLAKE_SOAK_PROTOCOL'] ?? 'http';
if (PROTOCOL !== 'http' && PROTOCOL !== 'grpc') throw new Error(`SIGLAKE_SOAK_PROTOCOL=${PROTOCOL}: http or grpc`);

interface Sample {
  t: number;
  rssMiB: number;
  fds: number;
  requests: number;
  non200: number;
  walBytes: number;
  lanes: number;
  /** The compactor's figures (absent series read 0): its lag, the WAL it landed, its scheduling class, its raises. */
  lagS: number;
  landedBytes: number;
  schedIdle: number;
  raised: number;
}

function loadgen(target: string, extra: string[], outFile: string): Promise<{ code: number | null; report: Record<string, any> }> {
  const args = [CLI, 'loadgen', '--protocol', PROTOCOL, '--target', target, '--tenants', String(TENANTS), '--signal', 'mixed', '--out', outFile, ...extra];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    child.stdout.on('data', (c: Buffer) => (text += c.toString()));
    child.stderr.on('data', (c: Buffer) => (text += c.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      process.stdout.write(text);
      try {
        resolve({ code, report: JSON.parse(fs.readFileSync(outFile, 'utf8')) as Record<string, any> });
      } catch (e) {
        reject(new Error(`loadgen exited ${code} without a report: ${(e as Error).message}\n${text}`));
      }
    });
  });
}

/** Least-squares slope of y over x. */
function slope(xs: number[], ys: number[]): number {
  const n = xs.length;
  if (n < 2) return 0;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my);
    den += (xs[i]! - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

const median = (a: number[]): number => {
  const s = [...a].sort((x, y) => x - y);
  return s.length === 0 ? 0 : s[Math.floor(s.length / 2)]!;
};

async function main(): Promise<number> {
  fs.mkdirSync(OUT, { recursive: true });
  console.log(`soak: ${SECS} s of OTLP/${PROTOCOL === 'grpc' ? 'gRPC' : 'HTTP'} at ${FRACTION * 100} % of the best rate, ${WORKERS} workers, compactor ${COMPACTOR ? 'on' : 'off'}; output in ${OUT}`);
  const ing = await startIngester({
    workers: WORKERS,
    args: ['--trust-tenant-header'],
    env: { SIGLAKE_COMPACTOR: String(COMPACTOR) },
  });
  const pid = ing.child.pid!;
  const target = PROTOCOL === 'grpc' ? ing.grpcAddress : ing.url;
  // gRPC multiplexes: fewer connections, several calls on each (as a Collector's exporter does).
  const conns = (n: number): string[] => (PROTOCOL === 'grpc' ? ['--connections', String(n / 4), '--streams', '4'] : ['--connections', String(n)]);
  try {
    // 1. The best rate: a closed loop with plenty of connections.
    const probe = await loadgen(target, [...conns(64), '--duration', `${PROBE_SECS}s`, '--warmup', '3'], path.join(OUT, 'loadgen-probe.json'));
    const best = Number(probe.report['rates']?.['okPerSec'] ?? 0);
    if (!(best > 0)) throw new Error('the probe run acknowledged nothing');
    const rate = Math.max(1, Math.round(best * FRACTION));
    console.log(`soak: best rate ${best} req/s; soaking at ${rate} req/s`);

    // 2. The soak, sampled.
    const samples: Sample[] = [];
    const csv = fs.openSync(path.join(OUT, 'samples.csv'), 'w');
    fs.writeSync(csv, 't_s,rss_mib,fds,requests,non200,wal_bytes,lanes,compactor_lag_s,compactor_wal_bytes_read,compactor_sched_idle,compactor_raised\n');
    const t0 = Date.now();
    const sample = async () => {
      let m = new Map<string, number>();
      try {
        m = parseMetrics(await (await fetch(`${ing.url}/metrics`)).text());
      } catch {
        // the sample keeps what /proc says
      }
      let requests = 0;
      let non200 = 0;
      for (const [k, v] of m) {
        if (!k.startsWith('siglake_ingest_requests_total{')) continue;
        requests += v;
        if (!k.includes('status="200"')) non200 += v;
      }
      const s: Sample = {
        t: Math.round((Date.now() - t0) / 1000),
        rssMiB: Math.round((rssBytes(pid) / MiB) * 10) / 10,
        fds: fdCount(pid),
        requests,
        non200,
        walBytes: m.get('siglake_wal_bytes_written_total') ?? 0,
        lanes: m.get('siglake_ingest_lanes') ?? 0,
        lagS: Math.round((m.get('siglake_compactor_lag_seconds') ?? 0) * 10) / 10,
        landedBytes: m.get('siglake_compactor_wal_bytes_read_total') ?? 0,
        schedIdle: m.get('siglake_compactor_sched_idle') ?? 0,
        raised: m.get('siglake_compactor_priority_raised_total') ?? 0,
      };
      samples.push(s);
      fs.writeSync(csv, `${s.t},${s.rssMiB},${s.fds},${s.requests},${s.non200},${s.walBytes},${s.lanes},${s.lagS},${s.landedBytes},${s.schedIdle},${s.raised}\n`);
      if (samples.length % Math.max(1, Math.round(60 / SAMPLE_SECS)) === 1) {
        console.log(`soak: t=${s.t}s rss=${s.rssMiB} MiB fds=${s.fds} requests=${s.requests} non200=${s.non200} compactor lag=${s.lagS}s landed=${(s.landedBytes / 1e9).toFixed(2)}/${(s.walBytes / 1e9).toFixed(2)} GB sched_idle=${s.schedIdle} raised=${s.raised}`);
      }
    };
    await sample();
    const timer = setInterval(() => void sample(), SAMPLE_SECS * 1000);
    const soak = await loadgen(
      target,
      ['--rate', String(rate), ...conns(256), '--duration', `${SECS}s`, '--interval-ms', String(SAMPLE_SECS * 1000)],
      path.join(OUT, 'loadgen-soak.json'),
    );
    clearInterval(timer);
    await sample();
    fs.closeSync(csv);

    // 3. A graceful stop.
    const exitCode = await ing.stop(60_000);

    // Flatness: after a warm-up (a tenth of the run, at least a minute), the
    // steady part is cut into five windows; the last window's peak and median
    // must not exceed the first's by more than a quarter (plus 32 MiB of
    // slack), descriptors by more than 8. Peaks, not only medians, because
    // work that comes in rounds (compaction, segment rotation) makes RSS a
    // sawtooth: a flat sawtooth passes, a rising one does not. The slope over
    // the whole steady part is reported too.
    const warm = Math.max(60, SECS * 0.1);
    const steady = samples.filter((s) => s.t >= warm && s.t <= SECS);
    const w = Math.max(1, Math.floor(steady.length / 5));
    const first = steady.slice(0, w);
    const last = steady.slice(-w);
    const rssFirst = median(first.map((s) => s.rssMiB));
    const rssLast = median(last.map((s) => s.rssMiB));
    const rssFirstPeak = Math.max(0, ...first.map((s) => s.rssMiB));
    const rssLastPeak = Math.max(0, ...last.map((s) => s.rssMiB));
    const fdFirst = median(first.map((s) => s.fds));
    const fdLast = median(last.map((s) => s.fds));
    const rssSlopeMiBPerHour = slope(steady.map((s) => s.t), steady.map((s) => s.rssMiB)) * 3600;
    const totals = soak.report['totals'] ?? {};
    // Stored is 200 over HTTP, OK over gRPC (loadgen counts by the protocol's own status).
    const errors = Number(totals['errors'] ?? 0) + Object.entries(soak.report['statusCounts'] ?? {}).filter(([k]) => k !== '200' && k !== 'OK').reduce((a, [, v]) => a + Number(v), 0);
    const rssFlat = rssLast <= rssFirst * 1.25 + 32 && rssLastPeak <= rssFirstPeak * 1.25 + 32;
    const fdsFlat = fdLast <= fdFirst + 8;
    const summary = {
      secs: SECS,
      workers: WORKERS,
      compactor: COMPACTOR,
      cores: os.cpus().length,
      bestRate: best,
      targetRate: rate,
      achievedRate: soak.report['rates']?.['okPerSec'],
      requests: totals['requests'],
      errors,
      latencyMs: soak.report['latencyMs'],
      rssMiB: {
        firstWindow: { median: rssFirst, peak: rssFirstPeak },
        lastWindow: { median: rssLast, peak: rssLastPeak },
        max: Math.max(...samples.map((s) => s.rssMiB)),
        slopeMiBPerHour: Math.round(rssSlopeMiBPerHour * 10) / 10,
      },
      fds: { firstWindowMedian: fdFirst, lastWindowMedian: fdLast, max: Math.max(...samples.map((s) => s.fds)) },
      // What the compactor landed of the WAL written (it is not part of the verdict: at a load that
      // leaves no idle CPU it falls behind, docs/operations.md "Sizing").
      compactorFigures: COMPACTOR
        ? (() => {
            const end = samples[samples.length - 1]!;
            return {
              walWrittenBytes: end.walBytes,
              walLandedBytes: end.landedBytes,
              lagSecondsMax: Math.max(...samples.map((x) => x.lagS)),
              lagSecondsEnd: end.lagS,
              priorityRaised: end.raised,
            };
          })()
        : null,
      ingesterExit: exitCode,
      verdict: { rssFlat, fdsFlat, noErrors: errors === 0, cleanExit: exitCode === 0 },
      samples: samples.length,
      out: OUT,
    };
    fs.writeFileSync(path.join(OUT, 'summary.json'), JSON.stringify(summary, null, 2) + '\n');
    console.log(`soak summary: ${JSON.stringify(summary)}`);
    const ok = rssFlat && fdsFlat && errors === 0 && exitCode === 0;
    console.log(ok ? 'soak: FLAT' : 'soak: NOT FLAT (see summary.json)');
    return ok ? 0 : 1;
  } finally {
    await ing.kill9();
    // The WAL of a soak is gigabytes; the figures are in OUT. SIGLAKE_SOAK_KEEP=1 keeps it.
    if (env['SIGLAKE_SOAK_KEEP'] !== '1') fs.rmSync(ing.dataDir, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error(`soak failed: ${(e as Error).stack ?? String(e)}`);
    process.exit(1);
  },
);
