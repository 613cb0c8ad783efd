// The ingester says what it refuses: the first refusal of a status is logged
// at info at once, later ones of that status are counted and carried in the
// next line (at most one a period; a minute outside tests), with the reason
// labels the metrics keep, and never the token.

import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post } from '../helpers/http.js';
import { sleep, until as untilWithin } from '../helpers/wait.js';
import { startIngester, type LogLine, type RunningIngester } from '../helpers/ingester.js';
import { logsProto } from '../helpers/otlp-bodies.js';

const PERIOD_MS = 1500;
const TOKEN = 'good-token-0123456789';
const WRONG = 'wrong-token-s3cr3t-abcdef';

const refusalLines = (ing: RunningIngester, status: number): LogLine[] =>
  ing.logs.filter((l) => l['status'] === status && typeof l['refused'] === 'number');

const until = (cond: () => boolean, what: string): Promise<void> => untilWithin(cond, 20_000, what, 20);

describe('refusal log', () => {
  let ing: RunningIngester;
  beforeAll(async () => {
    ing = await startIngester({ args: ['--auth-bearer-tokens', TOKEN], env: { SIGLAKE_TEST_REFUSAL_LOG_MS: String(PERIOD_MS) } });
  });
  afterAll(async () => {
    expect(await ing.stop()).toBe(0);
    fs.rmSync(ing.dataDir, { recursive: true, force: true });
  });

  it('logs the first refusal per status at info, counts the rest into the next line, never the token', async () => {
    const body = logsProto(['x']);
    const auth = { authorization: `Bearer ${WRONG}` };
    const first = await post(ing.url, '/v1/logs', body, { headers: auth });
    expect(first.status).toBe(401);
    await until(() => refusalLines(ing, 401).length === 1, 'the first 401 line');
    const line = refusalLines(ing, 401)[0]!;
    expect(line.level).toBe(30); // info
    expect(line['refused']).toBe(1);

    // A burst: counted, not logged line by line.
    const started = Date.now();
    const burst = await Promise.all(Array.from({ length: 100 }, () => post(ing.url, '/v1/logs', body, { headers: auth })));
    expect(burst.every((r) => r.status === 401)).toBe(true);
    // After a period, one more refusal writes the line that carries the count.
    await sleep(PERIOD_MS + 100);
    expect((await post(ing.url, '/v1/logs', body, { headers: auth })).status).toBe(401);
    const elapsed = Date.now() - started;
    await until(() => refusalLines(ing, 401).reduce((n, l) => n + (l['refused'] as number), 0) === 102, 'every 401 counted in a line');
    const lines = refusalLines(ing, 401);
    // At most one line per period (plus the first).
    expect(lines.length).toBeLessThanOrEqual(2 + Math.floor(elapsed / PERIOD_MS));
    expect(lines.length).toBeLessThan(102);

    // Denials carry their reason label.
    const denied = await post(ing.url, '/v1/logs', body, { headers: { authorization: `Bearer ${TOKEN}`, 'x-scope-orgid': 'acme' } });
    expect(denied.status).toBe(403);
    await until(() => refusalLines(ing, 403).length === 1, 'the 403 line');
    expect(refusalLines(ing, 403)[0]!['reasons']).toEqual({ header_not_trusted: 1 });

    const all = JSON.stringify(ing.logs) + ing.stderr;
    expect(all).not.toContain(WRONG);
    expect(all).not.toContain(TOKEN);
  });
});
