// Runs the client threads of `siglake loadgen`: starts them, waits until every
// one has made its bodies and tokens, gives them one common start time, adds
// up what they post, shows the progress line, and stops them on SIGINT.

import { Worker } from 'node:worker_threads';
import { IntervalStats, type IntervalMessage } from './interval-stats.js';
import type { DoneMessage } from './load-client.js';
import { LoadReport } from './load-report.js';
import type { ReadyMessage, StartMessage, WorkerInput } from './load-worker.js';
import type { LoadgenOptions } from './loadgen-options.js';
import { ProgressLine } from './progress-line.js';

type WorkerMessage = ReadyMessage | IntervalMessage | DoneMessage | { type: 'error'; message: string };

/** Lead time between "all ready" and the first request, so every thread starts together. */
const START_LEAD_MS = 50;
/** How long after a second's boundary the progress line is drawn (threads post the interval at the boundary). */
const TICK_AFTER_MS = 150;

export class LoadCoordinator {
  readonly #o: LoadgenOptions;
  readonly #progress: ProgressLine | undefined;
  readonly #workers: Worker[] = [];

  constructor(opts: LoadgenOptions, stdout: NodeJS.WriteStream) {
    this.#o = opts;
    const show = opts.progress === 'on' || (opts.progress === 'auto' && stdout.isTTY === true);
    this.#progress = show ? new ProgressLine(stdout) : undefined;
  }

  /** Asks every thread to stop sending (requests in flight still finish). */
  stop(): void {
    for (const w of this.#workers) w.postMessage({ type: 'stop' });
  }

  async run(): Promise<LoadReport> {
    const o = this.#o;
    const ready: ReadyMessage[] = [];
    const pending: IntervalMessage[] = [];
    const done: DoneMessage[] = [];
    let report: LoadReport | undefined;
    let failure: Error | undefined;
    let wake: () => void = () => {};
    const changed = (): void => wake();

    for (let t = 0; t < o.threads; t++) {
      const input: WorkerInput = { options: o, thread: t, threads: o.threads };
      const w = new Worker(new URL('./load-worker.js', import.meta.url), { workerData: input });
      w.on('message', (m: WorkerMessage) => {
        if (m.type === 'ready') ready.push(m);
        else if (m.type === 'interval') {
          if (report !== undefined) report.addInterval(m);
          else pending.push(m);
        } else if (m.type === 'done') done.push(m);
        else if (m.type === 'error') failure ??= new Error(`client thread ${t}: ${m.message}`);
        changed();
      });
      w.on('error', (e) => {
        failure ??= new Error(`client thread ${t} failed: ${e.message}`);
        changed();
      });
      w.on('exit', (code) => {
        if (code !== 0 && done.find((d) => d.thread === t) === undefined) failure ??= new Error(`client thread ${t} exited with ${code}`);
        changed();
      });
      this.#workers.push(w);
    }
    const until = async (cond: () => boolean): Promise<void> => {
      while (!cond() && failure === undefined) await new Promise<void>((r) => (wake = r));
      if (failure !== undefined) {
        await Promise.all(this.#workers.map((w) => w.terminate()));
        throw failure;
      }
    };

    await until(() => ready.length === o.threads);
    const startAt = Date.now() + START_LEAD_MS;
    report = new LoadReport(o, startAt);
    for (const r of ready) report.addReady(r);
    for (const m of pending) report.addInterval(m);
    const start: StartMessage = { type: 'start', startAt };
    for (const w of this.#workers) w.postMessage(start);

    let ticker: NodeJS.Timeout | undefined;
    const progress = this.#progress;
    if (progress !== undefined) {
      const rep = report;
      const totalSecs = o.durationSecs > 0 ? o.warmupSecs + o.durationSecs : undefined;
      // Tick just after each second's boundary, when every thread has posted
      // the interval that ended there, and show that second: no lag.
      let second = 0;
      const tick = (): void => {
        second++;
        const last = new IntervalStats();
        let any = false;
        // The intervals that ended in the last second; with intervals longer than a second, the last whole one.
        const to = Math.floor((second * 1000) / o.intervalMs);
        const from = o.intervalMs > 1000 ? to - 1 : Math.floor(((second - 1) * 1000) / o.intervalMs);
        for (let i = from; i < to; i++) {
          const s = rep.interval(i);
          if (s !== undefined) {
            last.addStats(s);
            any = true;
          }
        }
        progress.update({
          elapsedSecs: totalSecs !== undefined ? Math.min(second, totalSecs) : second,
          totalSecs,
          warmup: second <= o.warmupSecs,
          last: any ? last : undefined,
          lastSecs: o.intervalMs > 1000 ? o.intervalMs / 1000 : 1,
          total: rep.total,
          requests: o.requests,
        });
        ticker = setTimeout(tick, Math.max(0, startAt + (second + 1) * 1000 + TICK_AFTER_MS - Date.now()));
      };
      ticker = setTimeout(tick, Math.max(0, startAt + 1000 + TICK_AFTER_MS - Date.now()));
    }
    try {
      await until(() => done.length === o.threads);
    } finally {
      if (ticker !== undefined) clearTimeout(ticker);
      progress?.end();
    }
    for (const d of done) report.addDone(d);
    report.finish(Date.now());
    return report;
  }
}
