// RefusalLog on a hand-driven clock: one line per status per period, the
// count since the previous line, the increase of each reason.

import { describe, expect, it } from 'vitest';
import type { Logger } from '../../src/log.js';
import { RefusalLog } from '../../src/metrics/refusal-log.js';

function recorder(): { log: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const log = { info: (fields: Record<string, unknown>) => lines.push(fields) } as unknown as Logger;
  return { log, lines };
}

describe('RefusalLog', () => {
  it('logs the first refusal of a status, then at most one line a period with the count since the last', () => {
    let now = 1_000_000;
    const reasons = { header_not_trusted: 0, not_allowed: 0 };
    const { log, lines } = recorder();
    const r = new RefusalLog(log, { periodMs: 60_000, now: () => now, reasons: (s) => (s === 403 ? reasons : undefined) });
    reasons.header_not_trusted++;
    r.refused(403);
    expect(lines).toEqual([{ status: 403, refused: 1, reasons: { header_not_trusted: 1 } }]);
    for (let i = 0; i < 999; i++) {
      reasons.header_not_trusted++;
      now += 10;
      r.refused(403);
    }
    r.refused(401);
    expect(lines).toHaveLength(2);
    expect(lines[1]).toEqual({ status: 401, refused: 1 });
    now = 1_000_000 + 60_000;
    reasons.not_allowed++;
    r.refused(403);
    expect(lines).toHaveLength(3);
    expect(lines[2]).toEqual({ status: 403, refused: 1000, sinceSecs: 60, reasons: { header_not_trusted: 999, not_allowed: 1 } });
  });
});
