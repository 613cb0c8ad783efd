// Shared pieces of the interop suite (`npm run test:interop`): where
// test/interop/install.sh put the peers (a Python venv, the jars, the
// Collector binary), a runner for a peer that prints one JSON object, and a
// fixture that ingests telemetry for three tenants through two real
// `siglake ingest` processes and lands it with `siglake compact`, run by
// three processes at once, into a SQLite or PostgreSQL catalog.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CLI, REPO, startIngester, tempDir } from '../helpers/ingester.js';
import { startPostgres, type PostgresServer } from '../helpers/postgres.js';

export const INTEROP_CACHE = process.env['SIGLAKE_INTEROP_CACHE'] ?? path.join(os.homedir(), '.cache', 'siglake-interop');
export const PYTHON = path.join(INTEROP_CACHE, 'venv', 'bin', 'python');
export const JARS = path.join(INTEROP_CACHE, 'jars');
export const PEERS = path.join(REPO, 'test', 'interop', 'peers');

/** Fails with the fix when install.sh has not run. */
export function requireInstalled(file: string): string {
  if (!fs.existsSync(file)) throw new Error(`${file} is missing: run \`bash test/interop/install.sh\` first (cache: ${INTEROP_CACHE})`);
  return file;
}

export interface ProcResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to completion, asynchronously (so several can run at once). */
export function runProcess(cmd: string, args: string[], opts: { env?: Record<string, string>; cwd?: string; timeoutMs?: number } = {}): Promise<ProcResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd ?? REPO, env: { ...process.env, ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 300_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Runs a Python peer from test/interop/peers and returns the JSON object it printed last. */
export async function pythonPeer<T>(script: string, args: string[], env: Record<string, string> = {}): Promise<T> {
  const r = await runProcess('nice', ['-n', '5', requireInstalled(PYTHON), path.join(PEERS, script), ...args], { env: { PYTHONUNBUFFERED: '1', ...env } });
  const last = r.stdout.trim().split('\n').at(-1) ?? '';
  if (r.code !== 0 || !last.startsWith('{')) throw new Error(`${script} exited ${r.code}\nstdout: ${r.stdout.slice(-2000)}\nstderr: ${r.stderr.slice(-6000)}`);
  return JSON.parse(last) as T;
}

/** The Spark peer's classpath: every jar test/interop/install.sh put in the cache (the Iceberg runtime and the JDBC drivers among them). */
export function sparkJars(): string {
  const jars = requireInstalled(JARS);
  const names = fs.readdirSync(jars).filter((f) => f.endsWith('.jar'));
  for (const want of ['iceberg-spark-runtime-', 'sqlite-jdbc-', 'postgresql-']) {
    if (!names.some((n) => n.startsWith(want))) throw new Error(`no ${want}*.jar in ${jars}: run bash test/interop/install.sh`);
  }
  return names.map((n) => path.join(jars, n)).join(',');
}

/** `siglake <args>` as a child process, asynchronously. */
export function siglake(args: string[]): Promise<ProcResult> {
  return runProcess(process.execPath, [CLI, ...args], { timeoutMs: 120_000 });
}

// ------------------------------------------------------------------ the landed fixture

export const TENANTS = ['default', 'acme', 'globex'] as const;
export type Tenant = (typeof TENANTS)[number];
export const NAMESPACE: Record<Tenant, string> = { default: 'main', acme: 'tenant_acme', globex: 'tenant_globex' };

/** Two days, so that tables have two `time_day` partitions. */
export const DAY1_NS = 1_768_435_200_000_000_000n; // 2026-01-15T00:00:00Z
export const DAY2_NS = DAY1_NS + 86_400_000_000_000n; // 2026-01-16T00:00:00Z
export const DAY2_ISO = '2026-01-16T00:00:00+00:00';

export interface Acked {
  marker: string;
  service: string;
  k: string;
  day2: boolean;
}

export type CatalogKind = 'sqlite' | 'postgres';

/** How each reader names the same catalog. */
export interface CatalogUris {
  siglake: string;
  pyiceberg: string;
  jdbc: string;
  warehouse: string;
  warehouseUri: string;
}

export interface LandedFixture {
  kind: CatalogKind;
  uris: CatalogUris;
  /** namespace.table → what was acknowledged for it. */
  acked: Map<string, Acked[]>;
  /** Exit codes and outputs of the concurrent `siglake compact` runs. */
  compactRuns: ProcResult[];
  cleanup(): Promise<void>;
}

const anyValue = (s: string) => ({ stringValue: s });

function logsBody(markers: Acked[]): unknown {
  const services = [...new Set(markers.map((m) => m.service))];
  return {
    resourceLogs: services.map((service) => ({
      resource: { attributes: [{ key: 'service.name', value: anyValue(service) }, { key: 'host.name', value: anyValue('interop') }] },
      scopeLogs: [
        {
          scope: { name: 'interop', version: '1.0.0' },
          logRecords: markers
            .filter((m) => m.service === service)
            .map((m, i) => ({
              timeUnixNano: String((m.day2 ? DAY2_NS : DAY1_NS) + BigInt(3_600_000_000_000 + i * 1_000_001)),
              severityNumber: 9,
              severityText: 'INFO',
              body: anyValue(m.marker),
              attributes: [
                { key: 'k', value: anyValue(m.k) },
                { key: 'n', value: { intValue: String(i) } },
              ],
            })),
        },
      ],
    })),
  };
}

function tracesBody(markers: Acked[]): unknown {
  const services = [...new Set(markers.map((m) => m.service))];
  return {
    resourceSpans: services.map((service) => ({
      resource: { attributes: [{ key: 'service.name', value: anyValue(service) }] },
      scopeSpans: [
        {
          scope: { name: 'interop' },
          spans: markers
            .filter((m) => m.service === service)
            .map((m, i) => {
              const start = (m.day2 ? DAY2_NS : DAY1_NS) + BigInt(7_200_000_000_000 + i * 1_000_003);
              return {
                traceId: Buffer.from(m.marker.padEnd(16, '#').slice(-16)).toString('hex'),
                spanId: Buffer.from(m.marker.padEnd(8, '#').slice(-8)).toString('hex'),
                name: m.marker,
                kind: 2,
                startTimeUnixNano: String(start),
                endTimeUnixNano: String(start + 1_500_000n),
                status: { code: 1 },
                attributes: [{ key: 'k', value: anyValue(m.k) }],
              };
            }),
        },
      ],
    })),
  };
}

async function postJson(url: string, body: unknown, headers: Record<string, string>): Promise<number> {
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  await r.arrayBuffer();
  return r.status;
}

/**
 * Two ingesters (separate WALs, one catalog, compactor off) receive logs and
 * spans for three tenants over two days, two services and two values of
 * attribute `k`; both stop (which seals their segments); then three
 * `siglake compact --once` run at once: two on the first WAL (the same
 * segments: one of them must be abandoned) and one on the second (replicas
 * committing to the same tables).
 */
export async function landFixture(kind: CatalogKind, label: string): Promise<LandedFixture> {
  const root = tempDir(`siglake-interop-${kind}-`);
  let pg: PostgresServer | undefined;
  let uris: CatalogUris;
  const warehouse = path.join(root, 'warehouse');
  if (kind === 'postgres') {
    pg = await startPostgres();
    uris = {
      siglake: pg.url,
      pyiceberg: `postgresql+psycopg2://postgres@127.0.0.1:${pg.port}/postgres`,
      jdbc: `jdbc:postgresql://127.0.0.1:${pg.port}/postgres?user=postgres`,
      warehouse,
      warehouseUri: `file://${warehouse}`,
    };
  } else {
    const db = path.join(root, 'catalog.db');
    uris = { siglake: `sqlite:${db}`, pyiceberg: `sqlite:///${db}`, jdbc: `jdbc:sqlite:${db}`, warehouse, warehouseUri: `file://${warehouse}` };
  }
  const icebergFlags = ['--catalog-url', uris.siglake, '--warehouse', warehouse];
  const acked = new Map<string, Acked[]>();
  const dirs = ['a', 'b'].map((r) => path.join(root, r));
  for (const [replica, dataDir] of dirs.entries()) {
    fs.mkdirSync(dataDir, { recursive: true });
    const ing = await startIngester({ dataDir, args: ['--trust-tenant-header', '--compactor=false', ...icebergFlags] });
    try {
      for (const tenant of TENANTS) {
        const headers: Record<string, string> = tenant === 'default' ? {} : { 'x-scope-orgid': tenant };
        for (const table of ['logs', 'traces'] as const) {
          // Three requests per table, each with both services and both days.
          for (let req = 0; req < 3; req++) {
            const markers: Acked[] = Array.from({ length: 8 }, (_, i) => ({
              marker: `${label}-${kind}-r${replica}-${tenant}-${table}-${req}-${i}`,
              service: `svc-${tenant}-${i % 2 === 0 ? 'web' : 'db'}`,
              k: i % 3 === 0 ? 'v' : 'w',
              day2: i >= 5,
            }));
            const body = table === 'logs' ? logsBody(markers) : tracesBody(markers);
            const status = await postJson(`${ing.url}/v1/${table}`, body, headers);
            if (status !== 200) throw new Error(`ingest of ${tenant}/${table} answered ${status}`);
            const key = `${NAMESPACE[tenant]}.${table}`;
            acked.set(key, [...(acked.get(key) ?? []), ...markers]);
          }
        }
      }
    } finally {
      const code = await ing.stop();
      if (code !== 0) throw new Error(`ingester exited ${code}: ${ing.stderr}`);
    }
  }
  const compact = (dataDir: string) => siglake(['compact', '--once', '--wal-dir', path.join(dataDir, 'wal'), ...icebergFlags]);
  const compactRuns = await Promise.all([compact(dirs[0]!), compact(dirs[0]!), compact(dirs[1]!)]);
  return {
    kind,
    uris,
    acked,
    compactRuns,
    async cleanup() {
      await pg?.stop();
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
}
