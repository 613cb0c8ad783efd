// A small file system for the disk-full suite: tmpfs with a size, mounted by
// the test (CI runs as root). No privilege is a failure, not a skip: the row
// of the reliability table must be tried.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export class TmpfsMount {
  #mounted = false;

  constructor(
    readonly dir: string,
    readonly sizeBytes: number,
  ) {}

  mount(): void {
    fs.mkdirSync(this.dir, { recursive: true });
    const r = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${this.sizeBytes},mode=0755`, 'tmpfs', this.dir], { encoding: 'utf8' });
    if (r.status !== 0) {
      throw new Error(
        `disk-full suite: cannot mount a ${this.sizeBytes}-byte tmpfs on ${this.dir} ` +
          `(mount exited ${r.status}${r.error ? `, ${r.error.message}` : ''}: ${r.stderr.trim()}). ` +
          'This suite needs root (or CAP_SYS_ADMIN) to make a small file system; CI runs as root. ' +
          'Run it as root, or in a container started with --privileged.',
      );
    }
    this.#mounted = true;
  }

  /** Fills the file system with one ballast file until it refuses more; returns its path (remove it to free the space). */
  fill(): string {
    const ballast = path.join(this.dir, 'ballast');
    const fd = fs.openSync(ballast, 'w');
    const chunk = Buffer.alloc(4096, 1);
    try {
      for (;;) fs.writeSync(fd, chunk);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
    } finally {
      fs.closeSync(fd);
    }
    return ballast;
  }

  /** Bytes free on the mounted file system. */
  freeBytes(): number {
    const s = fs.statfsSync(this.dir);
    return s.bavail * s.bsize;
  }

  unmount(): void {
    if (!this.#mounted) return;
    let r = spawnSync('umount', [this.dir], { encoding: 'utf8' });
    if (r.status !== 0) r = spawnSync('umount', ['-l', this.dir], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`umount ${this.dir} failed: ${r.stderr}`);
    this.#mounted = false;
  }
}
