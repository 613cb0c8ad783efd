// The send loop of one client thread. Closed loop: every connection (times
// streams, for gRPC) keeps one request in flight until the end. Fixed rate:
// request k is due at start + k / rate; it goes out when due and a connection
// is free, and its latency is counted from when it was due, not from when it
// went out, so a server that stalls is charged for the requests it held up
// (no coordinated omission). Completions are added to the stats of the
// interval they fall in, and each interval is posted once it is over.
// Sending ends at the end of --duration (or at stop()) whatever the target
// does: nothing due before the end goes out after it (fixed rate counts it
// unsent), connections waiting out a backoff stop waiting, and requests still
// in flight get DRAIN_MAX_MS (at most --timeout-ms) to be answered before they
// are abandoned and counted as "timeout". Before, a fixed-rate run against a
// target that refused connections sent its backlog after the end, one request
// per connection per backoff second (144,000 due at 16,000/s for 9 s: hours),
// and a target that accepted and never answered held the run for --timeout-ms.

import { performance } from 'node:perf_hooks';
import type { PooledBody } from './body-pool.js';
import { IntervalStats, type IntervalMessage } from './interval-stats.js';
import type { LaneTarget } from './lane-plan.js';

/** Called once per request: the status key, whether it succeeded, and a refusal's body or message. */
export type SendDone = (status: string, ok: boolean, detail: Buffer | string | undefined) => void;

export interface RequestSender {
  /** Sends `body` for `target` on connection `conn`; calls `done` exactly once. */
  send(conn: number, target: LaneTarget, body: PooledBody, done: SendDone): void;
  /** Ends every request in flight now: each `done` is called with "timeout", not ok, and `message`. */
  abandon(message: string): void;
  close(): Promise<void>;
}

const BACKOFF_FIRST_MS = 10;
const BACKOFF_MAX_MS = 1000;
/** After the end of sending, how long requests in flight may still take before they are abandoned (at most --timeout-ms). */
export const DRAIN_MAX_MS = 3000;

export interface DoneMessage {
  type: 'done';
  thread: number;
  issued: number;
  /** Fixed rate: most requests that were due and not yet sent at one time. */
  maxBacklog: number;
  /** Fixed rate: requests due before the end that never went out. */
  unsent: number;
  /** First refusal message seen per status. */
  samples: Record<string, string>;
}

export interface LoadClientOptions {
  thread: number;
  targets: LaneTarget[];
  sender: RequestSender;
  post(m: IntervalMessage): void;
  /** performance.now() of the start (may be in the future) and of the end of sending. */
  startPerf: number;
  endPerf: number;
  /** Requests this thread sends at most. */
  budget: number;
  connections: number;
  /** In flight per connection (gRPC streams; 1 for HTTP). */
  streams: number;
  /** Requests/s for this thread; undefined for a closed loop. */
  rate: number | undefined;
  intervalMs: number;
  /** How long requests in flight at the end of sending may still take (then abandoned as "timeout"). */
  drainMs: number;
  /** Turns a refusal body into one line for the report. */
  describe(status: string, detail: Buffer | string): string;
}

export class LoadClient {
  readonly #o: LoadClientOptions;
  readonly #stats = new IntervalStats();
  #interval = -1;
  #endPerf: number;
  /**
   * The end the fixed-rate schedule counts requests due against (unsent =
   * due − sent): the run's end, even when the end timer fired a little before
   * it (#end then stops sending at once, and a request due in between was
   * neither sent nor counted: issued + unsent came to one short of rate ×
   * duration), or the moment of stop().
   */
  #dueEndPerf: number;
  #issued = 0;
  #inflight = 0;
  #laneCursor: number;
  #maxBacklog = 0;
  readonly #samples: Record<string, string> = {};
  #timer: NodeJS.Timeout | undefined;
  #idle: (() => void) | undefined;
  /** Per connection: the wait before its next request after a connection failure (0: none). */
  readonly #backoffMs: number[];
  /** Connections waiting out a backoff: their timers and what each runs when it fires. */
  readonly #sleepers = new Set<{ timer: NodeJS.Timeout | undefined; fn: () => void }>();
  /** Sending is over (the end of --duration, or stop()). */
  #ended = false;
  #endTimer: NodeJS.Timeout | undefined;
  #drainTimer: NodeJS.Timeout | undefined;

  constructor(opts: LoadClientOptions) {
    this.#o = opts;
    this.#endPerf = opts.endPerf;
    this.#dueEndPerf = opts.endPerf;
    this.#laneCursor = 0;
    this.#backoffMs = new Array<number>(opts.connections).fill(0);
  }

  /**
   * After a request on `conn`, the wait before the next one: doubling from
   * 10 ms to 1 s while the connection cannot be made (refused, reset, no
   * route; gRPC UNAVAILABLE without a server answer), 0 once anything answers.
   * A dead target is probed a few times a second, not 7,000 times.
   */
  #backoff(conn: number, status: string, detail: Buffer | string | undefined): number {
    const transport =
      status.startsWith('error:') ||
      (status === 'UNAVAILABLE' && typeof detail === 'string' && /connect|ECONNREFUSED|ECONNRESET|No connection/i.test(detail));
    const next = transport ? Math.min(BACKOFF_MAX_MS, Math.max(BACKOFF_FIRST_MS, this.#backoffMs[conn]! * 2)) : 0;
    this.#backoffMs[conn] = next;
    return next;
  }

  /** Runs `fn` after `ms` (at once when 0, or once sending is over), counted as a sleeping connection meanwhile. */
  #after(ms: number, fn: () => void): void {
    if (ms === 0 || this.#ended) return fn();
    const s = { timer: undefined as NodeJS.Timeout | undefined, fn };
    s.timer = setTimeout(() => {
      this.#sleepers.delete(s);
      fn();
    }, ms);
    this.#sleepers.add(s);
  }

  /** Stops sending now; requests in flight get the drain time to finish. */
  stop(): void {
    // Stopped early, what was due after now never was: not counted unsent.
    this.#dueEndPerf = Math.min(this.#dueEndPerf, performance.now());
    this.#end();
  }

  /**
   * Sending is over: the schedule closes (what was due and not sent is
   * counted unsent), sleeping connections wake to find nothing to send, and
   * requests still in flight are abandoned after the drain time.
   */
  #end(): void {
    if (this.#ended) return;
    this.#ended = true;
    // (A timer may fire a fraction of a millisecond before the end it was set for.)
    this.#endPerf = Math.min(this.#endPerf, performance.now());
    clearTimeout(this.#endTimer);
    this.#endTimer = undefined;
    for (const s of [...this.#sleepers]) {
      clearTimeout(s.timer);
      this.#sleepers.delete(s);
      s.fn();
    }
    if (this.#schedule?.open === true) this.#schedule.pump();
    if (this.#inflight > 0) {
      const ms = this.#o.drainMs;
      this.#drainTimer = setTimeout(() => {
        this.#drainTimer = undefined;
        this.#o.sender.abandon(`no answer by the end of the run (${ms} ms after sending stopped)`);
      }, ms);
    }
    this.#checkIdle();
  }

  async run(): Promise<DoneMessage> {
    const o = this.#o;
    const wait = o.startPerf - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    // Post each interval just after its end (aligned to the common start), so
    // the coordinator's progress line can show the second that just ended.
    let flushTimer: NodeJS.Timeout | undefined;
    const flushAtBoundary = (): void => {
      this.#flushIfStale();
      const since = performance.now() - o.startPerf;
      flushTimer = setTimeout(flushAtBoundary, o.intervalMs - (since % o.intervalMs) + 5);
    };
    flushAtBoundary();
    const idle = new Promise<void>((resolve) => {
      this.#idle = resolve;
    });
    if (!this.#ended && Number.isFinite(this.#endPerf)) this.#endTimer = setTimeout(() => this.#end(), Math.max(0, this.#endPerf - performance.now()));
    let unsent = 0;
    if (o.rate === undefined) {
      const chains = o.connections * o.streams;
      for (let i = 0; i < chains && this.#canIssue(); i++) this.#closedLoop(i % o.connections);
    } else {
      unsent = await this.#fixedRate(o.rate);
    }
    this.#checkIdle();
    await idle;
    clearTimeout(flushTimer);
    clearTimeout(this.#endTimer);
    clearTimeout(this.#drainTimer);
    if (this.#stats.completed > 0) o.post(this.#stats.message(o.thread, this.#interval));
    return { type: 'done', thread: o.thread, issued: this.#issued, maxBacklog: this.#maxBacklog, unsent, samples: this.#samples };
  }

  #canIssue(): boolean {
    return this.#issued < this.#o.budget && performance.now() < this.#endPerf;
  }

  #checkIdle(): void {
    if (this.#inflight === 0 && this.#sleepers.size === 0 && this.#timer === undefined && this.#idle !== undefined && !this.#pending()) this.#idle();
  }

  /** Fixed rate keeps a schedule open until its last due request went out. */
  #pending(): boolean {
    return this.#schedule !== undefined && this.#schedule.open;
  }

  #next(): [LaneTarget, PooledBody] {
    const targets = this.#o.targets;
    const t = targets[this.#laneCursor];
    this.#laneCursor = this.#laneCursor + 1 === targets.length ? 0 : this.#laneCursor + 1;
    const body = t.bodies[t.cursor % t.bodies.length];
    t.cursor++;
    return [t, body];
  }

  #closedLoop(conn: number): void {
    const [target, body] = this.#next();
    this.#issued++;
    this.#inflight++;
    const started = performance.now();
    this.#o.sender.send(conn, target, body, (status, ok, detail) => {
      this.#complete(started, status, ok, detail, body);
      this.#after(this.#backoff(conn, status, detail), () => {
        if (this.#canIssue()) this.#closedLoop(conn);
        else this.#checkIdle();
      });
    });
  }

  #schedule: { open: boolean; k: number; free: number[]; pump: () => void } | undefined;

  /** Resolves when sending is over; returns how many due requests never went out. */
  #fixedRate(rate: number): Promise<number> {
    const o = this.#o;
    const period = 1000 / rate;
    // The schedule starts at the common start time, even if this timer woke late.
    const start = o.startPerf;
    const free: number[] = [];
    for (let s = 0; s < o.streams; s++) for (let c = o.connections - 1; c >= 0; c--) free.push(c);
    return new Promise<number>((resolve) => {
      const sched = { open: true, k: 0, free, pump: () => {} };
      this.#schedule = sched;
      const finish = (): void => {
        if (!sched.open) return;
        sched.open = false;
        if (this.#timer !== undefined) clearTimeout(this.#timer);
        this.#timer = undefined;
        // Requests due before the end that never went out.
        // The count of k with start + k * period < end, by the same comparison the loop makes.
        let due = o.budget;
        const end = this.#dueEndPerf;
        if (Number.isFinite(end)) {
          due = Math.max(0, Math.ceil((end - start) / period));
          while (due > 0 && start + (due - 1) * period >= end) due--;
          while (start + due * period < end) due++;
        }
        const dueAtEnd = Math.min(o.budget, due);
        resolve(Math.max(0, dueAtEnd - sched.k));
      };
      const onTimer = (): void => {
        this.#timer = undefined;
        sched.pump();
      };
      // Runs on the timer and after every completion: a request due while
      // the timer waits (it fires a millisecond or more late) goes out with
      // the next completion, not with the timer.
      sched.pump = () => {
        const now = performance.now();
        for (;;) {
          if (sched.k >= o.budget) return finish();
          const due = start + sched.k * period;
          // Nothing goes out after the end, not even a request due before it (counted unsent).
          if (due >= this.#endPerf || now >= this.#endPerf) return finish();
          if (due > now) {
            this.#timer ??= setTimeout(onTimer, due - now);
            return;
          }
          const backlog = Math.floor((now - start) / period) + 1 - sched.k;
          if (backlog > this.#maxBacklog) this.#maxBacklog = backlog;
          if (free.length === 0) return; // a completion pumps again
          const conn = free.pop()!;
          sched.k++;
          this.#sendAt(conn, due);
        }
      };
      sched.pump();
    });
  }

  #sendAt(conn: number, due: number): void {
    const [target, body] = this.#next();
    this.#issued++;
    this.#inflight++;
    this.#o.sender.send(conn, target, body, (status, ok, detail) => {
      this.#complete(due, status, ok, detail, body);
      this.#after(this.#backoff(conn, status, detail), () => {
        const sched = this.#schedule!;
        sched.free.push(conn);
        if (sched.open) sched.pump();
        this.#checkIdle();
      });
    });
  }

  #complete(started: number, status: string, ok: boolean, detail: Buffer | string | undefined, body: PooledBody): void {
    this.#inflight--;
    const now = performance.now();
    const o = this.#o;
    const index = Math.floor((now - o.startPerf) / o.intervalMs);
    if (index !== this.#interval) {
      if (this.#stats.completed > 0) o.post(this.#stats.message(o.thread, this.#interval));
      this.#stats.reset();
      this.#interval = index;
    }
    this.#stats.record(status, ok, (now - started) * 1000, body.wire.length, body.rawBytes, body.records);
    if (!ok && detail !== undefined && this.#samples[status] === undefined) this.#samples[status] = o.describe(status, detail);
  }

  #flushIfStale(): void {
    const o = this.#o;
    const index = Math.floor((performance.now() - o.startPerf) / o.intervalMs);
    if (index !== this.#interval && this.#stats.completed > 0) {
      o.post(this.#stats.message(o.thread, this.#interval));
      this.#stats.reset();
      this.#interval = index;
    }
  }
}
