import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { ProtoWriter } from '../../src/otlp/proto-writer.js';

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

/** What protobufjs' own writer produces. */
function reference(write: (w: protobuf.Writer) => void): string {
  const w = protobuf.Writer.create();
  write(w);
  return hex(w.finish());
}

const halves = (v: bigint): [number, number] => {
  const u = BigInt.asUintN(64, v);
  return [Number(u & 0xffffffffn), Number(u >> 32n)];
};

const long = (v: bigint): protobuf.Long => new protobuf.util.LongBits(...halves(v)).toLong(true);

describe('ProtoWriter', () => {
  it('writes varints, fixed values and doubles as protobufjs does', () => {
    const values32 = [0, 1, 127, 128, 300, 16383, 16384, 2 ** 21 - 1, 2 ** 21, 2 ** 28 - 1, 2 ** 28, 2 ** 31, 2 ** 32 - 1];
    for (const v of values32) {
      const w = new ProtoWriter(1);
      w.varint32(v);
      w.fixed32(v);
      expect(hex(w.finish()), String(v)).toBe(reference((r) => r.uint32(v).fixed32(v)));
    }
    const values64 = [0n, 1n, 2n ** 32n, 2n ** 35n - 1n, 2n ** 35n, 2n ** 42n, 2n ** 49n, 2n ** 56n, 2n ** 63n, 2n ** 64n - 1n, -1n, -(2n ** 63n), 1700000000000000001n];
    for (const v of values64) {
      const [lo, hi] = halves(v);
      const w = new ProtoWriter(1);
      w.varint64(lo, hi);
      w.fixed64(lo, hi);
      expect(hex(w.finish()), String(v)).toBe(reference((r) => r.uint64(long(v)).fixed64(long(v))));
    }
    for (const d of [0, -0, 1.5, -637.704, Number.MAX_VALUE, Number.MIN_VALUE, Infinity, NaN]) {
      const w = new ProtoWriter(1);
      w.double(d);
      expect(hex(w.finish())).toBe(reference((r) => r.double(d)));
    }
  });

  it.each([0, 1, 127, 128, 16383, 16384, 2 ** 21 - 1, 2 ** 21])('patches a minimal length prefix for %i bytes of content', (n) => {
    const content = Uint8Array.from({ length: n }, (_, i) => i & 0xff);
    const w = new ProtoWriter(4);
    w.mark(1);
    w.openMessage(1);
    w.copy(content, 0, n);
    w.closeMessage();
    w.mark(2);
    w.varint32(0x10); // tag of field 2, varint
    w.varint32(7);
    const expected = reference((r) => r.uint32(0x0a).bytes(content).uint32(0x10).uint32(7));
    expect(hex(w.finish())).toBe(expected);
  });

  it('puts each message\'s fields in field-number order, keeping a repeated field\'s elements in order', () => {
    const w = new ProtoWriter(8);
    // Outer fields arrive as 3, 1 (repeated, two elements), 2.
    w.mark(3);
    w.tag(3, 0);
    w.varint32(33);
    w.mark(1);
    for (const inner of [[5, 1], [5, 2]]) {
      w.openMessage(1);
      // Inner fields arrive as 9, 4: they are sorted inside the nested message too.
      w.mark(9);
      w.tag(9, 0);
      w.varint32(inner[1]);
      w.mark(4);
      w.tag(4, 0);
      w.varint32(inner[0]);
      w.closeMessage();
    }
    w.mark(2);
    w.tag(2, 0);
    w.varint32(22);
    const expected = reference((r) => {
      r.uint32(0x0a).fork().uint32(0x20).uint32(5).uint32(0x48).uint32(1).ldelim();
      r.uint32(0x0a).fork().uint32(0x20).uint32(5).uint32(0x48).uint32(2).ldelim();
      r.uint32(0x10).uint32(22).uint32(0x18).uint32(33);
    });
    expect(hex(w.finish())).toBe(expected);
  });

  it('sorts a large out-of-order message that needs the buffer to grow', () => {
    const big = Uint8Array.from({ length: 100_000 }, (_, i) => (i * 7) & 0xff);
    const w = new ProtoWriter(16);
    w.mark(2);
    w.openMessage(2);
    w.copy(big, 0, big.length);
    w.closeMessage();
    w.mark(1);
    w.tag(1, 0);
    w.varint32(1);
    expect(hex(w.finish())).toBe(reference((r) => r.uint32(0x08).uint32(1).uint32(0x12).bytes(big)));
  });
});
