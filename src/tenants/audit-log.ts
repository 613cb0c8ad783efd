// The audit stream (declared-tenants.md §4): `audit.file`, JSON lines, `-` for
// stdout, off by default. One event per refusal, first admission of a tenant
// and of a lane, index change and tenants reload, each with time, event,
// tenant (or null), subject (the verified `sub`, never a token), reason,
// remote. Bounded cost: events are queued and written in batches off the
// request path; past MAX_QUEUED_BYTES an event is dropped and counted, so a
// sink that cannot keep up never blocks or grows the acceptor.
//
// A sink that stops reading never holds the process: a FIFO is opened
// read-write and non-blocking (opened write-only it blocked start-up until a
// reader came, and a write to a full one blocked its thread so that a stop
// waited for it for ever), a full pipe is retried (the queue meanwhile bounds
// what waits), and a stop gives the batch being written CLOSE_GRACE_MS before
// it counts what is left as lost. The servers reopen the file on SIGHUP
// (logrotate's rename, then HUP; with copytruncate the appends simply go on
// at the new end): without a handler a SIGHUP ended the ingester.

import fs from 'node:fs';
import path from 'node:path';
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
/** At a stop, how long the batch being written may still take before what is left is counted lost. */
export const CLOSE_GRACE_MS = 1000;
/** A full pipe (EAGAIN) is tried again after this, doubling to EAGAIN_MAX_MS. */
const EAGAIN_FIRST_MS = 10;
const EAGAIN_MAX_MS = 200;

export interface AuditLogOptions {
  /** A batch the file refused (its events counted lost), for the caller to log (throttled). */
  onError?: (err: Error, lost: number) => void;
  /** Events dropped at the queue's bound (the sink does not keep up), for the caller to log (throttled). */
  onDropped?: (lost: number) => void;
  /** Reopen the file on SIGHUP (the servers; not `-`). */
  reopenOnHup?: boolean;
  /** A reopen that failed (the previous file is still written). */
  onReopenError?: (err: Error) => void;
  /** Events lost at the stop (the sink took nothing within CLOSE_GRACE_MS, or refused the rest): once, unthrottled. */
  onStopLoss?: (lost: number, why: string) => void;
  /** Open the file only at open() (the servers: once nothing can refuse the start any more). */
  deferOpen?: boolean;
}

/** Events (lines) in `bytes` from `from` on: a line cut short is lost too. */
function linesFrom(bytes: Buffer, from: number): number {
  let n = 0;
  for (let i = bytes.indexOf(10, from); i >= 0; i = bytes.indexOf(10, i + 1)) n++;
  return n;
}

/**
 * Opens the audit file for appending. A FIFO read-write and non-blocking: the
 * open never waits for a reader (one may come later), and a full pipe answers
 * EAGAIN instead of blocking a thread.
 */
function openSink(file: string): { fd: number; created: boolean } {
  let fifo = false;
  try {
    fifo = fs.statSync(file).isFIFO();
  } catch {
    // Absent: created below.
  }
  if (fifo) return { fd: fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_NONBLOCK), created: false };
  // Made here (O_EXCL) or there before: only a file this process made may be removed again (discardIfCreated).
  try {
    return { fd: fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o640), created: true };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
  return { fd: fs.openSync(file, 'a', 0o640), created: false };
}

/**
 * Why `file` could not be opened for appending, without making it (a start
 * that is refused later must leave nothing behind): an existing file (or
 * FIFO) is opened and closed again, never created nor written; for an absent
 * one, its directory must be a directory this process may write in. null:
 * it can be opened (`-` always). The error code (ENOENT, EACCES, …) otherwise.
 */
export function auditFileProblem(file: string): string | null {
  if (file === '-') return null;
  let st: fs.Stats | undefined;
  try {
    st = fs.statSync(file);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT') return code ?? (e as Error).message;
  }
  try {
    if (st !== undefined) {
      const flags = st.isFIFO() ? fs.constants.O_RDWR | fs.constants.O_NONBLOCK : fs.constants.O_WRONLY | fs.constants.O_APPEND;
      fs.closeSync(fs.openSync(file, flags));
      return null;
    }
    const dir = path.dirname(path.resolve(file));
    if (!fs.statSync(dir).isDirectory()) return 'ENOTDIR';
    fs.accessSync(dir, fs.constants.W_OK | fs.constants.X_OK);
    return null;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code ?? (e as Error).message;
  }
}

class WriteFailed extends Error {
  constructor(
    readonly err: Error,
    /** Events of the batch not written. */
    readonly lost: number,
  ) {
    super(err.message);
  }
}

/** One batch being written: settled once, written or lost. */
interface Batch {
  events: number;
  settled: boolean;
}

export class AuditLog {
  readonly #file: string;
  /** undefined until open() (deferOpen): events wait in the queue. */
  #fd: number | 'stdout' | undefined;
  /** This process made the file (it did not exist before): discardIfCreated() may remove it. */
  #created = false;
  readonly #o: AuditLogOptions;
  #queue: string[] = [];
  #queued = 0;
  #writing: Promise<void> | undefined;
  #batch: Batch | undefined;
  #scheduled = false;
  #closed = false;
  #reopenWanted = false;
  readonly #onHup = (): void => {
    this.#reopenWanted = true;
    if (this.#writing === undefined) this.#reopen();
  };
  /** Events lost: dropped at the queue's bound, or in a batch the file refused. */
  dropped = 0;
  /** Events written. */
  written = 0;

  /**
   * Opens (appends to) `file`, or stdout for `-`. Throws when the file cannot
   * be opened. `opts` (or just its `onError`): see AuditLogOptions.
   */
  constructor(file: string, opts: AuditLogOptions | ((err: Error, lost: number) => void) = {}) {
    this.#file = file;
    this.#o = typeof opts === 'function' ? { onError: opts } : opts;
    if (this.#o.deferOpen !== true) this.open();
  }

  /**
   * Opens the file (once; the constructor does unless deferOpen). Throws when
   * it cannot be opened. Events written before are written now.
   */
  open(): void {
    if (this.#fd !== undefined || this.#closed) return;
    if (this.#file === '-') this.#fd = 'stdout';
    else {
      const { fd, created } = openSink(this.#file);
      this.#fd = fd;
      this.#created = created;
    }
    if (this.#o.reopenOnHup === true && this.#fd !== 'stdout') process.on('SIGHUP', this.#onHup);
    if (this.#queue.length > 0 && !this.#scheduled) {
      this.#scheduled = true;
      setImmediate(() => this.#flush());
    }
  }

  /**
   * A start (or command) refused after open(), before any event: closes the
   * file, and removes it when this process made it and nothing was written to
   * it (a refused start leaves nothing behind). A file that existed before
   * keeps its bytes. With an event queued or written it does nothing and
   * answers false: close() it instead.
   */
  discardIfCreated(): boolean {
    if (this.#closed) return true;
    if (this.#queue.length > 0 || this.#writing !== undefined || this.written > 0 || this.dropped > 0) return false;
    this.#closed = true;
    process.off('SIGHUP', this.#onHup);
    const fd = this.#fd;
    if (fd === undefined || fd === 'stdout') return true;
    try {
      // Still the file this process made, and still empty.
      const open = fs.fstatSync(fd);
      const named = fs.statSync(this.#file);
      if (this.#created && open.size === 0 && open.ino === named.ino && open.dev === named.dev) fs.unlinkSync(this.#file);
    } catch {
      // Gone already: nothing to remove.
    }
    try {
      fs.closeSync(fd);
    } catch {
      // Already closed.
    }
    return true;
  }

  write(e: AuditEvent): void {
    if (this.#closed) return;
    const line = JSON.stringify({ time: new Date().toISOString(), ...e }) + '\n';
    if (this.#queued + line.length > MAX_QUEUED_BYTES) {
      this.dropped++;
      this.#o.onDropped?.(1);
      return;
    }
    this.#queue.push(line);
    this.#queued += line.length;
    if (!this.#scheduled && this.#writing === undefined) {
      this.#scheduled = true;
      setImmediate(() => this.#flush());
    }
  }

  /** Between batches: the file named `file` now (logrotate renamed the old one). A failure keeps the old file. */
  #reopen(): void {
    this.#reopenWanted = false;
    if (this.#closed || this.#fd === 'stdout' || this.#fd === undefined) return;
    let fd: number;
    try {
      fd = openSink(this.#file).fd;
    } catch (e) {
      this.#o.onReopenError?.(e as Error);
      return;
    }
    const old = this.#fd;
    this.#fd = fd;
    this.#created = false;
    try {
      fs.closeSync(old);
    } catch {
      // Already gone: nothing to release.
    }
  }

  #lost(err: Error, n: number): void {
    if (n <= 0) return;
    this.dropped += n;
    this.#o.onError?.(err, n);
  }

  #flush(): void {
    this.#scheduled = false;
    if (this.#writing !== undefined || this.#queue.length === 0 || this.#closed || this.#fd === undefined) return;
    const batch: Batch = { events: this.#queue.length, settled: false };
    const bytes = Buffer.from(this.#queue.join(''), 'utf8');
    this.#queue = [];
    this.#queued = 0;
    this.#batch = batch;
    this.#writing = this.#writeAll(bytes).then(
      () => {
        if (batch.settled) return;
        batch.settled = true;
        this.written += batch.events;
      },
      (err: unknown) => {
        if (batch.settled) return;
        batch.settled = true;
        const lost = err instanceof WriteFailed ? err.lost : batch.events;
        this.written += batch.events - lost;
        this.#lost(err instanceof WriteFailed ? err.err : err instanceof Error ? err : new Error(String(err)), lost);
      },
    );
    void this.#writing.then(() => {
      this.#writing = undefined;
      this.#batch = undefined;
      if (this.#closed) return;
      if (this.#reopenWanted) this.#reopen();
      if (this.#queue.length > 0) this.#flush();
    });
  }

  /**
   * Writes every byte (a short write goes on from where it stopped; a full
   * pipe is tried again, until a stop). Rejects with WriteFailed: how many of
   * the batch's events were not written.
   */
  async #writeAll(bytes: Buffer): Promise<void> {
    if (this.#fd === 'stdout') {
      await new Promise<void>((resolve, reject) => process.stdout.write(bytes, (err) => (err ? reject(err) : resolve())));
      return;
    }
    const fd = this.#fd!;
    let wait = EAGAIN_FIRST_MS;
    for (let off = 0; off < bytes.length; ) {
      try {
        off += await new Promise<number>((resolve, reject) => fs.write(fd, bytes, off, bytes.length - off, null, (err, n) => (err ? reject(err) : resolve(n))));
        wait = EAGAIN_FIRST_MS;
      } catch (e) {
        const err = e as NodeJS.ErrnoException;
        if (err.code !== 'EAGAIN' || this.#closed) throw new WriteFailed(err, linesFrom(bytes, off));
        await new Promise((r) => setTimeout(r, wait));
        wait = Math.min(EAGAIN_MAX_MS, wait * 2);
      }
    }
  }

  /**
   * Waits for the batch being written (at most CLOSE_GRACE_MS: a sink nobody
   * reads must not hold a stop), writes what is queued if the sink takes it
   * now, counts the rest lost, and closes the file.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    process.off('SIGHUP', this.#onHup);
    let stalled = false;
    let lostAtStop = 0;
    let why = '';
    const lose = (n: number, reason: string): void => {
      if (n <= 0) return;
      this.dropped += n;
      lostAtStop += n;
      why ||= reason;
    };
    const writing = this.#writing;
    if (writing !== undefined) {
      let timer: NodeJS.Timeout | undefined;
      stalled = !(await Promise.race([writing.then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), CLOSE_GRACE_MS)))]));
      clearTimeout(timer);
      const batch = this.#batch;
      if (stalled && batch !== undefined && !batch.settled) {
        batch.settled = true;
        lose(batch.events, `the sink took nothing for ${CLOSE_GRACE_MS} ms`);
      }
    }
    const events = this.#queue.length;
    const text = this.#queue.join('');
    this.#queue = [];
    this.#queued = 0;
    if (this.#fd === 'stdout') {
      if (stalled) {
        lose(events, `the sink took nothing for ${CLOSE_GRACE_MS} ms`);
      } else {
        if (text !== '') process.stdout.write(text);
        this.written += events;
      }
      if (lostAtStop > 0) this.#o.onStopLoss?.(lostAtStop, why);
      return;
    }
    const fd = this.#fd;
    if (fd === undefined) {
      // Never opened (a start refused before it): nothing was made, nothing is written.
      lose(events, 'the file was never opened');
      if (lostAtStop > 0) this.#o.onStopLoss?.(lostAtStop, why);
      return;
    }
    if (!stalled && text !== '') {
      const bytes = Buffer.from(text, 'utf8');
      let off = 0;
      try {
        // The file is non-blocking only when it is a FIFO: a full one answers EAGAIN, and what is left is lost.
        while (off < bytes.length) off += fs.writeSync(fd, bytes, off, bytes.length - off);
        this.written += events;
      } catch (e) {
        const lost = linesFrom(bytes, off);
        this.written += events - lost;
        lose(lost, (e as NodeJS.ErrnoException).code ?? (e as Error).message);
      }
    } else {
      lose(events, `the sink took nothing for ${CLOSE_GRACE_MS} ms`);
    }
    if (lostAtStop > 0) this.#o.onStopLoss?.(lostAtStop, why);
    // A write still blocked on the descriptor keeps it: closing it under the write could hand its number to another file.
    if (!stalled) fs.closeSync(fd);
  }
}

/**
 * The throttled warn lines of an audit stream's losses: a batch the file
 * refused (a full disk), and events dropped because the sink did not keep up
 * (a reader that stopped reading): each at most one line per 10 s, with the
 * events lost since the last one; and one line for those lost at the stop. The exact count is
 * siglake_audit_events_dropped_total. Never an event's content.
 */
export function auditLossLog(log: Logger, file: string): Required<Pick<AuditLogOptions, 'onError' | 'onDropped' | 'onReopenError' | 'onStopLoss'>> {
  const throttle = new LogThrottle(10_000);
  let failed = 0;
  let dropped = 0;
  return {
    onError: (err, n) => {
      failed += n;
      if (throttle.take('audit-write') < 0) return;
      log.warn({ err: err.message, lost: failed }, 'audit file write failed: events lost (siglake_audit_events_dropped_total)');
      failed = 0;
    },
    onDropped: (n) => {
      dropped += n;
      if (throttle.take('audit-full') < 0) return;
      log.warn({ file, lost: dropped, queueBytes: MAX_QUEUED_BYTES }, 'audit sink does not keep up: events dropped (siglake_audit_events_dropped_total)');
      dropped = 0;
    },
    onStopLoss: (lost, why) => log.warn({ file, lost, why }, 'audit events lost at the stop (siglake_audit_events_dropped_total)'),
    onReopenError: (err) => log.warn({ file, err: err.message }, 'audit file not reopened on SIGHUP: the previous file is still written'),
  };
}

/**
 * Opens `audit.file` for a command (`-`: stdout); a file that cannot be
 * opened is the setting's refusal (ConfigError naming audit.file: exit 2,
 * with where the value came from). With `log` (the servers): losses logged
 * (throttled) and the file reopened on SIGHUP; for `-`, only a refused write is logged.
 */
export function openAuditLog(file: string, log?: Logger): AuditLog {
  try {
    if (log === undefined) return new AuditLog(file);
    const loss = auditLossLog(log, file);
    // With `-` the log lines share the stalled stdout: a line saying so would wait on it (the
    // logger writes synchronously), so the drops there are only counted.
    if (file === '-') return new AuditLog(file, { onError: loss.onError });
    return new AuditLog(file, { ...loss, reopenOnHup: true });
  } catch (e) {
    throw auditOpenRefusal(file, e);
  }
}

function auditOpenRefusal(file: string, e: unknown): ConfigError {
  return ConfigError.ofSetting('audit.file', `cannot open ${file} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
}

/**
 * `audit.file` for a server, checked now and opened later (openDeferredAuditLog):
 * a file that could not be opened is refused here as openAuditLog refuses it,
 * but nothing is made until the start has passed every check that can refuse
 * it (a refused start left an empty audit file behind).
 */
export function deferredAuditLog(file: string, log: Logger): AuditLog {
  const problem = auditFileProblem(file);
  if (problem !== null) throw auditOpenRefusal(file, { code: problem });
  const loss = auditLossLog(log, file);
  if (file === '-') return new AuditLog(file, { onError: loss.onError, deferOpen: true });
  return new AuditLog(file, { ...loss, reopenOnHup: true, deferOpen: true });
}

/** Opens a deferredAuditLog: the setting's refusal (ConfigError) when the file cannot be opened now. */
export function openDeferredAuditLog(audit: AuditLog, file: string): void {
  try {
    audit.open();
  } catch (e) {
    throw auditOpenRefusal(file, e);
  }
}
