// Loading and reloading the tenants file (declared-tenants.md §1). At start-up
// a bad file stops the process: exit 2, one line naming the setting, where its
// value came from, the file and what is wrong (tenant and field, or the two
// tenants that overlap): `invalid tenants.file (flag --tenants-file): <file>: …`.
// Afterwards the file is reloaded on SIGHUP and when it changes (fs.watch on
// its directory, so an editor's rename-into-place is seen, and so is a
// Kubernetes ConfigMap's swap of its ..data link; debounced): a
// reload that fails keeps the previous set, logs one line, counts
// siglake_tenants_reload_failures_total and writes an audit event.

import fs from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../errors.js';
import type { Logger } from '../log.js';
import type { AuditLog } from './audit-log.js';
import type { DeclaredTenants } from './declared-tenants.js';
import type { TenantMetrics } from './tenant-metrics.js';
import { parseTenantsText, TenantsFileError, type TenantDecl } from './tenants-file.js';

/** Reads and validates the file; every problem is a TenantsFileError naming the file. */
export function readTenantsFile(file: string): TenantDecl[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    const why = (e as NodeJS.ErrnoException).code ?? (e as Error).message;
    throw new TenantsFileError(`tenants.file: cannot read ${file} (${why})`, `cannot read (${why})`);
  }
  try {
    return parseTenantsText(text, file);
  } catch (e) {
    if (e instanceof TenantsFileError) throw new TenantsFileError(`tenants.file ${file}: ${e.message}`, e.detail);
    throw e;
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
}

export class TenantsReloader {
  readonly #o: ReloaderOptions;
  #watcher: fs.FSWatcher | undefined;
  #timer: NodeJS.Timeout | undefined;
  readonly #onHup = (): void => {
    this.reload('SIGHUP');
  };
  #lastText: string | undefined;

  constructor(o: ReloaderOptions) {
    this.#o = o;
  }

  start(): void {
    process.on('SIGHUP', this.#onHup);
    const dir = path.dirname(path.resolve(this.#o.file));
    const base = path.basename(this.#o.file);
    try {
      this.#lastText = fs.readFileSync(this.#o.file, 'utf8');
    } catch {
      this.#lastText = undefined;
    }
    try {
      this.#watcher = fs.watch(dir, { persistent: false }, (_event, name) => {
        // The file itself, or a Kubernetes ConfigMap/Secret update: the kubelet never writes
        // tenants.yaml (a link to ..data/tenants.yaml); it renames a new ..data link into place.
        if (name !== null && name !== base && !name.startsWith('..')) return;
        if (this.#timer !== undefined) clearTimeout(this.#timer);
        this.#timer = setTimeout(() => {
          this.#timer = undefined;
          this.reload('file change', true);
        }, this.#o.debounceMs ?? 100);
        this.#timer.unref();
      });
      this.#watcher.on('error', (e) => this.#o.log.warn({ err: e.message }, 'tenants file watch failed: reload with SIGHUP'));
    } catch (e) {
      this.#o.log.warn({ err: (e as Error).message }, 'cannot watch the tenants file: reload with SIGHUP');
    }
  }

  /** Reloads now; returns whether the new set is in force. */
  reload(cause: string, onlyIfChanged = false): boolean {
    const { file, tenants, log, metrics, audit } = this.#o;
    let text: string | undefined;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch {
      text = undefined;
    }
    // A change event for content already tried (touch, a watcher's echo) is no reload.
    if (onlyIfChanged && text !== undefined && text === this.#lastText) return true;
    this.#lastText = text;
    try {
      const decls = readTenantsFile(file);
      let changed: { added: string[]; removed: string[] };
      try {
        changed = tenants.replace(decls);
      } catch (e) {
        // An overlap the file alone decides (declared-tenants.md §2): name the file, as for every other problem.
        if (e instanceof TenantsFileError) throw new TenantsFileError(`tenants.file ${file}: ${e.message}`, e.detail);
        throw e;
      }
      const { added, removed } = changed;
      log.info({ cause, tenants: tenants.size, added: added.length, removed: removed.length }, 'tenants file reloaded');
      audit?.write({ event: 'tenants_reload', tenant: null, subject: null, reason: cause, remote: null, tenants: tenants.size, added, removed });
      return true;
    } catch (e) {
      const message = (e as Error).message;
      metrics?.reloadFailures.inc();
      log.warn({ cause, err: message }, 'tenants file reload refused: the previous set stays in force');
      audit?.write({ event: 'tenants_reload_failed', tenant: null, subject: null, reason: message, remote: null });
      return false;
    }
  }

  close(): void {
    process.off('SIGHUP', this.#onHup);
    this.#watcher?.close();
    if (this.#timer !== undefined) clearTimeout(this.#timer);
  }
}
