// A metrics or profiles request is answered 404 after its body is read and
// dropped, within the bounds of a lingering refusal (2 s, 16 MiB; contract
// §6): a body that arrives a byte at a time, or never ends, gets the 404 with
// a close (Content-Length: 100 MB here: uWS itself closes at once a
// request declaring 1 GB), so it holds its socket no longer than those bounds, however many
// such requests come at once, and the port goes on serving logs.

import type net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, rawRequest } from '../helpers/http.js';
import { startIngester, type RunningIngester } from '../helpers/ingester.js';
import { logsProto } from '../helpers/otlp-bodies.js';

describe('a metrics body that is slow or never ends', () => {
  let ing: RunningIngester;
  const sockets: net.Socket[] = [];
  beforeAll(async () => {
    ing = await startIngester({});
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    if (ing) expect(await ing.stop()).toBe(0);
  });

  it('a body trickled a byte at a time, 100 at once: each is answered 404 SIGLAKE_SIGNAL_UNSUPPORTED and closed', async () => {
    const head = `POST /v1/metrics HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n`;
    const reqs = Array.from({ length: 100 }, () => rawRequest(ing.httpPort, head, sockets));
    const drip = setInterval(() => {
      for (const r of reqs) if (!r.socket.destroyed) r.socket.write('a');
    }, 50);
    try {
      await Promise.all(reqs.map((r) => r.closed));
    } finally {
      clearInterval(drip);
    }
    for (const r of reqs) {
      expect(r.got()).toMatch(/^HTTP\/1\.1 404 /);
      expect(r.got()).toContain('SIGLAKE_SIGNAL_UNSUPPORTED');
    }
    const ok = await post(ing.url, '/v1/logs', logsProto(['after-trickle']), { contentType: 'application/x-protobuf' });
    expect(ok.status).toBe(200);
  }, 60_000);

  it('a chunked body that never ends: answered 404 and closed once past 16 MiB or 2 s', async () => {
    const head = 'POST /v1development/profiles HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nTransfer-Encoding: chunked\r\n\r\n';
    const r = rawRequest(ing.httpPort, head, sockets);
    const chunk = Buffer.concat([Buffer.from('100000\r\n'), Buffer.alloc(0x100000, 0x61), Buffer.from('\r\n')]);
    let closed = false;
    void r.closed.then(() => (closed = true));
    let sent = 0;
    while (!closed && sent < 200) {
      if (!r.socket.write(chunk)) await new Promise<void>((res) => r.socket.once('drain', res).once('close', res));
      sent++;
    }
    await r.closed;
    expect(sent).toBeLessThan(200);
    // A client still writing when the answer and its close go out may read a reset instead (as for
    // any lingering refusal past its bounds): what it reads, if anything, is the 404.
    if (r.got() !== '') expect(r.got()).toMatch(/^HTTP\/1\.1 404 /);
  }, 60_000);
});
