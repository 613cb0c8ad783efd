import { describe, expect, it } from 'vitest';
import { InflightTable, MAX_REQUEST_ID } from '../../src/shard/inflight-table.js';

interface Req {
  n: number;
}

function fill(t: InflightTable<Req, string>, count: number, shard = 0): number[] {
  return Array.from({ length: count }, (_, n) => t.add({ n }, `lane-${n}`, shard, 100 + n));
}

describe('InflightTable', () => {
  it('finds each request by its id with its lane and bytes, and forgets it once removed', () => {
    const t = new InflightTable<Req, string>(4);
    const ids = fill(t, 3);
    expect(new Set(ids).size).toBe(3);
    expect(t.size).toBe(3);
    ids.forEach((id, n) => {
      const slot = t.find(id);
      expect(slot).toBeGreaterThanOrEqual(0);
      expect(t.req(slot)).toEqual({ n });
      expect(t.lane(slot)).toBe(`lane-${n}`);
      expect(t.bytes(slot)).toBe(100 + n);
    });
    t.remove(t.find(ids[1]!));
    expect(t.find(ids[1]!)).toBe(-1);
    expect(t.size).toBe(2);
    expect(t.req(t.find(ids[2]!))).toEqual({ n: 2 });
  });

  it('answers -1 for ids never handed out, 0 and out-of-range numbers included', () => {
    const t = new InflightTable<Req, string>(8);
    fill(t, 2);
    for (const id of [0, -1, 3.5, NaN, MAX_REQUEST_ID + 1, 1 + 8, 2 + 8 * 1024]) expect(t.find(id)).toBe(-1);
  });

  it('doubles when half full and keeps every request it held', () => {
    const t = new InflightTable<Req, string>(4);
    const ids = fill(t, 100);
    expect(t.capacity).toBe(256);
    ids.forEach((id, n) => expect(t.req(t.find(id))).toEqual({ n }));
  });

  it('skips an id whose slot a long-running request still holds, so ids stay unique in flight', () => {
    const t = new InflightTable<Req, string>(8);
    const [held, ...rest] = fill(t, 4);
    for (const id of rest) t.remove(t.find(id));
    // Cycle far past the capacity while the first request stays in flight.
    const seen = new Set<number>([held!]);
    for (let i = 0; i < 1000; i++) {
      const id = t.add({ n: 1000 + i }, 'x', 0, 1);
      expect(seen.has(id)).toBe(false);
      expect(id & (t.capacity - 1)).not.toBe(held! & (t.capacity - 1));
      t.remove(t.find(id));
    }
    expect(t.req(t.find(held!))).toEqual({ n: 0 });
    expect(t.capacity).toBe(8);
  });

  it('wraps from the largest id to 1, never to 0', () => {
    const t = new InflightTable<Req, string>(8, MAX_REQUEST_ID - 1);
    const ids = fill(t, 3);
    expect(ids).toEqual([MAX_REQUEST_ID - 1, MAX_REQUEST_ID, 1]);
    ids.forEach((id, n) => expect(t.req(t.find(id))).toEqual({ n }));
    expect(() => new InflightTable(8, 0)).toThrow(RangeError);
  });

  it("lists one shard's requests in the order they were sent, across a wrap and a growth", () => {
    const t = new InflightTable<Req, string>(4, MAX_REQUEST_ID - 2);
    const sent: number[] = [];
    for (let n = 0; n < 12; n++) {
      const id = t.add({ n }, 'l', n % 3 === 0 ? 1 : 0, n);
      if (n % 3 === 0) sent.push(id);
    }
    expect(t.idsOfShard(1)).toEqual(sent);
    expect(t.idsOfShard(2)).toEqual([]);
  });
});
