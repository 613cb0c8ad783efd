// The audit stream (declared-tenants.md §4): `audit.file`, JSON lines, `-` for
// stdout, off by default. One event per refusal, first admission of a tenant
// and of a lane, index change and tenants reload, each with time, event,
// tenant (or null), subject (the verified `sub`, never a token), reason,
// remote. Bounded cost: events are queued and written in batches off the
// request path; past MAX_QUEUED_BYTES an event is dropped and counted, so a
// sink that cannot keep up never blocks or grows the acceptor.

import fs from 'node:fs';

export interface AuditEvent {
  event: 'refusal' | 'tenant_first_admission' | 'lane_first_admission' | 'index_change' | 'tenants_reload' | 'tenants_reload_failed';
  tenant: string | null;
  subject: string | null;
  reason: string | null;
  remote: string | null;
  [k: string]: unknown;
}

/** Queued bytes past which new events are dropped (and counted). */
export const MAX_QUEUED_BYTES = 4 * 1024 * 1024;

export class AuditLog {
  readonly #fd: number | 'stdout';
  #queue: string[] = [];
  #queued = 0;
  #writing = false;
  #scheduled = false;
  #closed = false;
  dropped = 0;
  written = 0;

  /** Opens (appends to) `file`, or stdout for `-`. Throws when the file cannot be opened. */
  constructor(file: string) {
    this.#fd = file === '-' ? 'stdout' : fs.openSync(file, 'a', 0o640);
  }

  write(e: AuditEvent): void {
    if (this.#closed) return;
    const line = JSON.stringify({ time: new Date().toISOString(), ...e }) + '\n';
    if (this.#queued + line.length > MAX_QUEUED_BYTES) {
      this.dropped++;
      return;
    }
    this.#queue.push(line);
    this.#queued += line.length;
    if (!this.#scheduled && !this.#writing) {
      this.#scheduled = true;
      setImmediate(() => this.#flush());
    }
  }

  #flush(): void {
    this.#scheduled = false;
    if (this.#writing || this.#queue.length === 0) return;
    const text = this.#queue.join('');
    this.#queue = [];
    this.#queued = 0;
    this.#writing = true;
    const done = (): void => {
      this.#writing = false;
      if (this.#queue.length > 0) this.#flush();
    };
    if (this.#fd === 'stdout') {
      process.stdout.write(text, done);
    } else {
      fs.write(this.#fd, text, null, 'utf8', (err) => {
        if (err) this.dropped++;
        else this.written++;
        done();
      });
    }
  }

  /** Writes what is queued (synchronously) and closes the file. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const text = this.#queue.join('');
    this.#queue = [];
    if (this.#fd === 'stdout') {
      if (text !== '') process.stdout.write(text);
      return;
    }
    try {
      if (text !== '') fs.writeSync(this.#fd, text);
    } finally {
      fs.closeSync(this.#fd);
    }
  }
}
