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

  it("a compactor process's snapshots: a restarted one's counters continue the earlier ones', its gauges are its own", () => {
    const ingester = CompactorStats.create();
    const first = CompactorStats.create();
    first.roundStarted(1_000);
    first.round(true, 2_000);
    first.setLag(30);
    ingester.load(first.snapshot(), ingester.counters());
    expect([ingester.rounds, ingester.busySeconds(5_000), ingester.lagSeconds]).toEqual([1, 1, 30]);
    // The first process dies; the second starts from zero.
    const base = ingester.counters();
    const second = CompactorStats.create();
    second.roundStarted(10_000);
    ingester.load(second.snapshot(), base);
    // Its round in progress counts; its lag (0 so far) replaces the dead one's.
    expect([ingester.rounds, ingester.busySeconds(10_500), ingester.lagSeconds]).toEqual([1, 1.5, 0]);
    second.round(false, 11_000);
    second.setLag(4);
    ingester.load(second.snapshot(), base);
    expect([ingester.rounds, ingester.roundErrors, ingester.busySeconds(99_000), ingester.lagSeconds]).toEqual([2, 1, 2, 4]);
    // A snapshot of another length (another build) is ignored.
    ingester.load(new Float64Array(3), base);
    expect(ingester.rounds).toBe(2);
  });

  it('a process killed mid-round: its round so far stays counted, and the next process does not take the counter back', () => {
    const ingester = CompactorStats.create();
    const first = CompactorStats.create();
    first.roundStarted(1_000);
    ingester.load(first.snapshot(), ingester.counters());
    expect(ingester.busySeconds(4_000)).toBe(3);
    // Killed at 4 s, in its round: the ingester ends that round's time there.
    ingester.processEnded(4_000);
    expect(ingester.busySeconds(9_000)).toBe(3);
    const second = CompactorStats.create();
    const base = ingester.counters();
    ingester.load(second.snapshot(), base);
    expect(ingester.busySeconds(9_500)).toBe(3);
    second.roundStarted(10_000);
    second.round(true, 10_500);
    ingester.load(second.snapshot(), base);
    expect([ingester.rounds, ingester.busySeconds(20_000)]).toEqual([1, 3.5]);
  });
});
