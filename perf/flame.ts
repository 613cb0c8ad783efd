// `npm run flame`: profiles `siglake ingest` under `siglake loadgen` traffic
// and renders one flame graph per thread. The ingester runs with
// `node --cpu-prof --cpu-prof-dir DIR`, which writes one .cpuprofile per thread
// at exit (the acceptor on the main thread, each Piscina writer worker), then
// stops gracefully; every profile becomes DIR/<thread>.svg plus a top-N
// self-time table (DIR/<thread>.top.txt, and printed).
//
//   npm run flame -- [--secs 10] [--protocol http|grpc] [--fsync batch] [--connections 64]
//                    [--workers N] [--out DIR] [--top 25] [--interval 500] [--whole]
//                    [--warmup-secs S] [--warmup-requests N]
//                    [-- extra loadgen flags]
// Only samples taken while the load ran are drawn (--whole: the whole process
// life, start-up and shutdown included). A warm-up (the same loadgen flags, for
// S seconds and/or N requests, e.g. one per tenant so every lane exists) runs
// before the profiled window: a steady-state profile, without lane creation.
//   node perf/run-ts.mjs perf/flame.ts --render FILE.cpuprofile...   (render existing profiles)
//   FLAME_INGEST_FLAGS="--trust-tenant-header --ingest-max-lanes 20000 --wal-max-open-files 512" \
//     node perf/run-ts.mjs perf/flame.ts --warmup-requests 20000 -- --tenants 10000   (the P5 row's shape)

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { FlameGraph, type CpuProfile } from './flame-graph.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CLI = path.join(REPO, 'dist', 'cli.js');

const dash = process.argv.indexOf('--', 2);
const own = dash === -1 ? process.argv.slice(2) : process.argv.slice(2, dash);
const extraLoad = dash === -1 ? [] : process.argv.slice(dash + 1);
const { values: args, positionals } = parseArgs({
  args: own,
  allowPositionals: true,
  options: {
    secs: { type: 'string', default: '10' },
    protocol: { type: 'string', default: 'http' },
    fsync: { type: 'string', default: 'batch' },
    connections: { type: 'string', default: '64' },
    streams: { type: 'string', default: '10' },
    workers: { type: 'string' },
    out: { type: 'string' },
    top: { type: 'string', default: '25' },
    interval: { type: 'string', default: '500' },
    render: { type: 'boolean' },
    whole: { type: 'boolean' },
    'warmup-secs': { type: 'string', default: '0' },
    'warmup-requests': { type: 'string', default: '0' },
  },
});

/** CPU.20250101.120000.<pid>.<tid>.<seq>.cpuprofile → thread id. */
function threadOf(file: string): number {
  const m = /\.(\d+)\.(\d+)\.(\d+)\.cpuprofile$/.exec(file);
  return m ? Number(m[2]) : -1;
}

function render(files: string[], outDir: string, topN: number, window?: { fromUs: number; toUs: number }): void {
  const sorted = [...files].sort((a, b) => threadOf(a) - threadOf(b));
  for (const file of sorted) {
    const tid = threadOf(file);
    const name = tid === 0 ? 'main-acceptor' : tid > 0 ? `thread-${tid}` : path.basename(file, '.cpuprofile');
    const what = window === undefined ? 'whole run' : 'while the load ran';
    const g = new FlameGraph(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, `siglake ingest: ${name}, ${what} (${path.basename(file)})`, REPO, window);
    writeFileSync(path.join(outDir, `${name}.svg`), g.svg());
    const text = g.topText(topN);
    writeFileSync(path.join(outDir, `${name}.top.txt`), text);
    process.stdout.write(`\n${text}`);
    process.stdout.write(`flame graph: ${path.relative(process.cwd(), path.join(outDir, `${name}.svg`))}\n`);
  }
}

function waitForLine(child: ChildProcess, msg: string, timeoutMs: number): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    let buf = '';
    let info: Record<string, unknown> = {};
    const timer = setTimeout(() => reject(new Error(`ingester did not say '${msg}' in time`)), timeoutMs);
    child.stdout!.setEncoding('utf8').on('data', (c: string) => {
      buf += c;
      let nl: number;
      while ((nl = buf.indexOf('\n')) !== -1) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        try {
          const j = JSON.parse(line) as Record<string, unknown>;
          if (j['msg'] === 'listening') info = j;
          if (j['msg'] === msg) {
            clearTimeout(timer);
            resolve(info);
          }
        } catch {
          // not a log line
        }
      }
    });
    child.once('exit', (code) => reject(new Error(`ingester exited with ${code}`)));
  });
}

function run(cmd: string, argv: string[]): Promise<number | null> {
  return new Promise((resolve) => {
    const c = spawn(cmd, argv, { stdio: ['ignore', 'inherit', 'inherit'] });
    c.on('exit', (code) => resolve(code));
  });
}

async function main(): Promise<number> {
  const topN = Number(args.top);
  if (args.render) {
    if (positionals.length === 0) throw new Error('--render needs .cpuprofile files');
    const outDir = args.out ?? path.dirname(positionals[0]);
    mkdirSync(outDir, { recursive: true });
    render(positionals, outDir, topN);
    return 0;
  }
  if (!existsSync(CLI)) throw new Error(`${CLI} missing: build first (npm run build)`);
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const outDir = path.resolve(args.out ?? path.join(REPO, 'perf', 'results', 'tmp', `flame-${stamp}`));
  const profDir = path.join(outDir, 'profiles');
  mkdirSync(profDir, { recursive: true });
  const walDir = mkdtempSync(path.join(os.tmpdir(), 'siglake-flame-'));
  const ingestArgs = [
    `--cpu-prof`,
    `--cpu-prof-dir=${profDir}`,
    `--cpu-prof-interval=${args.interval}`,
    CLI,
    'ingest',
    '--http-listen',
    '127.0.0.1:0',
    '--grpc-listen',
    '127.0.0.1:0',
    '--wal-dir',
    path.join(walDir, 'wal'),
    '--wal-fsync',
    args.fsync!,
    ...(args.workers !== undefined ? ['--workers', args.workers] : []),
    // More ingester flags, split on spaces (e.g. the 10,000-tenant row's
    // `--trust-tenant-header --ingest-max-lanes 20000 --wal-max-open-files 512`).
    ...(process.env['FLAME_INGEST_FLAGS'] ?? '').split(' ').filter((f) => f !== ''),
  ];
  process.stderr.write(`flame: node ${ingestArgs.join(' ')}\n`);
  const ing = spawn(process.execPath, ingestArgs, { stdio: ['ignore', 'pipe', 'inherit'] });
  // The load's span on CLOCK_MONOTONIC, the clock of the profiles' timestamps.
  const monoUs = (): number => Number(process.hrtime.bigint() / 1000n);
  let window: { fromUs: number; toUs: number } | undefined;
  try {
    const info = await waitForLine(ing, 'ready', 60_000);
    const target = args.protocol === 'grpc' ? `127.0.0.1:${String(info['grpc'])}` : `http://127.0.0.1:${String(info['http'])}`;
    const loadgen = (how: string[], out: string): string[] => [
      CLI,
      'loadgen',
      '--protocol',
      args.protocol!,
      '--target',
      target,
      ...how,
      '--connections',
      args.connections!,
      ...(args.protocol === 'grpc' ? ['--streams', args.streams!] : []),
      '--no-progress',
      '--out',
      path.join(outDir, out),
      ...extraLoad,
    ];
    const warmRequests = Number(args['warmup-requests']);
    const warmSecs = Number(args['warmup-secs']);
    if (warmRequests > 0) {
      const w = loadgen(['--requests', String(warmRequests), '--duration', '0'], 'warmup-requests.json');
      process.stderr.write(`flame: warm-up: node ${w.join(' ')}\n`);
      await run(process.execPath, w);
    }
    if (warmSecs > 0) {
      const w = loadgen(['--duration', String(warmSecs)], 'warmup-secs.json');
      process.stderr.write(`flame: warm-up: node ${w.join(' ')}\n`);
      await run(process.execPath, w);
    }
    const load = loadgen(['--duration', args.secs!], 'loadgen.json');
    process.stderr.write(`flame: node ${load.join(' ')}\n`);
    const fromUs = monoUs();
    const code = await run(process.execPath, load);
    // Start-up and shutdown stay out of the graphs (--whole keeps them).
    if (!args.whole) window = { fromUs, toUs: monoUs() };
    if (code !== 0) process.stderr.write(`flame: loadgen exited with ${code}\n`);
  } finally {
    // A graceful stop: the main thread and the workers write their profiles as they exit.
    const exited = new Promise((r) => ing.once('exit', r));
    if (ing.exitCode === null) ing.kill('SIGTERM');
    const t = setTimeout(() => ing.kill('SIGKILL'), 30_000);
    await exited;
    clearTimeout(t);
    rmSync(walDir, { recursive: true, force: true });
  }
  const files = readdirSync(profDir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((f) => path.join(profDir, f));
  if (files.length === 0) throw new Error(`no .cpuprofile written under ${profDir}`);
  render(files, outDir, topN, window);
  process.stdout.write(`\n${files.length} thread profile(s) and flame graphs under ${path.relative(process.cwd(), outDir)}\n`);
  return 0;
}

process.exitCode = await main();
