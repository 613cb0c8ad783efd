// The fixed-rate schedule's accounting at the end of a run: every request due
// before the run's end is either sent or counted unsent, even when the end
// timer fires a little early (seen once in the full suite: issued + unsent
// came to 47,999 of 16,000/s × 3 s). The timers here fire 5 ms early on
// purpose; the sender answers every request at once (the target is not what
// is tested, the schedule is).

import { afterEach, describe, expect, it } from 'vitest';
import type { PooledBody } from '../../src/loadgen/body-pool.js';
import type { LaneTarget } from '../../src/loadgen/lane-plan.js';
import { LoadClient, type RequestSender } from '../../src/loadgen/load-client.js';

const realSetTimeout = globalThis.setTimeout;

afterEach(() => {
  globalThis.setTimeout = realSetTimeout;
});

function client(o: { rate: number; runMs: number; sender: RequestSender }): { c: LoadClient; start: number; end: number } {
  const body: PooledBody = { signal: 'logs', wire: Buffer.from('x'), rawBytes: 1, records: 1 };
  const target: LaneTarget = { lane: 0, tenant: undefined, orgId: undefined, index: undefined, authorization: undefined, bodies: [body], cursor: 0 };
  const start = performance.now() + 20;
  const end = start + o.runMs;
  const c = new LoadClient({
    thread: 0,
    targets: [target],
    sender: o.sender,
    post: () => undefined,
    startPerf: start,
    endPerf: end,
    budget: Infinity,
    connections: 4,
    streams: 1,
    rate: o.rate,
    intervalMs: 1000,
    drainMs: 100,
    describe: (s) => s,
  });
  return { c, start, end };
}

const answering: RequestSender = {
  send: (_conn, _target, _body, done) => setImmediate(() => done('200', true, undefined)),
  abandon: () => undefined,
  close: async () => undefined,
};

describe('loadgen fixed rate: sent + never sent = due by the end of the run', () => {
  it('when the end timer fires early, the requests due after it count as never sent', async () => {
    // Every timer of 100 ms or more fires 5 ms early (the end's among them).
    globalThis.setTimeout = ((fn: () => void, ms?: number) => realSetTimeout(fn, ms !== undefined && ms >= 100 ? ms - 5 : ms)) as typeof setTimeout;
    const rate = 2000;
    const { c, start, end } = client({ rate, runMs: 300, sender: answering });
    const done = await c.run();
    let due = 0;
    while (start + due * (1000 / rate) < end) due++;
    expect(due).toBe(600);
    expect(done.issued + done.unsent).toBe(due);
    expect(done.unsent).toBeGreaterThan(0); // the 5 ms the timer cut off: about 10 requests
  });

  it('stopped early, what was due after the stop is not counted', async () => {
    const rate = 2000;
    const { c, start } = client({ rate, runMs: 5_000, sender: answering });
    let stoppedAt = 0;
    realSetTimeout(() => {
      stoppedAt = performance.now();
      c.stop();
    }, start + 200 - performance.now());
    const done = await c.run();
    // Due before the stop (stop() reads its clock a moment after stoppedAt: one more at most), never the 10,000 of the run.
    let due = 0;
    while (start + due * (1000 / rate) < stoppedAt) due++;
    expect(due).toBeGreaterThan(300);
    expect(done.issued + done.unsent).toBeGreaterThanOrEqual(due);
    expect(done.issued + done.unsent).toBeLessThanOrEqual(due + 1);
  });
});
