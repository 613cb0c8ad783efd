// Reads one segment file, finished or live, record by record, and says where
// and why it stopped: a clean end, a torn tail (what a crash mid-append
// leaves), or corruption (docs/wal-format.md "Reading: how a segment ends").
//
// The reader is strict: it accepts exactly what the format allows. It reads
// through one reused buffer, so a record's payload is a view that stays valid
// only until the next call to next().

import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { basename } from 'node:path';
import { CorruptionError } from '../errors.js';
import {
  RECORD_HEADER_SIZE,
  SEGMENT_HEADER_SIZE,
  decodeRecordHeader,
  decodeSegmentHeader,
  MAX_SEGMENT_FILE_BYTES,
  continueCrc,
  parseSegmentName,
  recordCrc,
  recordHeaderCrc,
  type RecordType,
  type SegmentHeader,
} from './format.js';
import { allZero, fileZeros } from './zeros.js';

export interface WalRecord {
  /** Offset of the record header in the segment file. */
  readonly offset: number;
  readonly type: RecordType;
  /** Log records or spans in the payload. */
  readonly count: number;
  readonly timeMs: number;
  /** A view into the reader's buffer: valid until the next call to next(). */
  readonly payload: Uint8Array;
}

export type SegmentStop =
  | { readonly kind: 'end'; readonly offset: number }
  | { readonly kind: 'torn'; readonly offset: number; readonly why: string }
  | { readonly kind: 'corrupt'; readonly offset: number; readonly error: CorruptionError };

/** What a whole read of a segment found. */
export interface SegmentScan {
  readonly path: string;
  readonly size: number;
  readonly header: SegmentHeader | null;
  readonly records: number;
  readonly stop: SegmentStop;
}

const CHUNK = 1 << 20;

export class SegmentReader implements Iterable<WalRecord> {
  readonly path: string;
  /** The number in the file name, or 0 when the name is not a segment name (the header check then skips it). */
  readonly number: number;
  #fd: number;
  #size: number;
  #buf: Buffer;
  #bufPos = 0;
  #bufLen = 0;
  #pos = 0;
  #header: SegmentHeader | null = null;
  #records = 0;
  #stop: SegmentStop | null = null;

  /** Opens `path` and reads up to its size at this moment (a live segment may grow; later bytes are not seen). */
  constructor(path: string) {
    this.path = path;
    this.number = parseSegmentName(basename(path))?.number ?? 0;
    this.#fd = openSync(path, 'r');
    try {
      this.#size = fstatSync(this.#fd).size;
    } catch (err) {
      closeSync(this.#fd);
      throw err;
    }
    this.#buf = Buffer.allocUnsafe(Math.min(CHUNK, Math.max(this.#size, SEGMENT_HEADER_SIZE)));
  }

  /** Reads the whole segment and returns what it found, closing the file. */
  static scan(path: string): SegmentScan {
    const r = new SegmentReader(path);
    try {
      while (r.next() !== null);
      return { path, size: r.size, header: r.header, records: r.records, stop: r.stop as SegmentStop };
    } finally {
      r.close();
    }
  }

  get size(): number {
    return this.#size;
  }

  /** The segment header, once read and found good. */
  get header(): SegmentHeader | null {
    return this.#header;
  }

  /** Whole records returned so far. */
  get records(): number {
    return this.#records;
  }

  /** Why reading stopped; null until next() has returned null. */
  get stop(): SegmentStop | null {
    return this.#stop;
  }

  close(): void {
    if (this.#fd >= 0) closeSync(this.#fd);
    this.#fd = -1;
  }

  *[Symbol.iterator](): Iterator<WalRecord> {
    for (let r = this.next(); r !== null; r = this.next()) yield r;
  }

  /** The next whole, valid record, or null at the stop (see `stop`). */
  next(): WalRecord | null {
    if (this.#stop !== null) return null;
    if (this.#header === null && !this.#readHeader()) return null;
    const pos = this.#pos;
    const left = this.#size - pos;
    if (left === 0) return this.#end('end', pos, '');
    if (left < RECORD_HEADER_SIZE) {
      return this.#end('torn', pos, `record header cut short (${left} of ${RECORD_HEADER_SIZE} bytes)`);
    }
    if (!this.#load(pos, RECORD_HEADER_SIZE)) return this.next();
    const h = decodeRecordHeader(this.#buf, pos - this.#bufPos);
    if (typeof h === 'string') return this.#bad(pos, h);
    const total = RECORD_HEADER_SIZE + h.length;
    if (pos + total > MAX_SEGMENT_FILE_BYTES) {
      return this.#bad(pos, `record declares a payload of ${h.length} bytes, running past the longest segment the writer makes (${MAX_SEGMENT_FILE_BYTES} bytes)`);
    }
    if (total > left) {
      return this.#end('torn', pos, `payload runs past the end of the file (declares ${h.length} bytes, ${left - RECORD_HEADER_SIZE} remain)`);
    }
    if (total > this.#buf.length) {
      // Longer than any record read so far: its CRC is checked through the buffer it has
      // before the buffer grows to hold it, so a damaged length (up to MAX_RECORD_PAYLOAD, over a
      // sparse tail of zeros) costs a read, not an allocation of what it declares.
      const crc = this.#crcThrough(pos, total);
      if (crc === null) return this.next();
      if (crc !== h.crc) return this.#end('corrupt', pos, 'record CRC mismatch');
    }
    if (!this.#load(pos, total)) return this.next();
    const at = pos - this.#bufPos;
    const payload = this.#buf.subarray(at + RECORD_HEADER_SIZE, at + total);
    if (recordCrc(this.#buf, at, payload) !== h.crc) return this.#end('corrupt', pos, 'record CRC mismatch');
    this.#pos = pos + total;
    this.#records++;
    return { offset: pos, type: h.type, count: h.count, timeMs: h.timeMs, payload };
  }

  #readHeader(): boolean {
    const size = this.#size;
    if (size === 0) {
      this.#end('end', 0, '');
      return false;
    }
    if (size < SEGMENT_HEADER_SIZE) {
      this.#end('torn', 0, `segment header cut short (${size} of ${SEGMENT_HEADER_SIZE} bytes)`);
      return false;
    }
    if (!this.#load(0, SEGMENT_HEADER_SIZE)) return this.#readHeader();
    const h = decodeSegmentHeader(this.#buf, 0 - this.#bufPos, this.number);
    if (typeof h === 'string') {
      this.#bad(0, h);
      return false;
    }
    this.#header = h;
    this.#pos = SEGMENT_HEADER_SIZE;
    return true;
  }

  /**
   * A field the format refuses at `offset`: a torn tail if nothing but zeros
   * follows, else corruption. In a file longer than any segment the writer
   * makes (MAX_SEGMENT_FILE_BYTES) the tail is damage whatever it holds, and
   * is not read: a sparse tail of 1 TiB (`truncate -s`) held the start for hours.
   */
  #bad(offset: number, why: string): null {
    if (this.#size > MAX_SEGMENT_FILE_BYTES) {
      return this.#end('corrupt', offset, `${why}; the file is ${this.#size} bytes, longer than any segment the writer makes (at most ${MAX_SEGMENT_FILE_BYTES}): the rest is not read`);
    }
    if (this.#zerosFrom(offset)) return this.#end('torn', offset, `zero-filled tail (${this.#size - offset} bytes)`);
    return this.#end('corrupt', offset, why);
  }

  #end(kind: SegmentStop['kind'], offset: number, why: string): null {
    if (kind === 'end') this.#stop = { kind, offset };
    else if (kind === 'torn') this.#stop = { kind, offset, why };
    else this.#stop = { kind, offset, error: new CorruptionError(this.path, offset, why) };
    return null;
  }

  /** Whether every byte from `offset` to the end of the file is zero: what the buffer holds, then the rest read in large blocks. */
  #zerosFrom(offset: number): boolean {
    let pos = offset;
    const bufEnd = this.#bufPos + this.#bufLen;
    if (offset >= this.#bufPos && offset < bufEnd) {
      if (!allZero(this.#buf, offset - this.#bufPos, this.#bufLen)) return false;
      pos = bufEnd;
    }
    return fileZeros(this.#fd, pos, this.#size);
  }

  /**
   * The CRC of the record of `total` bytes at `pos` (its header in the
   * buffer), read through the buffer as it is, never growing it. Null when
   * the file turned out shorter than its size at open (see #load).
   */
  #crcThrough(pos: number, total: number): number | null {
    let crc = recordHeaderCrc(this.#buf, pos - this.#bufPos);
    const end = pos + total;
    for (let off = pos + RECORD_HEADER_SIZE; off < end; ) {
      const n = Math.min(this.#buf.length, end - off);
      if (!this.#load(off, n)) return null;
      const at = off - this.#bufPos;
      crc = continueCrc(crc, this.#buf.subarray(at, at + n));
      off += n;
    }
    return crc;
  }

  /**
   * Makes bytes [off, off + n) of the file available in the buffer. Returns
   * false when the file turned out shorter than its size at open (a live
   * segment cut back by its writer); `size` is then lowered and the caller
   * decides again.
   */
  #load(off: number, n: number): boolean {
    if (off >= this.#bufPos && off + n <= this.#bufPos + this.#bufLen) return true;
    if (this.#buf.length < n) this.#buf = Buffer.allocUnsafe(Math.max(n, CHUNK));
    const want = Math.min(this.#buf.length, this.#size - off);
    let got = 0;
    while (got < want) {
      const r = readSync(this.#fd, this.#buf, got, want - got, off + got);
      if (r === 0) break;
      got += r;
    }
    this.#bufPos = off;
    this.#bufLen = got;
    if (got >= n) return true;
    this.#size = off + got;
    return false;
  }
}
