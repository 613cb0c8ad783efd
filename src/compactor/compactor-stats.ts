// The compactor's figures for /metrics, in one block of Float64 slots on a
// SharedArrayBuffer: the compactor thread writes them, the acceptor thread's
// registry reads them at scrape time (the same shape as the WAL workers'
// WorkerStats). Only the compactor thread writes. A compactor process
// (compactor.placement process, process-idle) posts snapshot() to the
// ingester, which load()s it into its own block.

/** Upper bounds (seconds) of the siglake_compactor_commit_seconds histogram. */
export const COMMIT_BUCKETS: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

const ROUNDS = 0;
const ROUND_ERRORS = 1;
const COMMITS = 2;
const CONFLICTS = 3;
const COMMIT_FAILURES = 4;
const FILES = 5;
const BYTES = 6;
const ROWS = 7;
const WAL_BYTES = 8;
const RETIRED = 9;
const CORRUPT = 10;
const LAG = 11;
const COMMIT_SUM = 12;
const COMMIT_BUCKET0 = 13;
/** Seconds spent in finished rounds. */
const BUSY = COMMIT_BUCKET0 + COMMIT_BUCKETS.length + 1;
/** Date.now() when the round in progress began; 0 between rounds. */
const STARTED = BUSY + 1;
const SLOTS = STARTED + 1;

export class CompactorStats {
  readonly sab: SharedArrayBuffer;
  readonly #f: Float64Array;

  static create(): CompactorStats {
    return new CompactorStats(new SharedArrayBuffer(SLOTS * 8));
  }

  constructor(sab: SharedArrayBuffer) {
    this.sab = sab;
    this.#f = new Float64Array(sab);
  }

  /** A copy of every slot: what a compactor process posts to the ingester. */
  snapshot(): Float64Array {
    return this.#f.slice();
  }

  /**
   * Takes a compactor process's snapshot as these figures: its counters added
   * to `base` (what the processes before it counted: a restarted compactor
   * starts from zero), its gauges as they are. One of another length is ignored.
   */
  load(values: Float64Array, base?: Float64Array): void {
    const f = this.#f;
    if (values.length !== f.length) return;
    for (let i = 0; i < f.length; i++) f[i] = i === LAG || i === STARTED || base === undefined ? values[i]! : base[i]! + values[i]!;
  }

  /** The counters now, gauges zeroed: the base for the next compactor process's snapshots. */
  counters(): Float64Array {
    const c = this.#f.slice();
    c[LAG] = 0;
    c[STARTED] = 0;
    return c;
  }

  /**
   * The compactor process these figures came from has ended: a round it was
   * in is over, and its time so far stays in busy seconds (the counter must
   * not go back when the next process's first snapshot has no round running).
   */
  processEnded(nowMs = Date.now()): void {
    const f = this.#f;
    if (f[STARTED]! > 0) f[BUSY]! += Math.max(0, nowMs - f[STARTED]!) / 1000;
    f[STARTED] = 0;
  }

  roundStarted(nowMs = Date.now()): void {
    this.#f[STARTED] = nowMs;
  }
  round(ok: boolean, nowMs = Date.now()): void {
    const f = this.#f;
    f[ROUNDS]! += 1;
    if (!ok) f[ROUND_ERRORS]! += 1;
    if (f[STARTED]! > 0) f[BUSY]! += Math.max(0, nowMs - f[STARTED]!) / 1000;
    f[STARTED] = 0;
  }
  commit(seconds: number): void {
    const f = this.#f;
    f[COMMITS]! += 1;
    f[COMMIT_SUM]! += seconds;
    let i = 0;
    while (i < COMMIT_BUCKETS.length && seconds > COMMIT_BUCKETS[i]!) i++;
    f[COMMIT_BUCKET0 + i]! += 1;
  }
  conflict(): void {
    this.#f[CONFLICTS]! += 1;
  }
  commitFailure(): void {
    this.#f[COMMIT_FAILURES]! += 1;
  }
  file(bytes: number, rows: number): void {
    this.#f[FILES]! += 1;
    this.#f[BYTES]! += bytes;
    this.#f[ROWS]! += rows;
  }
  walRead(bytes: number): void {
    this.#f[WAL_BYTES]! += bytes;
  }
  retired(): void {
    this.#f[RETIRED]! += 1;
  }
  corrupt(): void {
    this.#f[CORRUPT]! += 1;
  }
  setLag(seconds: number): void {
    this.#f[LAG] = seconds;
  }

  get rounds(): number {
    return this.#f[ROUNDS]!;
  }
  get roundErrors(): number {
    return this.#f[ROUND_ERRORS]!;
  }
  get commits(): number {
    return this.#f[COMMITS]!;
  }
  get conflicts(): number {
    return this.#f[CONFLICTS]!;
  }
  get commitFailures(): number {
    return this.#f[COMMIT_FAILURES]!;
  }
  get files(): number {
    return this.#f[FILES]!;
  }
  get bytes(): number {
    return this.#f[BYTES]!;
  }
  get rows(): number {
    return this.#f[ROWS]!;
  }
  get walBytes(): number {
    return this.#f[WAL_BYTES]!;
  }
  get segmentsRetired(): number {
    return this.#f[RETIRED]!;
  }
  get corruptSegments(): number {
    return this.#f[CORRUPT]!;
  }
  /** Seconds spent in rounds up to `nowMs`, the round in progress included. */
  busySeconds(nowMs = Date.now()): number {
    const started = this.#f[STARTED]!;
    return this.#f[BUSY]! + (started > 0 ? Math.max(0, nowMs - started) / 1000 : 0);
  }
  get lagSeconds(): number {
    return this.#f[LAG]!;
  }
  get commitSum(): number {
    return this.#f[COMMIT_SUM]!;
  }
  /** Non-cumulative count of bucket `i` (i = COMMIT_BUCKETS.length is +Inf). */
  commitBucket(i: number): number {
    return this.#f[COMMIT_BUCKET0 + i]!;
  }
}
