// The "slow clients" row of the reliability table, against the real process
// with --request-timeout-secs 1: a body that stops, and one sent byte by byte
// slower than the deadline, are answered 408 and their connections closed;
// other clients are unaffected, including with hundreds of idle connections
// (there with --request-timeout-secs 5: see that describe).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOGS_EXPORT, RawGrpcClient, grpc, openStalledGrpcCall } from '../helpers/grpc-client.js';
import { ManualUpload, idleConnections, post } from '../helpers/http.js';
import { sleep } from '../helpers/wait.js';
import { startIngester, walDump, type RunningIngester } from '../helpers/ingester.js';
import { decodeStatus, logsProto, tracesProto } from '../helpers/otlp-bodies.js';
import { httpCode } from '../helpers/rpc-status.js';

const PB = 'application/x-protobuf';

describe('slow and stalled clients (--request-timeout-secs 1)', () => {
  let ing: RunningIngester;
  beforeAll(async () => {
    ing = await startIngester({ args: ['--request-timeout-secs', '1'] });
  });
  afterAll(async () => {
    expect(await ing.stop()).toBe(0);
  });

  it('a stalled body and a byte-by-byte body get 408 and a closed connection within ~2 s; a normal client is unaffected', async () => {
    const stalledBody = logsProto(['never-finished-1']);
    const stalled = new ManualUpload(ing.httpPort, '/v1/logs', stalledBody.length);
    await stalled.connected;
    const t0 = Date.now();
    stalled.write(stalledBody.subarray(0, Math.floor(stalledBody.length / 2)));

    const dripBody = logsProto(['never-finished-2']);
    const drip = new ManualUpload(ing.httpPort, '/v1/traces', dripBody.length);
    await drip.connected;
    const t1 = Date.now();
    let dripped = 0;
    // One byte every 100 ms: the whole body would need several seconds.
    const dripper = setInterval(() => {
      if (dripped < dripBody.length && drip.write(dripBody.subarray(dripped, dripped + 1))) dripped++;
    }, 100);

    // A normal client keeps getting 200 meanwhile.
    const normal: number[] = [];
    const normalLoop = (async () => {
      for (let i = 0; i < 10; i++) {
        normal.push((await post(ing.url, '/v1/logs', logsProto([`normal-${i}`]))).status);
        await sleep(100);
      }
    })();

    try {
      const [rs, rd] = await Promise.all([stalled.response, drip.response]);
      await Promise.all([stalled.closed, drip.closed]);
      expect(rs.status).toBe(408);
      expect(String(rs.headers['content-type'])).toBe(PB);
      const st = decodeStatus(PB, rs.body);
      expect(st.code).toBe(grpc.status.DEADLINE_EXCEEDED);
      expect(httpCode({ contentType: PB, body: rs.body })).toBe('SIGLAKE_REQUEST_TIMEOUT');
      expect(rd.status).toBe(408);
      expect(httpCode({ contentType: PB, body: rd.body })).toBe('SIGLAKE_REQUEST_TIMEOUT');
      // Answered no earlier than the deadline, and well before the bodies could have finished (the
      // stalled one never would; the drip needs far longer than this at one byte per 100 ms).
      expect(stalled.respondedAt - t0).toBeGreaterThanOrEqual(900);
      expect(stalled.closedAt - t0).toBeLessThan(8000);
      expect(drip.closedAt - t1).toBeLessThan(8000);
      expect(dripped).toBeLessThan(dripBody.length);
    } finally {
      clearInterval(dripper);
      stalled.destroy();
      drip.destroy();
    }
    await normalLoop;
    expect(normal).toEqual(Array(10).fill(200));
    const texts = walDump(ing.walDir).flatMap((l) => l.texts);
    expect(texts).not.toContain('never-finished-1');
    expect(texts).not.toContain('never-finished-2');
    const m = await ing.metrics();
    expect(m.get('siglake_ingest_requests_total{endpoint="otlp",status="408"}')).toBe(1);
    expect(m.get('siglake_ingest_requests_total{endpoint="otlp_traces",status="408"}')).toBe(1);
  });

  it('a gRPC call whose message stalls is ended DEADLINE_EXCEEDED with SIGLAKE_REQUEST_TIMEOUT in grpc-status-details-bin', async () => {
    const before = (await ing.metric('siglake_ingest_requests_total{endpoint="otlp",status="408"}')) ?? 0;
    const stalled = await openStalledGrpcCall(ing.grpcAddress, LOGS_EXPORT);
    try {
      expect(await stalled.answered).toEqual({ code: grpc.status.DEADLINE_EXCEEDED, errorCode: 'SIGLAKE_REQUEST_TIMEOUT' });
    } finally {
      stalled.close();
    }
    // Counted as HTTP's 408 is (it went uncounted before stop 45).
    expect(await ing.metric('siglake_ingest_requests_total{endpoint="otlp",status="408"}')).toBe(before + 1);
  });
});

// The stalled uploads hold their connections until the deadline; a deadline far beyond what a normal
// request takes, even on a loaded machine, lets the test check the order of events instead of a
// duration: the normal requests are answered while every stalled upload still waits for its 408.
describe('idle connections and stalled uploads beside a normal client (--request-timeout-secs 5)', () => {
  let ing: RunningIngester;
  beforeAll(async () => {
    ing = await startIngester({ args: ['--request-timeout-secs', '5'] });
  });
  afterAll(async () => {
    expect(await ing.stop()).toBe(0);
  });

  it('a few hundred idle connections and stalled uploads do not stop a normal request', async () => {
    const idle = await idleConnections(ing.httpPort, 300);
    const stalled = await Promise.all(
      Array.from({ length: 50 }, async (_, i) => {
        const u = new ManualUpload(ing.httpPort, i % 2 ? '/v1/logs' : '/v1/traces', 100_000);
        await u.connected;
        u.write(new Uint8Array(10));
        return u;
      }),
    );
    const rpc = new RawGrpcClient(ing.grpcAddress);
    /** Stalled uploads answered so far (their 408 releases whatever they held). */
    const stalledAnswered = () => stalled.filter((u) => u.respondedAt !== 0).length;
    try {
      const r = await post(ing.url, '/v1/logs', logsProto(['beside-idle-connections']));
      expect(r.status).toBe(200);
      // Answered while the stalled uploads still held their connections, not once their deadline freed them.
      expect(stalledAnswered()).toBe(0);
      expect((await rpc.export('traces', tracesProto(['beside-idle-grpc']))).code).toBe(grpc.status.OK);
      expect(stalledAnswered()).toBe(0);
      // The stalled uploads are all answered 408 and closed by the deadline.
      const answers = await Promise.all(stalled.map((u) => u.response.then((x) => x.status)));
      expect(answers).toEqual(Array(50).fill(408));
      await Promise.all(stalled.map((u) => u.closed));
      // Memory stays bounded.
      expect(await ing.metric('siglake_process_rss_bytes')).toBeLessThan(512 * 1024 * 1024);
    } finally {
      rpc.close();
      for (const s of idle) s.destroy();
      for (const u of stalled) u.destroy();
    }
    const texts = walDump(ing.walDir).flatMap((l) => l.texts);
    expect(texts).toContain('beside-idle-connections');
    expect(texts).toContain('beside-idle-grpc');
  });
});
