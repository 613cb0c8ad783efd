// The audit stream (declared-tenants.md §4): `audit.file`, JSON lines, `-` for
// stdout, off by default. One event per refusal, first admission of a tenant
// and of a lane, index change and tenants reload, each with time, event,
// tenant (or null), subject (the verified `sub`, never a token), reason,
// remote. Bounded cost: events are queued and written in batches off the
// request path; past MAX_QUEUED_BYTES an event is dropped and counted, so a
// sink that cannot keep up never blocks or grows the acceptor.

import fs from 'node:fs';
import { ConfigError } from '../errors.js';
import { LogThrottle, type Logger } from '../log.js';

export interface AuditEvent {
  event: 'refusal' | 'tenant_first_admission' | 'lane_first_admission' | 'index_change' | 'tenants_reload' | 'tenants_reload_failed';
  tenant: string | null;
  subject: string | null;
  reason: string | null;
  remote: string | null;
  [k: string]: unknown;
}

/**
 * What one request's refusal event says, filled in as admission learns it:
 * the peer address (read when the request came), the verified subject, the
 * tenant, and a reason finer than the refusal's code (`tenant_rate_limited`,
 * `index_not_in_tenant`, `budget_exhausted_tenant`, …). One per request,
 * never shared: a request that resumes after an await still writes its own
 * (a field shared by all requests named another client's address).
 */
export interface AuditNote {
  readonly remote: string | null;
  subject: string | null;
  tenant: string | null;
  reason: string | null;
  /** Its refusal was written (a request is refused once). */
  done: boolean;
}

export function auditNote(remote: string | undefined): AuditNote {
  return { remote: remote ?? null, subject: null, tenant: null, reason: null, done: false };
}

/** Records what a refusing step knows (`note` undefined: auditing is off). */
export function noteRefusal(note: AuditNote | undefined, tenant: string | null, reason: string): void {
  if (note === undefined) return;
  if (tenant !== null) note.tenant = tenant;
  note.reason = reason;
}

/** What an index change was (an `index_change` event's `action`). */
export type IndexAction = 'created' | 'updated' | 'deleted';

/**
 * An index change (declared-tenants.md §4, "every index change"): `reason`
 * says what made it, as for the change of a tenant's declared subset
 * (`tenants_reload`): `index_api` (the query server's index API, with the
 * caller's verified subject and peer) or `index_command` (`siglake index`,
 * offline: no verified subject, no peer).
 */
export function indexChangeEvent(
  tenant: string,
  index: string,
  action: IndexAction,
  reason: 'index_api' | 'index_command',
  subject: string | null,
  remote: string | null,
): AuditEvent {
  return { event: 'index_change', tenant, subject, reason, remote, action, index };
}

/** A declared tenant's `indexes` subset as an event names it: sorted, joined by commas; null for all of its indexes. */
function subsetName(indexes: ReadonlySet<string> | undefined): string | null {
  return indexes === undefined ? null : [...indexes].sort().join(',');
}

/**
 * The `index_change` events of a tenants reload (reason `tenants_reload`):
 * one for each tenant declared before and after whose `indexes` subset
 * changed, `from` and `to` as subsetName() writes them. Maps: each declared
 * tenant's subset (undefined: all of its indexes).
 */
export function reloadIndexChanges(
  before: ReadonlyMap<string, ReadonlySet<string> | undefined>,
  after: ReadonlyMap<string, ReadonlySet<string> | undefined>,
): AuditEvent[] {
  const events: AuditEvent[] = [];
  for (const [id, next] of after) {
    if (!before.has(id)) continue;
    const from = subsetName(before.get(id));
    const to = subsetName(next);
    if (from !== to) events.push({ event: 'index_change', tenant: id, subject: null, reason: 'tenants_reload', remote: null, from, to });
  }
  return events;
}

/** Queued bytes past which new events are dropped (and counted). */
export const MAX_QUEUED_BYTES = 4 * 1024 * 1024;

export class AuditLog {
  readonly #fd: number | 'stdout';
  readonly #onError: ((err: Error, lost: number) => void) | undefined;
  #queue: string[] = [];
  #queued = 0;
  #writing: Promise<void> | undefined;
  #scheduled = false;
  #closed = false;
  /** Events lost: dropped at the queue's bound, or in a batch the file refused. */
  dropped = 0;
  /** Events written. */
  written = 0;

  /**
   * Opens (appends to) `file`, or stdout for `-`. Throws when the file cannot
   * be opened. `onError`: a batch the file refused (its events are counted
   * lost), for the caller to log (throttled).
   */
  constructor(file: string, onError?: (err: Error, lost: number) => void) {
    this.#fd = file === '-' ? 'stdout' : fs.openSync(file, 'a', 0o640);
    this.#onError = onError;
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
    if (!this.#scheduled && this.#writing === undefined) {
      this.#scheduled = true;
      setImmediate(() => this.#flush());
    }
  }

  #flush(): void {
    this.#scheduled = false;
    if (this.#writing !== undefined || this.#queue.length === 0) return;
    const events = this.#queue.length;
    const bytes = Buffer.from(this.#queue.join(''), 'utf8');
    this.#queue = [];
    this.#queued = 0;
    this.#writing = this.#writeAll(bytes).then(
      () => {
        this.written += events;
      },
      (err: unknown) => {
        this.dropped += events;
        this.#onError?.(err instanceof Error ? err : new Error(String(err)), events);
      },
    );
    void this.#writing.then(() => {
      this.#writing = undefined;
      if (this.#queue.length > 0 && !this.#closed) this.#flush();
    });
  }

  /** Writes every byte (a short write goes on from where it stopped). */
  async #writeAll(bytes: Buffer): Promise<void> {
    if (this.#fd === 'stdout') {
      await new Promise<void>((resolve, reject) => process.stdout.write(bytes, (err) => (err ? reject(err) : resolve())));
      return;
    }
    const fd = this.#fd;
    for (let off = 0; off < bytes.length; ) {
      off += await new Promise<number>((resolve, reject) => fs.write(fd, bytes, off, bytes.length - off, null, (err, n) => (err ? reject(err) : resolve(n))));
    }
  }

  /** Waits for the batch being written, writes what is queued, and closes the file. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#writing;
    const events = this.#queue.length;
    const text = this.#queue.join('');
    this.#queue = [];
    if (this.#fd === 'stdout') {
      if (text !== '') process.stdout.write(text);
      this.written += events;
      return;
    }
    try {
      if (text !== '') fs.writeSync(this.#fd, text);
      this.written += events;
    } catch (e) {
      this.dropped += events;
      this.#onError?.(e as Error, events);
    } finally {
      fs.closeSync(this.#fd);
    }
  }
}

/** An AuditLog `onError` that logs a refused batch at warn, at most one line per 10 s (with the events lost meanwhile). */
export function auditErrorLog(log: Logger): (err: Error, lost: number) => void {
  const throttle = new LogThrottle(10_000);
  let lost = 0;
  return (err, n) => {
    lost += n;
    if (throttle.take('audit') < 0) return;
    log.warn({ err: err.message, lost }, 'audit file write failed: events lost (siglake_audit_events_dropped_total)');
    lost = 0;
  };
}

/**
 * Opens `audit.file` for a command (`-`: stdout); a file that cannot be
 * opened is the setting's refusal (ConfigError naming audit.file: exit 2,
 * with where the value came from).
 */
export function openAuditLog(file: string, log?: Logger): AuditLog {
  try {
    return new AuditLog(file, log === undefined ? undefined : auditErrorLog(log));
  } catch (e) {
    throw ConfigError.ofSetting('audit.file', `cannot open ${file} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
}
