// Request bodies made before the clock starts, so generation is off the hot
// path. A pool is `bodies` distinct requests made by the project's own
// FixtureGenerator (realistic resources, scopes, log bodies, trace ids), with a
// seed of its own; a lane (tenant, index) sends the bodies of pool
// `lane mod pools` in turn. Bodies are kept encoded (protobuf or OTLP/JSON) and
// already gzipped when asked, exactly as they go on the wire.

import { gzipSync } from 'node:zlib';
import { FixtureGenerator } from '../otlp/fixtures.js';
import type { ProtoRoot } from '../otlp/proto-root.js';
import type { BodyEncoding, SignalMix } from './loadgen-options.js';

export interface PooledBody {
  signal: 'logs' | 'traces';
  /** The bytes sent (encoded, gzipped when asked). */
  wire: Buffer;
  /** Size before compression. */
  rawBytes: number;
  /** Log records or spans in the request. */
  records: number;
}

export interface BodyPoolOptions {
  root: ProtoRoot;
  signal: SignalMix;
  encoding: BodyEncoding;
  /** Gzip the bytes here (HTTP); gRPC compresses in grpc-js instead. */
  gzip: boolean;
  bodyBytes: number;
  logBodyBytes: number | undefined;
  bodies: number;
  seed: number;
}

export class BodyPool {
  readonly #o: BodyPoolOptions;
  readonly #pools = new Map<number, PooledBody[]>();
  #bytes = 0;

  constructor(opts: BodyPoolOptions) {
    this.#o = opts;
  }

  /** How many distinct pools fit in `capBytes` when `lanes` lanes share them (at least 1, at most `lanes`). */
  static poolCount(lanes: number, bodies: number, bodyBytes: number, capBytes: number): number {
    return Math.max(1, Math.min(lanes, Math.floor(capBytes / Math.max(1, bodies * bodyBytes))));
  }

  /** Distinct bodies made so far. */
  get size(): number {
    let n = 0;
    for (const p of this.#pools.values()) n += p.length;
    return n;
  }

  /** Bytes of every body made so far, as sent. */
  get bytes(): number {
    return this.#bytes;
  }

  /** The bodies of pool `id`, made on first use. */
  pool(id: number): PooledBody[] {
    let p = this.#pools.get(id);
    if (p === undefined) {
      p = this.#make(id);
      this.#pools.set(id, p);
    }
    return p;
  }

  #make(id: number): PooledBody[] {
    const o = this.#o;
    // A seed per pool, spread so neighbouring pools do not share a stream.
    const gen = new FixtureGenerator((o.seed + Math.imul(id + 1, 0x9e3779b1)) >>> 0, o.root);
    const count = o.signal === 'mixed' ? Math.max(2, o.bodies) : o.bodies;
    const out: PooledBody[] = [];
    for (let i = 0; i < count; i++) {
      const signal = o.signal === 'mixed' ? (i % 2 === 0 ? 'logs' : 'traces') : o.signal;
      const f = gen.request(signal, {
        targetBytes: o.bodyBytes,
        ...(o.logBodyBytes !== undefined ? { logBodyBytes: o.logBodyBytes } : {}),
        // Records of different pools at different times, as different services would send.
        startTimeUnixNano: String(1_700_000_000_000_000_000n + BigInt(id) * 1_000_000_000n),
      });
      const raw = o.encoding === 'json' ? f.json : f.protobuf;
      const wire = o.gzip ? gzipSync(raw) : Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
      this.#bytes += wire.length;
      out.push({ signal, wire, rawBytes: raw.length, records: f.records });
    }
    return out;
  }
}
