// Node's HTTP/2 layer (nghttp2) silently drops a header field whose value has
// leading or trailing whitespace, or holds NUL, CR, LF, another control
// character or DEL, and one whose name is not lower case. grpc-js then sees a
// call without its X-Scope-OrgID and would route it to `default` (or, in
// default mode, accept it instead of refusing it): a tenant-isolation breach
// (contract §5). Nothing in Node reports the drop, so the gRPC port reads the
// HPACK header blocks itself, from the bytes on their way to nghttp2, and
// remembers which streams carried a routing header that nghttp2 will drop;
// the acceptor refuses those calls with INVALID_ARGUMENT.
//
// The tap sits between the TCP socket and HTTP/2 as a Duplex. It parses only
// frame headers; DATA payloads are skipped without a copy, and only HEADERS and
// CONTINUATION payloads are decoded (hpack-decoder.ts keeps the dynamic table
// in step with the client's encoder).

import { HpackDecoder } from './hpack-decoder.js';
import type { Http2Stream } from 'node:http2';
import type net from 'node:net';
import { Duplex } from 'node:stream';

export const TAP = Symbol.for('siglake.grpcHeaderTap');

const PREFACE_BYTES = 24;
const FRAME_HEADER_BYTES = 9;
const TYPE_HEADERS = 0x1;
const TYPE_CONTINUATION = 0x9;
const FLAG_END_HEADERS = 0x4;
const FLAG_PADDED = 0x8;
const FLAG_PRIORITY = 0x20;
/** nghttp2 refuses header lists far smaller; past this the connection is cut. */
const MAX_HEADER_BLOCK_BYTES = 256 * 1024;
/**
 * Streams remembered at once; a call is looked up as soon as its headers are
 * parsed. Past it the oldest entry goes, and every stream up to the highest
 * one forgotten reads as dropped (fail-closed: see take()).
 */
export const MAX_REMEMBERED = 4096;
/** What nghttp2 would decode the table with: Node's default SETTINGS_HEADER_TABLE_SIZE. */
const HEADER_TABLE_BYTES = 4096;

/** What take() answers for a stream whose entry may have been evicted. */
const EVICTED = 'x-scope-orgid or x-siglake-index (forgotten: too many streams with one)';

const ROUTING = new Set(['x-scope-orgid', 'x-siglake-index']);

/** Whether nghttp2 (RFC 9113 §8.2.1) drops this value instead of passing it on. */
export function droppedByHttp2(v: string): boolean {
  const n = v.length;
  if (n === 0) return false;
  const first = v.charCodeAt(0);
  const last = v.charCodeAt(n - 1);
  if (first === 0x20 || first === 0x09 || last === 0x20 || last === 0x09) return true;
  for (let i = 0; i < n; i++) {
    const c = v.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09) || c === 0x7f) return true;
  }
  return false;
}

export class Http2HeaderTap {
  /** Stream id → the routing header nghttp2 will drop from it. */
  readonly #bad = new Map<number, string>();
  /**
   * The highest stream id whose entry was evicted to keep #bad bounded. A
   * stream at or below it that #bad does not hold may have lost its entry:
   * it is read as dropped, never as clean.
   */
  #evictedUpTo = 0;
  #pending: Buffer | undefined;
  #prefaceLeft = PREFACE_BYTES;
  /** Payload bytes of the current non-header frame still to skip. */
  #skip = 0;
  #block: Buffer[] = [];
  #blockBytes = 0;
  #blockStream = 0;
  readonly #decoder = new HpackDecoder(HEADER_TABLE_BYTES, ROUTING);
  readonly #onRouting = (name: string, value: string): void => {
    const lower = name.toLowerCase();
    if (lower !== name || droppedByHttp2(value)) this.#remember(this.#blockStream, lower);
  };
  /** Set when the byte stream stopped making sense; the connection is cut. */
  broken = false;

  /** Entries in the connection's HPACK dynamic table as the tap follows it (bounded by HEADER_TABLE_BYTES). */
  get tableEntries(): number {
    return this.#decoder.entries;
  }

  /**
   * The routing header of `streamId` that HTTP/2 dropped, if any (forgotten
   * once asked). A stream whose entry may have been evicted (its id at or
   * below the highest evicted one) reads as dropped: a client that leaves
   * more than MAX_REMEMBERED such streams unclaimed (one write of 4,097
   * HEADERS frames, the later ones answered 415 without a call) would
   * otherwise have the first call's header read as absent, and the call
   * routed to `default` (fail-closed, contract §5).
   */
  take(streamId: number): string | undefined {
    const v = this.#bad.get(streamId);
    if (v !== undefined) {
      this.#bad.delete(streamId);
      return v;
    }
    return streamId <= this.#evictedUpTo ? EVICTED : undefined;
  }

  feed(chunk: Buffer): void {
    if (this.broken) return;
    let buf = chunk;
    let off = 0;
    if (this.#prefaceLeft > 0) {
      const n = Math.min(this.#prefaceLeft, buf.length);
      this.#prefaceLeft -= n;
      off = n;
    }
    if (this.#skip > 0 && off < buf.length) {
      const n = Math.min(this.#skip, buf.length - off);
      this.#skip -= n;
      off += n;
    }
    if (off >= buf.length) return;
    if (this.#pending !== undefined) {
      buf = Buffer.concat([this.#pending, buf.subarray(off)]);
      off = 0;
      this.#pending = undefined;
    }
    while (off < buf.length) {
      if (buf.length - off < FRAME_HEADER_BYTES) break;
      const len = (buf[off]! << 16) | (buf[off + 1]! << 8) | buf[off + 2]!;
      const type = buf[off + 3]!;
      const flags = buf[off + 4]!;
      const stream = buf.readUInt32BE(off + 5) & 0x7fffffff;
      if (type !== TYPE_HEADERS && type !== TYPE_CONTINUATION) {
        const have = buf.length - off - FRAME_HEADER_BYTES;
        if (have >= len) {
          off += FRAME_HEADER_BYTES + len;
          continue;
        }
        this.#skip = len - have;
        return;
      }
      if (buf.length - off - FRAME_HEADER_BYTES < len) break;
      const payload = buf.subarray(off + FRAME_HEADER_BYTES, off + FRAME_HEADER_BYTES + len);
      off += FRAME_HEADER_BYTES + len;
      this.#headerFrame(type, flags, stream, payload);
      if (this.broken) return;
    }
    if (off < buf.length) {
      const rest = buf.subarray(off);
      if (rest.length > MAX_HEADER_BLOCK_BYTES + FRAME_HEADER_BYTES) {
        this.broken = true;
        return;
      }
      this.#pending = Buffer.from(rest);
    }
  }

  #headerFrame(type: number, flags: number, stream: number, payload: Buffer): void {
    let start = 0;
    let end = payload.length;
    if (type === TYPE_HEADERS) {
      if (flags & FLAG_PADDED) {
        end -= payload[0] ?? 0;
        start = 1;
      }
      if (flags & FLAG_PRIORITY) start += 5;
      this.#block = [];
      this.#blockBytes = 0;
      this.#blockStream = stream;
    }
    if (end < start) {
      this.broken = true;
      return;
    }
    this.#block.push(payload.subarray(start, end));
    this.#blockBytes += end - start;
    if (this.#blockBytes > MAX_HEADER_BLOCK_BYTES) {
      this.broken = true;
      return;
    }
    if ((flags & FLAG_END_HEADERS) === 0) return;
    const block = this.#block.length === 1 ? this.#block[0]! : Buffer.concat(this.#block);
    this.#block = [];
    this.#blockBytes = 0;
    try {
      this.#decoder.decode(block, this.#onRouting);
    } catch {
      this.broken = true;
    }
  }

  #remember(stream: number, header: string): void {
    if (this.#bad.size >= MAX_REMEMBERED) {
      const oldest = this.#bad.keys().next().value;
      if (oldest !== undefined) {
        this.#bad.delete(oldest);
        if (oldest > this.#evictedUpTo) this.#evictedUpTo = oldest;
      }
    }
    this.#bad.set(stream, header);
  }
}

/**
 * Wraps `socket` so that every byte passes through a header tap on its way to
 * HTTP/2. The tap is reachable as `duplex[TAP]` (and through grpc-js's view of
 * the session's socket).
 */
export function tapSocket(socket: net.Socket, first: Buffer): Duplex {
  const tap = new Http2HeaderTap();
  const duplex = new Duplex({
    read() {
      socket.resume();
    },
    write(chunk: Buffer, _enc, cb) {
      socket.write(chunk, cb);
    },
    // HTTP/2 hands over what it has to send in one corked batch (several
    // frames, often several calls' answers): one writev on the socket, not a
    // write system call per buffer (docs/performance.md, "The gRPC port's
    // header tap").
    writev(chunks: { chunk: Buffer }[], cb) {
      socket.cork();
      const last = chunks.length - 1;
      for (let i = 0; i < last; i++) socket.write(chunks[i]!.chunk);
      socket.write(chunks[last]!.chunk, cb);
      socket.uncork();
    },
    final(cb) {
      socket.end();
      cb();
    },
    destroy(err, cb) {
      socket.destroy();
      cb(err);
    },
  });
  Object.defineProperty(duplex, TAP, { value: tap });
  for (const k of ['remoteAddress', 'remotePort', 'localAddress', 'localPort', 'remoteFamily'] as const) {
    Object.defineProperty(duplex, k, { value: socket[k], enumerable: true });
  }
  const onData = (d: Buffer) => {
    tap.feed(d);
    if (tap.broken) {
      socket.destroy();
      return;
    }
    if (!duplex.push(d)) socket.pause();
  };
  socket.on('data', onData);
  socket.on('end', () => duplex.push(null));
  socket.on('close', () => duplex.destroy());
  socket.on('error', () => duplex.destroy());
  onData(first);
  return duplex;
}

/** The HTTP/2 stream of a grpc-js server call, and the tap of its connection. */
export function tapOfCall(call: unknown): { stream: Http2Stream; tap: Http2HeaderTap | undefined } | undefined {
  let c = call as { stream?: Http2Stream; nextCall?: unknown } | undefined;
  for (let i = 0; i < 8 && c !== undefined && c.stream === undefined; i++) c = c.nextCall as typeof c;
  const stream = c?.stream;
  if (stream === undefined || stream.id === undefined) return undefined;
  const sock = stream.session?.socket as unknown as Record<string | symbol, unknown> | undefined;
  const tap = (sock?.[TAP] ?? (sock?.['stream'] as Record<symbol, unknown> | undefined)?.[TAP]) as Http2HeaderTap | undefined;
  return { stream, tap };
}

/**
 * The peer address of a grpc-js server call (`host:port`), or 'unknown'.
 * grpc-js's getPeer() reads the session's socket, which for a tapped
 * connection is Node's wrapper around our duplex and has no address: the
 * address is the duplex's (tapSocket copies it from the TCP socket).
 */
export function peerOfCall(call: unknown): string {
  let c = call as { stream?: Http2Stream; nextCall?: unknown } | undefined;
  for (let i = 0; i < 8 && c !== undefined && c.stream === undefined; i++) c = c.nextCall as typeof c;
  const sock = c?.stream?.session?.socket as unknown as { remoteAddress?: string; remotePort?: number; stream?: { remoteAddress?: string; remotePort?: number } } | undefined;
  const at = sock?.remoteAddress !== undefined ? sock : sock?.stream;
  if (at?.remoteAddress === undefined) return 'unknown';
  return at.remotePort !== undefined ? `${at.remoteAddress}:${at.remotePort}` : at.remoteAddress;
}
