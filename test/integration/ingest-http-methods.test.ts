// Methods other than POST on the OTLP/HTTP port, against a real ingester,
// through Node's own HTTP client on one kept-alive connection: HEAD answers
// carry no body (RFC 9110 §9.3.2: a body after a HEAD answer is read as the
// start of the next response, and the client fails with a parse error), HEAD
// is answered wherever GET is, and a 405 says which method is allowed
// (RFC 9110 §15.5.6: `Allow` is required in a 405).

import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIngester, type RunningIngester } from '../helpers/ingester.js';

describe('OTLP/HTTP port: HEAD, GET and other methods', () => {
  let ing: RunningIngester;
  let agent: http.Agent;
  beforeAll(async () => {
    ing = await startIngester();
  });
  afterAll(async () => {
    agent?.destroy();
    if (ing) expect(await ing.stop()).toBe(0);
  });

  const call = (method: string, path: string) =>
    new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: ing.httpPort, method, path, agent }, (res) => {
        let body = '';
        res.setEncoding('latin1');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      });
      req.on('error', reject);
      req.end();
    });

  it('regression (head-answered-with-a-body): HEAD gets the status GET would, no body, and the connection stays in step', async () => {
    agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const sockets = new Set<unknown>();
    agent.on('free', (s) => sockets.add(s));
    for (const [path, status] of [
      ['/healthz', 200],
      ['/readyz', 200],
      ['/metrics', 200],
      ['/v1/logs', 405],
      ['/v1/traces', 405],
      ['/v1/metrics', 404],
      ['/nope', 404],
    ] as const) {
      const head = await call('HEAD', path);
      expect([path, head.status, head.body]).toEqual([path, status, '']);
    }
    // One connection served every HEAD, and the next GET on it reads its own answer.
    const after = await call('GET', '/healthz');
    expect([after.status, after.body]).toEqual([200, 'ok\n']);
    expect(sockets.size).toBe(1);
  });

  it('regression (405-without-allow): a 405 on an OTLP path names POST in Allow', async () => {
    for (const method of ['GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS']) {
      for (const path of ['/v1/logs', '/v1/traces']) {
        const r = await call(method, path);
        expect([method, path, r.status, r.headers['allow']]).toEqual([method, path, 405, 'POST']);
      }
    }
  });
});
