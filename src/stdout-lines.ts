// Lines to stdout for the offline commands (`wal dump`, `wal verify`), written
// with fs.writeSync in 64 KiB batches so that a reader closing the pipe
// (`siglake wal dump DIR | head`) is seen at once as EPIPE, thrown as
// ClosedOutput, instead of an unhandled 'error' event after the whole dump.

import { writeSync } from 'node:fs';

/** stdout was closed by its reader. */
export class ClosedOutput extends Error {
  constructor() {
    super('stdout closed');
  }
}

const BATCH = 64 * 1024;

export class StdoutLines {
  readonly #fd: number;
  #buf = '';

  constructor(fd = 1) {
    this.#fd = fd;
  }

  line(text: string): void {
    this.#buf += text + '\n';
    if (this.#buf.length >= BATCH) this.flush();
  }

  flush(): void {
    let data = Buffer.from(this.#buf, 'utf8');
    this.#buf = '';
    while (data.length > 0) {
      try {
        data = data.subarray(writeSync(this.#fd, data));
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === 'EPIPE') throw new ClosedOutput();
        // A non-blocking stdout that is full: wait a little for the reader.
        if (code === 'EAGAIN') Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
        else throw e;
      }
    }
  }
}
