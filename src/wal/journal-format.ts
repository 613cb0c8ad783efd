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
  MAX_SEGMENT_FILE_BYTES,
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
/**
 * The most an entry's body reaches into its segment: its offset (0 for one
 * that starts with the segment header) plus its length. A body is a run of
 * one segment's bytes, and no segment file the writer makes is longer than
 * MAX_SEGMENT_FILE_BYTES, whatever `ingester.wal.segmentBytes` and
 * `server.maxRequestBytes` were in any life of the WAL (format.ts), so no
 * valid entry exceeds it. A version-4 entry that does is damage, refused
 * before its body is read.
 */
export const MAX_ENTRY_SPAN = MAX_SEGMENT_FILE_BYTES;

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
  /**
   * The records: a view into the buffer given to decodeJournal, or, read from
   * a file (JournalReader over a JournalSource), into the piece of the file the
   * reader read it with (never reused: a view stays good as long as it is kept).
   */
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

/**
 * Where a JournalReader reads a journal file's bytes: a buffer holding it
 * whole (decodeJournal), or the file itself, a piece at a time
 * (journal-file.ts), so that a file made long and sparse, or longer than
 * Node reads at once (2 GiB), is never held whole.
 */
export interface JournalSource {
  /** The file's length. */
  readonly size: number;
  /** The longest view `bytes` returns without reading that many bytes into a buffer of their own. */
  readonly window: number;
  /**
   * `len` bytes at `pos` (`pos + len <= size`), as a view that stays good
   * for as long as it is kept (no buffer a view was returned from is reused).
   */
  bytes(pos: number, len: number): Uint8Array;
  /** Whether bytes [from, to) are all zero; compared a block at a time, never held whole. */
  zeros(from: number, to: number): boolean;
  /**
   * `len` bytes at `pos` (a record header, at most 32), as a view good only
   * until the next call: for a walk from record header to record header
   * that reads no payload. Without it, `bytes`.
   */
  head?(pos: number, len: number): Uint8Array;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

const ZERO_RUN = new Uint8Array(64 * 1024);

/** Whether `b` is all zero bytes (natively, a block at a time). */
export function isAllZero(b: Uint8Array): boolean {
  for (let from = 0; from < b.length; from += ZERO_RUN.length) {
    const to = Math.min(b.length, from + ZERO_RUN.length);
    if (Buffer.compare(b.subarray(from, to), ZERO_RUN.subarray(0, to - from)) !== 0) return false;
  }
  return true;
}

/** A journal file held whole in memory. */
class BufferSource implements JournalSource {
  readonly size: number;
  readonly window = Number.POSITIVE_INFINITY;
  constructor(private readonly b: Uint8Array) {
    this.size = b.length;
  }
  bytes(pos: number, len: number): Uint8Array {
    return this.b.subarray(pos, pos + len);
  }
  zeros(from: number, to: number): boolean {
    return isAllZero(this.b.subarray(from, to));
  }
}

/**
 * Decodes a whole journal file held in memory (a test's, or a small one):
 * JournalReader over the buffer, every entry a view into `b`.
 */
export function decodeJournal(b: Uint8Array, expectedNumber = 0): DecodedJournal {
  const r = new JournalReader(new BufferSource(b), expectedNumber);
  const entries: JournalEntry[] = [];
  for (let e = r.next(); e !== null; e = r.next()) entries.push(e);
  return { number: r.number, version: r.version, entries, stop: r.stop! };
}

/**
 * Reads a journal file's entries one at a time, in order. The entries end
 * cleanly (`end`) at the end of the file, at a terminator (versions 3, 4),
 * or where only zero bytes follow the last whole entry. Otherwise it stops at
 * the first entry that is not whole and valid: `torn` when the file ends
 * inside it, when only zero bytes follow where it starts, or in a spare
 * (versions 3, 4, flagged reused: past its entries lie its earlier bytes, and
 * a page a crash lost reads as those); `corrupt` otherwise. Nothing after a
 * stop is trusted, nor read: what follows the entries (a sparse tail of
 * zeros, an earlier use's bytes) is read only to tell whether it is all zero,
 * a block at a time. An entry is read whole only once its header's CRC
 * vouches for its length (version 4: through the body's digest, summed by a
 * walk over its record headers that stops at one of zeros, and refused at
 * once past MAX_ENTRY_SPAN), so a damaged length costs neither a read of
 * what it declares nor that much memory.
 */
export class JournalReader {
  /** 0 when the header is bad or torn (then there are no entries). */
  number = 0;
  /** The header's version (1 to 4); 0 when the header is bad or torn. */
  version = 0;
  /** Null until next() returned null. */
  stop: JournalStop | null = null;
  readonly #src: JournalSource;
  #at = JOURNAL_HEADER_SIZE;
  #seed = 0;
  /** Version 4: the entry CRC covers the body's digest (bodyDigest). */
  #digested = false;
  /** Past the entries of a spare lie bytes of its earlier use: a stop there, or in a round a crash cut, is torn. */
  #reused = false;

  constructor(src: JournalSource, expectedNumber = 0) {
    this.#src = src;
    const size = src.size;
    if (size === 0) {
      this.stop = { kind: 'torn', offset: 0, why: 'empty journal file' };
      return;
    }
    const h = src.bytes(0, Math.min(size, JOURNAL_HEADER_SIZE));
    const head = decodeJournalHeader(h, expectedNumber);
    if (typeof head === 'string') {
      // A spare renamed to its new number whose new header never reached the disk
      // (a crash right after the rename) still has its earlier, lower number: nothing in it is this file's.
      const earlier = decodeJournalHeader(h, 0);
      const kind = size < JOURNAL_HEADER_SIZE || (typeof earlier === 'number' && earlier < expectedNumber) || src.zeros(0, size) ? 'torn' : 'corrupt';
      this.stop = { kind, offset: 0, why: head };
      return;
    }
    this.number = head;
    this.version = readU16(h, 4);
    this.#seed = this.version >= JOURNAL_VERSION_3 ? seedOf(head) : 0;
    this.#digested = this.version === JOURNAL_VERSION;
    this.#reused = this.version >= JOURNAL_VERSION_3 && (readU32(h, 24) & JOURNAL_FLAG_REUSED) !== 0;
  }

  #end(kind: 'torn' | 'corrupt', why: string): null {
    this.stop = { kind: kind === 'corrupt' && this.#reused ? 'torn' : kind, offset: this.#at, why };
    return null;
  }

  /** The next whole entry, or null at a stop (then `stop` says which). */
  next(): JournalEntry | null {
    if (this.stop !== null) return null;
    const src = this.#src;
    const size = src.size;
    const at = this.#at;
    if (at >= size) {
      this.stop = { kind: 'end', offset: at };
      return null;
    }
    const h = src.bytes(at, Math.min(size - at, ENTRY_HEADER_SIZE));
    if (isAllZero(h)) {
      // Versions 3, 4: the terminator after the last round's entries. Else the
      // entries end where only zeros follow (a prefilled or sparse tail).
      if ((this.version >= JOURNAL_VERSION_3 && h.length === ENTRY_HEADER_SIZE) || src.zeros(at, size)) {
        this.stop = { kind: 'end', offset: at };
        return null;
      }
    }
    if (h.length < ENTRY_HEADER_SIZE) return this.#end('torn', 'entry header cut short');
    const bodyLength = readU32(h, 0);
    const tagLength = readU16(h, 8);
    if (tagLength < 1 || tagLength > MAX_TAG_LENGTH) return this.#end('corrupt', `bad tag length ${tagLength}`);
    if (readU16(h, 10) !== 0) return this.#end('corrupt', 'non-zero reserved field in entry header');
    const tagEnd = at + ENTRY_HEADER_SIZE + tagLength;
    if (tagEnd > size) return this.#end('torn', 'entry tag cut short');
    const tagBytes = src.bytes(at + ENTRY_HEADER_SIZE, tagLength);
    const end = tagEnd + bodyLength;
    if (this.#digested) {
      // Version 4: the CRC covers the body's digest, so the body must be in the file to check it.
      if (end > size) return this.#end('torn', 'entry body cut short');
      // No writer makes a body longer than the segment it goes to can be: such a length is damage
      // (the CRC, which covers it, would not check), said at once, before a byte of the body is read.
      const segmentOffset = readU64(h, 24);
      if (bodyLength + (segmentOffset === 0 ? 0 : segmentOffset) > MAX_ENTRY_SPAN) return this.#end('corrupt', 'entry CRC mismatch');
      // A body an earlier use left (records whose own CRCs check) fails here, as a damaged header does.
      const digest = this.#digest(tagEnd, bodyLength, segmentOffset === 0);
      if (digest === null || entryCrc(h, 0, tagBytes, this.#seed, digest) !== readU32(h, 4)) return this.#end('corrupt', 'entry CRC mismatch');
    } else if (entryCrc(h, 0, tagBytes, this.#seed) !== readU32(h, 4)) return this.#end('corrupt', 'entry CRC mismatch');
    const segment = readU64(h, 16);
    const offset = readU64(h, 24);
    if (segment < 1 || offset < 0) return this.#end('corrupt', 'entry value out of range');
    if (end > size) return this.#end('torn', 'entry body cut short');
    const body = src.bytes(tagEnd, bodyLength);
    let records = body;
    if (this.version !== JOURNAL_VERSION_1 && offset < SEGMENT_HEADER_SIZE) {
      // Version 2 on: offset 0 is a segment created by the round, its header first.
      if (offset !== 0) return this.#end('corrupt', `entry offset ${offset} inside the segment header`);
      if (body.length < SEGMENT_HEADER_SIZE) return this.#end('corrupt', 'entry at offset 0 without a segment header');
      const sh = decodeSegmentHeader(body, 0, segment);
      if (typeof sh === 'string') return this.#end('corrupt', `segment header in entry: ${sh}`);
      records = body.subarray(SEGMENT_HEADER_SIZE);
    }
    const count = readU32(h, 12);
    const bad = checkRecords(records, count);
    if (bad !== null) return this.#end('corrupt', bad);
    let tag: string;
    try {
      tag = utf8.decode(tagBytes);
    } catch {
      return this.#end('corrupt', 'lane tag is not UTF-8');
    }
    this.#at = end;
    return { at, tag, segment, offset, records: count, body };
  }

  /**
   * bodyDigest of the `len` bytes at `pos`. A body longer than the window
   * is walked from record header to record header (the digest sums only the
   * segment header and each record's CRC field), no payload read: the body
   * is read once, after its CRC checked. Null at a record header of 24 zero
   * bytes, which no writer writes (type 0): the digest cannot be the
   * writer's, and the walk stops there. A length damaged to gigabytes over a
   * sparse tail so ends where the entry's real records do; until stop 55 each
   * of its zeros was read and summed, about 3 s of CPU a GiB it declared.
   */
  #digest(pos: number, len: number, segmentHeader: boolean): number | null {
    const src = this.#src;
    if (len <= src.window) return bodyDigest([src.bytes(pos, len)], 0, 1, segmentHeader);
    const head = (at: number, n: number): Uint8Array => (src.head === undefined ? src.bytes(at, n) : src.head(at, n));
    let crc = 0;
    let rec = 0;
    if (segmentHeader) {
      rec = Math.min(len, SEGMENT_HEADER_SIZE);
      crc = crcRun(crc, head(pos, rec), 0, rec);
    }
    // As bodyDigest: a header with fewer than its first 12 bytes in the body adds nothing.
    while (len - rec >= 12) {
      const h = head(pos + rec, Math.min(RECORD_HEADER_SIZE, len - rec));
      if (h.length === RECORD_HEADER_SIZE && isAllZero(h)) return null;
      crc = crcRun(crc, h, 8, 12);
      rec += RECORD_HEADER_SIZE + readU32(h, 4);
    }
    return crc;
  }
}

/**
 * bodyDigest summed over the body's pieces one call at a time (a reader's:
 * the body of a long entry is read a window at a time, never held whole
 * before its CRC checks). The writer's bodyDigest is left as it is.
 */
export class BodyDigester {
  #crc = 0;
  /** Body offset of the next piece's first byte. */
  #pos = 0;
  /** Where the next record header starts. */
  #rec: number;
  /** Bytes of that header's [0, 12) gathered into #head. */
  #got = 0;
  readonly #head = new Uint8Array(12);
  readonly #segmentHeader: boolean;

  constructor(segmentHeader: boolean) {
    this.#segmentHeader = segmentHeader;
    this.#rec = segmentHeader ? SEGMENT_HEADER_SIZE : 0;
  }

  update(buf: Uint8Array): void {
    const pos = this.#pos;
    const end = pos + buf.length;
    if (this.#segmentHeader && pos < SEGMENT_HEADER_SIZE) this.#crc = crcRun(this.#crc, buf, 0, Math.min(buf.length, SEGMENT_HEADER_SIZE - pos));
    while (this.#rec < end) {
      const s = this.#rec + this.#got - pos;
      const take = Math.min(12 - this.#got, buf.length - s);
      for (let i = 0; i < take; i++) this.#head[this.#got + i] = buf[s + i]!;
      this.#got += take;
      if (this.#got < 12) break;
      this.#crc = crcRun(this.#crc, this.#head, 8, 12);
      this.#rec += RECORD_HEADER_SIZE + readU32(this.#head, 4);
      this.#got = 0;
    }
    this.#pos = end;
  }

  get value(): number {
    return this.#crc;
  }
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
