// Figures the writer workers keep for /metrics. Each shard has one block of
// Float64 slots on a SharedArrayBuffer that survives worker restarts, so
// counters never go backwards. Only the owning worker writes its block; the
// acceptor reads every block at scrape time.

/** Upper bounds (seconds) of the siglake_wal_fsync_seconds histogram. */
export const FSYNC_BUCKETS: readonly number[] = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
];

const WAL_BYTES = 0;
const TRUNCATED_BYTES = 1;
const FSYNC_COUNT = 2;
const FSYNC_SUM = 3;
const WRITEBACKS = 4;
const WRITE_ERRORS = 5;
const JOURNAL_REPLAYED_RECORDS = 6;
const CHECKPOINTS = 7;
const JOURNAL_SPARE_USES = 8;
const DIRECT_ROUNDS = 9;
const CHECKPOINT_SECONDS = 10;
const DEFERRED_BYTES = 11;
const LANE_DIR_FSYNCS = 12;
const FSYNC_BUCKET0 = 13;
const SLOTS = FSYNC_BUCKET0 + FSYNC_BUCKETS.length + 1;

export class WorkerStats {
  readonly sab: SharedArrayBuffer;
  readonly #f: Float64Array;

  static create(): WorkerStats {
    return new WorkerStats(new SharedArrayBuffer(SLOTS * 8));
  }

  constructor(sab: SharedArrayBuffer) {
    this.sab = sab;
    this.#f = new Float64Array(sab);
  }

  addWalBytes(n: number): void {
    this.#f[WAL_BYTES]! += n;
  }

  addTruncatedBytes(n: number): void {
    this.#f[TRUNCATED_BYTES]! += n;
  }

  addWriteError(): void {
    this.#f[WRITE_ERRORS]! += 1;
  }

  addJournalReplayedRecords(n: number): void {
    this.#f[JOURNAL_REPLAYED_RECORDS]! += n;
  }

  addCheckpoint(): void {
    this.#f[CHECKPOINTS]! += 1;
  }

  addCheckpointSeconds(seconds: number): void {
    this.#f[CHECKPOINT_SECONDS]! += seconds;
  }

  addDeferredBytes(n: number): void {
    this.#f[DEFERRED_BYTES]! += n;
  }

  addWriteback(): void {
    this.#f[WRITEBACKS]! += 1;
  }

  addJournalSpareUse(): void {
    this.#f[JOURNAL_SPARE_USES]! += 1;
  }

  addLaneDirFsyncs(n: number): void {
    this.#f[LANE_DIR_FSYNCS]! += n;
  }

  addDirectRound(): void {
    this.#f[DIRECT_ROUNDS]! += 1;
  }

  observeFsync(seconds: number): void {
    const f = this.#f;
    f[FSYNC_COUNT]! += 1;
    f[FSYNC_SUM]! += seconds;
    let i = 0;
    while (i < FSYNC_BUCKETS.length && seconds > FSYNC_BUCKETS[i]!) i++;
    f[FSYNC_BUCKET0 + i]! += 1;
  }

  get walBytes(): number {
    return this.#f[WAL_BYTES]!;
  }
  get truncatedBytes(): number {
    return this.#f[TRUNCATED_BYTES]!;
  }
  get writeErrors(): number {
    return this.#f[WRITE_ERRORS]!;
  }
  get journalReplayedRecords(): number {
    return this.#f[JOURNAL_REPLAYED_RECORDS]!;
  }
  get checkpoints(): number {
    return this.#f[CHECKPOINTS]!;
  }
  get checkpointSeconds(): number {
    return this.#f[CHECKPOINT_SECONDS]!;
  }
  get deferredBytes(): number {
    return this.#f[DEFERRED_BYTES]!;
  }
  get writebacks(): number {
    return this.#f[WRITEBACKS]!;
  }
  get journalSpareUses(): number {
    return this.#f[JOURNAL_SPARE_USES]!;
  }
  get laneDirFsyncs(): number {
    return this.#f[LANE_DIR_FSYNCS]!;
  }
  get directRounds(): number {
    return this.#f[DIRECT_ROUNDS]!;
  }
  get fsyncCount(): number {
    return this.#f[FSYNC_COUNT]!;
  }
  get fsyncSum(): number {
    return this.#f[FSYNC_SUM]!;
  }
  /** Non-cumulative count of the bucket `i` (i = FSYNC_BUCKETS.length is +Inf). */
  fsyncBucket(i: number): number {
    return this.#f[FSYNC_BUCKET0 + i]!;
  }
}
