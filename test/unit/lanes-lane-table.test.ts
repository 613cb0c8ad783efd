import { describe, expect, it } from 'vitest';
import { LaneTable } from '../../src/lanes/lane-table.js';

describe('LaneTable', () => {
  it('finds a lane by (tenant, signal) or (tenant, index) and keeps its shard', () => {
    const t = new LaneTable(10, 4);
    const logs = t.create('acme', 'logs', undefined);
    const traces = t.create('acme', 'traces', undefined);
    const idx = t.create('acme', 'logs', 'audit');
    const entry = t.tenant('acme');
    expect(t.find(entry, 'logs', undefined)).toBe(logs);
    expect(t.find(entry, 'traces', undefined)).toBe(traces);
    expect(t.find(entry, 'traces', 'audit')).toBe(idx); // an index lane takes both signals
    expect(t.find(entry, 'logs', 'other')).toBeUndefined();
    expect(t.find(t.tenant('nobody'), 'logs', undefined)).toBeUndefined();
    expect(logs.shard).toBe(logs.key.shard(4));
    expect(idx.key.key).toBe('acme/i:audit');
    expect(idx.shard).toBe(idx.key.shard(4));
    expect(t.laneCount).toBe(3);
    expect(t.tenantCount).toBe(1);
  });

  it('keeps an index named like a default table in its own lane', () => {
    const t = new LaneTable(10, 2);
    const logs = t.create('a', 'logs', undefined);
    const idx = t.create('a', 'logs', 'logs');
    expect(idx).not.toBe(logs);
    expect(idx.key.key).toBe('a/i:logs');
    expect(logs.key.key).toBe('a/logs');
  });

  it('reports full at the cap', () => {
    const t = new LaneTable(2, 1);
    t.create('a', 'logs', undefined);
    expect(t.isFull()).toBe(false);
    t.create('b', 'logs', undefined);
    expect(t.isFull()).toBe(true);
    expect(() => t.create('c', 'logs', undefined)).toThrow();
  });

  it('releases a provisional lane with nothing in flight, and its tenant with it', () => {
    const t = new LaneTable(2, 1);
    const lane = t.create('a', 'logs', 'x');
    Atomics.add(t.depth, lane.slot, 1);
    expect(t.releaseIfUnused(lane)).toBe(false); // in flight
    Atomics.sub(t.depth, lane.slot, 1);
    expect(t.releaseIfUnused(lane)).toBe(true);
    expect(t.laneCount).toBe(0);
    expect(t.tenantCount).toBe(0);
    expect(t.tenant('a')).toBeUndefined();
    // The slot is reused and the cap counts again from zero.
    const again = t.create('b', 'logs', undefined);
    expect(again.slot).toBe(lane.slot);
    expect(again.id).not.toBe(lane.id);
  });

  it('never releases a lane that has written', () => {
    const t = new LaneTable(2, 1);
    const lane = t.create('a', 'logs', undefined);
    lane.committed = true;
    expect(t.releaseIfUnused(lane)).toBe(false);
    expect(t.laneCount).toBe(1);
  });

  it('lists the lanes of one shard', () => {
    const t = new LaneTable(100, 3);
    const lanes = Array.from({ length: 30 }, (_, i) => t.create(`t${i}`, i % 2 ? 'logs' : 'traces', undefined));
    for (let k = 0; k < 3; k++) {
      expect(t.lanesOfShard(k).map((l) => l.id).sort()).toEqual(lanes.filter((l) => l.shard === k).map((l) => l.id).sort());
    }
    // FNV-1a spreads 30 lanes over 3 shards: none is empty.
    for (let k = 0; k < 3; k++) expect(t.lanesOfShard(k).length).toBeGreaterThan(0);
  });
});
