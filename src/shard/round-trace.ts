// Test-only (SIGLAKE_TEST_HOOKS=1 and SIGLAKE_TEST_ROUND_TRACE=<path>): a
// timeline of every request between the acceptor and its writer worker, and of
// every round a worker makes, to find where a round's time goes
// (`native-bench/run.mjs --only timeline`; docs/performance.md, "A round's
// timeline"). Off, it costs each hot path one null check.
//
// One clock for every thread of the process: performance.now() plus this
// thread's offset to process.hrtime (CLOCK_MONOTONIC), in milliseconds.
//
// The acceptor and the workers share one Float64Array of stamps, STAMP_WORDS
// per request, at (reqId & STAMP_MASK): the acceptor's `published` (the frame
// is in the ring), the worker's `read` (it read the frame), `posted` (its
// completion goes into the completion ring: stamped just before the push, so
// that the acceptor never drains it unstamped) and `round` (the start of the
// round that read it). When the acceptor drains the completion it appends a row to
// its log: those four stamps, then `drained`, `answered` (the answer written)
// and `woke` (1 when the drain came right after the acceptor had waited on
// the doorbell). Each worker appends a row per round: `start`, `read` (frames
// read and bodies validated and staged), `written` (lane writes and the
// journal write done, ring released), `synced` (NaN when the round made no
// fdatasync on its thread), `posted`, `n` requests, and `slept` (1 when the
// worker blocked on the ring's futex since its last round). With two rounds
// in flight (--wal-rounds-in-flight 2) rounds overlap: a round's `synced` is
// when the worker's event loop saw its fdatasync on the pool return, and its
// `posted` may come after the next round was written.
//
// On shutdown each log is written as raw float64 rows in the machine's byte
// order: <path>.acceptor.f64 (ACCEPTOR_COLUMNS) and <path>.shard<k>.f64
// (ROUND_COLUMNS). Rows past a log's capacity are not kept: the acceptor's
// log holds ACCEPTOR_ROWS (56 MiB), each worker's ROUND_ROWS (14 MiB), and a
// traced process's RSS includes them. Requests more than STAMP_SLOTS apart
// in reqId share a stamp slot, so a trace assumes fewer in flight at once.

import { writeFileSync } from 'node:fs';

export const ACCEPTOR_COLUMNS = ['published', 'read', 'posted', 'round', 'drained', 'answered', 'woke'] as const;
export const ROUND_COLUMNS = ['start', 'read', 'written', 'synced', 'posted', 'n', 'slept'] as const;

const STAMP_SLOTS = 1 << 16;
const STAMP_MASK = STAMP_SLOTS - 1;
const STAMP_WORDS = 4;
const ACCEPTOR_ROWS = 1 << 20;
const ROUND_ROWS = 1 << 18;

/** The trace file prefix, when the test hooks ask for a trace; else undefined. */
export function roundTracePath(): string | undefined {
  const p = process.env['SIGLAKE_TEST_ROUND_TRACE'];
  return process.env['SIGLAKE_TEST_HOOKS'] === '1' && p !== undefined && p !== '' ? p : undefined;
}

/**
 * Milliseconds on a clock every thread of the process shares. The offset is
 * taken from the closest of several pairs of readings: a thread's first
 * process.hrtime call is slow (it was 100-200 µs off when read once).
 */
export function traceClock(): () => number {
  let best = Infinity;
  let offset = 0;
  for (let i = 0; i < 20; i++) {
    const a = performance.now();
    const h = Number(process.hrtime.bigint()) / 1e6;
    const b = performance.now();
    if (b - a < best) {
      best = b - a;
      offset = h - (a + b) / 2;
    }
  }
  return () => performance.now() + offset;
}

/** A growing log of fixed-width float64 rows, written out once. */
class RowLog {
  readonly #rows: Float64Array;
  #n = 0;
  constructor(
    readonly columns: number,
    capacity: number,
  ) {
    this.#rows = new Float64Array(columns * capacity);
  }
  /** The next row's first index, or -1 when the log is full. */
  next(): number {
    const at = this.#n * this.columns;
    if (at >= this.#rows.length) return -1;
    this.#n++;
    return at;
  }
  get rows(): Float64Array {
    return this.#rows;
  }
  write(file: string): void {
    writeFileSync(file, new Uint8Array(this.#rows.buffer, 0, this.#n * this.columns * 8));
  }
}

/** The acceptor's side: stamps `published`, logs a row per completion drained. */
export class AcceptorTrace {
  readonly sab = new SharedArrayBuffer(STAMP_SLOTS * STAMP_WORDS * 8);
  readonly #stamps = new Float64Array(this.sab);
  readonly #log = new RowLog(ACCEPTOR_COLUMNS.length, ACCEPTOR_ROWS);
  readonly now = traceClock();
  /** The completion loop has just come back from waiting on the doorbell. */
  woke = false;

  constructor(readonly path: string) {}

  published(reqId: number): void {
    const s = (reqId & STAMP_MASK) * STAMP_WORDS;
    this.#stamps[s] = this.now();
    // An earlier request's stamps in this slot must not pass for this one's
    // (one refused SIGLAKE_WORKER_DIED is answered without a worker reading it).
    this.#stamps[s + 1] = 0;
    this.#stamps[s + 2] = 0;
    this.#stamps[s + 3] = 0;
  }

  /** A completion was drained at `drained` and its answer written now. */
  answered(reqId: number, drained: number): void {
    const at = this.#log.next();
    if (at < 0) return;
    const s = (reqId & STAMP_MASK) * STAMP_WORDS;
    const r = this.#log.rows;
    r[at] = this.#stamps[s]!;
    r[at + 1] = this.#stamps[s + 1]!;
    r[at + 2] = this.#stamps[s + 2]!;
    r[at + 3] = this.#stamps[s + 3]!;
    r[at + 4] = drained;
    r[at + 5] = this.now();
    r[at + 6] = this.woke ? 1 : 0;
  }

  write(): void {
    this.#log.write(`${this.path}.acceptor.f64`);
  }
}

/** A round as the trace follows it (two may be in flight: --wal-rounds-in-flight 2). */
export interface TracedRound {
  /** Its row in the worker's log (-1: none, the log is full). */
  traceRow: number;
  /** When it began. */
  traceStart: number;
}

/** A worker's side: stamps `read` and `posted`, logs a row per round. */
export class WorkerTrace {
  readonly #stamps: Float64Array;
  readonly #log = new RowLog(ROUND_COLUMNS.length, ROUND_ROWS);
  readonly now = traceClock();
  #slept = false;

  constructor(
    readonly path: string,
    sab: SharedArrayBuffer,
    readonly shard: number,
  ) {
    this.#stamps = new Float64Array(sab);
  }

  /** The worker is about to block on the ring. */
  sleeping(): void {
    this.#slept = true;
  }

  roundStart(round: TracedRound): void {
    round.traceRow = this.#log.next();
    round.traceStart = this.now();
    if (round.traceRow < 0) return;
    const r = this.#log.rows;
    r[round.traceRow] = round.traceStart;
    r[round.traceRow + 3] = NaN;
    r[round.traceRow + 6] = this.#slept ? 1 : 0;
    this.#slept = false;
  }

  /** A request `round` read. */
  read(round: TracedRound, reqId: number): void {
    const s = (reqId & STAMP_MASK) * STAMP_WORDS;
    this.#stamps[s + 1] = this.now();
    this.#stamps[s + 3] = round.traceStart;
  }

  /** Marks column `col` (1 read, 2 written, 3 synced) of `round`. */
  mark(round: TracedRound, col: 1 | 2 | 3): void {
    if (round.traceRow >= 0) this.#log.rows[round.traceRow + col] = this.now();
  }

  /** A request's completion is about to be posted (the acceptor may drain it at once). */
  posted(reqId: number): void {
    this.#stamps[(reqId & STAMP_MASK) * STAMP_WORDS + 2] = this.now();
  }

  /** `round`'s completions are all posted (and the acceptor's doorbell rung). */
  roundEnd(round: TracedRound, n: number): void {
    if (round.traceRow < 0) return;
    const r = this.#log.rows;
    r[round.traceRow + 4] = this.now();
    r[round.traceRow + 5] = n;
    round.traceRow = -1;
  }

  write(): void {
    this.#log.write(`${this.path}.shard${this.shard}.f64`);
  }
}
