// Starts the real `siglake ingest` process (the built dist/cli.js) on free
// ports with its own WAL directory, and reads back what it says and writes.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { followLogLines, type LogLine } from './log-lines.js';
import { INGESTER_LOCK, WAL_ROOT_MARKER } from '../../src/wal/layout.js';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const CLI = path.join(REPO, 'dist', 'cli.js');

export interface StartOptions {
  /** Extra flags after the listen addresses and --wal-dir. */
  args?: string[];
  env?: Record<string, string>;
  /** Reuse a directory (restart after a crash); default a fresh temp dir. */
  dataDir?: string;
  /** Default 1: two cores are shared by everything in the test run. */
  workers?: number;
  /** Wait for this log message before resolving (default 'ready'). */
  waitFor?: string;
  timeoutMs?: number;
  /**
   * Managed indexes to create in the ingester's catalog before it starts
   * (tenant → names): x-siglake-index must name an index the tenant has.
   */
  indexes?: Record<string, string[]>;
}

export type { LogLine } from './log-lines.js';

export class RunningIngester {
  readonly logs: LogLine[] = [];
  stderr = '';
  exitCode: number | null = null;
  exitSignal: NodeJS.Signals | null = null;
  readonly exited: Promise<number | null>;
  httpPort = 0;
  grpcPort = 0;
  /** The port of --metrics-listen, when it was given: /metrics is read there. */
  metricsPort: number | undefined;

  constructor(
    readonly child: ChildProcess,
    readonly dataDir: string,
  ) {
    // 'exit' may come before the last lines the process wrote are read from its stdout: `exited`
    // also waits for the pipe's end, so that `logs` holds them (its last words, 'stopped' among
    // them). At most a second: a compactor child that inherited the pipe may hold it a little longer.
    const stdout = child.stdout;
    const drained =
      stdout === null
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            stdout.once('end', resolve);
            stdout.once('close', resolve);
          });
    this.exited = new Promise((resolve) => {
      child.on('exit', (code, signal) => {
        this.exitCode = code;
        this.exitSignal = signal;
        let cap: NodeJS.Timeout | undefined;
        void Promise.race([drained, new Promise<void>((r) => (cap = setTimeout(r, 1000)))]).then(() => {
          clearTimeout(cap);
          resolve(code);
        });
      });
    });
  }

  get walDir(): string {
    return path.join(this.dataDir, 'wal');
  }

  get url(): string {
    return `http://127.0.0.1:${this.httpPort}`;
  }

  get grpcAddress(): string {
    return `127.0.0.1:${this.grpcPort}`;
  }

  /** SIGTERM and wait for the exit code. */
  async stop(timeoutMs = 30_000): Promise<number | null> {
    if (this.exitCode !== null || this.exitSignal !== null) return this.exitCode;
    this.child.kill('SIGTERM');
    const t = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
    const code = await this.exited;
    clearTimeout(t);
    return code;
  }

  async kill9(): Promise<void> {
    if (this.exitCode !== null || this.exitSignal !== null) return;
    this.child.kill('SIGKILL');
    await this.exited;
  }

  /** /metrics parsed into `name{labels}` → value. */
  async metrics(): Promise<Map<string, number>> {
    const base = this.metricsPort === undefined ? this.url : `http://127.0.0.1:${this.metricsPort}`;
    const text = await (await fetch(`${base}/metrics`)).text();
    return parseMetrics(text);
  }

  async metric(series: string): Promise<number | undefined> {
    return (await this.metrics()).get(series);
  }
}

export function parseMetrics(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const sp = line.lastIndexOf(' ');
    out.set(line.slice(0, sp), Number(line.slice(sp + 1)));
  }
  return out;
}

export function tempDir(prefix = 'siglake-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export async function startIngester(opts: StartOptions = {}): Promise<RunningIngester> {
  const dataDir = opts.dataDir ?? tempDir();
  if (opts.indexes !== undefined) await createIndexes(dataDir, opts.args ?? [], opts.indexes);
  const args = [
    CLI,
    'ingest',
    '--http-listen',
    '127.0.0.1:0',
    '--grpc-listen',
    '127.0.0.1:0',
    '--wal-dir',
    path.join(dataDir, 'wal'),
    '--workers',
    String(opts.workers ?? 1),
    ...(opts.args ?? []),
  ];
  const child = spawn(process.execPath, args, {
    cwd: dataDir,
    env: { ...process.env, SIGLAKE_TEST_HOOKS: '1', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return followIngester(child, dataDir, opts.waitFor ?? 'ready', opts.timeoutMs ?? 20_000);
}

/** A spawned `siglake ingest`, followed until it logs `waitFor`; its ports come from its `listening` line. */
export async function followIngester(child: ChildProcess, dataDir: string, waitFor: string, timeoutMs: number): Promise<RunningIngester> {
  const ing = new RunningIngester(child, dataDir);
  await followLogLines(child, ing, {
    what: 'ingester',
    waitFor,
    timeoutMs,
    onLine: (parsed) => {
      if (parsed.msg === 'listening') {
        ing.httpPort = parsed['http'] as number;
        ing.grpcPort = parsed['grpc'] as number;
        if (typeof parsed['metrics'] === 'number') ing.metricsPort = parsed['metrics'];
      }
    },
  });
  return ing;
}

/** Runs `siglake <args>` to completion. */
export function runCli(args: string[], opts: { env?: Record<string, string>; cwd?: string; timeoutMs?: number } = {}): {
  status: number | null;
  stdout: string;
  stderr: string;
  /** The signal that ended it, when one did (the timeout's, or spawnSync's past maxBuffer). */
  signal: NodeJS.Signals | null;
} {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    encoding: 'utf8',
    env: { ...process.env, ...opts.env },
    cwd: opts.cwd ?? REPO,
    timeout: opts.timeoutMs ?? 60_000,
    // `wal dump` of a few thousand records passes spawnSync's default 1 MiB,
    // past which the child is killed and its status is null.
    maxBuffer: 512 * 1024 * 1024,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, signal: r.signal };
}

export interface DumpLine {
  tenant: string;
  table: string;
  index?: string;
  segment: string;
  offset: number;
  type: 'logs' | 'traces';
  records: number;
  timeMs: number;
  texts: string[];
}

/** `siglake wal dump DIR`, parsed. An absent directory dumps as nothing. */
export function walDump(dir: string): DumpLine[] {
  if (!fs.existsSync(dir)) return [];
  const r = runCli(['wal', 'dump', dir]);
  if (r.status !== 0) throw new Error(`wal dump failed (${r.status ?? r.signal}): ${r.stderr}`);
  return dumpLines(r.stdout);
}

/** The record lines of `wal dump`'s output (also of a dump that exits 1 on damage). */
export function dumpLines(stdout: string): DumpLine[] {
  return stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as DumpLine);
}

/** Every file under `dir`, relative, sorted (for "nothing left behind" checks). */
export function listFiles(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      // The root marker and lock every ingester writes at start (wal-format.md "Directories") are no request's doing.
      if (d === dir && (e.name === WAL_ROOT_MARKER || e.name === INGESTER_LOCK)) continue;
      const p = path.join(d, e.name);
      out.push(path.relative(dir, p) + (e.isDirectory() ? '/' : ''));
      if (e.isDirectory()) walk(p);
    }
  };
  walk(dir);
  return out.sort();
}

/** The value of `--flag v` or `--flag=v` in args, else undefined. */
function flagValue(args: readonly string[], flag: string): string | undefined {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === flag) return args[i + 1];
    if (args[i]!.startsWith(`${flag}=`)) return args[i]!.slice(flag.length + 1);
  }
  return undefined;
}

/**
 * Creates managed indexes (no mapping) in the catalog an ingester started in
 * `dataDir` with `args` uses (its --catalog-url/--warehouse, else the
 * defaults relative to its working directory, dataDir). Existing ones stay.
 */
export async function createIndexes(dataDir: string, args: readonly string[], indexes: Record<string, string[]>): Promise<void> {
  const { SqlCatalog } = await import('../../src/iceberg/sql-catalog.js');
  const { FileStorage } = await import('../../src/iceberg/file-storage.js');
  const { IndexRegistry } = await import('../../src/indexes/registry.js');
  const url = flagValue(args, '--catalog-url') ?? 'sqlite:./data/catalog.db';
  const catalogUrl = url.startsWith('sqlite:') && !path.isAbsolute(url.slice(7)) ? `sqlite:${path.resolve(dataDir, url.slice(7))}` : url;
  const warehouse = path.resolve(dataDir, flagValue(args, '--warehouse') ?? './data/warehouse');
  fs.mkdirSync(path.join(dataDir, 'data'), { recursive: true });
  const catalog = SqlCatalog.open(catalogUrl, flagValue(args, '--catalog-name') ?? 'siglake');
  try {
    const registry = new IndexRegistry({ catalog, storage: new FileStorage(warehouse) });
    for (const [tenant, names] of Object.entries(indexes)) {
      const have = new Set(await registry.names(tenant));
      for (const name of names) if (!have.has(name)) await registry.create(tenant, { name, retentionDays: 0, mapping: [] });
    }
  } finally {
    await catalog.close();
  }
}
