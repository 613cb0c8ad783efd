// Loading and reloading the tenants file (declared-tenants.md §1). At start-up
// a bad file stops the process: exit 2, one line naming the setting, where its
// value came from, the file and what is wrong (tenant and field, or the two
// tenants that overlap): `invalid tenants.file (flag --tenants-file): <file>: …`.
// Afterwards the file is reloaded on SIGHUP and when it changes (fs.watch on
// its directory, so an editor's rename-into-place is seen, and so is a
// Kubernetes ConfigMap's swap of its ..data link; debounced): a
// reload that fails keeps the previous set, logs one line, counts
// siglake_tenants_reload_failures_total and writes an audit event.
//
// A reload parses the file on a thread of its own and swaps the result in on
// the event loop; one runs at a time, and those asked for meanwhile are one
// more (100 SIGHUPs in a second parse the file at most twice). Parsed in
// place, a 10,000-tenant YAML file held the event loop (every ingest request,
// /readyz) for about 5 s per reload, and a burst of reloads for minutes.

import fs from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { ConfigError } from '../errors.js';
import type { Logger } from '../log.js';
import type { AuditLog } from './audit-log.js';
import type { DeclaredTenants } from './declared-tenants.js';
import type { ParseReply, ParseRequest } from './tenants-parse-thread.js';
import type { TenantMetrics } from './tenant-metrics.js';
import { parseTenantsText, TenantsFileError, type TenantDecl } from './tenants-file.js';

/** The file's text; every problem reading it is a TenantsFileError naming the file. */
function readTenantsText(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (e) {
    const why = (e as NodeJS.ErrnoException).code ?? (e as Error).message;
    throw new TenantsFileError(`tenants.file: cannot read ${file} (${why})`, `cannot read (${why})`);
  }
}

/** A problem of the file's content, named after the file. */
function inFile(file: string, e: TenantsFileError): TenantsFileError {
  return new TenantsFileError(`tenants.file ${file}: ${e.message}`, e.detail);
}

/** Reads and validates the file; every problem is a TenantsFileError naming the file. */
export function readTenantsFile(file: string): TenantDecl[] {
  return readTenantsFileText(file).decls;
}

/** readTenantsFile, with the text it read: the reloader's reference for "changed since" (loadedText). */
export function readTenantsFileText(file: string): { decls: TenantDecl[]; text: string } {
  const text = readTenantsText(file);
  try {
    return { decls: parseTenantsText(text, file), text };
  } catch (e) {
    if (e instanceof TenantsFileError) throw inFile(file, e);
    throw e;
  }
}

const PARSE_THREAD = new URL('./tenants-parse-thread.js', import.meta.url);
/** A parse thread left idle this long ends (a burst of reloads reuses it, warm). */
const PARSE_THREAD_IDLE_MS = 30_000;

/**
 * Parses tenants files on a thread of its own (tenants-parse-thread.ts), one
 * at a time, so that a large file's parse does not hold the event loop; in
 * place when that module is not there (the TypeScript sources under a test
 * runner). The thread is started on the first parse and ends when idle.
 */
class ParseThread {
  #worker: Worker | undefined;
  #idle: NodeJS.Timeout | undefined;
  #pending: { resolve: (d: TenantDecl[]) => void; reject: (e: Error) => void } | undefined;

  parse(text: string, file: string): Promise<TenantDecl[]> {
    if (!fs.existsSync(PARSE_THREAD)) return Promise.resolve().then(() => parseTenantsText(text, file));
    if (this.#idle !== undefined) clearTimeout(this.#idle);
    this.#idle = undefined;
    const worker = this.#worker ?? this.#start();
    return new Promise<TenantDecl[]>((resolve, reject) => {
      this.#pending = { resolve, reject };
      worker.postMessage({ text, name: file } satisfies ParseRequest);
    });
  }

  #start(): Worker {
    const worker = new Worker(PARSE_THREAD);
    worker.unref(); // never what keeps a stopping process alive
    const fail = (e: Error): void => {
      if (this.#worker === worker) this.#worker = undefined;
      const p = this.#pending;
      this.#pending = undefined;
      p?.reject(e);
    };
    worker.on('message', (reply: ParseReply) => {
      const p = this.#pending;
      this.#pending = undefined;
      this.#idle = setTimeout(() => this.close(), PARSE_THREAD_IDLE_MS);
      this.#idle.unref();
      if (p === undefined) return;
      if ('decls' in reply) p.resolve(reply.decls);
      else p.reject(reply.error.file ? new TenantsFileError(reply.error.message, reply.error.detail) : new Error(reply.error.message));
    });
    worker.on('error', (e) => fail(new Error(`the tenants file's parse failed: ${e.message}`)));
    worker.on('exit', (code) => fail(new Error(`the tenants file's parse thread ended (exit ${code}) without an answer`)));
    this.#worker = worker;
    return worker;
  }

  close(): void {
    if (this.#idle !== undefined) clearTimeout(this.#idle);
    this.#idle = undefined;
    const w = this.#worker;
    this.#worker = undefined;
    if (w !== undefined) void w.terminate();
  }
}

/**
 * Start-up: runs `load` (reading `file` and building the tenants from it),
 * and turns any problem with the file, the overlap of two tenants that only
 * the built index finds included, into the setting's refusal
 * (ConfigError.ofSetting: `tenants.file: <file>: <what>`, to which the CLI
 * adds where the value came from). `file` undefined: no file, `load` as is.
 */
export function loadTenantsAtStart<T>(file: string | undefined, load: () => T): T {
  if (file === undefined) return load();
  try {
    return load();
  } catch (e) {
    if (e instanceof TenantsFileError) throw ConfigError.ofSetting('tenants.file', `${file}: ${e.detail}`);
    throw e;
  }
}

export interface ReloaderOptions {
  file: string;
  /** The ingester's DeclaredTenants, or the query server's tenant gate. */
  tenants: Pick<DeclaredTenants, 'replace' | 'size'>;
  log: Logger;
  metrics?: Pick<TenantMetrics, 'reloadFailures'>;
  audit?: AuditLog;
  /** Quiet time after the last change event before reloading. */
  debounceMs?: number;
  /**
   * The text the set now in force was loaded from (readTenantsFileText at
   * start-up): start() reloads when the file no longer holds it, a change made
   * before the watch began (else it was never applied, and its own change
   * event was taken for one already tried).
   */
  loadedText?: string | undefined;
}

export class TenantsReloader {
  readonly #o: ReloaderOptions;
  #watcher: fs.FSWatcher | undefined;
  #timer: NodeJS.Timeout | undefined;
  readonly #onHup = (): void => {
    void this.reload('SIGHUP');
  };
  #lastText: string | undefined;
  /** A reload under way (reading, parsing off the event loop, applying): the next one waits for it. */
  #running = false;
  /** Reloads asked for while one ran: one more, when it ends, forced if any of them was. */
  #queued: { cause: string; force: boolean; waiters: ((ok: boolean) => void)[] } | undefined;
  #closed = false;
  readonly #parser = new ParseThread();

  constructor(o: ReloaderOptions) {
    this.#o = o;
  }

  start(): void {
    process.on('SIGHUP', this.#onHup);
    const dir = path.dirname(path.resolve(this.#o.file));
    const base = path.basename(this.#o.file);
    if (this.#o.loadedText !== undefined) {
      this.#lastText = this.#o.loadedText;
    } else {
      try {
        this.#lastText = fs.readFileSync(this.#o.file, 'utf8');
      } catch {
        this.#lastText = undefined;
      }
    }
    try {
      this.#watcher = fs.watch(dir, { persistent: false }, (_event, name) => {
        // The file itself, or a Kubernetes ConfigMap/Secret update: the kubelet never writes
        // tenants.yaml (a link to ..data/tenants.yaml); it renames a new ..data link into place.
        if (name !== null && name !== base && !name.startsWith('..')) return;
        if (this.#timer !== undefined) clearTimeout(this.#timer);
        this.#timer = setTimeout(() => {
          this.#timer = undefined;
          void this.reload('file change', true);
        }, this.#o.debounceMs ?? 100);
        this.#timer.unref();
      });
      this.#watcher.on('error', (e) => this.#o.log.warn({ err: e.message }, 'tenants file watch failed: reload with SIGHUP'));
    } catch (e) {
      this.#o.log.warn({ err: (e as Error).message }, 'cannot watch the tenants file: reload with SIGHUP');
    }
    // A change between the load at start-up and the watch (Redis, WAL recovery and the listeners
    // come in between: seconds) would never be applied: its change event came before the watch.
    if (this.#o.loadedText !== undefined) void this.reload('file change', true);
  }

  /**
   * Reloads now, or once the reload under way ends (reloads asked for
   * meanwhile are one: a burst of SIGHUPs or changes parses the file at most
   * twice); resolves with whether the new set is in force. The file is
   * parsed off the event loop, then swapped in at once.
   */
  reload(cause: string, onlyIfChanged = false): Promise<boolean> {
    if (this.#closed) return Promise.resolve(false);
    if (this.#running) {
      const q = (this.#queued ??= { cause, force: false, waiters: [] });
      if (!onlyIfChanged && !q.force) {
        q.force = true;
        q.cause = cause;
      }
      return new Promise((resolve) => q.waiters.push(resolve));
    }
    this.#running = true;
    return this.#reloadNow(cause, onlyIfChanged).finally(() => {
      this.#running = false;
      const q = this.#queued;
      this.#queued = undefined;
      if (q !== undefined) {
        void this.reload(q.cause, !q.force).then((ok) => {
          for (const w of q.waiters) w(ok);
        });
      }
    });
  }

  async #reloadNow(cause: string, onlyIfChanged: boolean): Promise<boolean> {
    const { file, tenants, log, metrics, audit } = this.#o;
    let text: string | undefined;
    let unreadable: unknown;
    try {
      text = readTenantsText(file);
    } catch (e) {
      unreadable = e;
    }
    // A change event for content already tried (touch, a watcher's echo) is no reload.
    if (onlyIfChanged && text !== undefined && text === this.#lastText) return true;
    this.#lastText = text;
    try {
      if (text === undefined) throw unreadable;
      const decls = await this.#parser.parse(text, file).catch((e: unknown) => {
        throw e instanceof TenantsFileError ? inFile(file, e) : e;
      });
      // Stopped while the file was parsed: nothing more is swapped in.
      if (this.#closed) return false;
      let changed: { added: string[]; removed: string[] };
      try {
        changed = tenants.replace(decls);
      } catch (e) {
        // An overlap the file alone decides (declared-tenants.md §2): name the file, as for every other problem.
        if (e instanceof TenantsFileError) throw inFile(file, e);
        throw e;
      }
      const { added, removed } = changed;
      log.info({ cause, tenants: tenants.size, added: added.length, removed: removed.length }, 'tenants file reloaded');
      audit?.write({ event: 'tenants_reload', tenant: null, subject: null, reason: cause, remote: null, tenants: tenants.size, added, removed });
      return true;
    } catch (e) {
      if (this.#closed) return false;
      const message = (e as Error).message;
      metrics?.reloadFailures.inc();
      log.warn({ cause, err: message }, 'tenants file reload refused: the previous set stays in force');
      audit?.write({ event: 'tenants_reload_failed', tenant: null, subject: null, reason: message, remote: null });
      return false;
    }
  }

  close(): void {
    this.#closed = true;
    this.#parser.close();
    process.off('SIGHUP', this.#onHup);
    this.#watcher?.close();
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    const q = this.#queued;
    this.#queued = undefined;
    if (q !== undefined) for (const w of q.waiters) w(false);
  }
}
