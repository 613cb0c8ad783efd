// The live progress line, rewritten in place once a second while stdout is a
// TTY, fitted to the terminal width (80 columns when unknown):
//
//   4/15 s   12,345 req/s  12.34 MB/s  p99 1.23 ms  | total 49,380 ok  12 refused (503)
//
// The rates and p99 are those of the second that just ended (the coordinator
// ticks just after each second's boundary, once every thread has posted it);
// "total" counts since the end of the warm-up. What does not fit is left out,
// least useful first.

import type { IntervalStats } from './interval-stats.js';
import { fitParts, fmtMs, fmtNum } from './text-format.js';

export interface ProgressState {
  /** Whole seconds since the start (warm-up included). */
  elapsedSecs: number;
  /** Seconds the run lasts (warm-up included); undefined when bounded by --requests only. */
  totalSecs: number | undefined;
  warmup: boolean;
  /** The second (or, with --interval-ms above 1000, the interval) that just ended; undefined when nothing completed in it. */
  last: IntervalStats | undefined;
  /** Seconds `last` covers (default 1). */
  lastSecs?: number;
  /** Counted since the warm-up. */
  total: IntervalStats;
  /** --requests, if given. */
  requests: number | undefined;
}

/** The line for `s`, at most `width` columns. */
export function progressText(s: ProgressState, width: number): string {
  const last = s.last;
  const secs = s.lastSecs ?? 1;
  const rate = (last?.completed ?? 0) / secs;
  const mb = (last?.bytes ?? 0) / 1e6 / secs;
  const p99 = last === undefined || last.ok === 0 ? '-' : fmtMs(last.hist.percentile(99) / 1000);
  const lastRefused = last === undefined ? 0 : Math.round((last.completed - last.ok) / secs);
  const time = s.totalSecs !== undefined ? `${s.elapsedSecs}/${fmtNum(s.totalSecs)} s` : `${s.elapsedSecs} s`;
  const refused = s.total.completed - s.total.ok;
  const statuses = [...s.total.statuses].filter(([k]) => k !== '200' && k !== 'OK').sort((a, b) => b[1] - a[1]);
  return fitParts(
    [
      { text: time.padStart(8) + (s.warmup ? ' warm-up' : '') },
      { text: `${fmtNum(rate).padStart(7)} req/s${lastRefused > 0 ? ` (${fmtNum(lastRefused)} refused)` : ''}` },
      { text: `${fmtNum(mb, 2).padStart(6)} MB/s`, optional: true },
      { text: `p99 ${p99} ms`, optional: true },
      { text: `| total ${fmtNum(s.total.ok)} ok${s.requests !== undefined ? ` of ${fmtNum(s.requests)}` : ''}` },
      { text: refused > 0 ? `${fmtNum(refused)} refused` : '' },
      { text: statuses.length > 0 ? `(${statuses.slice(0, 2).map(([k]) => k).join(', ')}${statuses.length > 2 ? ', …' : ''})` : '', optional: true },
    ],
    width - 1,
  );
}

export class ProgressLine {
  readonly #out: NodeJS.WriteStream;
  #shown = false;

  constructor(out: NodeJS.WriteStream) {
    this.#out = out;
  }

  update(s: ProgressState): void {
    const cols = this.#out.columns;
    this.#out.write(`\r${progressText(s, typeof cols === 'number' && cols > 0 ? cols : 80)}\x1b[K`);
    this.#shown = true;
  }

  /** Ends the line so the report starts on a fresh one. */
  end(): void {
    if (this.#shown) this.#out.write('\n');
    this.#shown = false;
  }
}
