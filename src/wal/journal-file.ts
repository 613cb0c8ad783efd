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

export class JournalFile implements JournalSource {
  readonly size: number;
  readonly window: number;
  readonly #fd: number;
  /** The last window read; a new buffer each time, so that views into earlier ones stay good. */
  #win: Buffer = Buffer.alloc(0);
  #winAt = 0;
  #scratch: Buffer | null = null;

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

  /** `len` bytes at `pos` in a buffer of their own; past the end of a file that got shorter since it was opened, zeros. */
  #read(pos: number, len: number): Buffer {
    const buf = Buffer.allocUnsafe(len);
    const got = readAt(this.#fd, buf, len, pos);
    if (got < len) buf.fill(0, got);
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
