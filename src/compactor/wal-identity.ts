// The identity of one WAL directory, so that the progress the compactor
// records in a table ("segments of WAL <id>, lane <lane>, committed through
// n") is never confused with another replica's WAL, whose segment numbers are
// independent. It is a random id kept in `<walDir>/.siglake-wal-id` (a hidden
// name: never a tenant, ignored by the WAL tools), made on the first round
// that has something to commit, atomically (tmp file, fsync, link).

import { randomUUID } from 'node:crypto';
import { closeSync, fsyncSync, linkSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { CompactorError } from './compactor-error.js';

export const WAL_ID_FILE = '.siglake-wal-id';
const FILE = WAL_ID_FILE;
const ID_RE = /^[0-9a-f]{32}$/;

export class WalIdentity {
  readonly #walDir: string;
  #id: string | null = null;

  constructor(walDir: string) {
    this.#walDir = walDir;
  }

  /** The id when the file exists already; null otherwise (nothing is created). */
  peek(): string | null {
    if (this.#id !== null) return this.#id;
    let text: string;
    try {
      text = readFileSync(join(this.#walDir, FILE), 'utf8').trim();
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw new CompactorError('SIGLAKE_COMPACTOR_WAL_ID', `cannot read ${join(this.#walDir, FILE)}`, { cause: e });
    }
    if (!ID_RE.test(text)) throw new CompactorError('SIGLAKE_COMPACTOR_WAL_ID', `${join(this.#walDir, FILE)} does not hold a WAL id`);
    this.#id = text;
    return text;
  }

  /** The id, made now when the WAL has none. */
  get(): string {
    const existing = this.peek();
    if (existing !== null) return existing;
    const path = join(this.#walDir, FILE);
    const tmp = `${path}.${process.pid}.tmp`;
    const id = randomUUID().replace(/-/g, '');
    try {
      const fd = openSync(tmp, 'w', 0o644);
      try {
        writeSync(fd, `${id}\n`);
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      try {
        linkSync(tmp, path);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      } finally {
        unlinkSync(tmp);
      }
      const dir = openSync(this.#walDir, 'r');
      try {
        fsyncSync(dir);
      } finally {
        closeSync(dir);
      }
    } catch (e) {
      throw new CompactorError('SIGLAKE_COMPACTOR_WAL_ID', `cannot create ${path}`, { cause: e });
    }
    const got = this.peek();
    if (got === null) throw new CompactorError('SIGLAKE_COMPACTOR_WAL_ID', `${path} vanished`);
    return got;
  }
}
