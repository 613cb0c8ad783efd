// reliability.md "Redis gone", contract §9 ("A Redis failure admits the request
// and counts siglake_rate_budget_backend_errors_total"), docs/limits.md "When
// Redis fails": the real redis-server is killed with SIGKILL under a running
// `siglake ingest`, then started again on the same port.
//
// Settings: rate 5/s, burst 5 (lease size ceil(5/100) = 1), --redis-timeout-ms 1000
// (generous, so that a loaded test machine does not count slow answers as failures;
// a killed server fails commands at once: its connection closes).
// While Redis answers, one replica admits at most burst + rate·Δ + 2·L in a
// window Δ. While it is gone every request is admitted: far more than that bound
// shows the budget is not enforced, and each failed lease request counts one
// backend error. Once it is back (empty: every bucket full), ioredis reconnects
// by itself and the next lease request after the 1 s back-off enforces again:
// 429s return, with no restart of the ingester.

import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post } from '../helpers/http.js';
import { sleep } from '../helpers/wait.js';
import { startIngester, type RunningIngester } from '../helpers/ingester.js';
import { logsProto } from '../helpers/otlp-bodies.js';
import { RedisServer } from '../helpers/redis-server.js';

const RATE = 5;
const BURST = 5;
const LEASE = 1;
const BODY = logsProto(['redis-outage']);

describe('Redis killed and restarted under a running ingester (rate 5/s, burst 5)', () => {
  let redis: RedisServer;
  let ing: RunningIngester;
  let pid: number | undefined;
  let lastRetryAfter = 0;

  beforeAll(async () => {
    redis = await RedisServer.start();
    ing = await startIngester({
      args: ['--rate-limit-per-sec', String(RATE), '--rate-limit-burst', String(BURST), '--redis-url', redis.url, '--redis-timeout-ms', '1000'],
    });
    pid = ing.child.pid;
  });
  afterAll(async () => {
    if (ing) expect(await ing.stop()).toBe(0);
    await redis?.stop();
  });

  const errors = async () => (await ing.metric('siglake_rate_budget_backend_errors_total'))!;

  it('while Redis answers, the shared budget is enforced (429 within burst + rate·Δ + 2·L)', async () => {
    expect(await errors()).toBe(0);
    const start = performance.now();
    let admitted = 0;
    for (let i = 0; i < 100; i++) {
      const r = await post(ing.url, '/v1/logs', BODY);
      if (r.status === 429) {
        expect(r.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
        lastRetryAfter = Number(r.headers.get('retry-after'));
        break;
      }
      expect(r.status).toBe(200);
      admitted++;
    }
    expect(lastRetryAfter).toBeGreaterThan(0);
    expect(admitted).toBeGreaterThanOrEqual(1);
    expect(admitted).toBeLessThanOrEqual(BURST + RATE * ((performance.now() - start) / 1000) + 2 * LEASE);
    expect(await errors()).toBe(0);
  });

  it('after kill -9 every request is admitted (200), far past the budget, and backend errors rise', async () => {
    // Let the refusal Redis announced run out first (docs: it "still runs out its time").
    await sleep(lastRetryAfter * 1000 + 100);
    await redis.kill9();
    const start = performance.now();
    const statuses = new Map<number, number>();
    let n = 0;
    // 1.5 s of back-to-back requests: spans the 1 s back-off and the probe after it.
    while (performance.now() - start < 1500) {
      const r = await post(ing.url, '/v1/logs', BODY);
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      n++;
    }
    const spanSecs = (performance.now() - start) / 1000;
    expect([...statuses.keys()]).toEqual([200]);
    // More than one replica could ever admit while Redis answers: the budget is not enforced.
    expect(n).toBeGreaterThan(BURST + RATE * spanSecs + 2 * LEASE);
    expect(await errors()).toBeGreaterThanOrEqual(1);
    const m = await ing.metrics();
    expect(m.get('siglake_ingest_requests_total{endpoint="otlp",status="200"}')).toBeGreaterThanOrEqual(n);
    expect(ing.logs.some((l) => l.msg.startsWith('rate budget backend (Redis) failed'))).toBe(true);
  });

  it('restarted on the same port, limits are enforced again without restarting the ingester', async () => {
    await redis.restart();
    const deadline = performance.now() + 20_000;
    let refusedAt = -1;
    let sent = 0;
    while (performance.now() < deadline) {
      const r = await post(ing.url, '/v1/logs', BODY);
      sent++;
      if (r.status === 429) {
        expect(r.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
        refusedAt = sent;
        break;
      }
      expect(r.status).toBe(200);
      await sleep(10);
    }
    expect(refusedAt, 'no 429 after Redis came back').toBeGreaterThan(0);
    // Enforced means Redis answers again: further requests add no backend error and keep being limited.
    const errorsThen = await errors();
    let limited = 0;
    for (let i = 0; i < 20; i++) if ((await post(ing.url, '/v1/logs', BODY)).status === 429) limited++;
    expect(limited).toBeGreaterThan(0);
    expect(await errors()).toBe(errorsThen);
    // The same process all along.
    expect(ing.exitCode).toBeNull();
    expect(ing.exitSignal).toBeNull();
    expect(ing.child.pid).toBe(pid);
  });
});
