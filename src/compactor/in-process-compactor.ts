// The compactor of `siglake ingest` (compactor.enabled): a child process
// (compactor.placement process-idle, the default, or process) or a worker
// thread (thread) that the Ingester starts once WAL recovery is done and
// stops at shutdown. Its figures reach the ingester's /metrics through a
// SharedArrayBuffer: a thread writes them there, a process posts snapshots
// that are copied there.
//
// A `process-idle` compactor that falls compactor.idleMaxLagSecs behind is
// started again at normal priority (an unprivileged process may lower its
// scheduling class but never raise it), and told to go back to SCHED_IDLE
// once it has caught up: SCHED_IDLE keeps a round off a small host's
// acknowledgements, and this keeps it from starving while ingestion leaves no
// idle CPU for a long time.

import { fork, type ChildProcess } from 'node:child_process';
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type client from 'prom-client';
import { CompactorMetrics } from './compactor-metrics.js';
import { earlierLifeBoundary, type CompactorSettings } from './compactor-setup.js';
import { CompactorStats } from './compactor-stats.js';
import type { CompactorThreadData, RoundMessage, SchedMessage, StatsMessage } from './compactor-thread.js';
import { LabelledCompactorMetrics } from '../indexes/labelled-counts.js';
import { scrapedCounter, scrapedGauge } from '../metrics/scraped.js';

/** Old-generation heap of the compactor thread or process. */
const COMPACTOR_HEAP_MIB = 512;
/** A compactor that died is started again after 1 s, doubling each time it dies again before a round succeeds, up to this. */
const RESTART_MAX_MS = 60_000;
/** How often the ingester looks at a SCHED_IDLE compactor's lag and silence (compactor.idleMaxLagSecs). */
const WATCH_MS = 1000;
/** A compactor being replaced by one at normal priority may finish its round this long; then it is killed. */
const RAISE_GRACE_MS = 5000;

export type CompactorPlacement = 'process-idle' | 'process' | 'thread';

/** What start() made: a thread or a process, with the same three calls. */
interface Runner {
  /** Set when it died (not stopped): it is started again. */
  died: boolean;
  post(m: unknown): void;
  /** Resolves when it has ended. */
  readonly exited: Promise<void>;
  /** Ends it now. */
  kill(): Promise<void>;
}

export class InProcessCompactor {
  readonly #settings: CompactorSettings;
  readonly #log: Logger;
  readonly #stats = CompactorStats.create();
  readonly #placement: CompactorPlacement;
  #runner: Runner | null = null;
  #pid: number | undefined;
  /** Deaths since the last round that succeeded: the restart delay's exponent. */
  #deaths = 0;
  #restartTimer: NodeJS.Timeout | undefined;
  #boundary: Map<string, number> | null = null;
  readonly #maxFailingMs: number;
  readonly #now: () => number;
  /** When the current run of failed rounds began (null while the last round did not fail). */
  #failingSince: number | null = null;
  #lastError = '';
  readonly #labelled: LabelledCompactorMetrics;
  /** compactor.idleMaxLagSecs in ms; 0 when the compactor never leaves SCHED_IDLE (or is not process-idle). */
  readonly #idleMaxLagMs: number;
  /** How long a SCHED_IDLE compactor may say nothing: the same bound (a test hook may set it apart). */
  readonly #silentMaxMs: number;
  /** The running process said its threads are at SCHED_IDLE. */
  #schedIdle = false;
  /** When the running process last posted anything (its figures come every second). */
  #lastHeard = 0;
  /** A replacement at normal priority is under way. */
  #raising = false;
  #raised = 0;
  #watch: NodeJS.Timeout | undefined;
  #stopped = false;
  /** The running process was started at normal priority because the one before it fell behind. */
  #wasRaised = false;

  constructor(opts: {
    settings: CompactorSettings & {
      compactMaxFailingSecs: number;
      compactorPlacement?: CompactorPlacement;
      compactorIdleMaxLagSecs?: number;
      retentionLogsDays: number;
      retentionTracesDays: number;
      retentionSnapshotMaxAgeHours: number;
    };
    log: Logger;
    registry: client.Registry;
    now?: () => number;
  }) {
    this.#settings = {
      walDir: opts.settings.walDir,
      catalogUrl: opts.settings.catalogUrl,
      catalogName: opts.settings.catalogName,
      warehousePath: opts.settings.warehousePath,
      warehouseS3Endpoint: opts.settings.warehouseS3Endpoint,
      warehouseS3Region: opts.settings.warehouseS3Region,
      warehouseS3ForcePathStyle: opts.settings.warehouseS3ForcePathStyle,
      compactIntervalSecs: opts.settings.compactIntervalSecs,
      compactMaxRoundBytes: opts.settings.compactMaxRoundBytes,
      compactMaxRoundRows: opts.settings.compactMaxRoundRows,
      compactMaxValueChars: opts.settings.compactMaxValueChars,
      logLevel: opts.settings.logLevel,
      // Retention runs inside the compactor loop (src/retention).
      retentionLogsDays: opts.settings.retentionLogsDays,
      retentionTracesDays: opts.settings.retentionTracesDays,
      retentionSnapshotMaxAgeHours: opts.settings.retentionSnapshotMaxAgeHours,
    };
    this.#placement = opts.settings.compactorPlacement ?? 'thread';
    this.#idleMaxLagMs = this.#placement === 'process-idle' ? (opts.settings.compactorIdleMaxLagSecs ?? 0) * 1000 : 0;
    this.#silentMaxMs = testSilentMaxMs() ?? this.#idleMaxLagMs;
    this.#log = opts.log;
    this.#maxFailingMs = opts.settings.compactMaxFailingSecs * 1000;
    this.#now = opts.now ?? Date.now;
    new CompactorMetrics(opts.registry, this.#stats);
    this.#labelled = new LabelledCompactorMetrics(opts.registry);
    scrapedGauge(
      opts.registry,
      'siglake_compactor_failing_seconds',
      'Seconds since the first of the compaction rounds that have all failed in a row (0 while the last round did not fail).',
      () => (this.#failingSince === null ? 0 : Math.max(0, (this.#now() - this.#failingSince) / 1000)),
    );
    scrapedGauge(
      opts.registry,
      'siglake_compactor_not_ready',
      '1 while failing compaction rounds hold /readyz at 503 (failing for longer than compactor.maxFailingSecs), else 0.',
      () => (this.notReadyReason() === undefined ? 0 : 1),
    );
    if (this.#placement !== 'thread') {
      scrapedGauge(
        opts.registry,
        'siglake_compactor_sched_idle',
        'compactor.placement process-idle: 1 while every thread of the compactor process runs at SCHED_IDLE, 0 while it runs at normal priority (it fell compactor.idleMaxLagSecs behind, or SCHED_IDLE was refused) and while none runs.',
        () => (this.#schedIdle ? 1 : 0),
      );
      scrapedCounter(
        opts.registry,
        'siglake_compactor_priority_raised_total',
        'Times a compactor process at SCHED_IDLE fell compactor.idleMaxLagSecs behind and was replaced by one at normal priority.',
        () => this.#raised,
      );
    }
  }

  /**
   * Why the compactor holds the ingester unready: every round with work has
   * failed for longer than compactor.maxFailingSecs (issue 19). Undefined
   * otherwise, and always when the bound is 0.
   */
  notReadyReason(): string | undefined {
    if (this.#maxFailingMs === 0 || this.#failingSince === null) return undefined;
    const ms = this.#now() - this.#failingSince;
    if (ms <= this.#maxFailingMs) return undefined;
    return `compactor: every round has failed for ${Math.floor(ms / 1000)} s (compactor.maxFailingSecs ${this.#maxFailingMs / 1000}): ${this.#lastError}`;
  }

  /** The compactor process's pid while it runs (its RSS counts toward the memory breaker); undefined for a thread. */
  get pid(): number | undefined {
    return this.#pid;
  }

  #onMessage(m: unknown, base?: Float64Array): void {
    if (typeof m === 'object' && m !== null && (m as SchedMessage).type === 'sched') {
      this.#schedIdle = (m as SchedMessage).idle;
      return;
    }
    if (typeof m === 'object' && m !== null && (m as StatsMessage).type === 'stats') {
      const slots = (m as StatsMessage).slots;
      if (slots instanceof Float64Array) this.#stats.load(slots, base);
      return;
    }
    if (LabelledCompactorMetrics.isMessage(m)) {
      this.#labelled.add(m.deltas, m.retentionLastRun);
      return;
    }
    if (typeof m !== 'object' || m === null || (m as RoundMessage).type !== 'round') return;
    const outcome = (m as RoundMessage).outcome;
    if (!outcome.failed) {
      this.#deaths = 0;
      // Its figures came just before (CompactorStats: lag measured at the round's end).
      this.#maybeLower();
      if (this.#failingSince !== null) this.#log.info('compaction rounds succeed again');
      this.#failingSince = null;
      this.#lastError = '';
      return;
    }
    this.#failingSince ??= this.#now();
    this.#lastError = outcome.error;
  }

  /**
   * Notes which segments belong to earlier lives of the ingester. Must run
   * before the writer workers start: afterwards a lane's highest segment may
   * be one they are appending to (regression: compactor-lands-live-segment).
   */
  markEarlierLife(): void {
    this.#boundary = earlierLifeBoundary(this.#settings.walDir);
  }

  /** Starts the compactor thread or process. */
  start(): void {
    if (this.#runner !== null) return;
    if (this.#boundary === null) throw new Error('InProcessCompactor.markEarlierLife() must run before the writers start');
    this.#launch();
  }

  #launch(idle = this.#placement === 'process-idle'): void {
    const runner = this.#placement === 'thread' ? this.#startThread() : this.#startProcess(idle);
    this.#runner = runner;
    void runner.exited.then(() => {
      // Stopped (stop() let go of it first), or ended on its own after saying so: not restarted.
      if (this.#runner !== runner || !runner.died) return;
      const delayMs = Math.min(RESTART_MAX_MS, 1000 * 2 ** Math.min(this.#deaths - 1, 16));
      this.#log.warn({ delayMs, placement: this.#placement }, 'starting the compactor again');
      this.#restartTimer = setTimeout(() => {
        this.#restartTimer = undefined;
        // One that was raised because it fell behind comes back at normal priority.
        if (this.#runner === runner) this.#launch(this.#placement === 'process-idle' && !this.#wasRaised);
      }, delayMs);
      this.#restartTimer.unref();
    });
  }

  /**
   * The compactor died: a failed round for readiness (compactor.maxFailingSecs),
   * and it is started again once it has ended (#launch). The boundary of
   * earlier-life segments it gets is still this life's.
   */
  #died(runner: Runner, what: string): void {
    runner.died = true;
    this.#deaths++;
    this.#log.error({ err: what, placement: this.#placement }, 'the compactor died; it is started again, and WAL segments wait meanwhile');
    this.#onMessage({ type: 'round', outcome: { failed: true, error: `the compactor died: ${what}` } } satisfies RoundMessage);
  }

  #startThread(): Runner {
    const data: CompactorThreadData = { settings: this.#settings, statsSab: this.#stats.sab, boundary: [...this.#boundary!] };
    const worker = new Worker(new URL('./compactor-thread.js', import.meta.url), {
      workerData: data,
      name: 'siglake-compactor',
      // A bounded heap makes V8 collect a round's garbage instead of growing
      // toward its default limit (GBs on a big host): RSS counts toward the breaker.
      resourceLimits: { maxOldGenerationSizeMb: COMPACTOR_HEAP_MIB },
    });
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    const runner: Runner = { died: false, post: (m) => worker.postMessage(m), exited, kill: async () => void (await worker.terminate()) };
    worker.on('message', (m: unknown) => this.#onMessage(m));
    worker.on('error', (e) => this.#died(runner, e.message));
    worker.unref();
    return runner;
  }

  #startProcess(idle: boolean): Runner {
    const data: CompactorThreadData = { settings: this.#settings, idle, boundary: [...this.#boundary!] };
    const child: ChildProcess = fork(new URL('./compactor-thread.js', import.meta.url), [], {
      // Its log lines go where the ingester's go; its settings come over the channel, not argv.
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      serialization: 'advanced',
      execArgv: [...process.execArgv, `--max-old-space-size=${COMPACTOR_HEAP_MIB}`],
    });
    this.#pid = child.pid;
    this.#schedIdle = false;
    this.#lastHeard = this.#now();
    let stopped = false;
    let exit: () => void = () => {};
    const exited = new Promise<void>((resolve) => {
      exit = resolve;
    });
    const runner: Runner = {
      died: false,
      post: (m) => {
        if (child.connected) child.send(m as string);
      },
      exited,
      kill: async () => {
        stopped = true;
        child.kill('SIGKILL');
        await exited;
      },
    };
    // 'close', not 'exit': it comes once the IPC channel is closed too, so
    // every message the process sent has been handled.
    child.once('close', (code, signal) => {
      if (this.#pid === child.pid) this.#pid = undefined;
      if (this.#runner === runner || this.#runner === null) {
        // A round it was in ends with it: its time so far stays counted.
        this.#stats.processEnded();
        this.#schedIdle = false;
      }
      if (!stopped) this.#died(runner, signal !== null ? `its process was killed by ${signal}` : `its process exited with code ${String(code)}`);
      exit();
    });
    // Its counters continue those of the processes before it.
    const base = this.#stats.counters();
    child.on('message', (m: unknown) => {
      if (m === 'ready') child.send(data);
      // Its end is said: 'failed' came after the round message that says why.
      else if (m === 'stopped' || m === 'failed') stopped = true;
      // Figures and outcomes of a process another has replaced are not this compactor's any more.
      else if (this.#runner === runner || this.#runner === null) this.#onMessage(m, base);
      if (this.#runner === runner) this.#lastHeard = this.#now();
    });
    // A channel that breaks as the child dies: the 'close' handler says why.
    child.on('error', (e) => this.#log.debug({ err: e.message }, 'compactor process channel'));
    child.unref();
    child.channel?.unref();
    this.#log.info({ compactorPid: child.pid, placement: this.#placement, schedIdle: idle }, 'compactor process started');
    if (this.#idleMaxLagMs > 0 && this.#watch === undefined) {
      this.#watch = setInterval(() => this.#watchLag(), WATCH_MS);
      this.#watch.unref();
    }
    return runner;
  }

  /**
   * compactor.idleMaxLagSecs: a compactor at SCHED_IDLE whose lag passed the
   * bound, or that has said nothing for that long (its figures come every
   * second, so it got no CPU at all), is replaced by one at normal priority.
   * (Its lag is measured as it starts and at the end of each round: a round
   * that starves reports late, and silence covers one that cannot even post.)
   */
  #watchLag(): void {
    const runner = this.#runner;
    if (runner === null || runner.died || !this.#schedIdle || this.#raising || this.#stopped) return;
    const lagMs = this.#stats.lagSeconds * 1000;
    const silentMs = this.#now() - this.#lastHeard;
    if (lagMs > this.#idleMaxLagMs || silentMs > this.#silentMaxMs) void this.#raise(runner, lagMs, silentMs);
  }

  /**
   * After each successful round of a compactor that was raised: once its lag
   * is under half of compactor.idleMaxLagSecs it goes back to SCHED_IDLE. (One
   * that SCHED_IDLE refused was never raised, and is never asked.)
   */
  #maybeLower(): void {
    const runner = this.#runner;
    if (!this.#wasRaised || runner === null || this.#raising || this.#stopped) return;
    if (this.#stats.lagSeconds * 1000 >= this.#idleMaxLagMs / 2) return;
    this.#wasRaised = false;
    this.#log.info({ lagSeconds: this.#stats.lagSeconds, idleMaxLagSecs: this.#idleMaxLagMs / 1000 }, 'the compactor caught up: back to SCHED_IDLE');
    runner.post('idle');
  }

  async #raise(runner: Runner, lagMs: number, silentMs: number): Promise<void> {
    this.#raising = true;
    this.#log.warn(
      {
        compactorPid: this.#pid,
        lagSeconds: Math.round(lagMs / 1000),
        silentSeconds: Math.round(silentMs / 1000),
        idleMaxLagSecs: this.#idleMaxLagMs / 1000,
      },
      'the compactor at SCHED_IDLE fell behind: starting it again at normal priority',
    );
    try {
      await this.#end(runner, RAISE_GRACE_MS);
      // Stopped meanwhile, or it died first (then it is started again as after any death).
      if (this.#stopped || this.#runner !== runner || runner.died) return;
      this.#wasRaised = true;
      this.#raised++;
      this.#launch(false);
    } finally {
      this.#raising = false;
    }
  }

  /** Lets the round in progress finish (up to `timeoutMs`), then ends the thread or process. */
  async stop(timeoutMs: number): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#watch);
    const runner = this.#runner;
    if (runner === null) return;
    this.#runner = null;
    clearTimeout(this.#restartTimer);
    await this.#end(runner, timeoutMs);
  }

  /** Asks `runner` to stop after its round; ends it after `timeoutMs`. Not a death: it is not started again by #launch. */
  async #end(runner: Runner, timeoutMs: number): Promise<void> {
    runner.post('stop');
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(true), timeoutMs);
    });
    const late = await Promise.race([runner.exited.then(() => false), timedOut]);
    clearTimeout(timer);
    if (late) {
      // Safe to cut short: a round that did not commit leaves its segments in the WAL.
      this.#log.warn({ timeoutMs }, 'compaction round still running when the compactor was told to stop: ending it');
      await runner.kill();
    }
  }
}

/**
 * Test-only (SIGLAKE_TEST_HOOKS=1): SIGLAKE_TEST_COMPACTOR_SILENT_MS=n lets a
 * SCHED_IDLE compactor say nothing for n ms before it is raised, apart from
 * compactor.idleMaxLagSecs, so that a test of the lag bound on a loaded machine
 * is not cut short by a raise for silence.
 */
function testSilentMaxMs(): number | undefined {
  if (process.env['SIGLAKE_TEST_HOOKS'] !== '1') return undefined;
  const ms = Number(process.env['SIGLAKE_TEST_COMPACTOR_SILENT_MS'] ?? '');
  return Number.isFinite(ms) && ms > 0 ? ms : undefined;
}
