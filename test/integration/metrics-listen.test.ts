// server.metricsListen (--metrics-listen): /metrics on an address of its own.
// The series name tenants (here a declared tenant's siglake_tenant_*), so on
// the OTLP/HTTP port any caller, without credentials, read which other
// tenants write and how much. With the setting, that port answers /metrics
// 404 and the metrics port serves them; the probes stay where they were.

import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startIngester, tempDir, type RunningIngester } from '../helpers/ingester.js';
import { AUDIENCE, ISSUER, makeKeyPair, mint, writeJwksFile } from '../helpers/jwt.js';
import { Client } from '../helpers/tenancy-client.js';

describe('server.metricsListen: /metrics apart from the OTLP ports', () => {
  let ing: RunningIngester;
  let client: Client;
  let token: string;
  beforeAll(async () => {
    const key = await makeKeyPair('ES256', 'k-metrics');
    const dir = tempDir('siglake-metrics-listen-');
    const jwks = writeJwksFile(dir, [key.jwk]);
    const file = path.join(dir, 'tenants.yaml');
    fs.writeFileSync(file, 'tenants:\n  - id: acme-secret\n    subjects: { claims: { org_id: acme } }\n');
    ing = await startIngester({
      args: ['--oidc-issuer', ISSUER, '--oidc-audience', AUDIENCE, '--oidc-jwks-file', jwks, '--tenants-file', file, '--metrics-listen', '127.0.0.1:0'],
    });
    client = new Client(ing);
    token = await mint(key, { org_id: 'acme' }, { sub: 'writer' });
  });
  afterAll(async () => {
    client?.close();
    if (ing) expect(await ing.stop()).toBe(0);
  });

  it('the OTLP/HTTP port answers /metrics 404, naming no tenant; the metrics port serves the series', async () => {
    expect(ing.metricsPort).toBeGreaterThan(0);
    expect(ing.metricsPort).not.toBe(ing.httpPort);
    expect((await client.send('http', 'logs', 'm0', { authorization: `Bearer ${token}` })).status).toBe(200);
    const onOtlp = await fetch(`${ing.url}/metrics`);
    expect(onOtlp.status).toBe(404);
    expect(await onOtlp.text()).not.toContain('acme-secret');
    const scraped = await fetch(`http://127.0.0.1:${ing.metricsPort}/metrics`);
    expect(scraped.status).toBe(200);
    expect(scraped.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const m = await ing.metrics();
    expect(m.get('siglake_tenant_requests_total{tenant="acme-secret",outcome="accepted"}')).toBe(1);
    expect(m.get('siglake_ingest_requests_total{endpoint="otlp",status="200"}')).toBe(1);
  });

  it('the probes stay on the OTLP/HTTP port; the metrics port serves /metrics alone', async () => {
    expect((await fetch(`${ing.url}/healthz`)).status).toBe(200);
    const ready = await fetch(`${ing.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.text()).toBe('ready\n');
    const base = `http://127.0.0.1:${ing.metricsPort}`;
    expect((await fetch(`${base}/readyz`)).status).toBe(404);
    expect((await fetch(`${base}/v1/logs`, { method: 'POST', body: 'x' })).status).toBe(404);
    const post = await fetch(`${base}/metrics`, { method: 'POST', body: 'x' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    const head = await fetch(`${base}/metrics?x=1`, { method: 'HEAD' });
    expect(head.status).toBe(200);
  });
});

describe('server.metricsListen refused at start', () => {
  it('the address of the OTLP/HTTP port: exit 2, naming both settings', async () => {
    const port = await freePort();
    const dir = tempDir('siglake-metrics-listen-bad-');
    const r = runCli(['ingest', '--http-listen', `127.0.0.1:${port}`, '--grpc-listen', '127.0.0.1:0', '--metrics-listen', `127.0.0.1:${port}`, '--wal-dir', path.join(dir, 'wal')]);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('invalid server.metricsListen (flag --metrics-listen): the same address as server.httpListen (flag --http-listen)');
    // Refused before anything was made.
    expect(fs.existsSync(path.join(dir, 'wal'))).toBe(false);
  });

  it('an address that cannot be bound: the start fails, naming the setting', async () => {
    const blocker = net.createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      const dir = tempDir('siglake-metrics-listen-busy-');
      const r = runCli(['ingest', '--http-listen', '127.0.0.1:0', '--grpc-listen', '127.0.0.1:0', '--metrics-listen', `127.0.0.1:${port}`, '--wal-dir', path.join(dir, 'wal')]);
      expect(r.status).not.toBe(0);
      expect(r.signal).toBeNull();
      expect(r.stderr).toContain(`cannot listen on 127.0.0.1:${port} for /metrics (server.metricsListen)`);
    } finally {
      blocker.close();
    }
  });
});

function freePort(): Promise<number> {
  const s = net.createServer();
  return new Promise((resolve) =>
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    }),
  );
}
