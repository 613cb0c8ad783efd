// Shutdown and restart of the real process: SIGTERM under load (every 200 is in
// the WAL, exit 0 within the bound, /readyz 503 while draining, the WAL
// verifies clean with no torn tail), and a restart on the same data directory
// (segment numbers continue, old records kept, nothing duplicated).

import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LOGS_EXPORT, RawGrpcClient, grpc, openStalledGrpcCall } from '../helpers/grpc-client.js';
import { KeepAliveSocket, post } from '../helpers/http.js';
import { sleep } from '../helpers/wait.js';
import { listFiles, runCli, startIngester, walDump, type RunningIngester } from '../helpers/ingester.js';
import { logsProto, tracesProto } from '../helpers/otlp-bodies.js';
import { httpCode } from '../helpers/rpc-status.js';

function segmentsOf(walDir: string): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const f of listFiles(walDir)) {
    const m = /^(.*)\/(\d+)\.seg$/.exec(f);
    if (!m) continue;
    const list = out.get(m[1]!) ?? [];
    list.push(Number(m[2]));
    out.set(m[1]!, list);
  }
  for (const l of out.values()) l.sort((a, b) => a - b);
  return out;
}

function verifyClean(walDir: string): string {
  const v = runCli(['wal', 'verify', walDir]);
  expect(v.status, v.stdout + v.stderr).toBe(0);
  expect(v.stdout).toMatch(/0 torn tails, 0 problems: OK/);
  return v.stdout;
}

async function waitForLog(ing: RunningIngester, msg: string, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!ing.logs.some((l) => l.msg === msg)) {
    if (Date.now() > end) throw new Error(`no '${msg}' log line`);
    await sleep(2);
  }
}

describe('shutdown', () => {
  const started: RunningIngester[] = [];
  afterAll(async () => {
    for (const i of started) await i.kill9();
  });

  it('SIGTERM under load: exit 0 within the bound, every 200 is in the WAL, the WAL verifies clean', async () => {
    const ing = await startIngester({ args: ['--shutdown-timeout-secs', '5'], indexes: { default: ['audit'] } });
    started.push(ing);
    const rpc = new RawGrpcClient(ing.grpcAddress);
    const acked = new Set<string>();
    const afterTerm: string[] = [];
    const beforeTerm: string[] = [];
    let sigtermAt = 0;
    let exited = false;
    void ing.exited.then(() => {
      exited = true;
    });

    const httpLoop = async (name: string, p: '/v1/logs' | '/v1/traces', headers: Record<string, string> = {}) => {
      for (let i = 0; !exited; i++) {
        const text = `${name}-${i}`;
        const body = p === '/v1/logs' ? logsProto([text]) : tracesProto([text]);
        const sentBeforeTerm = sigtermAt === 0;
        let status = -1;
        try {
          status = (await post(ing.url, p, body, { headers })).status;
        } catch {
          // Refused or reset once the listener is gone.
          await sleep(5);
        }
        if (status === 200) acked.add(text);
        else if (sentBeforeTerm && sigtermAt === 0) beforeTerm.push(`${text}:${status}`);
        else if (status !== -1) afterTerm.push(`${status}`);
      }
    };
    const grpcLoop = async () => {
      for (let i = 0; !exited; i++) {
        const text = `grpc-${i}`;
        const r = await rpc.export('logs', logsProto([text]), {}, 2000);
        if (r.code === grpc.status.OK) acked.add(text);
        else if (sigtermAt === 0) beforeTerm.push(`${text}:${r.code}`);
        else await sleep(5);
      }
    };
    const loops = [
      httpLoop('http-logs-a', '/v1/logs'),
      httpLoop('http-logs-b', '/v1/logs'),
      httpLoop('http-traces', '/v1/traces'),
      httpLoop('http-index', '/v1/logs', { 'x-siglake-index': 'audit' }),
      grpcLoop(),
    ];
    while (acked.size < 60) await sleep(10);
    sigtermAt = Date.now();
    ing.child.kill('SIGTERM');
    const code = await ing.exited;
    const took = Date.now() - sigtermAt;
    await Promise.all(loops);
    rpc.close();

    expect(code).toBe(0);
    expect(took).toBeLessThan(5000 + 2000);
    expect(beforeTerm).toEqual([]);
    // Only 503 (draining) or transport errors after SIGTERM, never another status.
    expect(afterTerm.filter((s) => s !== '503')).toEqual([]);
    expect(ing.logs.find((l) => l.msg === 'stopped')?.['unanswered']).toBe(0);

    const dumped = walDump(ing.walDir).flatMap((l) => l.texts);
    const missing = [...acked].filter((t) => !dumped.includes(t));
    expect(missing).toEqual([]);
    // Nothing written twice.
    expect(new Set(dumped).size).toBe(dumped.length);
    // Sealed: no half-made segment, no torn tail anywhere.
    expect(listFiles(ing.walDir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
    verifyClean(ing.walDir);
  });

  it('/readyz turns 503 while draining; new connections are refused; exit 0 within --shutdown-timeout-secs', async () => {
    // The drain lasts the whole bound (the stalled call below): long enough for every check made
    // during it on a loaded machine.
    const SHUTDOWN_SECS = 10;
    const ing = await startIngester({ args: ['--shutdown-timeout-secs', String(SHUTDOWN_SECS)] });
    started.push(ing);
    expect((await post(ing.url, '/v1/logs', logsProto(['before-drain']))).status).toBe(200);
    const ka = new KeepAliveSocket(ing.httpPort);
    await ka.ready;
    expect((await ka.get('/readyz'))?.status).toBe(200);
    // A gRPC call whose message never arrives keeps the drain going until the bound.
    const stalled = await openStalledGrpcCall(ing.grpcAddress, LOGS_EXPORT);
    try {
      const t0 = Date.now();
      ing.child.kill('SIGTERM');
      await waitForLog(ing, 'stopping: draining queues');
      const r = await ka.get('/readyz');
      expect(r).not.toBeNull();
      expect(r!.status).toBe(503);
      expect(r!.body).toBe('draining\n');
      // /healthz still answers while the process lives.
      expect((await ka.get('/healthz'))?.status).toBe(200);
      // An export on a connection still open is refused, retryably, with the draining code (and the
      // connection is closed after it).
      const refusal = await ka.post('/v1/logs', logsProto(['during-drain']), 'application/x-protobuf');
      expect(refusal?.status).toBe(503);
      expect(httpCode({ contentType: refusal!.contentType, body: refusal!.raw })).toBe('SIGLAKE_DRAINING');
      // The listener is closed: a new connection is refused.
      const refused = await new Promise<string>((resolve) => {
        const s = net.connect(ing.httpPort, '127.0.0.1', () => {
          s.destroy();
          resolve('connected');
        });
        s.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
      });
      expect(refused).toBe('ECONNREFUSED');
      const code = await ing.exited;
      expect(code).toBe(0);
      // It ends at the bound, not later (a process that ignored it would wait on the stalled call).
      expect(Date.now() - t0).toBeLessThan(SHUTDOWN_SECS * 1000 * 1.5);
    } finally {
      stalled.close();
      ka.destroy();
    }
    expect(walDump(ing.walDir).flatMap((l) => l.texts)).toEqual(['before-drain']);
    verifyClean(ing.walDir);
  });
});

describe('signals', () => {
  it('SIGINT drains like SIGTERM; a second signal while draining exits at once with 1', async () => {
    const ing = await startIngester({ args: ['--shutdown-timeout-secs', '20'] });
    expect((await post(ing.url, '/v1/logs', logsProto(['before-sigint']))).status).toBe(200);
    // A gRPC call whose message never arrives keeps the drain going until the bound.
    const stalled = await openStalledGrpcCall(ing.grpcAddress, LOGS_EXPORT);
    try {
      ing.child.kill('SIGINT');
      await waitForLog(ing, 'stopping: draining queues');
      expect(ing.logs.find((l) => l.msg === 'stopping: draining queues')?.['signal']).toBe('SIGINT');
      await sleep(200);
      expect(ing.exitCode).toBeNull();
      const t0 = Date.now();
      ing.child.kill('SIGTERM');
      expect(await ing.exited).toBe(1);
      // At once: well inside the 20 s drain the stalled call would otherwise hold it for.
      expect(Date.now() - t0).toBeLessThan(10_000);
      expect(ing.logs.some((l) => l.msg === 'second signal: exiting at once')).toBe(true);
    } finally {
      stalled.close();
    }
    // What was acknowledged before the signals is on disk, and the WAL needs no repair.
    expect(walDump(ing.walDir).flatMap((l) => l.texts)).toEqual(['before-sigint']);
    verifyClean(ing.walDir);
  });
});

describe('restart on the same data directory', () => {
  it('segment numbering continues, old records stay, nothing is duplicated', async () => {
    const first = await startIngester({ indexes: { default: ['audit'] } });
    const rpc1 = new RawGrpcClient(first.grpcAddress);
    const round1 = { logs: ['r1-log-a', 'r1-log-b'], spans: ['r1-span-a'], index: ['r1-idx-a'] };
    try {
      expect((await post(first.url, '/v1/logs', logsProto(round1.logs))).status).toBe(200);
      expect((await rpc1.export('traces', tracesProto(round1.spans))).code).toBe(grpc.status.OK);
      expect((await post(first.url, '/v1/logs', logsProto(round1.index), { headers: { 'x-siglake-index': 'audit' } })).status).toBe(200);
    } finally {
      rpc1.close();
    }
    expect(await first.stop()).toBe(0);
    const before = segmentsOf(first.walDir);
    expect([...before.keys()].sort()).toEqual(['indexes/audit', 'logs', 'traces']);
    const dump1 = walDump(first.walDir);

    const second = await startIngester({ dataDir: first.dataDir });
    const rpc2 = new RawGrpcClient(second.grpcAddress);
    const round2 = { logs: ['r2-log-a'], spans: ['r2-span-a', 'r2-span-b'], index: ['r2-idx-a'] };
    try {
      // A clean shutdown left nothing to repair.
      expect(await second.metric('siglake_wal_truncated_bytes_total')).toBe(0);
      expect((await rpc2.export('logs', logsProto(round2.logs))).code).toBe(grpc.status.OK);
      expect((await post(second.url, '/v1/traces', tracesProto(round2.spans))).status).toBe(200);
      expect((await rpc2.export('logs', logsProto(round2.index), { 'x-siglake-index': 'audit' })).code).toBe(grpc.status.OK);
    } finally {
      rpc2.close();
    }
    expect(await second.stop()).toBe(0);

    const after = segmentsOf(second.walDir);
    for (const [lane, old] of before) {
      const now = after.get(lane)!;
      // The old segments are still there, and the new one has a higher number.
      expect(now.slice(0, old.length)).toEqual(old);
      const added = now.slice(old.length);
      expect(added.length, lane).toBeGreaterThan(0);
      expect(Math.min(...added)).toBeGreaterThan(Math.max(...old));
    }
    const dump2 = walDump(second.walDir);
    // Every old record is still dumped, unchanged, ahead of the new ones of its lane.
    for (const old of dump1) {
      expect(dump2).toContainEqual(old);
    }
    const texts = (table: string, index?: string) =>
      dump2.filter((l) => l.table === table && l.index === index).flatMap((l) => l.texts);
    expect(texts('logs')).toEqual([...round1.logs, ...round2.logs]);
    expect(texts('traces')).toEqual([...round1.spans, ...round2.spans]);
    expect(texts('index', 'audit')).toEqual([...round1.index, ...round2.index]);
    expect(fs.existsSync(path.join(second.walDir, 'indexes', 'audit'))).toBe(true);
    verifyClean(second.walDir);
  });
});
