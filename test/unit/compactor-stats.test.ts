// The compactor's busy time (siglake_compactor_busy_seconds_total): finished
// rounds add their length, the round in progress counts up to the scrape.

import { describe, expect, it } from 'vitest';
import { CompactorStats } from '../../src/compactor/compactor-stats.js';

describe('CompactorStats busy seconds', () => {
  it('adds finished rounds and the one in progress, read through another view of the same memory', () => {
    const s = CompactorStats.create();
    const reader = new CompactorStats(s.sab);
    expect(reader.busySeconds(5_000)).toBe(0);
    s.roundStarted(1_000);
    expect(reader.busySeconds(3_500)).toBe(2.5);
    s.round(true, 4_000);
    expect(reader.busySeconds(60_000)).toBe(3);
    s.roundStarted(70_000);
    s.round(false, 70_250);
    expect(reader.busySeconds(99_000)).toBe(3.25);
    expect([reader.rounds, reader.roundErrors]).toEqual([2, 1]);
    // A round that ends without having been marked started adds nothing.
    s.round(true, 200_000);
    expect(reader.busySeconds(300_000)).toBe(3.25);
  });
});
