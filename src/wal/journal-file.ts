// A commit journal file read from disk a piece at a time (docs/wal-format.md
// "Commit journal"), for start-up replay and `siglake wal verify|dump`.
//
// Until stop 54 each reader read a journal file whole into one buffer: one
// made long and sparse after a crash (`truncate -s 1500000000`) held 2.99 GB
// resident, and one past 2 GiB (Node's largest read) was refused by name,
// which stopped the start, although deferral lets a file grow toward 3 GiB.
// Here the file is read through a window of WINDOW bytes that moves on with
// the reader; an entry longer than the window is read into a buffer of its
// own once its CRC vouches for its length (JournalReader), and a run of
// zeros (a sparse tail) is compared a block at a time through one scratch
// buffer, never held. Memory is the window, the scratch block and the entry
// being read, whatever the file's length.

import { closeSync } from 'node:fs';
import { JournalReader, isAllZero, type JournalEntry, type JournalSource } from './journal-format.js';
import { openRegularFile, readAt } from './regular-file.js';

/** The bytes read at once, and the longest view handed out of one read. */
const WINDOW = 4 * 1024 * 1024;
/** What head() reads at once outside the window: the record headers of a run of short records, in one read. */
const HEAD_READ = 64 * 1024;

export class JournalFile implements JournalSource {
  readonly size: number;
  readonly window: number;
  readonly #fd: number;
  /** The last window read; a new buffer each time, so that views into earlier ones stay good. */
  #win: Buffer = Buffer.alloc(0);
  #winAt = 0;
  #scratch: Buffer | null = null;
  /** What head() read last outside the window (reused: its views are good until the next call). */
  #head: Buffer | null = null;
  #headAt = 0;
  #headLen = 0;

  /** Opens `path` (a regular file only: not through a link, never blocking on a FIFO). */
  constructor(path: string, window = WINDOW) {
    const { fd, size } = openRegularFile(path);
    this.#fd = fd;
    this.size = size;
    this.window = window;
  }

  bytes(pos: number, len: number): Uint8Array {
    if (pos >= this.#winAt && pos + len <= this.#winAt + this.#win.length) return this.#win.subarray(pos - this.#winAt, pos - this.#winAt + len);
    if (len > this.window) return this.#read(pos, len);
    this.#win = this.#read(pos, Math.max(len, Math.min(this.window, this.size - pos)));
    this.#winAt = pos;
    return this.#win.subarray(0, len);
  }

  head(pos: number, len: number): Uint8Array {
    if (pos >= this.#winAt && pos + len <= this.#winAt + this.#win.length) return this.#win.subarray(pos - this.#winAt, pos - this.#winAt + len);
    if (!(pos >= this.#headAt && pos + len <= this.#headAt + this.#headLen)) {
      // A record header outside the window: a small read, so that a walk over records longer than the
      // window reads their headers, never their payloads (the body is read once its CRC checked).
      const buf = (this.#head ??= Buffer.allocUnsafe(Math.min(HEAD_READ, this.window)));
      const n = Math.max(len, Math.min(buf.length, this.size - pos));
      const into = n <= buf.length ? buf : Buffer.allocUnsafe(n);
      const got = readAt(this.#fd, into, n, pos);
      if (got < n) into.fill(0, got, n);
      if (into !== buf) return into.subarray(0, len);
      this.#headAt = pos;
      this.#headLen = n;
    }
    return this.#head!.subarray(pos - this.#headAt, pos - this.#headAt + len);
  }

  zeros(from: number, to: number): boolean {
    const scratch = (this.#scratch ??= Buffer.allocUnsafe(this.window));
    for (let pos = from; pos < to; ) {
      const n = Math.min(scratch.length, to - pos);
      const got = readAt(this.#fd, scratch, n, pos);
      if (!isAllZero(scratch.subarray(0, got))) return false;
      if (got < n) return true; // the file got shorter: nothing more there
      pos += n;
    }
    return true;
  }

  close(): void {
    closeSync(this.#fd);
  }

  /**
   * `len` bytes at `pos` in a buffer of their own; past the end of a file that got shorter since it
   * was opened, zeros. What the window holds of them is copied, not read again: the window read
   * at a long entry's header holds the first 4 MiB of its body.
   */
  #read(pos: number, len: number): Buffer {
    const buf = Buffer.allocUnsafe(len);
    const winEnd = this.#winAt + this.#win.length;
    const have = pos >= this.#winAt && pos < winEnd ? Math.min(len, winEnd - pos) : 0;
    if (have > 0) this.#win.copy(buf, 0, pos - this.#winAt, pos - this.#winAt + have);
    if (have < len) {
      const got = readAt(this.#fd, buf.subarray(have), len - have, pos + have);
      if (got < len - have) buf.fill(0, have + got);
    }
    return buf;
  }
}

/**
 * Reads the journal file at `path` entry by entry: `each` gets every whole
 * entry in order (a view that stays good while kept), and the reader (its
 * number, version and stop) is returned once the entries end.
 */
export function readJournalFile(path: string, expectedNumber: number, each: (e: JournalEntry) => void): JournalReader {
  const file = new JournalFile(path);
  try {
    const r = new JournalReader(file, expectedNumber);
    for (let e = r.next(); e !== null; e = r.next()) each(e);
    return r;
  } finally {
    file.close();
  }
}
