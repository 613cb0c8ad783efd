import { describe, expect, it } from 'vitest';
import { CompletionRing, Doorbell, MESSAGE_BYTES } from '../../src/shard/completion-ring.js';

describe('CompletionRing', () => {
  it('delivers completions in order and frees their slots', () => {
    const ring = CompletionRing.create(8);
    for (let i = 0; i < 8; i++) expect(ring.push(i, 200, i * 10)).toBe(true);
    expect(ring.isFull()).toBe(true);
    expect(ring.push(99, 200, 0)).toBe(false);
    const seen: number[][] = [];
    expect(ring.drain((r, s, n, m) => seen.push([r, s, n, m === undefined ? 0 : 1]))).toBe(8);
    expect(seen).toEqual(Array.from({ length: 8 }, (_, i) => [i, 200, i * 10, 0]));
    expect(ring.push(99, 500, 0)).toBe(true);
  });

  it('wraps its free-running counters', () => {
    const ring = CompletionRing.create(4);
    let next = 0;
    let expected = 0;
    for (let round = 0; round < 1000; round++) {
      for (let i = 0; i < 3; i++) expect(ring.push(next++, 200, 1)).toBe(true);
      ring.drain((r) => {
        expect(r).toBe(expected++);
      });
    }
    expect(expected).toBe(3000);
  });

  it('carries a refusal message, cut to its area at a character boundary', () => {
    const ring = CompletionRing.create(4);
    ring.push(1, 400, 0, 'invalid protobuf: field 9 is 5 bytes');
    ring.push(2, 400, 0, 'é'.repeat(MESSAGE_BYTES));
    const msgs: (string | undefined)[] = [];
    ring.drain((_r, _s, _n, m) => msgs.push(m));
    expect(msgs[0]).toBe('invalid protobuf: field 9 is 5 bytes');
    expect(msgs[1]).toBe('é'.repeat(MESSAGE_BYTES / 2));
  });

  it('lets a producer wait for room', async () => {
    const ring = CompletionRing.create(2);
    ring.push(1, 200, 0);
    ring.push(2, 200, 0);
    const waited = ring.waitForRoom(5000);
    setTimeout(() => {
      ring.drain(() => {});
      ring.notifyRoom();
    }, 10);
    const t0 = Date.now();
    await waited;
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(ring.push(3, 200, 0)).toBe(true);
  });
});

describe('Doorbell', () => {
  it('wakes a waiter when rung and returns at once when already moved', async () => {
    const bell = new Doorbell();
    const seen = bell.value();
    setTimeout(() => bell.ring(), 10);
    const t0 = Date.now();
    await bell.wait(seen, 5000);
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(bell.value()).toBe(seen + 1);
    const t1 = Date.now();
    await bell.wait(seen, 5000);
    expect(Date.now() - t1).toBeLessThan(100);
  });
});
