// The native fast walk (native/otlp-walk.c, in the addon `npm run build` makes) against
// the JS fast walk, the exact walk and the fuzz suite's independent oracle
// (test/reliability/lib/otlp-oracle.ts): the same mutated bodies as
// otlp-wire-walks.test.ts, every generator fixture, every truncation of a
// body, every alignment, views into larger and shared buffers, and the
// loader's refusals. The addon must be built here: a missing addon fails this
// file rather than skipping it (CI builds it with SIGLAKE_NATIVE_BUILD=required).

import { isUtf8 } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { FixtureGenerator } from '../../src/otlp/fixtures.js';
import { ADDON_PATH } from '../../src/native/addon.js';
import { loadNativeWalk, type NativeWalk } from '../../src/native/otlp-walk.js';
import { MAX_ANY_VALUE_DEPTH, Msg, ROOT_MSG, type Signal } from '../../src/otlp/schema.js';
import { ACTIONS, fastWalk, useOtlpWalk, validateExportRequest, validateExportRequestExact } from '../../src/otlp/wire-validator.js';
import { proto } from '../helpers/otlp-bodies.js';
import { mutatedCases, ProtoMutator, walkOutcome as outcome } from '../reliability/lib/otlp-mutator.js';
import { OtlpOracle } from '../reliability/lib/otlp-oracle.js';
import { Prng } from '../reliability/lib/prng.js';

const oracle = new OtlpOracle(proto);
const mutator = new ProtoMutator(oracle);

/** The layout wire-validator.ts hands the addon (the op codes 0-7, then the action bits). */
const LAYOUT = Int32Array.from([0, 1, 2, 3, 4, 5, 6, 7, 4, 1 << 9, 1 << 10, 16]);
const STACK_CAP = 2 * (16 + 3 * (MAX_ANY_VALUE_DEPTH + 1));

function load(): NativeWalk {
  const r = loadNativeWalk({ actions: ACTIONS, anyValue: Msg.AnyValue, maxAnyDepth: MAX_ANY_VALUE_DEPTH, stackCap: STACK_CAP, layout: LAYOUT });
  if (r.walk === null) throw new Error(`${r.failure}: run npm run build`);
  return r.walk;
}
const native = load();
const nativeOf = (signal: Signal, body: Uint8Array): number => native.walk(ROOT_MSG[signal]!, body);

describe('the native walk', () => {
  it('is what validateExportRequest runs by default (auto), and --otlp-walk js turns it off', () => {
    expect(useOtlpWalk('auto')).toEqual({ walk: 'native' });
    expect(useOtlpWalk('js')).toEqual({ walk: 'js' });
    expect(useOtlpWalk('native')).toEqual({ walk: 'native' });
  });

  it('agrees with the oracle and with the JS fast walk on thousands of mutated bodies, with zero mismatches', () => {
    const prng = new Prng(0x5eed_0b);
    const gen = new FixtureGenerator(prng.u32(), proto);
    const mismatches: string[] = [];
    let valid = 0;
    let accepted = 0;
    const CASES = 3000;
    for (const { i, signal, body, kinds } of mutatedCases(mutator, gen, prng, CASES)) {
      const o = oracle.check(signal, body);
      const n = nativeOf(signal, body);
      const js = fastWalk(ROOT_MSG[signal]!, body);
      const where = `case ${i} ${signal} [${kinds.join(',')}] oracle ${o.valid ? o.records : `refused (${o.why})`}`;
      if (n !== -1 && (!o.valid || n !== o.records)) mismatches.push(`${where}: native walk accepted with ${n}`);
      if (n !== js) mismatches.push(`${where}: native walk ${n}, JS fast walk ${js}`);
      if (o.valid) valid++;
      if (n !== -1) accepted++;
    }
    expect(mismatches).toEqual([]);
    expect(valid).toBeGreaterThan(CASES / 10);
    expect(valid).toBeLessThan(CASES);
    expect(accepted).toBeGreaterThan(valid / 2);
  });

  it('counts every generator fixture as the exact walk does, small and 256 KiB, every value kind', () => {
    const gen = new FixtureGenerator(7, proto);
    for (const signal of ['logs', 'traces'] as const) {
      for (const targetBytes of [0, 60, 1024, 16 * 1024, 256 * 1024]) {
        for (const allValueKinds of [false, true]) {
          const f = gen.request(signal, { targetBytes, allValueKinds, resources: 2 });
          expect(nativeOf(signal, f.protobuf), `${signal} ${targetBytes} ${allValueKinds}`).toBe(f.records);
          expect(validateExportRequestExact(signal, f.protobuf)).toBe(f.records);
        }
      }
    }
  });

  it('gives up (never crashes, never accepts) on every truncation of a body, and on an empty one counts 0', () => {
    const gen = new FixtureGenerator(11, proto);
    const f = gen.request('traces', { targetBytes: 3000, allValueKinds: true });
    expect(nativeOf('traces', new Uint8Array(0))).toBe(0);
    for (let cut = 1; cut < f.protobuf.length; cut++) {
      const body = f.protobuf.subarray(0, cut);
      const n = nativeOf('traces', body);
      const exact = outcome(validateExportRequestExact, 'traces', body);
      if (n !== -1) expect(n, `cut at ${cut}`).toBe(exact);
      expect(n, `cut at ${cut}`).toBe(fastWalk(ROOT_MSG.traces!, body));
    }
  });

  it('reads only its view: bytes after the view and before it are not the body', () => {
    const gen = new FixtureGenerator(13, proto);
    const f = gen.request('logs', { targetBytes: 2000 });
    // The body in the middle of a buffer whose other bytes would make it invalid if read.
    const holder = new Uint8Array(f.protobuf.length + 64).fill(0xff);
    holder.set(f.protobuf, 32);
    expect(native.walk(ROOT_MSG.logs!, holder.subarray(32, 32 + f.protobuf.length))).toBe(f.records);
    // A prefix whose last string runs past the view's end: given up, as the JS walk does.
    const prefix = holder.subarray(32, 32 + f.protobuf.length - 1);
    expect(native.walk(ROOT_MSG.logs!, prefix)).toBe(fastWalk(ROOT_MSG.logs!, prefix));
  });

  it('reads a body in a SharedArrayBuffer (the request ring), at every alignment', () => {
    const gen = new FixtureGenerator(17, proto);
    const f = gen.request('logs', { targetBytes: 5000, allValueKinds: true });
    const sab = new SharedArrayBuffer(f.protobuf.length + 16);
    for (let at = 0; at < 8; at++) {
      const view = new Uint8Array(sab, at, f.protobuf.length);
      view.set(f.protobuf);
      expect(native.walk(ROOT_MSG.logs!, view), `at ${at}`).toBe(f.records);
    }
  });

  it('checks UTF-8 as isUtf8 does: every 1- to 4-byte sequence around the edges, at every place in a string', () => {
    const ld = (no: number, content: readonly number[]): number[] => [(no << 3) | 2, content.length, ...content];
    const logs = (record: readonly number[]): Uint8Array => Uint8Array.from(ld(1, ld(2, ld(2, record))));
    const seqs: number[][] = [];
    for (const lead of [0x7f, 0x80, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xec, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xff]) {
      seqs.push([lead]);
      for (const c1 of [0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0]) {
        seqs.push([lead, c1]);
        for (const c2 of [0x80, 0xbf, 0x41]) {
          seqs.push([lead, c1, c2]);
          seqs.push([lead, c1, c2, 0x80], [lead, c1, c2, 0xc0]);
        }
      }
    }
    let checked = 0;
    for (const seq of seqs) {
      for (const before of [0, 3, 15, 16, 17]) {
        // LogRecord.severity_text (field 3), a string of at most 40 bytes.
        const text = [...Array<number>(before).fill(0x61), ...seq, 0x62, 0x63];
        const body = logs(ld(3, text));
        const want = isUtf8(Uint8Array.from(text)) ? 1 : -1;
        expect(native.walk(ROOT_MSG.logs!, body), `${seq.map((b) => b.toString(16)).join(' ')} after ${before}`).toBe(want);
        expect(outcome(validateExportRequest, 'logs', body)).toBe(outcome(validateExportRequestExact, 'logs', body));
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(2000);
  });

  it('gives up on what is not a Uint8Array and on an unknown root message, and throws on nothing', () => {
    const body = new FixtureGenerator(19, proto).request('logs', { targetBytes: 500 }).protobuf;
    const addon = native as unknown as { walk: (...a: unknown[]) => number };
    expect(addon.walk(ROOT_MSG.logs, Array.from(body))).toBe(-1);
    expect(addon.walk(ROOT_MSG.logs, new Int8Array(body.buffer, body.byteOffset, body.length))).toBe(-1);
    expect(addon.walk(ROOT_MSG.logs, body.buffer)).toBe(-1);
    expect(addon.walk(10_000, body)).toBe(-1);
    expect(addon.walk(-1, body)).toBe(-1);
    expect(addon.walk('1', body)).toBe(-1);
    expect(addon.walk()).toBe(-1);
  });
});

describe('loading the native walk', () => {
  const table = { actions: ACTIONS, anyValue: Msg.AnyValue, maxAnyDepth: MAX_ANY_VALUE_DEPTH, stackCap: STACK_CAP, layout: LAYOUT };

  it('says why when the addon is not there', () => {
    const r = loadNativeWalk(table, '/nonexistent/siglake_native.node');
    expect(r.walk).toBeNull();
    expect(r.failure).toBe('native addon siglake_native.node: not built (npm run build builds it; it needs a C compiler, make and python3)');
  });

  it('refuses a table written in another layout, or of the wrong shape', () => {
    const other = loadNativeWalk({ ...table, layout: Int32Array.from([0, 1, 2, 3, 4, 5, 6, 8, 4, 1 << 9, 1 << 10, 16]) }, ADDON_PATH);
    expect(other.failure).toMatch(/native OTLP walk: init: the action layout differs/);
    const ragged = loadNativeWalk({ ...table, actions: ACTIONS.subarray(0, 300) }, ADDON_PATH);
    expect(ragged.failure).toMatch(/init: the action table must hold 256 entries per message/);
    const deep = loadNativeWalk({ ...table, stackCap: 1 << 20 }, ADDON_PATH);
    expect(deep.failure).toMatch(/init: stackCap or maxAnyDepth out of range/);
    // A refused init leaves the thread's table as it was.
    expect(native.walk(ROOT_MSG.logs!, new FixtureGenerator(23, proto).request('logs', { targetBytes: 500 }).protobuf)).toBeGreaterThan(0);
  });
});
