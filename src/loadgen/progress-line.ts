// The live progress line, rewritten in place once a second while stdout is a
// TTY: elapsed time, the last whole interval's rate and latency, and errors
// by status so far.

import type { IntervalStats } from './interval-stats.js';

export class ProgressLine {
  readonly #out: NodeJS.WriteStream;
  #shown = false;

  constructor(out: NodeJS.WriteStream) {
    this.#out = out;
  }

  /** `last` is the most recent whole interval (may be undefined: nothing completed in it). */
  update(elapsedSecs: number, warmup: boolean, last: IntervalStats | undefined, intervalSecs: number, total: IntervalStats): void {
    const n = (v: number): string => Math.round(v).toLocaleString('en-US');
    const rate = last === undefined ? 0 : last.completed / intervalSecs;
    const mb = last === undefined ? 0 : last.bytes / 1e6 / intervalSecs;
    const errs: string[] = [];
    for (const [k, v] of total.statuses) if (k !== '200' && k !== 'OK') errs.push(`${k}: ${n(v)}`);
    const p = (q: number): string => (last === undefined || last.completed === 0 ? '-' : (last.hist.percentile(q) / 1000).toFixed(2));
    const line =
      `[${elapsedSecs.toFixed(1).padStart(6)}s${warmup ? ' warm-up' : ''}] ${n(rate).padStart(8)} req/s ${mb.toFixed(2).padStart(8)} MB/s` +
      `  p50 ${p(50)} ms  p99 ${p(99)} ms  ok ${n(total.ok)}  errors ${n(total.completed - total.ok)}${errs.length > 0 ? ` (${errs.join(', ')})` : ''}`;
    const cols = this.#out.columns ?? 160;
    this.#out.write(`\r${line.slice(0, Math.max(20, cols - 1))}\x1b[K`);
    this.#shown = true;
  }

  /** Ends the line so the report starts on a fresh one. */
  end(): void {
    if (this.#shown) this.#out.write('\n');
    this.#shown = false;
  }
}
