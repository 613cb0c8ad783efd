// The gRPC header tap's HPACK decoder (src/ingest/hpack-decoder.ts) against
// two real encoders: hpack.js's compressor (every representation, Huffman on
// and off, table size updates, eviction), decoded side by side with
// hpack.js's decompressor as the oracle; and Node's HTTP/2 client, whose
// encoder is nghttp2's, captured off the wire. Only the routing headers are
// reported, with the name as sent; the dynamic table must stay in step over
// thousands of blocks for the values referenced by index to come out right.

import hpack from 'hpack.js';
import http2 from 'node:http2';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { Http2HeaderTap, tapSocket } from '../../src/ingest/grpc-header-tap.js';
import { HpackDecoder, HpackError } from '../../src/ingest/hpack-decoder.js';
import { Prng } from '../../src/prng.js';

const ROUTING = new Set(['x-scope-orgid', 'x-siglake-index']);

interface Field {
  name: string;
  value: string;
  huffman?: boolean;
  incremental?: boolean;
  neverIndex?: boolean;
}

/** What our decoder reports for a block. */
function ours(d: HpackDecoder, block: Buffer): [string, string][] {
  const out: [string, string][] = [];
  d.decode(block, (n, v) => out.push([n, v]));
  return out;
}

/** A dynamic table size update (§6.3): 001 and the size as a 5-bit prefixed integer. */
function sizeUpdate(size: number): Buffer {
  if (size < 31) return Buffer.from([0x20 | size]);
  const out = [0x3f];
  let v = size - 31;
  while (v >= 128) {
    out.push((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out.push(v);
  return Buffer.from(out);
}

/** hpack.js's compressor as a synchronous block encoder. */
function encoder(): { encode(fields: Field[]): Buffer; resize(size: number): Buffer } {
  const c = hpack.compressor.create({ table: { maxSize: 4096 } });
  const drain = (): Buffer => {
    const parts: Buffer[] = [];
    for (let x = c.read(); x !== null; x = c.read()) parts.push(x);
    return Buffer.concat(parts);
  };
  return {
    encode(fields) {
      c.write(fields);
      return drain();
    },
    resize(size) {
      // hpack.js shrinks its own table without saying so below its maximum: the update (§6.3) is written here.
      c.updateTableSize(size);
      const said = drain();
      return said.length > 0 ? said : sizeUpdate(size);
    },
  };
}

/** hpack.js's decompressor: every field of a block. */
function oracle(): (block: Buffer) => [string, string][] {
  const d = hpack.decompressor.create({ table: { maxSize: 4096 } });
  return (block) => {
    d.write(block);
    d.execute();
    const out: [string, string][] = [];
    for (let h = d.read(); h !== null; h = d.read()) if (ROUTING.has(h.name.toLowerCase())) out.push([h.name, h.value]);
    return out;
  };
}

const NAMES = ['x-scope-orgid', 'X-Scope-OrgID', 'x-siglake-index', 'X-SIGLAKE-INDEX', 'content-type', 'te', 'user-agent', 'grpc-timeout', 'authorization', 'x-custom', ':path', 'cache-control'];

function value(r: Prng): string {
  const kind = r.int(6);
  const len = kind === 5 ? r.range(300, 3000) : r.int(40);
  let s = '';
  for (let i = 0; i < len; i++) {
    const c = r.chance(0.1) ? r.pick([0, 9, 10, 13, 32, 127, 200, 255]) : r.range(0x21, 0x7f);
    s += String.fromCharCode(c);
  }
  // Values that repeat, so the encoder finds them in its table.
  return kind === 0 ? 'acme' : kind === 1 ? `t${r.int(20)}` : s;
}

describe('the header tap HPACK decoder', () => {
  it('reports what hpack.js decodes, over 3,000 blocks of every representation, with table size updates', () => {
    const r = new Prng(20261204);
    const enc = encoder();
    const dec = oracle();
    const d = new HpackDecoder(4096, ROUTING);
    let routed = 0;
    let most = 0;
    let emptied = 0;
    for (let b = 0; b < 3000; b++) {
      let block: Buffer = Buffer.alloc(0);
      if (r.chance(0.02)) block = enc.resize(r.pick([0, 256, 1024, 4096]));
      const fields: Field[] = [];
      for (let k = r.range(1, 12); k > 0; k--) {
        fields.push({
          name: r.chance(0.7) ? r.pick(NAMES) : `x-${r.int(50)}`,
          value: value(r),
          huffman: r.chance(0.6),
          incremental: r.chance(0.8),
          neverIndex: r.chance(0.1),
        });
      }
      block = Buffer.concat([block, enc.encode(fields)]);
      const want = dec(block);
      const got = ours(d, block);
      expect(got).toEqual(want);
      routed += got.length;
      most = Math.max(most, d.entries);
      if (d.entries === 0) emptied++;
    }
    expect(routed).toBeGreaterThan(3000);
    // The table filled and emptied on the way (evictions, the size updates to 0).
    expect(most).toBeGreaterThan(10);
    expect(emptied).toBeGreaterThan(0);
  });

  it('Huffman-decodes every octet value, alone and in runs', () => {
    const enc = encoder();
    const dec = oracle();
    const d = new HpackDecoder(4096, ROUTING);
    let all = '';
    for (let c = 0; c < 256; c++) all += String.fromCharCode(c);
    const values = [...Array.from({ length: 256 }, (_, c) => String.fromCharCode(c)), all, all.repeat(20)];
    for (const v of values) {
      const block = enc.encode([{ name: 'x-scope-orgid', value: v, huffman: true, incremental: false }]);
      expect(ours(d, block)).toEqual(dec(block));
      expect(ours(d, block)).toEqual([['x-scope-orgid', v]]);
    }
  });

  it("reads what Node's HTTP/2 client (nghttp2's encoder) sends, request after request on one connection", async () => {
    const blocks: Buffer[] = [];
    let bytes = Buffer.alloc(0);
    // A bare TCP server: collects the client's bytes and cuts HEADERS (+CONTINUATION) blocks out of the frames.
    const server = net.createServer((s) => {
      s.write(Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0])); // an empty SETTINGS
      s.on('data', (d: Buffer) => {
        bytes = Buffer.concat([bytes, d]);
      });
      s.on('error', () => {});
    });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
    const port = (server.address() as net.AddressInfo).port;
    const client = http2.connect(`http://127.0.0.1:${port}`);
    client.on('error', () => {});
    const sent: string[] = [];
    for (let k = 0; k < 200; k++) {
      const org = k % 7 === 0 ? `tenant-${k}` : `t${k % 5}`;
      sent.push(org);
      const req = client.request({ ':method': 'POST', ':path': '/opentelemetry.proto.collector.logs.v1.LogsService/Export', 'x-scope-orgid': org, 'content-type': 'application/grpc', 'x-pad': 'p'.repeat(k * 13) });
      req.on('error', () => {});
      req.end();
    }
    await new Promise((res) => setTimeout(res, 300));
    client.destroy();
    server.close();
    let off = 24; // the connection preface
    let block: Buffer[] = [];
    while (off + 9 <= bytes.length) {
      const len = bytes.readUIntBE(off, 3);
      const type = bytes[off + 3]!;
      const flags = bytes[off + 4]!;
      if (off + 9 + len > bytes.length) break;
      let payload = bytes.subarray(off + 9, off + 9 + len);
      off += 9 + len;
      if (type === 1) {
        if (flags & 0x8) payload = payload.subarray(1, payload.length - payload[0]!);
        if (flags & 0x20) payload = payload.subarray(5);
        block = [payload];
      } else if (type === 9) block.push(payload);
      else continue;
      if (flags & 0x4) blocks.push(Buffer.concat(block));
    }
    expect(blocks.length).toBeGreaterThan(100);
    const d = new HpackDecoder(4096, ROUTING);
    const got = blocks.flatMap((b) => ours(d, b).map(([, v]) => v));
    expect(got).toEqual(sent.slice(0, got.length));
    // Later requests reuse the table: the same org id costs a byte or two.
    expect(d.entries).toBeGreaterThan(0);
  });

  it('refuses malformed blocks', () => {
    const bad = (hex: string) => () => new HpackDecoder(4096, ROUTING).decode(Buffer.from(hex, 'hex'), () => {});
    expect(bad('80')).toThrow(HpackError); // indexed field 0
    expect(bad('be')).toThrow(/past the table/); // index 62, empty dynamic table
    expect(bad('3fe21f')).toThrow(/table size update/); // size update to 4096 + 31 + ... past the limit
    expect(bad('4085')).toThrow(/past the block/); // a literal name of 5 octets, none there
    expect(bad('ff' + 'ff'.repeat(6))).toThrow(/integer/);
    // A Huffman string of one byte 0x00: '0' (5 bits) then 000 padding, not all ones.
    expect(bad('408100')).toThrow(/padding/);
    // EOS in a string: 30 one bits, padded with ones (4 octets of 0xff).
    expect(bad('4084ffffffff')).toThrow(/EOS|padding/);
  });

  describe('in the tap, on the bytes of a connection', () => {
    const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
    /** A HEADERS frame (END_HEADERS) of `block` on `stream`. */
    const headers = (stream: number, block: Buffer): Buffer => {
      const h = Buffer.alloc(9);
      h.writeUIntBE(block.length, 0, 3);
      h[3] = 1;
      h[4] = 0x4 | 0x1;
      h.writeUInt32BE(stream, 5);
      return Buffer.concat([h, block]);
    };

    it('follows a client that resizes its table (a size update no longer cuts the connection) and marks the dropped routing header after it', () => {
      const enc = encoder();
      const tap = new Http2HeaderTap();
      tap.feed(PREFACE);
      tap.feed(headers(1, Buffer.concat([sizeUpdate(0), sizeUpdate(4096), enc.encode([{ name: 'x-scope-orgid', value: 'acme' }])])));
      tap.feed(headers(3, Buffer.concat([enc.resize(1024), enc.encode([{ name: 'x-scope-orgid', value: ' acme' }])])));
      expect(tap.broken).toBe(false);
      expect(tap.take(1)).toBeUndefined();
      expect(tap.take(3)).toBe('x-scope-orgid');
    });

    it('keeps a bounded table whatever a client enters in it (20,000 new fields of 100 bytes)', () => {
      const enc = encoder();
      const tap = new Http2HeaderTap();
      tap.feed(PREFACE);
      for (let i = 0; i < 20_000; i++) tap.feed(headers(2 * i + 1, enc.encode([{ name: `x-n${i}`, value: 'v'.repeat(100) }])));
      expect(tap.broken).toBe(false);
      // 4,096 octets of table hold at most 4096 / (32 + 4 + 100) entries.
      expect(tap.tableEntries).toBeLessThanOrEqual(Math.floor(4096 / 136));
      expect(tap.tableEntries).toBeGreaterThan(0);
    });
  });
});

describe('the tap between the socket and HTTP/2', () => {
  it('passes what HTTP/2 writes in one corked batch to the socket as one writev, in order', async () => {
    const received: Buffer[] = [];
    const server = net.createServer((s) => s.on('data', (d: Buffer) => received.push(d)));
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
    const port = (server.address() as net.AddressInfo).port;
    const socket = net.connect(port, '127.0.0.1');
    await new Promise((res) => socket.once('connect', res));
    const writev = (socket as unknown as { _writev: (...a: unknown[]) => void })._writev;
    let writevs = 0;
    (socket as unknown as { _writev: (...a: unknown[]) => void })._writev = function (this: unknown, ...a: unknown[]) {
      writevs++;
      return writev.apply(this, a);
    };
    const duplex = tapSocket(socket, Buffer.alloc(0));
    duplex.cork();
    const done = new Promise((res) => {
      duplex.write(Buffer.from('one,'));
      duplex.write(Buffer.from('two,'));
      duplex.write(Buffer.from('three'), res);
    });
    duplex.uncork();
    await done;
    await new Promise((res) => setTimeout(res, 50));
    expect(writevs).toBe(1);
    expect(Buffer.concat(received).toString()).toBe('one,two,three');
    socket.destroy();
    server.close();
  });
});

