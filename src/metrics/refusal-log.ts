// The ingester says what it refuses, without flooding its log: one info line
// for the first refusal of each HTTP status (gRPC answers count under their
// HTTP status) per period (a minute), carrying the count since the previous
// line for that status and, where the metrics know them, the reasons
// (header_not_trusted, queue_full…). Nothing from the request is logged: no
// token, no tenant telemetry; only counts and reason labels.

import type { Logger } from '../log.js';

export interface RefusalLogOptions {
  /** At most one line per status per this many ms (default 60,000). */
  periodMs?: number;
  /** Cumulative counts by reason label of refusals with this status, if the metrics keep any. */
  reasons?: (status: number) => Readonly<Record<string, number>> | undefined;
  now?: () => number;
}

interface Entry {
  /** Refusals since the last line. */
  count: number;
  /** When the last line was written (-Infinity: never). */
  lineAt: number;
  /** The reason counts at the last line, to log their increase. */
  reasons: Readonly<Record<string, number>>;
}

export class RefusalLog {
  readonly #log: Logger;
  readonly #periodMs: number;
  readonly #reasons: RefusalLogOptions['reasons'];
  readonly #now: () => number;
  readonly #entries = new Map<number, Entry>();

  constructor(log: Logger, opts: RefusalLogOptions = {}) {
    this.#log = log;
    this.#periodMs = opts.periodMs ?? 60_000;
    this.#reasons = opts.reasons;
    this.#now = opts.now ?? Date.now;
  }

  /** One refused request (call after the metrics counted it, so the reasons include it). */
  refused(status: number): void {
    let e = this.#entries.get(status);
    if (e === undefined) {
      e = { count: 0, lineAt: -Infinity, reasons: {} };
      this.#entries.set(status, e);
    }
    e.count++;
    const now = this.#now();
    if (now - e.lineAt < this.#periodMs) return;
    const current = this.#reasons?.(status);
    const fields: Record<string, unknown> = { status, refused: e.count };
    if (Number.isFinite(e.lineAt)) fields['sinceSecs'] = Math.round((now - e.lineAt) / 1000);
    if (current !== undefined) {
      const delta: Record<string, number> = {};
      for (const [k, v] of Object.entries(current)) {
        const d = v - (e.reasons[k] ?? 0);
        if (d > 0) delta[k] = d;
      }
      if (Object.keys(delta).length > 0) fields['reasons'] = delta;
      e.reasons = { ...current };
    }
    this.#log.info(fields, `ingest requests refused with ${status} (logged at most once a minute per status)`);
    e.count = 0;
    e.lineAt = now;
  }
}
