// The compactor of `siglake ingest` (compactor.placement): a worker_threads
// Worker (`thread`) or a child process forked with an IPC channel (`process`,
// `process-idle`), so that reading segments, encoding Parquet and waiting on
// the catalog never run on the acceptor thread. It runs the CompactorLoop
// until the parent posts 'stop', then closes the catalog and ends.
//
// As a process it posts 'ready', gets its CompactorThreadData as the first
// message in reply, posts
// its figures (CompactorStats.snapshot) every STATS_MS and after each round
// instead of sharing their memory, ignores SIGINT and SIGTERM (the ingester
// stops it once its own graceful stop is done) and ends when the channel
// closes (the ingester died). `process-idle` first moves every thread of the
// process to SCHED_IDLE (native/thread-sched.c), and again when told 'idle'
// (compactor.idleMaxLagSecs, src/compactor/in-process-compactor.ts).

import { parentPort, workerData } from 'node:worker_threads';
import { createLogger } from '../log.js';
import { CompactorLoop, type RoundOutcome } from './compactor-loop.js';
import { CompactorSetup, type CompactorSettings } from './compactor-setup.js';
import { CompactorStats } from './compactor-stats.js';
import { walLagSeconds } from './compactor.js';
import type { LabelledMessage } from '../indexes/labelled-counts.js';
import { retentionHook } from '../retention/in-loop.js';
import { loadAddon } from '../native/addon.js';
import type { Logger } from 'pino';

export interface CompactorThreadData {
  readonly settings: CompactorSettings;
  /** The parent's figures (a thread); a process keeps its own and posts snapshots. */
  readonly statsSab?: SharedArrayBuffer;
  /** A process: SCHED_IDLE for all its threads. */
  readonly idle?: boolean;
  /** [lane dir, highest segment number] before the writers started. */
  readonly boundary: [string, number][];
}

/** What the compactor posts to the parent besides 'started'/'stopped'/'failed': each round's outcome. */
export interface RoundMessage {
  readonly type: 'round';
  readonly outcome: RoundOutcome;
}

/** A compactor process's figures (CompactorStats slots). */
export interface StatsMessage {
  readonly type: 'stats';
  readonly slots: Float64Array;
}

/** A process says which class its threads run in: when it starts, and when told 'idle'. */
export interface SchedMessage {
  readonly type: 'sched';
  /** Every thread is at SCHED_IDLE. */
  readonly idle: boolean;
}

/** A process posts its figures this often (and after each round). */
const STATS_MS = 1000;

/** The parent, over a worker's port or a child's IPC channel. */
interface Port {
  post(m: unknown): void;
  on(f: (m: unknown) => void): void;
  close(): void;
}

const port: Port =
  parentPort !== null
    ? { post: (m) => parentPort!.postMessage(m), on: (f) => parentPort!.on('message', f), close: () => parentPort!.close() }
    : {
        // A message to a parent that is gone is dropped: the 'disconnect' handler ends this process.
        post: (m) => {
          if (process.connected) process.send!(m);
        },
        on: (f) => process.on('message', f),
        close: () => {
          if (process.connected) process.disconnect();
        },
      };

const postRound = (outcome: RoundOutcome): void => port.post({ type: 'round', outcome } satisfies RoundMessage);

let stopping = false;
port.on((m: unknown) => {
  if (m === 'stop') stopping = true;
  // The ingester saw this process catch up after it was started at normal
  // priority (compactor.idleMaxLagSecs): back to SCHED_IDLE. Lowering one's
  // own class needs no privilege; raising it again does, so the ingester
  // raises a compactor by starting a new one.
  else if (m === 'idle') {
    // Before its settings came (a replacement told at once): main() honours it.
    if (processLog !== null) goIdle(processLog);
    else idleAsked = true;
  }
});

/** A process's logger, once it has its settings. */
let processLog: Logger | null = null;
let idleAsked = false;

/** Moves every thread of this process to SCHED_IDLE, and tells the parent where it stands. */
function goIdle(log: Logger): void {
  const { addon, failure } = loadAddon();
  const err = addon?.setProcessIdle();
  if (addon === null) log.warn({ why: failure }, 'compactor.placement process-idle: the native addon is missing, so the compactor runs at normal priority');
  else if (err !== 0) log.warn({ errno: err }, 'compactor.placement process-idle: SCHED_IDLE was refused, so the compactor runs at normal priority');
  port.post({ type: 'sched', idle: addon !== null && err === 0 } satisfies SchedMessage);
}

/**
 * Opens the catalog and warehouse, retrying while they are unreachable (an
 * object store still starting, a credentials mount not yet there): the WAL
 * keeps every record meanwhile. Null when told to stop first.
 */
async function openWithRetry(data: CompactorThreadData, log: Logger, stats: CompactorStats): Promise<CompactorSetup | null> {
  const retryMs = Math.min(30_000, data.settings.compactIntervalSecs * 1000);
  for (;;) {
    try {
      return await CompactorSetup.open(data.settings, 'in-process', log, {
        stats,
        boundary: new Map(data.boundary),
        ...testCommitDelay(),
      });
    } catch (e) {
      log.error({ err: (e as Error).message, code: (e as { code?: string }).code, retryMs }, 'the compactor cannot open the catalog or warehouse; retrying');
      // A failed open counts as a failed round, so readiness (compactor.maxFailingSecs) sees it.
      postRound({ failed: true, error: `the compactor cannot open the catalog or warehouse: ${(e as Error).message}` });
      const lag = walLagSeconds(data.settings.walDir, Date.now());
      if (lag !== null) stats.setLag(lag);
    }
    const until = Date.now() + retryMs;
    while (Date.now() < until) {
      if (stopping) return null;
      await new Promise((r) => setTimeout(r, 100));
    }
    if (stopping) return null;
  }
}

/**
 * Test-only (SIGLAKE_TEST_HOOKS=1): SIGLAKE_TEST_COMMIT_DELAY_MS=n holds every
 * commit n ms between writing its metadata file and the catalog swap, so that
 * replicas sharing a table reliably race for it (the compare-and-set path).
 */
function testCommitDelay(): { beforeCommit?: () => Promise<void> } {
  if (process.env['SIGLAKE_TEST_HOOKS'] !== '1') return {};
  const ms = Number(process.env['SIGLAKE_TEST_COMMIT_DELAY_MS'] ?? '0');
  return ms > 0 ? { beforeCommit: () => new Promise<void>((r) => setTimeout(r, ms)) } : {};
}

/** A thread's data is its workerData; a process's comes as the first message. */
function threadData(): Promise<CompactorThreadData> {
  if (parentPort !== null) return Promise.resolve(workerData as CompactorThreadData);
  // Asked for once listening: a message that came earlier would have had no listener.
  // ('stop' may come first: the listener above notes it.)
  const p = new Promise<CompactorThreadData>((resolve) => {
    const take = (m: unknown): void => {
      if (typeof m !== 'object' || m === null) return;
      process.off('message', take);
      resolve(m as CompactorThreadData);
    };
    process.on('message', take);
  });
  port.post('ready');
  return p;
}

async function main(): Promise<void> {
  const data = await threadData();
  const log = createLogger(data.settings.logLevel, 'siglake-compactor');
  let stats: CompactorStats;
  let postStats = (): void => {};
  if (data.statsSab !== undefined) {
    stats = new CompactorStats(data.statsSab);
  } else {
    stats = CompactorStats.create();
    postStats = () => port.post({ type: 'stats', slots: stats.snapshot() } satisfies StatsMessage);
    setInterval(postStats, STATS_MS).unref();
    processLog = log;
    // Its lag from the start, and while the catalog cannot be opened: a
    // restarted compactor must not read 0 until its first round.
    const lag = walLagSeconds(data.settings.walDir, Date.now());
    if (lag !== null) stats.setLag(lag);
    postStats();
    if (data.idle === true || idleAsked) goIdle(log);
    else port.post({ type: 'sched', idle: false } satisfies SchedMessage);
  }
  const setup = await openWithRetry(data, log, stats);
  if (setup === null) {
    port.post('stopped');
    port.close();
    return;
  }
  // Labelled counters (src/indexes) go to the parent after each round, with its outcome.
  const afterRound = (outcome: RoundOutcome): void => {
    const deltas = setup.compactor.labelled.take();
    if (deltas.length > 0) port.post({ type: 'labelled', deltas } satisfies LabelledMessage);
    postStats();
    postRound(outcome);
  };
  const loop = new CompactorLoop(setup.compactor, data.settings.compactIntervalSecs * 1000, log, afterRound);
  // Retention (src/retention) at most hourly, after the compaction rounds of a tick.
  loop.afterRounds = retentionHook(setup, data.settings, log, (lastRunSecs) => {
    port.post({ type: 'labelled', deltas: setup.compactor.labelled.take(), retentionLastRun: lastRunSecs } satisfies LabelledMessage);
  });
  const stop = () => {
    void loop.stop().then(async () => {
      await setup.close();
      postStats();
      port.post('stopped');
      port.close();
    });
  };
  if (stopping) {
    stop();
    return;
  }
  port.on((m: unknown) => {
    if (m === 'stop') stop();
  });
  port.post('started');
  await loop.start();
}

if (parentPort === null) {
  // A child process: the ingester decides when it stops.
  process.on('SIGINT', () => {});
  process.on('SIGTERM', () => {});
  // The ingester is gone (killed): nothing is left to answer to; a round that
  // did not commit leaves its segments in the WAL for the next life.
  process.on('disconnect', () => process.exit(0));
}

main().catch((e: unknown) => {
  createLogger('info', 'siglake-compactor').error({ err: (e as Error).message, code: (e as { code?: string }).code }, 'the compactor failed to start');
  postRound({ failed: true, error: `the compactor failed to start: ${(e as Error).message}` });
  port.post('failed');
  // A process ends there (a thread is ended by the ingester's stop).
  if (parentPort === null) port.close();
});
