// Starts the real `siglake query` process (the built dist/cli.js) on a free
// port, lands tenants' logs through the real ingester and compactor, and asks
// the query API.

import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import { CLI, parseMetrics, runCli, startIngester } from './ingester.js';
import { followLogLines, type LogLine } from './log-lines.js';
import { jsonBytes, logsJson, tracesJson } from './otlp-bodies.js';

export class RunningQuery {
  readonly logs: LogLine[] = [];
  stderr = '';
  port = 0;
  exitCode: number | null = null;
  readonly exited: Promise<number | null>;

  constructor(readonly child: ChildProcess) {
    this.exited = new Promise((resolve) => child.on('exit', (code) => resolve((this.exitCode = code))));
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async stop(timeoutMs = 30_000): Promise<number | null> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return this.child.exitCode;
    this.child.kill('SIGTERM');
    const t = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
    const code = await this.exited;
    clearTimeout(t);
    return code;
  }

  async metrics(): Promise<Map<string, number>> {
    return parseMetrics(await (await fetch(`${this.url}/metrics`)).text());
  }
}

/** `siglake query` on 127.0.0.1:0 in `dataDir` (relative catalog and warehouse paths resolve there). */
export async function startQuery(dataDir: string, args: string[], env: Record<string, string> = {}): Promise<RunningQuery> {
  const child = spawn(process.execPath, [CLI, 'query', '--query-listen', '127.0.0.1:0', ...args], {
    cwd: dataDir,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return followQuery(child, 20_000);
}

/** A spawned `siglake query`, followed until it logs `ready`; its port comes from its `listening` line. */
export async function followQuery(child: ChildProcess, timeoutMs: number): Promise<RunningQuery> {
  const q = new RunningQuery(child);
  await followLogLines(child, q, {
    what: 'query server',
    waitFor: 'ready',
    timeoutMs,
    onLine: (parsed) => {
      if (parsed.msg === 'listening') q.port = parsed['port'] as number;
    },
  });
  return q;
}

export interface SqlAnswer {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
  text: string;
}

/** POST /api/v1/sql (or another path) with `{"sql": …}`. */
export async function postSql(
  url: string,
  sql: string,
  o: { token?: string; path?: string; accept?: string; headers?: Record<string, string> } = {},
): Promise<SqlAnswer> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...o.headers };
  if (o.token !== undefined) headers['authorization'] = `Bearer ${o.token}`;
  if (o.accept !== undefined) headers['accept'] = o.accept;
  const res = await fetch(`${url}${o.path ?? '/api/v1/sql'}`, { method: 'POST', headers, body: JSON.stringify({ sql }) });
  const text = await res.text();
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // NDJSON or plain text: the caller reads `text`.
  }
  return { status: res.status, headers: res.headers, body, text };
}

export const TENANT_NAMESPACE = (tenant: string): string => (tenant === 'default' ? 'main' : `tenant_${tenant}`);

/** The log bodies each tenant is sent by landTenants. */
export function bodiesOf(tenant: string, round: string, n: number): string[] {
  return Array.from({ length: n }, (_, i) => `${round}-${tenant}-log-${i}`);
}

/** Sends `n` logs (service `svc-<tenant>`) and 2 spans per tenant to a running ingester routing by X-Scope-OrgID. */
export async function sendTenants(ingestUrl: string, tenants: readonly string[], round: string, n: number): Promise<void> {
  for (const tenant of tenants) {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (tenant !== 'default') headers['x-scope-orgid'] = tenant;
    const logs = await fetch(`${ingestUrl}/v1/logs`, { method: 'POST', headers, body: jsonBytes(logsJson(bodiesOf(tenant, round, n), `svc-${tenant}`)) });
    expect(logs.status, await logs.text()).toBe(200);
    const spans = await fetch(`${ingestUrl}/v1/traces`, { method: 'POST', headers, body: jsonBytes(tracesJson([`${round}-${tenant}-span-0`, `${round}-${tenant}-span-1`], `svc-${tenant}`)) });
    expect(spans.status, await spans.text()).toBe(200);
  }
}

/**
 * Lands `n` logs per tenant in `dataDir`'s catalog and warehouse through the
 * real ingester (stopped afterwards) and `siglake compact --once --ingester-stopped`.
 */
export async function landTenants(dataDir: string, tenants: readonly string[], round: string, n: number): Promise<void> {
  const ing = await startIngester({ dataDir, args: ['--trust-tenant-header', '--compactor=false', ...icebergFlags(dataDir)] });
  try {
    await sendTenants(ing.url, tenants, round, n);
  } finally {
    expect(await ing.stop()).toBe(0);
  }
  const r = runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', path.join(dataDir, 'wal'), ...icebergFlags(dataDir)]);
  expect(r.status, r.stderr).toBe(0);
}

export function icebergFlags(dataDir: string): string[] {
  return ['--catalog-url', `sqlite:${path.join(dataDir, 'catalog.db')}`, '--warehouse', path.join(dataDir, 'warehouse')];
}

/** The live data files (absolute paths) of a tenant's table, read by the test's own reader (icebird). */
export async function tableFiles(dataDir: string, tenant: string, table: string): Promise<string[]> {
  const { icebirdDataFiles, installFileFetch } = await import('./iceberg.js');
  const catalog = SqlCatalog.open(`sqlite:${path.join(dataDir, 'catalog.db')}`, 'siglake');
  const restore = installFileFetch();
  try {
    const loc = await catalog.metadataLocation(TENANT_NAMESPACE(tenant), table);
    if (loc === null) return [];
    return (await icebirdDataFiles(loc)).map((f) => new URL(f.path).pathname);
  } finally {
    restore();
    await catalog.close();
  }
}

/** Every file under a directory, relative to it. */
export function listFiles(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return (fs.readdirSync(dir, { recursive: true }) as string[]).filter((f) => fs.statSync(path.join(dir, f)).isFile()).sort();
}
