// A caller that hangs up while its tenant's tables are still being read (the
// query server's pool acquire, before runQuery) must stop the query before it
// starts: the abort event has fired already, before runQuery listened for it,
// and the query used to run to query.timeoutSecs. A real embedded engine.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runQuery } from '../../src/query/query-runner.js';
import { TenantEngine } from '../../src/query/tenant-engine.js';

let engine: TenantEngine;
beforeAll(async () => {
  engine = await TenantEngine.open([], { memoryLimitMib: 256 });
});
afterAll(() => engine.close());

describe('runQuery with a signal aborted before it starts', () => {
  it('answers 503 at once, runs nothing, and the engine answers the next query', async () => {
    const hungUp = new AbortController();
    hungUp.abort();
    const t0 = performance.now();
    // Minutes of work if it ran.
    const run = runQuery(engine, 'SELECT sum(range % 7) AS s FROM range(100000000000000)', { maxRows: 10, timeoutMs: 600_000, signal: hungUp.signal });
    await expect(run).rejects.toMatchObject({ code: 'SIGLAKE_UNAVAILABLE' });
    expect(performance.now() - t0).toBeLessThan(2_000);
    const next = await runQuery(engine, 'SELECT 41 + 1 AS n', { maxRows: 10, timeoutMs: 10_000 });
    expect(next.rows).toEqual([[42]]);
  });
});

describe('runQuery with a signal aborted while the statement is being prepared', () => {
  it('is cancelled whenever the hang-up comes: never left to run to its timeout', async () => {
    // DuckDB drops an interrupt that arrives while a statement is parsed or prepared (no query
    // running yet): the query then ran to query.timeoutSecs. So an abort a few event-loop turns
    // after the call, at each of a dozen moments, must answer "cancelled", not "timed out".
    const outcomes: string[] = [];
    for (let ticks = 0; ticks < 12; ticks++) {
      for (let rep = 0; rep < 2; rep++) {
        const hungUp = new AbortController();
        // A text of its own each time, so that nothing is cached and every step runs.
        const sql = `SELECT sum(range % 7) + ${ticks * 10 + rep} AS s FROM range(100000000000000)`;
        const run = runQuery(engine, sql, { maxRows: 10, timeoutMs: 5_000, signal: hungUp.signal });
        for (let n = 0; n < ticks; n++) await new Promise<void>((r) => setImmediate(r));
        hungUp.abort();
        outcomes.push(await run.then(() => 'answered', (e: { code?: string }) => e.code ?? String(e)));
      }
    }
    expect(outcomes).toEqual(Array(24).fill('SIGLAKE_UNAVAILABLE'));
    const next = await runQuery(engine, 'SELECT 41 + 1 AS n', { maxRows: 10, timeoutMs: 10_000 });
    expect(next.rows).toEqual([[42]]);
  }, 180_000);
});
