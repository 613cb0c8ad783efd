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
