// The bytes of a shard's commit journal (docs/wal-format.md "Commit journal").
//
// In `batch` mode a writer shard appends every round's records, each run of
// them tagged with its lane and the place (segment number, offset) where the
// same bytes go in the lane's segment, to one journal file, and makes the
// round durable with one fdatasync of that file, however many lanes the round
// touched. The lane segments are written too, without a sync, and made
// durable later by a checkpoint; recovery replays the journal's tail into them.
//
// A journal file is a 32-byte header followed by entries. An entry is a
// 32-byte header, the lane tag (the lane directory relative to the WAL root,
// UTF-8, `/`-separated), then the body: whole WAL records, byte for byte as
// they are in the segment. The entry CRC covers the entry header (but the CRC
// field) and the tag, and from version 4 on the body's digest; the records
// of the body keep their own CRCs too, which a reader checks.
//
// Version 2: the lane segments are created without a sync, so the round
// that creates a segment journals its header too: that entry has offset 0
// and its body is the 32-byte segment header followed by the records, again
// byte for byte what went to the segment. Version 1 files (written before)
// are still read; they never hold an offset-0 entry.
//
// Version 3: a file may be a spare, a retired file (or one of zeros) used
// again (journal.ts), flagged in the header. So that nothing it held before
// is ever read as an entry of its new number, each entry's CRC is seeded
// with the file's number, and every round's entries are followed by a
// terminator (32 zero bytes, where the next round's entries start): the
// entries end there.
//
// Version 4 (this writer): the entry CRC also covers the body, through a
// digest of it: the segment header (offset-0 entries), then each record's
// own CRC field, which covers the rest of that record. In a version-3 spare
// a power loss could keep a new entry's header page and lose a page of its
// body; the earlier use's records read there checked by their own CRCs (not
// seeded) when they lay at the same record boundaries, so replay took
// another lane's old records as the new entry's. Summing 4 bytes a record
// keeps the payload summed once.

import { crc32c } from '@node-rs/crc32';
import {
  RECORD_HEADER_SIZE,
  SEGMENT_HEADER_SIZE,
  crcRun,
  decodeRecordHeader,
  decodeSegmentHeader,
  readU16,
  readU32,
  readU64,
  recordCrc,
  writeU16,
  writeU32,
  writeU64,
} from './format.js';
import { WalArgumentError } from './wal-argument-error.js';

/** Under the WAL root; a dot-directory is never a tenant (contract §7). */
export const JOURNAL_ROOT = '.journal';
/** "SLJN" */
export const JOURNAL_MAGIC: readonly number[] = Object.freeze([0x53, 0x4c, 0x4a, 0x4e]);
/** The version this writer writes; decodeJournal also reads versions 3, 2 and 1. */
export const JOURNAL_VERSION = 4;
/** Entries' CRCs seeded, terminators, spares; the entry CRC does not cover the body. */
export const JOURNAL_VERSION_3 = 3;
/** Entries' CRCs not seeded, no terminator, no spares. */
export const JOURNAL_VERSION_2 = 2;
/** Written before segments were created without a sync: no entry carries a segment header. */
export const JOURNAL_VERSION_1 = 1;
/** Version 3 and 4 header flag: the file was a spare; past its entries lie bytes of its earlier use, or zeros. */
export const JOURNAL_FLAG_REUSED = 1;
export const JOURNAL_HEADER_SIZE = 32;
export const ENTRY_HEADER_SIZE = 32;
/** Longest lane tag (bytes). */
export const MAX_TAG_LENGTH = 1024;
export const JOURNAL_SUFFIX = '.jnl';

/** The directory of shard `shard` of `workers`: `shard-<k>-of-<W>`. */
export function journalDirName(shard: number, workers: number): string {
  return `shard-${shard}-of-${workers}`;
}

/** Whether `name` is a shard journal directory's (`shard-<k>-of-<W>`), the only ones replay reads. */
export function isJournalDirName(name: string): boolean {
  return /^shard-\d+-of-\d+$/.test(name);
}

export function formatJournalName(n: number): string {
  return String(n).padStart(8, '0') + JOURNAL_SUFFIX;
}

const JOURNAL_NAME_RE = /^(\d{8,})\.jnl$/;

/** The number of a journal file name, or 0 when it is not one. */
export function parseJournalName(name: string): number {
  const m = JOURNAL_NAME_RE.exec(name);
  if (m === null) return 0;
  const n = Number(m[1]);
  return Number.isSafeInteger(n) && n >= 1 && m[1] === String(n).padStart(8, '0') ? n : 0;
}

function crcOf(b: Uint8Array, from: number, to: number, crc = 0): number {
  return to > from ? crc32c(b.subarray(from, to), crc) : crc;
}

// ---------------------------------------------------------------- file header

/**
 * ```
 *  0 magic "SLJN" | 4 u16 version 4 (or 3, 2, 1) | 6 u16 header size 32 | 8 u64 file number
 * 16 u64 created ms | 24 u32 flags (versions 3, 4: JOURNAL_FLAG_REUSED; before: reserved 0) | 28 u32 CRC-32C of [0, 28)
 * ```
 */
export function encodeJournalHeader(target: Uint8Array, offset: number, number: number, createdMs: number, flags = 0): void {
  if (!Number.isSafeInteger(number) || number < 1) throw new WalArgumentError(`journal number ${number} out of range`);
  for (let i = 0; i < 4; i++) target[offset + i] = JOURNAL_MAGIC[i];
  writeU16(target, offset + 4, JOURNAL_VERSION);
  writeU16(target, offset + 6, JOURNAL_HEADER_SIZE);
  writeU64(target, offset + 8, number);
  writeU64(target, offset + 16, createdMs);
  writeU32(target, offset + 24, flags);
  writeU32(target, offset + 28, crcOf(target, offset, offset + 28));
}

/** The file number, or a reason the header is bad. */
export function decodeJournalHeader(b: Uint8Array, expected: number): number | string {
  if (b.length < JOURNAL_HEADER_SIZE) return 'journal header cut short';
  for (let i = 0; i < 4; i++) if (b[i] !== JOURNAL_MAGIC[i]) return 'bad journal magic';
  const version = readU16(b, 4);
  if (version < JOURNAL_VERSION_1 || version > JOURNAL_VERSION) return `unsupported journal version ${version}`;
  if (readU16(b, 6) !== JOURNAL_HEADER_SIZE) return 'bad journal header size';
  if (readU32(b, 28) !== crcOf(b, 0, 28)) return 'journal header CRC mismatch';
  const flags = readU32(b, 24);
  if (version >= JOURNAL_VERSION_3 ? (flags & ~JOURNAL_FLAG_REUSED) !== 0 : flags !== 0) return 'unknown flags in journal header';
  const n = readU64(b, 8);
  if (n < 1 || readU64(b, 16) < 0) return 'journal header value out of range';
  if (expected !== 0 && n !== expected) return `journal number ${n} does not match file name (${expected})`;
  return n;
}

// ---------------------------------------------------------------- entries

/**
 * The CRC of the entry header at `b[at]` and its tag: bytes [0, 4) and [8,
 * 32), then the tag, from `seed` (versions 3, 4: the file's number, see
 * seedOf; before: 0); version 4 then sums the body's `digest` (bodyDigest),
 * as 4 bytes little-endian.
 */
function entryCrc(b: Uint8Array, at: number, tag: Uint8Array, seed: number, digest?: number): number {
  // A round stamps one entry per lane it touched: the header and a short tag
  // are summed in JavaScript, a long tag (up to MAX_TAG_LENGTH) natively.
  const c = crcRun(crcRun(seed, b, at, at + 4), b, at + 8, at + ENTRY_HEADER_SIZE);
  const t = tag.length <= SHORT_TAG ? crcRun(c, tag, 0, tag.length) : crc32c(tag, c);
  if (digest === undefined) return t;
  writeU32(DIGEST_BYTES, 0, digest);
  return crcRun(t, DIGEST_BYTES, 0, 4);
}

const DIGEST_BYTES = new Uint8Array(4);

/**
 * Version 4: the digest of an entry's body, from the buffers `iov[from, to)`
 * that hold it in order (split anywhere): CRC-32C from 0 of the segment
 * header's 32 bytes when the body starts with one (`segmentHeader`), then of
 * each record's CRC field (record header bytes [8, 12)). A record's CRC
 * covers the rest of its header and its payload, so the digest stands for
 * every byte of the body, for 4 bytes summed a record.
 */
export function bodyDigest(iov: readonly Uint8Array[], from: number, to: number, segmentHeader: boolean): number {
  let crc = 0;
  let pos = 0; // body offset of iov[k]'s first byte
  let rec = segmentHeader ? SEGMENT_HEADER_SIZE : 0; // where the next record header starts
  let got = 0; // bytes of that header's [0, 12) gathered into HEAD12
  for (let k = from; k < to; k++) {
    const buf = iov[k]!;
    const end = pos + buf.length;
    if (segmentHeader && pos < SEGMENT_HEADER_SIZE) crc = crcRun(crc, buf, 0, Math.min(buf.length, SEGMENT_HEADER_SIZE - pos));
    while (rec < end) {
      const s = rec + got - pos;
      const take = Math.min(12 - got, buf.length - s);
      for (let i = 0; i < take; i++) HEAD12[got + i] = buf[s + i]!;
      got += take;
      if (got < 12) break;
      crc = crcRun(crc, HEAD12, 8, 12);
      rec += RECORD_HEADER_SIZE + readU32(HEAD12, 4);
      got = 0;
    }
    pos = end;
  }
  return crc;
}

const HEAD12 = new Uint8Array(12);

/** Tags up to this many bytes are summed in JavaScript (entryCrc). */
const SHORT_TAG = 128;

/**
 * A version-3 or -4 entry's CRC seed: its file's number (low 32 bits, never 0).
 * For the same bytes, two seeds always give two CRCs, so an entry a spare
 * held under an earlier number never checks under its new one.
 */
function seedOf(fileNumber: number): number {
  return fileNumber >>> 0;
}

/**
 * Writes the CRC of the entry header at `target[offset]` (fields already
 * written) for a version-4 file numbered `fileNumber`, whose body has the
 * digest `digest` (bodyDigest).
 */
export function stampEntryCrc(target: Uint8Array, offset: number, tag: Uint8Array, fileNumber: number, digest: number): void {
  writeU32(target, offset + 4, entryCrc(target, offset, tag, seedOf(fileNumber), digest));
}

/**
 * Writes the 32-byte header of an entry at `target[offset]`, its CRC as
 * versions 1 and 2 have it (not seeded, the body not covered):
 * ```
 *  0 u32 body length B | 4 u32 CRC-32C of [0, 4) ++ [8, 32) ++ tag | 8 u16 tag length T
 * 10 u16 reserved 0    | 12 u32 records in the body | 16 u64 segment | 24 u64 offset
 * ```
 */
export function encodeEntryHeader(
  target: Uint8Array,
  offset: number,
  tag: Uint8Array,
  segment: number,
  segmentOffset: number,
  bodyLength: number,
  records: number,
): void {
  encodeEntryFields(target, offset, tag, segment, segmentOffset, bodyLength, records);
  writeU32(target, offset + 4, entryCrc(target, offset, tag, 0));
}

/**
 * The fields of encodeEntryHeader, CRC left 0: for a writer that stamps it
 * once it knows the file the entry goes to (stampEntryCrc).
 */
export function encodeEntryFields(
  target: Uint8Array,
  offset: number,
  tag: Uint8Array,
  segment: number,
  segmentOffset: number,
  bodyLength: number,
  records: number,
): void {
  if (tag.length < 1 || tag.length > MAX_TAG_LENGTH) throw new WalArgumentError(`lane tag of ${tag.length} bytes`);
  writeU32(target, offset, bodyLength);
  writeU32(target, offset + 4, 0);
  writeU16(target, offset + 8, tag.length);
  writeU16(target, offset + 10, 0);
  writeU32(target, offset + 12, records);
  writeU64(target, offset + 16, segment);
  writeU64(target, offset + 24, segmentOffset);
}

/** One whole, checked entry of a journal file. */
export interface JournalEntry {
  /** Offset of the entry header in the journal file. */
  readonly at: number;
  /** The lane directory relative to the WAL root (`logs`, `acme/traces`, `acme/indexes/audit`). */
  readonly tag: string;
  readonly segment: number;
  /**
   * Where the body starts in the segment file. 0 (version 2 only): the round
   * created the segment, and the body starts with its 32-byte header.
   */
  readonly offset: number;
  readonly records: number;
  /** The records, a view into the decoded buffer. */
  readonly body: Uint8Array;
}

export type JournalStop =
  | { readonly kind: 'end'; readonly offset: number }
  | { readonly kind: 'torn' | 'corrupt'; readonly offset: number; readonly why: string };

export interface DecodedJournal {
  /** 0 when the header is bad or torn (then there are no entries). */
  readonly number: number;
  /** The header's version (1 to 4); 0 when the header is bad or torn. */
  readonly version: number;
  readonly entries: JournalEntry[];
  readonly stop: JournalStop;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

const ZERO_RUN = new Uint8Array(64 * 1024);

function isTerminator(b: Uint8Array, at: number): boolean {
  return Buffer.compare(b.subarray(at, at + ENTRY_HEADER_SIZE), ZERO_RUN.subarray(0, ENTRY_HEADER_SIZE)) === 0;
}

function allZero(b: Uint8Array, from: number): boolean {
  return zeroTailStart(b) <= from;
}

/**
 * Where the run of zero bytes that ends the file starts (b.length when the
 * last byte is not zero). A prefilled file (journal.ts) ends in zeros after
 * its entries; compared a block at a time, natively.
 */
function zeroTailStart(b: Uint8Array): number {
  let end = b.length;
  while (end > 0) {
    const from = Math.max(0, end - ZERO_RUN.length);
    if (Buffer.compare(b.subarray(from, end), ZERO_RUN.subarray(0, end - from)) !== 0) {
      while (b[end - 1] === 0) end--;
      return end;
    }
    end = from;
  }
  return 0;
}

/**
 * Decodes a whole journal file. The entries end cleanly (`end`) at the end
 * of the file, at a terminator (versions 3, 4), or where only zero bytes follow
 * the last whole entry. Otherwise it stops at the first entry that is not
 * whole and valid: `torn` when the file ends inside it, when only zero bytes
 * follow where it starts, or in a spare (versions 3, 4,
 * flagged reused: past its entries lie its earlier bytes, and a page a crash
 * lost reads as those); `corrupt` otherwise. Nothing after a stop is trusted.
 */
export function decodeJournal(b: Uint8Array, expectedNumber = 0): DecodedJournal {
  if (b.length === 0) return { number: 0, version: 0, entries: [], stop: { kind: 'torn', offset: 0, why: 'empty journal file' } };
  const head = decodeJournalHeader(b, expectedNumber);
  if (typeof head === 'string') {
    // A spare renamed to its new number whose new header never reached the disk
    // (a crash right after the rename) still has its earlier, lower number: nothing in it is this file's.
    const earlier = decodeJournalHeader(b, 0);
    const kind = b.length < JOURNAL_HEADER_SIZE || allZero(b, 0) || (typeof earlier === 'number' && earlier < expectedNumber) ? 'torn' : 'corrupt';
    return { number: 0, version: 0, entries: [], stop: { kind, offset: 0, why: head } };
  }
  const version = readU16(b, 4);
  const seed = version >= JOURNAL_VERSION_3 ? seedOf(head) : 0;
  /** Version 4: the entry CRC covers the body's digest (bodyDigest). */
  const digested = version === JOURNAL_VERSION;
  /** Past the entries of a spare lie bytes of its earlier use: a stop there, or in a round a crash cut, is torn. */
  const reused = version >= JOURNAL_VERSION_3 && (readU32(b, 24) & JOURNAL_FLAG_REUSED) !== 0;
  const entries: JournalEntry[] = [];
  let at = JOURNAL_HEADER_SIZE;
  const zeroTail = zeroTailStart(b);
  const stop = (kind: 'torn' | 'corrupt', why: string): DecodedJournal => ({
    number: head,
    version,
    entries,
    stop: { kind: kind === 'corrupt' && (reused || zeroTail <= at) ? 'torn' : kind, offset: at, why },
  });
  while (at < b.length) {
    if (zeroTail <= at) break;
    // Versions 3, 4: the terminator after the last round's entries.
    if (version >= JOURNAL_VERSION_3 && b.length - at >= ENTRY_HEADER_SIZE && isTerminator(b, at)) break;
    if (b.length - at < ENTRY_HEADER_SIZE) return stop('torn', 'entry header cut short');
    const bodyLength = readU32(b, at);
    const tagLength = readU16(b, at + 8);
    if (tagLength < 1 || tagLength > MAX_TAG_LENGTH) return stop('corrupt', `bad tag length ${tagLength}`);
    if (readU16(b, at + 10) !== 0) return stop('corrupt', 'non-zero reserved field in entry header');
    const tagEnd = at + ENTRY_HEADER_SIZE + tagLength;
    if (tagEnd > b.length) return stop('torn', 'entry tag cut short');
    const tagBytes = b.subarray(at + ENTRY_HEADER_SIZE, tagEnd);
    if (digested) {
      // Version 4: the CRC covers the body's digest, so the body must be in the file to check it.
      const bodyEnd = tagEnd + bodyLength;
      if (bodyEnd > b.length) return stop('torn', 'entry body cut short');
      // A body an earlier use left (records whose own CRCs check) fails here, as a damaged header does.
      const digest = bodyDigest([b.subarray(tagEnd, bodyEnd)], 0, 1, readU64(b, at + 24) === 0);
      if (entryCrc(b, at, tagBytes, seed, digest) !== readU32(b, at + 4)) return stop('corrupt', 'entry CRC mismatch');
    } else if (entryCrc(b, at, tagBytes, seed) !== readU32(b, at + 4)) return stop('corrupt', 'entry CRC mismatch');
    const segment = readU64(b, at + 16);
    const offset = readU64(b, at + 24);
    if (segment < 1 || offset < 0) return stop('corrupt', 'entry value out of range');
    const end = tagEnd + bodyLength;
    if (end > b.length) return stop('torn', 'entry body cut short');
    const body = b.subarray(tagEnd, end);
    let records = body;
    if (version !== JOURNAL_VERSION_1 && offset < SEGMENT_HEADER_SIZE) {
      // Version 2 on: offset 0 is a segment created by the round, its header first.
      if (offset !== 0) return stop('corrupt', `entry offset ${offset} inside the segment header`);
      if (body.length < SEGMENT_HEADER_SIZE) return stop('corrupt', 'entry at offset 0 without a segment header');
      const h = decodeSegmentHeader(body, 0, segment);
      if (typeof h === 'string') return stop('corrupt', `segment header in entry: ${h}`);
      records = body.subarray(SEGMENT_HEADER_SIZE);
    }
    const bad = checkRecords(records, readU32(b, at + 12));
    if (bad !== null) return stop('corrupt', bad);
    let tag: string;
    try {
      tag = utf8.decode(b.subarray(at + ENTRY_HEADER_SIZE, tagEnd));
    } catch {
      return stop('corrupt', 'lane tag is not UTF-8');
    }
    entries.push({ at, tag, segment, offset, records: readU32(b, at + 12), body });
    at = end;
  }
  return { number: head, version, entries, stop: { kind: 'end', offset: at } };
}

/** Null when `body` is exactly `count` whole records with good CRCs, else why not. */
function checkRecords(body: Uint8Array, count: number): string | null {
  let off = 0;
  let n = 0;
  while (off < body.length) {
    if (body.length - off < RECORD_HEADER_SIZE) return 'record header cut short in entry body';
    const h = decodeRecordHeader(body, off);
    if (typeof h === 'string') return h;
    const end = off + RECORD_HEADER_SIZE + h.length;
    if (end > body.length) return 'record payload runs past the entry body';
    if (recordCrc(body, off, body.subarray(off + RECORD_HEADER_SIZE, end)) !== h.crc) return 'record CRC mismatch in entry body';
    off = end;
    n++;
  }
  return n === count ? null : `entry says ${count} records, body holds ${n}`;
}
