// The local file-system warehouse: objects are files under a root directory,
// addressed as `file:///abs/path` URIs (what Iceberg Java, pyiceberg, DuckDB
// and icebird all open). An object is written to `<name>.<random>.tmp`,
// fdatasynced, then linked to its name (which fails if the name exists, so
// nothing is ever overwritten) and the directory is fsynced.

import { randomBytes } from 'node:crypto';
import { constants as fsc } from 'node:fs';
import { open, link, readFile, unlink, type FileHandle } from 'node:fs/promises';
import { makeDirs } from '../make-dirs.js';
import { dirname, isAbsolute, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { IcebergError } from './iceberg-error.js';
import { locationUnder, type ObjectSink, type ObjectStorage } from './storage.js';

export class FileStorage implements ObjectStorage {
  readonly rootUri: string;
  readonly #root: string;
  readonly #madeDirs = new Set<string>();

  constructor(rootDir: string) {
    this.#root = resolve(rootDir);
    this.rootUri = pathToFileURL(this.#root).href.replace(/\/+$/, '');
  }

  get rootDir(): string {
    return this.#root;
  }

  locationOf(...segments: string[]): string {
    return locationUnder(this.rootUri, segments);
  }

  /** The file behind a location; refuses anything outside the root. */
  pathOf(location: string): string {
    let p: string;
    try {
      p = fileURLToPath(location);
    } catch (e) {
      throw new IcebergError('SIGLAKE_ICEBERG_ARGUMENT', `not a file: URI: ${location}`, { cause: e });
    }
    if (!isAbsolute(p) || !(p === this.#root || p.startsWith(this.#root + sep))) {
      throw new IcebergError('SIGLAKE_ICEBERG_ARGUMENT', `location outside the warehouse: ${location}`);
    }
    return p;
  }

  async putNew(location: string, bytes: Uint8Array): Promise<void> {
    const sink = await this.openSink(location);
    try {
      await sink.write(bytes);
    } catch (e) {
      await sink.abort();
      throw e;
    }
    await sink.close();
  }

  async openSink(location: string): Promise<ObjectSink> {
    const path = this.pathOf(location);
    await this.#mkdirs(dirname(path));
    const tmp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
    let fh: FileHandle;
    try {
      fh = await open(tmp, fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL, 0o644);
    } catch (e) {
      throw storageError('create', tmp, e);
    }
    return new FileSink(fh, tmp, path);
  }

  async get(location: string): Promise<Uint8Array> {
    const path = this.pathOf(location);
    try {
      return await readFile(path);
    } catch (e) {
      throw storageError('read', path, e);
    }
  }

  async delete(location: string): Promise<void> {
    const path = this.pathOf(location);
    try {
      await unlink(path);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw storageError('delete', path, e);
    }
  }

  async #mkdirs(dir: string): Promise<void> {
    if (this.#madeDirs.has(dir)) return;
    try {
      await makeDirs(dir);
    } catch (e) {
      throw storageError('mkdir', dir, e);
    }
    this.#madeDirs.add(dir);
  }
}

class FileSink implements ObjectSink {
  readonly #fh: FileHandle;
  readonly #tmp: string;
  readonly #path: string;
  #size = 0;
  #done = false;

  constructor(fh: FileHandle, tmp: string, path: string) {
    this.#fh = fh;
    this.#tmp = tmp;
    this.#path = path;
  }

  async write(bytes: Uint8Array): Promise<void> {
    let off = 0;
    try {
      while (off < bytes.length) {
        const { bytesWritten } = await this.#fh.write(bytes, off, bytes.length - off, this.#size + off);
        off += bytesWritten;
      }
    } catch (e) {
      throw storageError('write', this.#tmp, e);
    }
    this.#size += bytes.length;
  }

  async close(): Promise<number> {
    if (this.#done) throw new IcebergError('SIGLAKE_ICEBERG_STORAGE', `${this.#path}: sink already closed`);
    this.#done = true;
    try {
      await this.#fh.datasync();
      await this.#fh.close();
      await link(this.#tmp, this.#path);
      await unlink(this.#tmp);
      const dir = await open(dirname(this.#path), 'r');
      try {
        await dir.sync();
      } finally {
        await dir.close();
      }
    } catch (e) {
      await unlink(this.#tmp).catch(() => undefined);
      throw storageError('commit', this.#path, e);
    }
    return this.#size;
  }

  async abort(): Promise<void> {
    if (this.#done) return;
    this.#done = true;
    await this.#fh.close().catch(() => undefined);
    await unlink(this.#tmp).catch(() => undefined);
  }
}

function storageError(op: string, path: string, cause: unknown): IcebergError {
  const code = (cause as NodeJS.ErrnoException | null)?.code;
  return new IcebergError('SIGLAKE_ICEBERG_STORAGE', `${op} ${path} failed${code ? ` (${code})` : ''}`, { cause });
}

