import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ByteRing, type Frame } from '../../src/lanes/byte-ring.js';

function frame(): Frame {
  return { offset: 0, length: 0, tag: 0 };
}

function bytesOf(n: number, seed: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = (seed + i * 7) & 0xff;
  return b;
}

describe('ByteRing', () => {
  it('delivers frames in order with their tags and contents', () => {
    const ring = ByteRing.create(1024);
    const f = frame();
    expect(ring.read(f)).toBe(false);
    for (let i = 0; i < 5; i++) expect(ring.push(bytesOf(10 + i, i), 100 + i)).toBe(true);
    for (let i = 0; i < 5; i++) {
      expect(ring.read(f)).toBe(true);
      expect(f.tag).toBe(100 + i);
      expect(ring.bytes.slice(f.offset, f.offset + f.length)).toEqual(bytesOf(10 + i, i));
    }
    expect(ring.read(f)).toBe(false);
    ring.release();
    expect(ring.usedBytes()).toBe(0);
  });

  it('refuses a frame when full and accepts it once the consumer releases', () => {
    const ring = ByteRing.create(256);
    const f = frame();
    let pushed = 0;
    while (ring.push(bytesOf(40, pushed), pushed)) pushed++;
    expect(pushed).toBeGreaterThan(0);
    expect(pushed).toBeLessThan(256 / 48 + 1);
    // Reading without releasing frees nothing.
    expect(ring.read(f)).toBe(true);
    expect(ring.read(f)).toBe(true);
    expect(ring.push(bytesOf(40, 99), 99)).toBe(false);
    ring.release();
    expect(ring.push(bytesOf(40, 99), 99)).toBe(true);
    // The frames still unread come before the new one.
    const tags: number[] = [];
    while (ring.read(f)) tags.push(f.tag);
    expect(tags).toEqual([...Array.from({ length: pushed - 2 }, (_, i) => i + 2), 99]);
  });

  it('wraps a frame that does not fit before the end to offset 0, whole', () => {
    const ring = ByteRing.create(256);
    const f = frame();
    // Move head and tail to the middle.
    expect(ring.push(bytesOf(150, 1), 1)).toBe(true);
    expect(ring.read(f)).toBe(true);
    ring.release();
    // 100 bytes do not fit in the 96 left before the end: they go to offset 0.
    const big = bytesOf(100, 2);
    expect(ring.push(big, 2)).toBe(true);
    expect(ring.read(f)).toBe(true);
    expect(f.offset).toBe(8);
    expect(f.tag).toBe(2);
    expect(ring.bytes.slice(f.offset, f.offset + f.length)).toEqual(big);
    ring.release();
    expect(ring.isEmpty()).toBe(true);
  });

  it('always fits a frame of maxPayload bytes once empty, wherever head is', () => {
    const ring = ByteRing.create(ByteRing.capacityFor(1000));
    const f = frame();
    for (let shift = 0; shift < ring.capacity; shift += 40) {
      const pad = bytesOf(shift % 900, shift);
      expect(ring.push(pad, 0)).toBe(true);
      expect(ring.read(f)).toBe(true);
      ring.release();
      const max = bytesOf(1000, shift);
      expect(ring.push(max, 7)).toBe(true);
      expect(ring.read(f)).toBe(true);
      expect(ring.bytes.slice(f.offset, f.offset + f.length)).toEqual(max);
      ring.release();
    }
  });

  it('handles zero-length frames', () => {
    const ring = ByteRing.create(64);
    const f = frame();
    for (let i = 0; i < 20; i++) {
      expect(ring.push(new Uint8Array(0), i)).toBe(true);
      expect(ring.read(f)).toBe(true);
      expect(f.length).toBe(0);
      expect(f.tag).toBe(i);
      ring.release();
    }
  });

  it('carries 20,000 frames from another thread intact, waking the consumer', async () => {
    const ring = ByteRing.create(4096);
    const N = 20_000;
    const worker = new Worker(
      `
      const { workerData } = require('node:worker_threads');
      const ctl = new Int32Array(workerData.sab, 0, 32);
      const cap = workerData.sab.byteLength - 128;
      const view = new DataView(workerData.sab, 128, cap);
      const bytes = new Uint8Array(workerData.sab, 128, cap);
      const align8 = (n) => (n + 7) & ~7;
      let pushed = 0;
      // A minimal producer speaking the ring protocol (same layout as ByteRing).
      function reserve(len) {
        const need = 8 + align8(len);
        const head = Atomics.load(ctl, 0), tail = ctl[16];
        if (tail >= head) {
          const endRoom = cap - tail;
          if (need < endRoom || (need === endRoom && head !== 0)) return tail + 8;
          if (need < head) return 8;
          return -1;
        }
        return need < head - tail ? tail + 8 : -1;
      }
      while (pushed < workerData.n) {
        const len = (pushed * 13) % 300;
        const off = reserve(len);
        if (off < 0) { Atomics.wait(ctl, 0, Atomics.load(ctl, 0), 1); continue; }
        for (let i = 0; i < len; i++) bytes[off + i] = (pushed + i) & 0xff;
        const tail = ctl[16];
        const start = off - 8;
        if (start !== tail) view.setUint32(tail, 0xffffffff, true);
        view.setUint32(start, len, true);
        view.setUint32(start + 4, pushed, true);
        let next = start + 8 + align8(len);
        if (next === cap) next = 0;
        Atomics.store(ctl, 16, next);
        Atomics.add(ctl, 24, 1);
        if (Atomics.load(ctl, 25) === 1) Atomics.notify(ctl, 24);
        pushed++;
      }
      `,
      { eval: true, workerData: { sab: ring.sab, n: N } },
    );
    const f = frame();
    let got = 0;
    let bad = 0;
    while (got < N) {
      if (!ring.read(f)) {
        ring.release();
        await ring.waitForData(50);
        continue;
      }
      if (f.tag !== got || f.length !== (got * 13) % 300) bad++;
      else for (let i = 0; i < f.length; i++) if (ring.bytes[f.offset + i] !== ((got + i) & 0xff)) bad++;
      got++;
      if (got % 16 === 0) ring.release();
    }
    ring.release();
    await worker.terminate();
    expect(bad).toBe(0);
    expect(got).toBe(N);
  });
});
