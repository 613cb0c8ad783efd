// The gRPC port's pool of open calls, shared fairly by tenants
// (src/ingest/grpc-stream-pool.ts). The end-to-end behaviour over real HTTP/2
// calls is in test/reliability/hostile-clients-2.test.ts; these cover the
// choices a full pool makes.

import { describe, expect, it } from 'vitest';
import { StreamPool, type StreamSlot } from '../../src/ingest/grpc-stream-pool.js';

interface TestSlot extends StreamSlot {
  name: string;
  refused: boolean;
  /** Answered or abandoned already, its end not yet reported to the pool (release() comes a tick later). */
  over: boolean;
}

function slot(name: string): TestSlot {
  const s: TestSlot = {
    name,
    counted: false,
    tenant: undefined,
    received: false,
    seat: -1,
    refused: false,
    over: false,
    preempt: () => {
      expect(s.counted, `${name} gave its slot up before it was refused`).toBe(false);
      if (s.over) return false;
      s.refused = true;
      return true;
    },
  };
  return s;
}

/** A call that starts and is admitted for `tenant` at once; whether it got a slot. */
function open(pool: StreamPool, name: string, tenant: string, onPreempt = () => {}): TestSlot & { seated: boolean } {
  const s = slot(name) as TestSlot & { seated: boolean };
  s.seated = pool.take(s) ? (pool.attribute(s, tenant), true) : pool.admitLate(s, tenant, onPreempt);
  return s;
}

describe('StreamPool', () => {
  it('refuses a tenant that holds all of its share, and gives another the largest holder\'s oldest stalled slot', () => {
    const pool = new StreamPool(4);
    const hog = [0, 1, 2, 3].map((k) => open(pool, `hog${k}`, 'hog'));
    expect(hog.every((s) => s.seated)).toBe(true);
    expect(open(pool, 'hog4', 'hog').seated).toBe(false);
    let preempted = 0;
    const a = open(pool, 'a0', 'a', () => preempted++);
    expect(a.seated).toBe(true);
    expect(hog.map((s) => s.refused)).toEqual([true, false, false, false]);
    expect(preempted).toBe(1);
    expect(pool.open).toBe(4);
    // Share is 2 for two holders: a takes one more, then is refused.
    expect(open(pool, 'a1', 'a').seated).toBe(true);
    expect(hog.map((s) => s.refused)).toEqual([true, true, false, false]);
    expect(open(pool, 'a2', 'a').seated).toBe(false);
    expect(hog.map((s) => s.refused)).toEqual([true, true, false, false]);
    expect(pool.open).toBe(4);
  });

  it('never takes a call whose message arrived, nor one whose tenant is not known yet', () => {
    const pool = new StreamPool(3);
    const received = open(pool, 'r', 'hog');
    received.received = true;
    const pending = slot('pending'); // its admission is still running: it holds a slot, nobody's
    expect(pool.take(pending)).toBe(true);
    const stalled = open(pool, 's', 'hog');
    // Full; share for b is floor(3 / 2) = 1; hog holds 2 attributed slots, one stalled.
    const b = open(pool, 'b', 'b');
    expect(b.seated).toBe(true);
    expect([received.refused, pending.refused, stalled.refused]).toEqual([false, false, true]);
    // Nothing left to take: hog's only slot is being written, the pending one is nobody's.
    expect(open(pool, 'c', 'c').seated).toBe(false);
    expect(pool.open).toBe(3);
  });

  it('takes from the largest holder above the share that has a stalled call, oldest first', () => {
    const pool = new StreamPool(6);
    const x = [0, 1, 2].map((k) => open(pool, `x${k}`, 'x'));
    const y = [0, 1, 2].map((k) => open(pool, `y${k}`, 'y'));
    y[0]!.received = true;
    const z = open(pool, 'z', 'z'); // share 2: both hold 3; x is first of the equals
    expect(z.seated).toBe(true);
    expect(x.map((s) => s.refused)).toEqual([true, false, false]);
    x[1]!.received = true;
    x[2]!.received = true;
    // Four holders with w: a share of 1. x holds 2, above it, but both are being written; y's oldest stalled is y1.
    const w = open(pool, 'w', 'w');
    expect(w.seated).toBe(true);
    expect(y.map((s) => s.refused)).toEqual([false, true, false]);
  });

  it('gives a slot freed meanwhile before taking one, and counts every release once', () => {
    const pool = new StreamPool(2);
    const a = open(pool, 'a', 't');
    const b = open(pool, 'b', 't');
    const late = slot('late');
    expect(pool.take(late)).toBe(false);
    pool.release(a);
    pool.release(a);
    expect(pool.open).toBe(1);
    expect(pool.admitLate(late, 'u', () => {})).toBe(true);
    expect(b.refused).toBe(false);
    expect(pool.open).toBe(2);
    pool.release(b);
    pool.release(late);
    expect(pool.open).toBe(0);
  });

  // Every call enters and leaves the pool: it keeps its calls in a table kept for life (no Set per
  // tenant, whose copied tables kept calls alive through the acceptor's scavenges).
  it('keeps its table through any number of calls coming and going, and forgets each call it released', () => {
    const pool = new StreamPool(1000, 64);
    const live: TestSlot[] = [];
    for (let n = 0; n < 10_000; n++) {
      const s = open(pool, `c${n}`, `t${n % 3}`);
      expect(s.seated).toBe(true);
      live.push(s);
      // 40 calls open at most, in any order of ending
      if (live.length > 40) {
        const done = live.splice((n * 7) % live.length, 1)[0]!;
        pool.release(done);
        expect(done.seat).toBe(-1);
        expect(done.counted).toBe(false);
      }
    }
    expect(pool.capacity).toBe(64);
    expect(pool.tenantsKnown).toBe(3);
    expect(pool.open).toBe(40);
    for (const s of live) pool.release(s);
    expect(pool.open).toBe(0);
    expect(pool.capacity).toBe(64);
  });

  it('doubles past its capacity and keeps each tenant\'s calls oldest first', () => {
    const pool = new StreamPool(300, 2);
    const hog = Array.from({ length: 290 }, (_, k) => open(pool, `hog${k}`, 'hog'));
    expect(pool.capacity).toBe(512);
    // The oldest ones are being written; the first stalled one is hog5.
    for (let k = 0; k < 5; k++) hog[k]!.received = true;
    const a = Array.from({ length: 10 }, (_, k) => open(pool, `a${k}`, 'a'));
    expect(pool.open).toBe(300);
    // Full; two holders, share 150: a takes hog's oldest stalled calls in order.
    const b = open(pool, 'late-a', 'a');
    expect(b.seated).toBe(true);
    expect(hog.map((s) => s.refused).indexOf(true)).toBe(5);
    expect(hog.filter((s) => s.refused)).toHaveLength(1);
    expect(open(pool, 'late-a2', 'a').seated).toBe(true);
    expect(hog[6]!.refused).toBe(true);
    for (const s of [...hog, ...a]) pool.release(s);
    expect(pool.open).toBe(2);
    expect(pool.capacity).toBe(512);
  });

  it('moves a call attributed again to its new tenant', () => {
    const pool = new StreamPool(2);
    const s = open(pool, 's', 'x');
    pool.attribute(s, 'y');
    expect(s.tenant).toBe('y');
    const t = open(pool, 't', 'y');
    // Full, y holds both: x (holding nothing now) takes y's oldest stalled call, s.
    expect(open(pool, 'u', 'x').seated).toBe(true);
    expect([s.refused, t.refused]).toEqual([true, false]);
  });

  it('forgets tenants holding nothing once it knows 1,024, never one that holds a call', () => {
    const pool = new StreamPool(4);
    const kept = open(pool, 'kept', 'kept');
    for (let n = 0; n < 5_000; n++) pool.release(open(pool, `c${n}`, `tenant-${n}`));
    expect(pool.tenantsKnown).toBeLessThanOrEqual(1024);
    // kept's tenant still holds its call, first in line when the pool is full.
    const others = [0, 1, 2].map((k) => open(pool, `k${k}`, 'kept'));
    expect(pool.open).toBe(4);
    expect(open(pool, 'z', 'z').seated).toBe(true);
    expect([kept.refused, ...others.map((s) => s.refused)]).toEqual([true, false, false, false]);
  });

  // grpc-js reports a call's end (onCancel, where the acceptor releases its slot) a tick after its
  // answer or its stream's reset, and Node emits a new stream that came in the same read before
  // that: the late call finds the ended call still holding its slot and "waiting for its message".
  it('gives a late call the slot of a call already over without counting a preemption, and takes nobody else', () => {
    const pool = new StreamPool(2);
    const hog = [0, 1].map((k) => open(pool, `hog${k}`, 'hog'));
    hog[0]!.over = true;
    let preempted = 0;
    const late = open(pool, 'late', 'other', () => preempted++);
    expect(late.seated).toBe(true);
    expect(preempted).toBe(0);
    expect(hog.map((s) => s.refused)).toEqual([false, false]);
    expect(hog.map((s) => s.counted)).toEqual([false, true]);
    expect(pool.open).toBe(2);
    // Its end reported at last: nothing more to give back.
    pool.release(hog[0]!);
    expect(pool.open).toBe(2);
    // A live stalled call is taken, and counted, as before.
    let more = 0;
    expect(open(pool, 'third', 'third', () => more++).seated).toBe(false); // share 0 of 2 for three holders
    pool.release(late);
    const hog2 = open(pool, 'hog2', 'hog');
    expect(hog2.seated).toBe(true);
    expect(open(pool, 'late2', 'other', () => more++).seated).toBe(true);
    expect(more).toBe(1);
    expect([hog[1]!.refused, hog2.refused]).toEqual([true, false]);
  });

  // The table against the Set-based pool it replaced (2c01f4c^), as a plain model: every call in
  // any order of taking, attribution, arrival, release and late admission, with the table growing
  // from 2 places and tenants forgotten and their indices reused (up to 3,000 tenant names).
  it('makes the choices the Set-based pool made, in any order of events, through growth and forgotten tenants', () => {
    class Model {
      open = 0;
      readonly byTenant = new Map<string, Set<ModelSlot>>();
      constructor(readonly max: number) {}
      take(c: ModelSlot): boolean {
        if (this.open >= this.max) return false;
        this.open++;
        c.counted = true;
        return true;
      }
      attribute(c: ModelSlot, tenant: string): void {
        this.unlist(c);
        c.tenant = tenant;
        if (!c.counted) return;
        let set = this.byTenant.get(tenant);
        if (set === undefined) this.byTenant.set(tenant, (set = new Set()));
        set.add(c);
      }
      release(c: ModelSlot): void {
        if (!c.counted) return;
        c.counted = false;
        this.open--;
        this.unlist(c);
      }
      unlist(c: ModelSlot): void {
        const set = c.tenant === undefined ? undefined : this.byTenant.get(c.tenant);
        if (set === undefined || !set.delete(c)) return;
        if (set.size === 0) this.byTenant.delete(c.tenant!);
      }
      admitLate(c: ModelSlot, tenant: string, preempted: () => void): boolean {
        if (this.take(c)) {
          this.attribute(c, tenant);
          return true;
        }
        const mine = this.byTenant.get(tenant)?.size ?? 0;
        const share = Math.floor(this.max / (this.byTenant.size + (mine === 0 ? 1 : 0)));
        if (mine >= share) return false;
        let victim: ModelSlot | undefined;
        let from = 0;
        for (const [t, set] of this.byTenant) {
          if (t === tenant || set.size <= share || set.size <= from) continue;
          for (const v of set) {
            if (!v.received) {
              victim = v;
              from = set.size;
              break;
            }
          }
        }
        if (victim === undefined) return false;
        this.release(victim);
        this.take(c);
        this.attribute(c, tenant);
        if (victim.preempt()) preempted();
        return true;
      }
    }
    type ModelSlot = TestSlot;
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
    let known = 0;
    for (let round = 0; round < 36; round++) {
      const max = round % 6 === 0 ? 300 : 1 + Math.floor(random() * (round % 3 === 0 ? 200 : 12));
      const names = round % 6 === 0 ? 3000 : 1 + Math.floor(random() * 6);
      const steps = round % 6 === 0 ? 6000 : 600;
      const pool = new StreamPool(max, 2);
      const model = new Model(max);
      const calls: Array<[TestSlot, ModelSlot]> = [];
      const events: string[][] = [[], []];
      for (let step = 0; step < steps; step++) {
        const op = random();
        const tenant = `t${Math.floor(random() * names)}`;
        const pick = Math.floor(random() * 1e9);
        if (op < 0.4) {
          const pair = [slot(`c${step}`), slot(`c${step}`)] as [TestSlot, ModelSlot];
          calls.push(pair);
          [pool, model].forEach((p, i) => {
            const c = pair[i]!;
            const on = () => events[i]!.push(`preempted by c${step}`);
            events[i]!.push(`c${step}:${p.take(c) ? (p.attribute(c, tenant), 'seated') : p.admitLate(c, tenant, on) ? 'late' : 'refused'}`);
          });
        } else if (op < 0.5) {
          const pair = [slot(`p${step}`), slot(`p${step}`)] as [TestSlot, ModelSlot];
          calls.push(pair);
          events[0]!.push(`p${step}:${pool.take(pair[0])}`);
          events[1]!.push(`p${step}:${model.take(pair[1])}`);
        } else if (op < 0.58) {
          const pending = calls.filter(([c]) => c.counted && c.tenant === undefined);
          const pair = pending[pick % Math.max(1, pending.length)];
          if (pair !== undefined) {
            pool.attribute(pair[0], tenant);
            model.attribute(pair[1], tenant);
          }
        } else if (op < 0.88) {
          const pair = calls[pick % Math.max(1, calls.length)];
          if (pair !== undefined) {
            pool.release(pair[0]);
            model.release(pair[1]);
            if (pick % 3 === 0 || calls.length > 100) calls.splice(calls.indexOf(pair), 1);
          }
        } else if (op < 0.96) {
          const pair = calls[pick % Math.max(1, calls.length)];
          if (pair !== undefined) pair[0].received = pair[1].received = true;
        } else {
          const pair = calls[pick % Math.max(1, calls.length)];
          if (pair !== undefined) pair[0].over = pair[1].over = true;
        }
        for (const [c, m] of calls) events[0]!.push(c.refused ? 'R' : c.counted ? 'C' : '-'), events[1]!.push(m.refused ? 'R' : m.counted ? 'C' : '-');
        if (events[0]!.join() !== events[1]!.join()) expect(events[0], `round ${round} step ${step}`).toEqual(events[1]);
        if (pool.open !== model.open) expect(pool.open, `round ${round} step ${step}`).toBe(model.open);
        known = Math.max(known, pool.tenantsKnown);
        events[0] = [];
        events[1] = [];
      }
      for (const [c] of calls) expect(c.seat === -1).toBe(!c.counted || c.tenant === undefined);
      expect(pool.capacity).toBeLessThanOrEqual(Math.max(2, 2 * max));
      expect(pool.open).toBe(calls.filter(([c]) => c.counted).length);
    }
    // Tenants were forgotten and their indices reused on the way.
    expect(known).toBe(1024);
  });
});
