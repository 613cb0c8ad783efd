// What the acceptor hands a shard task (the Piscina task's arguments), the
// control words they share, and what the task returns. The frames are in
// ./frames.ts, the completion record in ./completion-ring.ts.

import type { OtlpWalk } from '../otlp/wire-validator.js';
import type { LaneSpec } from './frames.js';

export interface WorkerSettings {
  walDir: string;
  walFsync: 'batch' | 'interval' | 'never';
  walFsyncIntervalMs: number;
  /** `batch` mode: 2 writes round N+1 while round N's journal fdatasync runs. */
  walRoundsInFlight: number;
  /** `batch` mode: keep retired commit-journal files as spares for reuse. */
  walJournalRecycle: boolean;
  /** `batch` mode: a one-lane round of at least this many bytes fdatasyncs its segments instead of the journal (0: never). */
  walDirectRoundBytes: number;
  /** `batch` mode: lanes whose segment descriptor is closed leave a round's records to the checkpoint (journal only). */
  walDeferLaneWrites: boolean;
  /** Segment files: drop the pages an fdatasync made durable (the acceptor checked the addon loads). */
  walDropSyncedPages: boolean;
  /** `batch` mode: bytes of zeros the journal's first spare is prefilled with (0: none). */
  walJournalPrefillBytes: number;
  walSegmentBytes: number;
  walSegmentMaxAgeSecs: number;
  /** This worker's share of --wal-max-open-files. */
  maxOpenFiles: number;
  maxRequestBytes: number;
  /** --otlp-walk (the acceptor checked that `native` loads). */
  otlpWalk: OtlpWalk;
  logLevel: string;
}

export interface ShardTaskArgs {
  shard: number;
  workers: number;
  /** Bumped each time the shard task is started again after a worker died. */
  incarnation: number;
  ringSab: SharedArrayBuffer;
  complSab: SharedArrayBuffer;
  doorbellSab: SharedArrayBuffer;
  /** Int32 words, see ControlWord. */
  controlSab: SharedArrayBuffer;
  statsSab: SharedArrayBuffer;
  settings: WorkerSettings;
  /** Lanes of this shard the acceptor already knows (after a restart). */
  lanes: LaneSpec[];
  /** Test-only: the request stamps of a round trace (src/shard/round-trace.ts), when one is on. */
  traceSab?: SharedArrayBuffer;
}

/** The module Piscina loads in each worker thread: its default export serves one shard. */
export const SHARD_TASK_URL = new URL('../worker/shard-task.js', import.meta.url).href;

/** Int32 indexes into the control SharedArrayBuffer. */
export const ControlWord = {
  /** The incarnation number once the worker has recovered its WAL and reads frames. */
  READY: 0,
  /** worker_threads threadId of the current worker (for the test-only kill hook). */
  THREAD_ID: 1,
} as const;

export interface ShardExit {
  shard: number;
  requests: number;
}
