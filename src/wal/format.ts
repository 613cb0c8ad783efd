// The bytes of a WAL segment (docs/wal-format.md): constants, the segment
// header, the record header and its CRC, and segment file names.
//
// Encoders write into a caller's buffer and allocate nothing: the writer keeps
// one slab of record headers and reuses it every round. The CRC of the 20
// covered header bytes is computed here from a table (cheaper than a native
// call on so few bytes); the payload goes through @node-rs/crc32 (SIMD),
// continuing from the header's CRC.

import { crc32c } from '@node-rs/crc32';
import { WalArgumentError } from './wal-argument-error.js';

/** "SLWL" */
export const SEGMENT_MAGIC: readonly number[] = Object.freeze([0x53, 0x4c, 0x57, 0x4c]);
export const FORMAT_VERSION = 1;
export const SEGMENT_HEADER_SIZE = 32;
export const RECORD_HEADER_SIZE = 24;
/** Largest payload a record header can express (u32). */
export const MAX_PAYLOAD_LENGTH = 0xffff_ffff;
/** The largest `server.maxRequestBytes` the settings accept (src/config/settings.ts takes its maximum from here). */
export const MAX_REQUEST_BYTES_SETTING = 512 * 1024 * 1024;
/**
 * Largest payload the writer ever stores, and so the largest a reader
 * accepts: twice the largest request body the settings accept. A protobuf
 * body is stored as it came (after gunzip, capped at the same setting); one
 * converted from OTLP/JSON is rewritten as protobuf, which is never much
 * longer than its JSON (a 10-byte varint needs at least `"kind":-1`, 9
 * bytes). A record header declaring more (up to 4 GiB − 1 fits the field) is
 * damage, refused before a byte of the payload is read or allocated: in an
 * oversized sparse segment such a header made the reader allocate its
 * declared length before the CRC failed (docs/wal-format.md "Record").
 */
export const MAX_RECORD_PAYLOAD = 2 * MAX_REQUEST_BYTES_SETTING;
/** Largest record count (u32). */
export const MAX_RECORD_COUNT = 0xffff_ffff;
/** The largest `ingester.wal.segmentBytes` the settings accept (src/config/settings.ts takes its maximum from here). */
export const MAX_SEGMENT_BYTES_SETTING = 2 ** 31;
/**
 * Longer than any segment file the writer can make, under any segment size
 * setting this release accepts (the setting may have changed between lives):
 * the setting's largest value, plus the header and one record of the largest
 * payload the writer stores, MAX_RECORD_PAYLOAD (a record larger than the setting goes alone into
 * a fresh segment, so this is more than either case needs). A segment file
 * longer than this is damage past this length, which readers never scan
 * (docs/wal-format.md "Reading: how a segment ends"): `truncate -s 1T` on a
 * segment held the start for hours while its zeros were read.
 */
export const MAX_SEGMENT_FILE_BYTES = MAX_SEGMENT_BYTES_SETTING + SEGMENT_HEADER_SIZE + RECORD_HEADER_SIZE + MAX_RECORD_PAYLOAD;

/** Record types. A new encoding gets a new number; a number never changes meaning. */
export const RecordType = {
  /** OTLP ExportLogsServiceRequest, protobuf binary. */
  LOGS: 1,
  /** OTLP ExportTraceServiceRequest, protobuf binary. */
  TRACES: 2,
} as const;
export type RecordType = (typeof RecordType)[keyof typeof RecordType];

export function isRecordType(t: number): t is RecordType {
  return t === RecordType.LOGS || t === RecordType.TRACES;
}

export function recordTypeName(t: RecordType): 'logs' | 'traces' {
  return t === RecordType.LOGS ? 'logs' : 'traces';
}

const TWO_32 = 0x1_0000_0000;
/** 2^53 − 1 split: the high word of a u64 may not exceed this. */
const MAX_SAFE_HIGH = 0x1f_ffff;

// ---------------------------------------------------------------- integers

export function writeU16(b: Uint8Array, off: number, v: number): void {
  b[off] = v;
  b[off + 1] = v >>> 8;
}

export function writeU32(b: Uint8Array, off: number, v: number): void {
  b[off] = v;
  b[off + 1] = v >>> 8;
  b[off + 2] = v >>> 16;
  b[off + 3] = v >>> 24;
}

/** Writes a non-negative safe integer as a u64. */
export function writeU64(b: Uint8Array, off: number, v: number): void {
  writeU32(b, off, v >>> 0);
  writeU32(b, off + 4, Math.floor(v / TWO_32));
}

export function readU16(b: Uint8Array, off: number): number {
  return b[off] | (b[off + 1] << 8);
}

export function readU32(b: Uint8Array, off: number): number {
  return (b[off] | (b[off + 1] << 8) | (b[off + 2] << 16) | (b[off + 3] << 24)) >>> 0;
}

/** A u64 as a number, or -1 when it exceeds 2^53 − 1. */
export function readU64(b: Uint8Array, off: number): number {
  const hi = readU32(b, off + 4);
  if (hi > MAX_SAFE_HIGH) return -1;
  return hi * TWO_32 + readU32(b, off);
}

function isU64Safe(v: number): boolean {
  return Number.isSafeInteger(v) && v >= 0;
}

// ---------------------------------------------------------------- CRC-32C of short runs

function makeCrc32cTable(): Uint32Array {
  const t = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[i] = c >>> 0;
  }
  return t;
}

/** Constant after load; only ever read. */
const CRC_TABLE = makeCrc32cTable();

/**
 * CRC-32C of b[from, to), continuing from `crc` (a finished CRC, 0 to start),
 * like crc32c(buf, crc), in JavaScript: for the few dozen bytes of a header,
 * cheaper than a call into the native CRC and the view it needs.
 */
export function crcRun(crc: number, b: Uint8Array, from: number, to: number): number {
  let c = ~crc;
  for (let i = from; i < to; i++) c = CRC_TABLE[(c ^ b[i]) & 0xff] ^ (c >>> 8);
  return ~c >>> 0;
}

/**
 * The CRC of a record: bytes [0, 8) and [12, 24) of its header at `b[off]`,
 * then the payload.
 */
export function recordCrc(b: Uint8Array, off: number, payload: Uint8Array): number {
  const c = recordHeaderCrc(b, off);
  return payload.length === 0 ? c : crc32c(payload, c);
}

/** The CRC of a record's covered header bytes alone, for continuing over its payload in pieces (continueCrc). */
export function recordHeaderCrc(b: Uint8Array, off: number): number {
  return crcRun(crcRun(0, b, off, off + 8), b, off + 12, off + RECORD_HEADER_SIZE);
}

/** CRC-32C of `bytes`, continuing from `crc` (natively). */
export function continueCrc(crc: number, bytes: Uint8Array): number {
  return bytes.length === 0 ? crc : crc32c(bytes, crc);
}

// ---------------------------------------------------------------- segment header

/** Writes the 32-byte segment header at `target[offset]`. */
export function encodeSegmentHeader(target: Uint8Array, offset: number, segment: number, createdMs: number): void {
  if (!isU64Safe(segment) || segment < 1) throw new WalArgumentError(`segment number ${segment} out of range`);
  if (!isU64Safe(createdMs)) throw new WalArgumentError(`created time ${createdMs} out of range`);
  for (let i = 0; i < 4; i++) target[offset + i] = SEGMENT_MAGIC[i];
  writeU16(target, offset + 4, FORMAT_VERSION);
  writeU16(target, offset + 6, SEGMENT_HEADER_SIZE);
  writeU64(target, offset + 8, segment);
  writeU64(target, offset + 16, createdMs);
  writeU32(target, offset + 24, 0);
  writeU32(target, offset + 28, crcRun(0, target, offset, offset + 28));
}

export interface SegmentHeader {
  readonly version: number;
  readonly segment: number;
  readonly createdMs: number;
}

/**
 * Decodes and checks the 32 bytes at `b[off]`. Returns the header, or a short
 * reason when it breaks the format. `expectedSegment` is the number in the
 * file name (0 to skip that check).
 */
export function decodeSegmentHeader(b: Uint8Array, off: number, expectedSegment: number): SegmentHeader | string {
  for (let i = 0; i < 4; i++) if (b[off + i] !== SEGMENT_MAGIC[i]) return 'bad magic';
  const version = readU16(b, off + 4);
  if (version !== FORMAT_VERSION) return `unsupported version ${version}`;
  const size = readU16(b, off + 6);
  if (size !== SEGMENT_HEADER_SIZE) return `bad header size ${size}`;
  const crc = readU32(b, off + 28);
  if (crc !== crcRun(0, b, off, off + 28)) return 'segment header CRC mismatch';
  if (readU32(b, off + 24) !== 0) return 'non-zero reserved field in segment header';
  const segment = readU64(b, off + 8);
  const createdMs = readU64(b, off + 16);
  if (segment < 1 || createdMs < 0) return 'segment header value out of range';
  if (expectedSegment !== 0 && segment !== expectedSegment) {
    return `segment number ${segment} in header does not match file name (${expectedSegment})`;
  }
  return { version, segment, createdMs };
}

// ---------------------------------------------------------------- record header

/**
 * Writes the 24-byte record header for `payload` at `target[offset]`,
 * including its CRC. Arguments are not checked here (the writer checks them
 * once at staging).
 */
export function encodeRecordHeader(
  target: Uint8Array,
  offset: number,
  type: RecordType,
  count: number,
  timeMs: number,
  payload: Uint8Array,
): void {
  target[offset] = type;
  target[offset + 1] = 0;
  writeU16(target, offset + 2, 0);
  writeU32(target, offset + 4, payload.length);
  writeU32(target, offset + 12, count);
  writeU64(target, offset + 16, timeMs);
  writeU32(target, offset + 8, recordCrc(target, offset, payload));
}

/** The fields of a record header, as read. */
export interface RecordHeader {
  readonly type: RecordType;
  readonly length: number;
  readonly crc: number;
  readonly count: number;
  readonly timeMs: number;
}

/**
 * Decodes the 24 bytes at `b[off]` and checks every field the header alone
 * decides (type, flags, reserved, a payload length of at most
 * MAX_RECORD_PAYLOAD, time). Returns the header or a reason.
 */
export function decodeRecordHeader(b: Uint8Array, off: number): RecordHeader | string {
  const type = b[off];
  if (!isRecordType(type)) return `unknown record type ${type}`;
  if (b[off + 1] !== 0) return `non-zero record flags ${b[off + 1]}`;
  if (readU16(b, off + 2) !== 0) return 'non-zero reserved field in record header';
  const length = readU32(b, off + 4);
  if (length > MAX_RECORD_PAYLOAD) return `record declares a payload of ${length} bytes, more than the writer ever stores (at most ${MAX_RECORD_PAYLOAD})`;
  const timeMs = readU64(b, off + 16);
  if (timeMs < 0) return 'record time out of range';
  return { type, length, crc: readU32(b, off + 8), count: readU32(b, off + 12), timeMs };
}

// ---------------------------------------------------------------- names

export const SEGMENT_SUFFIX = '.seg';
export const TMP_SUFFIX = '.seg.tmp';

/** `00000001.seg`: at least eight digits, no extra leading zeros. */
export function formatSegmentName(n: number): string {
  return String(n).padStart(8, '0') + SEGMENT_SUFFIX;
}

export interface SegmentName {
  readonly number: number;
  /** A `.seg.tmp` file: a segment whose creation did not finish. */
  readonly tmp: boolean;
  /** Spelled exactly as formatSegmentName would spell it. */
  readonly canonical: boolean;
}

const NAME_RE = /^(\d+)\.seg(\.tmp)?$/;

/** Parses `<digits>.seg` or `<digits>.seg.tmp`; null for anything else or a number outside 1..2^53−1. */
export function parseSegmentName(name: string): SegmentName | null {
  const m = NAME_RE.exec(name);
  if (m === null) return null;
  const digits = m[1];
  const number = Number(digits);
  if (!Number.isSafeInteger(number) || number < 1) return null;
  return { number, tmp: m[2] !== undefined, canonical: digits === String(number).padStart(8, '0') };
}
