// `siglake loadgen` against targets that never answer: a port nothing listens
// on (ECONNREFUSED), a server that accepts and stays silent, and one that
// closes every connection it accepts. Whatever the target does, the run stops
// at its --duration (the process is killed past a bound well above the run, and
// a killed run has no exit code), counts what happened in its report and JSON,
// and exits 1 with a last line that names the target and the error. Before,
// a fixed-rate run against a refused port sent its backlog after the end, one
// request per connection per backoff second, and never ended; a silent server
// held any run for --timeout-ms (30 s).

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadReportJson } from '../../src/loadgen/load-report.js';
import { freePort } from '../helpers/free-port.js';
import { CLI, tempDir } from '../helpers/ingester.js';

interface Run {
  /** null: it did not end by itself and was killed. */
  code: number | null;
  stdout: string;
  stderr: string;
  json: LoadReportJson | undefined;
}

let dir: string;
let runs = 0;

/** Runs `siglake loadgen`, killed after `killAfterMs` (far past the run's own end: a bound, not a timing). */
function loadgen(args: string[], killAfterMs = 20_000): Promise<Run> {
  const out = path.join(dir, `run-${runs++}.json`);
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, 'loadgen', '--no-progress', '--quiet', '--out', out, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    child.on('exit', (code) => {
      clearTimeout(timer);
      const json = fs.existsSync(out) ? (JSON.parse(fs.readFileSync(out, 'utf8')) as LoadReportJson) : undefined;
      resolve({ code, stdout, stderr, json });
    });
  });
}

const lastLine = (text: string): string => text.trimEnd().split('\n').pop() ?? '';

/** A TCP server on 127.0.0.1 that accepts and then either stays silent or closes at once. */
async function tcpServer(mode: 'silent' | 'close'): Promise<{ port: number; accepted: () => number; close: () => Promise<void> }> {
  const sockets = new Set<net.Socket>();
  let accepted = 0;
  const server = net.createServer((s) => {
    accepted++;
    s.on('error', () => {});
    if (mode === 'close') {
      s.destroy();
      return;
    }
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.resume(); // read and drop what the loadgen sends; answer nothing
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    accepted: () => accepted,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

beforeAll(() => {
  dir = tempDir('siglake-loadgen-dead-');
});
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('loadgen against a port nothing listens on', () => {
  let target: string;
  beforeAll(async () => {
    target = `http://127.0.0.1:${await freePort()}`;
  });

  it('fixed rate with a backlog: stops at the duration, counts ECONNREFUSED and the requests never sent, exits 1 naming the target', async () => {
    // The run of the report: 16,000/s over 64 connections, with a warm-up, one thread.
    const r = await loadgen(['--target', target, '--rate', '16000', '--connections', '64', '--duration', '2', '--warmup', '1', '--threads', '1']);
    expect(r.code).toBe(1);
    const j = r.json!;
    expect(Object.keys(j.statusCounts)).toEqual(['error:ECONNREFUSED']);
    expect(j.statusCounts['error:ECONNREFUSED']).toBe(j.totals.requests);
    expect(j.totals.ok).toBe(0);
    // Each connection backs off to a probe a second: most of the 48,000 due were never sent.
    expect(j.fixedRate!.unsent).toBeGreaterThan(40_000);
    expect(j.totals.issued + j.fixedRate!.unsent).toBe(48_000);
    expect(j.verdict.failed).toBe(true);
    expect(lastLine(r.stderr)).toMatch(new RegExp(`^siglake loadgen: no request was answered by ${target}: error:ECONNREFUSED x \\d+ \\(connect ECONNREFUSED 127\\.0\\.0\\.1:\\d+\\)$`));
  });

  it('closed loop over two threads, and --requests: the same', async () => {
    const r = await loadgen(['--target', target, '--connections', '16', '--duration', '2', '--threads', '2']);
    expect(r.code).toBe(1);
    expect(r.json!.config.threads).toBe(2);
    expect(Object.keys(r.json!.statusCounts)).toEqual(['error:ECONNREFUSED']);
    expect(lastLine(r.stderr)).toMatch(/^siglake loadgen: no request was answered by .*: error:ECONNREFUSED x \d+/);

    const n = await loadgen(['--target', target, '--rate', '1000', '--requests', '40', '--duration', '0', '--connections', '4', '--threads', '2']);
    expect(n.code).toBe(1);
    expect(n.json!.statusCounts).toEqual({ 'error:ECONNREFUSED': 40 });
    expect(n.json!.fixedRate!.unsent).toBe(0);
  });

  it('gRPC: UNAVAILABLE without a connection is no answer either', async () => {
    const r = await loadgen(['--protocol', 'grpc', '--target', target.slice('http://'.length), '--connections', '2', '--duration', '1', '--threads', '1']);
    expect(r.code).toBe(1);
    expect(Object.keys(r.json!.statusCounts)).toEqual(['UNAVAILABLE']);
    expect(lastLine(r.stderr)).toMatch(/^siglake loadgen: no request was answered by 127\.0\.0\.1:\d+: UNAVAILABLE x \d+ \(No connection established/);
  });
});

describe('loadgen against a server that accepts and never answers', () => {
  let srv: Awaited<ReturnType<typeof tcpServer>>;
  beforeAll(async () => {
    srv = await tcpServer('silent');
  });
  afterAll(async () => {
    await srv.close();
  });

  // --timeout-ms stays at its 30 s default: the run must not wait for it.
  it.each([
    ['closed loop', ['--connections', '8']],
    ['fixed rate', ['--rate', '500', '--connections', '8']],
    ['closed loop, two threads', ['--connections', '8', '--threads', '2']],
  ])('%s: stops at the duration, the requests in flight counted as timeouts', async (_name, extra) => {
    const r = await loadgen(['--target', `http://127.0.0.1:${srv.port}`, '--duration', '1', '--threads', '1', ...extra]);
    expect(r.code).toBe(1);
    const j = r.json!;
    // One request per connection went out and none came back.
    expect(j.totals.issued).toBe(8);
    expect(j.statusCounts).toEqual({ timeout: 8 });
    expect(j.errorSamples['timeout']).toBe('no answer by the end of the run (3000 ms after sending stopped)');
    expect(lastLine(r.stderr)).toMatch(new RegExp(`^siglake loadgen: no request was answered by http://127\\.0\\.0\\.1:${srv.port}: timeout x 8 \\(no answer by the end of the run`));
  });

  it('gRPC: the calls in flight are cancelled at the end and counted as timeouts', async () => {
    const r = await loadgen(['--protocol', 'grpc', '--target', `127.0.0.1:${srv.port}`, '--connections', '2', '--streams', '2', '--duration', '1', '--threads', '1']);
    expect(r.code).toBe(1);
    expect(r.json!.statusCounts).toEqual({ timeout: 4 });
    expect(lastLine(r.stderr)).toMatch(/no request was answered by 127\.0\.0\.1:\d+: timeout x 4/);
  });
});

describe('loadgen against a server that closes every connection it accepts', () => {
  let srv: Awaited<ReturnType<typeof tcpServer>>;
  beforeAll(async () => {
    srv = await tcpServer('close');
  });
  afterAll(async () => {
    await srv.close();
  });

  it('fixed rate and closed loop: ECONNRESET counted, backed off, exit 1', async () => {
    for (const extra of [['--rate', '2000'], []]) {
      const r = await loadgen(['--target', `http://127.0.0.1:${srv.port}`, '--connections', '8', '--duration', '1', '--threads', '1', ...extra]);
      expect(r.code).toBe(1);
      const j = r.json!;
      // Reset under the request (a write into the closed socket may meet EPIPE first).
      expect(Object.keys(j.statusCounts).every((k) => /^error:(ECONNRESET|EPIPE)$/.test(k)), JSON.stringify(j.statusCounts)).toBe(true);
      // Backing off from 10 ms: a handful of attempts per connection in a second, not thousands.
      expect(j.totals.issued).toBeLessThan(8 * 12);
      expect(lastLine(r.stderr)).toMatch(/^siglake loadgen: no request was answered by http:\/\/127\.0\.0\.1:\d+: error:(ECONNRESET|EPIPE) x \d+/);
    }
    expect(srv.accepted()).toBeGreaterThan(0);
  });
});
