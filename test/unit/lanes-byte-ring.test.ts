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

  it('with a soft size, keeps its frames near the start while the consumer keeps up', () => {
    const ring = ByteRing.create(64 * 1024, 4096);
    const f = frame();
    let highest = 0;
    for (let i = 0; i < 2000; i++) {
      const body = bytesOf(1 + ((i * 37) % 700), i);
      expect(ring.push(body, i)).toBe(true);
      expect(ring.read(f)).toBe(true);
      expect(f.tag).toBe(i);
      expect(ring.bytes.slice(f.offset, f.offset + f.length)).toEqual(body);
      highest = Math.max(highest, f.offset + f.length);
      // The consumer releases every few frames, as a round does.
      if (i % 3 === 2) ring.release();
    }
    // Without the soft size the 2,000 frames (about 700 KB) would have run
    // through all 64 KiB many times; with it nothing lies past the soft size
    // plus what was in flight at once (three frames of at most 712 bytes).
    expect(highest).toBeLessThanOrEqual(4096 + 3 * 712);
  });

  it('with a soft size, never refuses a frame while a held round leaves most of the buffer free', () => {
    // A writer worker reads a round's frames and releases them only once it
    // has written them; meanwhile the acceptor pushes the next round. Rounds
    // of eight 1,000-byte frames (8 KiB) against a 256 KiB ring: room for
    // many at once. A producer that wrapped to the start into less room than the
    // held round refused frames here (they went to the dispatcher's backlog,
    // a second copy each).
    const ring = ByteRing.create(256 * 1024, 4096);
    const f = frame();
    const K = 8;
    let next = 0;
    let got = 0;
    let highest = 0;
    const refused: number[] = [];
    const bad: number[] = [];
    const pushRound = (): void => {
      for (let k = 0; k < K; k++, next++) if (!ring.push(bytesOf(1000, next), next)) refused.push(next);
    };
    pushRound();
    for (let round = 0; round < 300; round++) {
      while (ring.read(f)) {
        const want = bytesOf(1000, got);
        if (f.tag !== got || f.length !== 1000 || want.some((b, i) => ring.bytes[f.offset + i] !== b)) bad.push(got);
        highest = Math.max(highest, f.offset + f.length);
        got++;
      }
      pushRound(); // while the round read above is held
      ring.release();
    }
    expect(refused).toEqual([]);
    expect(bad).toEqual([]);
    expect(got).toBe(300 * K);
    // And it still keeps to the front of the buffer: the soft size plus twice
    // the most it held at once (a held round and the next, 2 x 8 frames), not
    // the whole 256 KiB.
    expect(highest).toBeLessThan(4096 + 1008 + 2 * (2 * K * 1008));
  });

  it('with a soft size, goes on past the soft size while what is in flight would not fit before head', () => {
    const ring = ByteRing.create(64 * 1024, 4096);
    const f = frame();
    for (let i = 0; i < 6; i++) expect(ring.push(bytesOf(1000, i), i)).toBe(true);
    // The consumer has released two frames (2,016 bytes before head); four
    // (4,032 bytes) are in flight: the next frame goes on at the tail.
    for (let i = 0; i < 2; i++) expect(ring.read(f)).toBe(true);
    ring.release();
    expect(ring.push(bytesOf(1000, 6), 6)).toBe(true);
    for (let i = 2; i < 7; i++) {
      expect(ring.read(f)).toBe(true);
      expect(f.tag).toBe(i);
    }
    expect(f.offset).toBe(6 * 1008 + 8);
    // All released: now it goes back to the start.
    ring.release();
    expect(ring.push(bytesOf(1000, 7), 7)).toBe(true);
    expect(ring.read(f)).toBe(true);
    expect(f.offset).toBe(8);
  });

  it('with a soft size, still uses the whole capacity when the consumer falls behind, and refuses when full', () => {
    const ring = ByteRing.create(16 * 1024, 2048);
    const f = frame();
    let pushed = 0;
    while (ring.push(bytesOf(500, pushed), pushed)) pushed++;
    // 508 bytes a frame: about 32 fit in 16 KiB, far more than the soft 2 KiB.
    expect(pushed).toBeGreaterThan(28);
    const tags: number[] = [];
    while (ring.read(f)) {
      expect(ring.bytes.slice(f.offset, f.offset + f.length)).toEqual(bytesOf(500, f.tag));
      tags.push(f.tag);
    }
    expect(tags).toEqual(Array.from({ length: pushed }, (_, i) => i));
    ring.release();
    // Empty, its tail far past the soft size, but it once held nearly the
    // whole buffer: it goes on at the tail and back to the start only at the
    // end of the buffer (those pages are resident already), so a burst like
    // the last one finds room again.
    const offsets: number[] = [];
    for (let i = 0; i < 400; i++) {
      expect(ring.push(bytesOf(100, i), i)).toBe(true);
      expect(ring.read(f)).toBe(true);
      expect(ring.bytes.slice(f.offset, f.offset + f.length)).toEqual(bytesOf(100, i));
      offsets.push(f.offset);
      ring.release();
    }
    expect(offsets[0]).toBeGreaterThan(15 * 1024);
    const wraps = offsets.flatMap((o, i) => (o === 8 ? [i] : []));
    expect(wraps.length).toBeGreaterThanOrEqual(2);
    // Each lap runs on to about the end of the buffer.
    for (let w = 1; w < wraps.length; w++) expect(offsets[wraps[w]! - 1]).toBeGreaterThan(15 * 1024);
    while (ring.push(bytesOf(500, pushed), pushed)) pushed++;
    expect(pushed).toBeGreaterThan(2 * 28);
  });

  it('with a soft size, carries 50,000 frames to a consumer on another thread intact and in order', async () => {
    const ring = ByteRing.create(64 * 1024, 8192);
    const N = 50_000;
    const done = new Int32Array(new SharedArrayBuffer(16));
    const ctl = new Int32Array(ring.sab, 0, 32);
    // A minimal consumer speaking the ring protocol (same layout as ByteRing):
    // the consumer side is unchanged by the soft size, so it must follow the
    // producer's early wraps by the markers alone.
    const worker = new Worker(
      `
      const { workerData } = require('node:worker_threads');
      const ctl = new Int32Array(workerData.sab, 0, 32);
      const cap = workerData.sab.byteLength - 128;
      const view = new DataView(workerData.sab, 128, cap);
      const bytes = new Uint8Array(workerData.sab, 128, cap);
      const out = new Int32Array(workerData.done);
      const align8 = (n) => (n + 7) & ~7;
      let pos = Atomics.load(ctl, 0), got = 0, bad = 0, early = 0;
      while (got < workerData.n) {
        const tail = Atomics.load(ctl, 16);
        if (pos === tail) { Atomics.store(ctl, 0, pos); Atomics.wait(ctl, 24, Atomics.load(ctl, 24), 1); continue; }
        let len = view.getUint32(pos, true);
        // A wrap with room for the largest frame (908 bytes) left before the end: an early one.
        if (len === 0xffffffff) { if (cap - pos > 8 + 912) early++; pos = 0; continue; }
        const tag = view.getUint32(pos + 4, true);
        if (tag !== got || len !== (got * 13) % 900) bad++;
        else for (let i = 0; i < len; i++) if (bytes[pos + 8 + i] !== ((got + i) & 0xff)) { bad++; break; }
        pos += 8 + align8(len);
        if (pos === cap) pos = 0;
        got++;
        if (got % 7 === 0) Atomics.store(ctl, 0, pos);
      }
      Atomics.store(ctl, 0, pos);
      out[0] = got; out[1] = bad; out[2] = early; out[3] = 1;
      Atomics.notify(out, 3);
      `,
      { eval: true, workerData: { sab: ring.sab, n: N, done: done.buffer } },
    );
    for (let i = 0; i < N; ) {
      const len = (i * 13) % 900;
      const body = new Uint8Array(len);
      for (let k = 0; k < len; k++) body[k] = (i + k) & 0xff;
      // A producer that keeps at most 4 KiB in flight, as one whose worker
      // keeps up: its peak stays far below the 64 KiB, so it wraps early.
      if (ring.usedBytes() < 4096 && ring.push(body, i)) {
        i++;
        Atomics.notify(ctl, 24); // the consumer waits on seq, which push() bumped
      } else {
        await new Promise((r) => setImmediate(r));
      }
    }
    while (Atomics.load(done, 3) === 0) await new Promise((r) => setTimeout(r, 5));
    await worker.terminate();
    expect(done[0]).toBe(N);
    expect(done[1]).toBe(0);
    // The producer went back to the start early (50,000 frames of up to 900
    // bytes would otherwise wrap only at the end of the 64 KiB).
    expect(done[2]).toBeGreaterThan(0);
  });
});
