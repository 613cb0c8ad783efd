// The second-acceptor experiment of native-bench (docs/performance.md, issue 18
// part 3): the uWS discard server in two threads listens on one port and
// answers every connection, whichever thread the kernel hands it to; and the
// report shows each row's CPU per request when the run measured it.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO } from '../helpers/ingester.js';

const SERVER = path.join(REPO, 'native-bench', 'servers', 'uws-discard.mjs');
const started: ChildProcess[] = [];
afterAll(() => {
  for (const c of started) c.kill('SIGKILL');
});

function startDiscard(threads: number): Promise<{ child: ChildProcess; port: number; threads: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SERVER, '0', String(threads)], { stdio: ['ignore', 'pipe', 'pipe'] });
    started.push(child);
    let out = '';
    let err = '';
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const line = out.split('\n')[0];
      if (out.includes('\n')) resolve({ child, ...(JSON.parse(line!) as { port: number; threads: number }) });
    });
    child.once('exit', (code) => reject(new Error(`discard server exited ${code}: ${err}`)));
  });
}

/** One POST on a fresh connection (no keep-alive), so the kernel picks a listener for each. */
function post(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/v1/logs', method: 'POST', agent: false, headers: { 'content-type': 'application/x-protobuf' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(Buffer.alloc(1024, 1));
  });
}

describe('native-bench: the uWS discard ceiling in two threads', () => {
  it('listens on one port from two threads and answers 200 on every connection', async () => {
    // The server prints its port only once the second thread's app has
    // listened on it too (it exits with 'cannot listen' otherwise).
    const srv = await startDiscard(2);
    expect(srv.threads).toBe(2);
    const statuses: number[] = [];
    // Enough fresh connections that SO_REUSEPORT's hash gives both listeners some.
    for (let i = 0; i < 200; i += 20) statuses.push(...(await Promise.all(Array.from({ length: 20 }, () => post(srv.port)))));
    expect(statuses).toHaveLength(200);
    expect(new Set(statuses)).toEqual(new Set([200]));
    srv.child.kill('SIGTERM');
  });

  it('the report shows CPU µs per request, main thread / process, for rows that measured it', () => {
    const entries = [
      { id: 'ceiling-1k', kind: 'ceiling', proto: 'http', size: '1k', label: 'uWS discard (ceiling)', rps: 31111, mbps: 35.8, recordsPerSec: 62223, p50: 1.23, p99: 30.47, rssMiB: 52, errors: 0, cpuMainUs: 11.5, cpuAllUs: 11.5 },
      { id: 'ceiling-1k-2t', kind: 'ceiling-threads', proto: 'http', size: '1k', threads: 2, label: 'uWS discard, 2 threads', rps: 45118, mbps: 51.9, recordsPerSec: 90236, p50: 0.86, p99: 11.04, rssMiB: 64, errors: 0, cpuMainUs: 6.3, cpuAllUs: 11.9 },
      { id: 'disk-1k', kind: 'disk', proto: 'disk', size: '1k', label: 'disk', rps: 6992, mbps: 7.2, recordsPerSec: NaN, p50: 0.14, p99: 0.21, rssMiB: NaN, errors: 0 },
    ];
    const r = spawnSync(
      process.execPath,
      ['--input-type=module', '-e', `import { table } from ${JSON.stringify(path.join(REPO, 'native-bench', 'report.mjs'))}; process.stdout.write(table(${JSON.stringify(entries)}));`],
      { encoding: 'utf8' },
    );
    expect(r.status).toBe(0);
    const lines = r.stdout.split('\n');
    expect(lines[0]).toMatch(/CPU µs\/req main\/all$/);
    expect(lines.find((l) => l.startsWith('ceiling-1k ')) ?? '').toMatch(/ 11\.5 \/ 11\.5$/);
    expect(lines.find((l) => l.startsWith('ceiling-1k-2t ')) ?? '').toMatch(/ 6\.3 \/ 11\.9$/);
    // A row that measured no CPU (the disk ceiling) leaves the column empty.
    expect(lines.find((l) => l.startsWith('disk-1k ')) ?? '').not.toMatch(/\//);
  });
});
