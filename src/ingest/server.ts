// `siglake ingest`: wires settings into the acceptor (uWebSockets.js + grpc-js
// on the main thread), the admission checks, the worker pool and /metrics, and
// owns start-up and graceful shutdown.

import { accessSync, constants as fsConstants, mkdtempSync, rmdirSync, statSync } from 'node:fs';
import { makeDirsSync } from '../make-dirs.js';
import { dirname, join, resolve } from 'node:path';
import { Piscina } from 'piscina';
import client from 'prom-client';
import type { TemplatedApp } from 'uWebSockets.js';
import { authenticatorFromSettings } from '../auth/from-settings.js';
import type { Settings } from '../config/settings.js';
import { InProcessCompactor } from '../compactor/in-process-compactor.js';
import { IngestIndexSet } from '../indexes/ingest-index-set.js';
import { LaneTable } from '../lanes/lane-table.js';
import { InflightBytes } from '../limits/inflight-bytes.js';
import { MemBreaker } from '../limits/mem-breaker.js';
import { scrapedCounter, scrapedGauge } from '../metrics/scraped.js';
import type { RateBudget } from '../limits/rate-budget.js';
import { RateLimiter } from '../limits/rate-limiter.js';
import { RedisBudget } from '../limits/redis-budget.js';
import type { Logger } from '../log.js';
import { IngestMetrics } from '../metrics/ingest-metrics.js';
import { AllowList } from '../tenancy/allow-list.js';
import { TenantResolver } from '../tenancy/tenant-resolver.js';
import { deferredAuditLog, openDeferredAuditLog, type AuditLog } from '../tenants/audit-log.js';
import { DeclaredTenants } from '../tenants/declared-tenants.js';
import { TenantMetrics } from '../tenants/tenant-metrics.js';
import { loadTenantsAtStart, readTenantsFileText, TenantsReloader } from '../tenants/tenants-reloader.js';
import { Admission } from './admission.js';
import { Dispatcher } from '../shard/dispatcher.js';
import { SHARD_TASK_URL, type WorkerSettings } from '../shard/protocol.js';
import { GrpcAcceptor } from './grpc-acceptor.js';
import { HttpAcceptor } from './http-acceptor.js';
import { MetricsListener } from './metrics-listener.js';
import { UnsupportedSignalCounter } from './unsupported-signals.js';
import { loadUws } from './uws-loader.js';
import { useOtlpWalk } from '../otlp/wire-validator.js';
import { ConfigError } from '../errors.js';
import { dropSyncedPagesOps } from '../wal/page-cache.js';
import { logKeptJournal, replayForeignJournals } from '../wal/journal.js';
import { lockWalRoot, markWalRoot, unlockWalRoot, walRootProblem } from '../wal/layout.js';

export interface IngesterOptions {
  settings: Settings;
  log: Logger;
  /** Enables the test-only admin routes (never in production: set by SIGLAKE_TEST_HOOKS=1). */
  testHooks?: boolean;
}

export class Ingester {
  readonly #o: IngesterOptions;
  readonly #pool: Piscina;
  readonly #dispatcher: Dispatcher;
  readonly #http: HttpAcceptor;
  readonly #grpc: GrpcAcceptor;
  /** /metrics on its own address (server.metricsListen), or undefined: on the OTLP/HTTP port. */
  readonly #metricsListener: MetricsListener | undefined;
  readonly #breaker: MemBreaker;
  readonly #rateBudget: RateBudget;
  readonly #compactor: InProcessCompactor | undefined;
  /** Declared tenants (src/tenants): undefined unless a tenants file, per-principal rate or server budget is set. */
  readonly #tenants: DeclaredTenants | undefined;
  readonly #tenantsReloader: TenantsReloader | undefined;
  readonly #audit: AuditLog | undefined;
  readonly #indexes: IngestIndexSet;
  #ready = false;
  #draining = false;
  #stopped: Promise<number> | undefined;

  constructor(opts: IngesterOptions) {
    this.#o = opts;
    const s = opts.settings;
    const log = opts.log;
    const badRoot = walRootProblem(s.walDir);
    if (badRoot !== null) throw new ConfigError(badRoot);
    usableWalDir(s.walDir);
    const { uws, native, failure } = loadUws(s.allowUwsFallback);
    if (!native) log.warn({ reason: failure }, 'uWebSockets.js runs on its JavaScript fallback: expect a fraction of the throughput');
    const walk = useOtlpWalk(s.otlpWalk);
    if (walk.failure !== undefined) {
      if (s.otlpWalk === 'native') throw new ConfigError(`${walk.failure}; refusing to start with --otlp-walk native (auto falls back to the JavaScript walk)`);
      log.warn({ reason: walk.failure }, 'OTLP bodies are validated by the JavaScript walk: slower on large bodies');
    }
    const dropPages = s.walDropSyncedPages ? dropSyncedPagesOps() : undefined;
    if (dropPages?.failure !== undefined) log.warn({ reason: dropPages.failure }, 'WAL segment pages are left in the page cache (--wal-drop-synced-pages needs the native addon)');
    log.info({ walk: walk.walk, dropSyncedPages: dropPages !== undefined && dropPages.failure === undefined }, 'native code');

    const registry = new client.Registry();
    this.#compactor = s.compactorEnabled ? new InProcessCompactor({ settings: s, log, registry }) : undefined;
    // The index registry as ingest knows it (src/indexes): refreshed off the request path.
    this.#indexes = new IngestIndexSet({ catalogUrl: s.catalogUrl, catalogName: s.catalogName, refreshSecs: s.indexesRefreshSecs, log });
    const lanes = new LaneTable(s.maxLanes, s.workers);
    const compactor = this.#compactor;
    this.#breaker = new MemBreaker({ limitMib: s.memBreakerLimitMib, sampleSecs: s.memBreakerSampleSecs, alsoPid: () => compactor?.pid });
    if (compactor !== undefined && s.compactorPlacement !== 'thread') {
      const breaker = this.#breaker;
      scrapedGauge(registry, 'siglake_compactor_process_rss_bytes', 'Resident set size of the compactor process (compactor.placement process, process-idle); it counts toward the memory breaker. 0 while none runs.', () =>
        breaker.alsoRssBytes(),
      );
    }
    let metrics: IngestMetrics | undefined;
    // The same buckets in process or shared through Redis.
    const buckets = {
      ratePerSec: s.rateLimitPerSec,
      burst: s.rateLimitBurst,
      globalRatePerSec: s.rateLimitGlobalPerSec,
      globalBurst: s.rateLimitGlobalBurst,
      maxTenantBuckets: s.rateLimitMaxTenantBuckets,
    };
    this.#rateBudget =
      s.redisUrl !== undefined && s.rateLimitPerSec > 0
        ? new RedisBudget({
            url: s.redisUrl,
            ...buckets,
            commandTimeoutMs: s.redisTimeoutMs,
            onBackendError: (err) => {
              metrics?.backendError();
              log.warn({ err: err.message }, 'rate budget backend (Redis) failed: admitting unenforced');
            },
          })
        : new RateLimiter(buckets);

    const workerSettings: WorkerSettings = {
      walDir: s.walDir,
      walFsync: s.walFsync,
      walFsyncIntervalMs: s.walFsyncIntervalMs,
      walRoundsInFlight: s.walRoundsInFlight,
      walJournalRecycle: s.walJournalRecycle,
      walDropSyncedPages: s.walDropSyncedPages,
      walDeferLaneWrites: s.walDeferLaneWrites,
      walDirectRoundBytes: s.walDirectRoundKib * 1024,
      walJournalPrefillBytes: s.walJournalPrefillMib * 1024 * 1024,
      walSegmentBytes: s.walSegmentBytes,
      walSegmentMaxAgeSecs: s.walSegmentMaxAgeSecs,
      maxOpenFiles: Math.max(1, Math.floor(s.walMaxOpenFiles / s.workers)),
      maxRequestBytes: s.maxRequestBytes,
      otlpWalk: s.otlpWalk,
      logLevel: s.logLevel,
    };
    this.#pool = new Piscina({
      filename: SHARD_TASK_URL,
      minThreads: s.workers,
      maxThreads: s.workers,
      idleTimeout: 2 ** 31 - 1,
      concurrentTasksPerWorker: 1,
      atomics: 'disabled',
      // Memory that grows with the worker count (docs/performance.md, "On 16 cores").
      ...(s.workerYoungGenerationMib > 0 ? { resourceLimits: { maxYoungGenerationSizeMb: s.workerYoungGenerationMib } } : {}),
    });
    // Filled in just below; the dispatcher calls it only once requests flow.
    let admission: Admission | undefined;
    const dispatcher = new Dispatcher({
      pool: this.#pool,
      workers: s.workers,
      lanes,
      settings: workerSettings,
      maxRequestBytes: s.maxRequestBytes,
      log,
      onFinish: (lane, stored, written, note) => {
        // [declared tenants] budgets, counters: for what a worker answered.
        if (written !== undefined) tenants?.completed(lane.tenant, lane.index, written.code, written.records, written.bytes, note);
        // An empty export request (a 200 that wrote nothing, contract §6) leaves nothing behind: it is
        // not a lane's first admission, nor what keeps a new lane (and its tenant) held. (It committed
        // the lane: empty requests under fresh tenant ids filled --max-tenants and --ingest-max-lanes.)
        const wrote = stored && (written === undefined || written.bytes > 0);
        if (admission!.finish(lane, wrote, note)) dispatcher.forget(lane);
      },
    });
    this.#dispatcher = dispatcher;
    metrics = new IngestMetrics(registry, {
      workerStats: () => dispatcher.workerStats,
      lanes: () => lanes.laneCount,
      tenantsAdmitted: () => lanes.tenantCount,
      rssBytes: () => this.#breaker.rssBytes(),
    });
    // Test hook: a short period so a test can see the count carried to the next line.
    const refusalLogMs = opts.testHooks ? Number(process.env['SIGLAKE_TEST_REFUSAL_LOG_MS'] ?? NaN) : NaN;
    metrics.logRefusals(log, Number.isFinite(refusalLogMs) ? refusalLogMs : undefined);

    const auth = authenticatorFromSettings(s);
    // [declared tenants] only when configured: declaring nothing changes nothing.
    const declaring = s.tenantsFile !== undefined || s.rateLimitPerPrincipalPerSec > 0 || s.serverBudgetRecords > 0 || s.serverBudgetBytes > 0;
    // Checked now, made only in start() once nothing can refuse the start (a refused start left an empty file).
    this.#audit = s.auditFile !== undefined ? deferredAuditLog(s.auditFile, log) : undefined;
    let tenants: DeclaredTenants | undefined;
    let budgetWarnedAt = 0;
    if (declaring) {
      const audit = this.#audit;
      const tenantMetrics = new TenantMetrics(registry, {
        remaining: () => tenants?.remaining() ?? [],
        declared: () => tenants?.size ?? 0,
        auditDropped: () => audit?.dropped ?? 0,
      });
      const file = s.tenantsFile;
      // A bad file (an overlap of two tenants included) is the setting's refusal: exit 2, `invalid tenants.file (<source>): <file>: …`.
      let loadedText: string | undefined;
      tenants = loadTenantsAtStart(file, () => {
        const loaded = file === undefined ? undefined : readTenantsFileText(file);
        loadedText = loaded?.text;
        return new DeclaredTenants(loaded?.decls ?? [], {
          perPrincipalPerSec: s.rateLimitPerPrincipalPerSec,
          serverBudget:
            s.serverBudgetRecords > 0 || s.serverBudgetBytes > 0
              ? {
                  period: s.serverBudgetPeriod,
                  records: s.serverBudgetRecords > 0 ? s.serverBudgetRecords : undefined,
                  bytes: s.serverBudgetBytes > 0 ? s.serverBudgetBytes : undefined,
                }
              : undefined,
          metrics: tenantMetrics,
          ...(audit !== undefined ? { audit } : {}),
          ...(s.redisUrl !== undefined
            ? {
                shared: {
                  url: s.redisUrl,
                  commandTimeoutMs: s.redisTimeoutMs,
                  onBackendError: (err: Error) => {
                    metrics?.backendError();
                    // One line per 10 s at most: a sync runs every 200 ms.
                    if (Date.now() - budgetWarnedAt < 10_000) return;
                    budgetWarnedAt = Date.now();
                    log.warn({ err: err.message }, 'budget backend (Redis) failed: enforcing this replica\'s own view');
                  },
                },
              }
            : {}),
        });
      });
      this.#tenantsReloader =
        s.tenantsFile === undefined
          ? undefined
          : new TenantsReloader({ file: s.tenantsFile, tenants, log, metrics: tenantMetrics, loadedText, ...(audit !== undefined ? { audit } : {}) });
    }
    this.#tenants = tenants;
    // The audit stream without declared tenants: refusals are audited all the same (they were
    // silently not, the file stayed empty), and its losses counted under the same name.
    if (!declaring && this.#audit !== undefined) {
      const audit = this.#audit;
      scrapedCounter(registry, 'siglake_audit_events_dropped_total', 'Audit events dropped because the audit sink could not keep up.', () => audit.dropped);
    }
    admission = new Admission({
      tenants,
      breaker: this.#breaker,
      rateBudget: this.#rateBudget,
      auth,
      resolver: new TenantResolver({
        trustTenantHeader: s.trustTenantHeader,
        ...(s.tenantClaim !== undefined ? { tenantClaim: s.tenantClaim } : {}),
      }),
      allowList: new AllowList(s.allowedTenants),
      lanes,
      metrics,
      maxTenants: s.maxTenants,
      queueCapacity: s.queueCapacity,
      indexes: this.#indexes,
      audit: this.#audit,
    });

    const inflight = new InflightBytes(s.maxInflightMib * 1024 * 1024, this.#breaker, (e) => {
      if (e.code === 'SIGLAKE_INFLIGHT_FULL') metrics!.inflightRefused();
      else {
        metrics!.memBreakerRejected();
        metrics!.rejected('mem_breaker');
      }
    });
    metrics.inflightBytes = () => inflight.bytes;
    metrics.ringBacklogFrames = () => dispatcher.backlogged;
    const common = {
      inflight,
      maxRequestBytes: s.maxRequestBytes,
      requestTimeoutSecs: s.requestTimeoutSecs,
      admission,
      dispatcher,
      metrics,
      log,
      isDraining: () => this.#draining,
      unsupported: new UnsupportedSignalCounter(registry),
    };
    this.#http = new HttpAcceptor({
      ...common,
      uws,
      host: s.httpListen.host,
      port: s.httpListen.port,
      isReady: () => this.#ready,
      notReadyReason: () => this.#compactor?.notReadyReason(),
      serveMetrics: s.metricsListen === undefined,
      ...(opts.testHooks ? { extraRoutes: (app: TemplatedApp) => this.#testRoutes(app) } : {}),
    });
    this.#grpc = new GrpcAcceptor({
      ...common,
      host: s.grpcListen.host,
      port: s.grpcListen.port,
      maxStreamsPerConnection: s.grpcMaxStreamsPerConnection,
      maxStreams: s.grpcMaxStreams,
    });
    this.#metricsListener =
      s.metricsListen === undefined ? undefined : new MetricsListener({ host: s.metricsListen.host, port: s.metricsListen.port, registry, log });
  }

  get httpPort(): number {
    return this.#http.port;
  }

  get grpcPort(): number {
    return this.#grpc.port;
  }

  /** The port of server.metricsListen, or undefined when /metrics is on the OTLP/HTTP port. */
  get metricsPort(): number | undefined {
    return this.#metricsListener?.port;
  }

  /**
   * Listens, then starts the workers; resolves once WAL recovery is done and /readyz says 200.
   * A start that fails removes the audit file it made (one that was there keeps its bytes).
   */
  async start(): Promise<void> {
    try {
      await this.#start();
    } catch (e) {
      // No event can be queued before the listeners (none listened yet, or the listen failed).
      if (this.#audit !== undefined && !this.#audit.discardIfCreated()) await this.#audit.close();
      throw e;
    }
  }

  /**
   * The audit file (audit.file), made now: after the settings, the tenants file, the compactor's
   * targets (cli.ts) and the WAL root were checked, so a start they refuse leaves none behind.
   */
  #openAudit(): void {
    if (this.#audit !== undefined) openDeferredAuditLog(this.#audit, this.#o.settings.auditFile!);
  }

  async #start(): Promise<void> {
    if (this.#rateBudget instanceof RedisBudget) {
      // Not fatal: without Redis the budget admits and counts backend errors.
      await this.#rateBudget.ready(2000).catch((e: unknown) => {
        this.#o.log.warn({ err: (e as Error).message }, 'Redis not ready at start: rate budgets unenforced until it is');
      });
    }
    try {
      makeDirsSync(this.#o.settings.walDir);
    } catch (e) {
      // A file system that refuses directories (/proc, a read-only mount): the setting's refusal, exit 2.
      const err = e as NodeJS.ErrnoException;
      throw ConfigError.ofSetting('ingester.walDir', `${this.#o.settings.walDir} cannot be made (${err.code ?? err.message}: mkdir ${err.path ?? '?'})`);
    }
    this.#openAudit();
    markWalRoot(this.#o.settings.walDir);
    lockWalRoot(this.#o.settings.walDir); // drain and compact --ingester-stopped refuse while it is held
    // [commit journal] journals of another worker count: replayed before any worker owns their lanes.
    for (const [dir, r] of replayForeignJournals(this.#o.settings.walDir, this.#o.settings.workers)) {
      this.#o.log.info({ dir, files: r.files, entries: r.entries, rewritten: r.rewritten, rewrittenRecords: r.rewrittenRecords }, 'WAL journal of another worker count replayed');
      for (const k of r.kept) logKeptJournal(this.#o.log, k);
    }
    // Before any writer starts: what is on disk now belongs to earlier lives.
    this.#compactor?.markEarlierLife();
    await this.#tenants?.ready(); // [declared tenants] shared buckets' Redis, bounded
    this.#tenantsReloader?.start();
    await this.#indexes.start(5000);
    await Promise.all([this.#http.listen(), this.#grpc.listen(), this.#metricsListener?.listen()]);
    this.#o.log.info({ http: this.#http.port, grpc: this.#grpc.port, ...(this.#metricsListener !== undefined ? { metrics: this.#metricsListener.port } : {}) }, 'listening');
    await this.#dispatcher.start();
    this.#compactor?.start();
    this.#ready = true;
  }

  /**
   * Graceful stop: /readyz turns 503, listeners close, queued requests are
   * written and answered, workers seal and close their segments. Resolves with
   * the number of requests that could not be answered within the bound.
   */
  stop(): Promise<number> {
    this.#stopped ??= this.#stop();
    return this.#stopped;
  }

  async #stop(): Promise<number> {
    const s = this.#o.settings;
    this.#draining = true;
    this.#http.stopListening();
    const compactorDone = this.#compactor?.stop(s.shutdownTimeoutSecs * 1000);
    const grpcDone = this.#grpc.shutdown(s.shutdownTimeoutSecs * 1000);
    const { unanswered } = await this.#dispatcher.shutdown(s.shutdownTimeoutSecs * 1000);
    await grpcDone;
    this.#breaker.close();
    await this.#rateBudget.close();
    this.#tenantsReloader?.close();
    await this.#tenants?.close();
    await this.#audit?.close();
    await this.#pool.destroy();
    await compactorDone;
    await this.#indexes.close();
    this.#http.close();
    await this.#metricsListener?.close();
    // Every writer has sealed and closed: the WAL may be drained now (drain-on-shutdown comes next).
    unlockWalRoot(s.walDir);
    return unanswered;
  }

  #testRoutes(app: TemplatedApp): void {
    // Test-only: terminate the worker thread serving a shard, mid-load.
    app.post('/-/test/kill-worker', (res, req) => {
      const shard = Number(req.getQuery('shard') ?? '0');
      const tid = this.#dispatcher.threadIdOf(shard);
      const thread = this.#pool.threads.find((t) => t.threadId === tid);
      res.onAborted(() => {});
      if (thread === undefined) {
        res.cork(() => res.writeStatus('404 Not Found').end('no such worker\n'));
        return;
      }
      void thread.terminate();
      res.cork(() => res.end(`terminated thread ${tid} of shard ${shard}\n`));
    });
  }
}

/**
 * The WAL root exists (made when missing) and this process may write in it,
 * or a ConfigError naming ingester.walDir (exit 2, with where the value came
 * from), before anything else is made: the catalog file and the warehouse
 * were left behind by a start that failed later on EACCES or EEXIST (exit 1).
 */
function usableWalDir(walDir: string): void {
  // Nothing is made here (a refused start leaves nothing): the directory, or the nearest one above
  // it that exists (start() makes the rest), must be a directory this process may write in.
  let at = resolve(walDir);
  for (;;) {
    let st;
    try {
      st = statSync(at);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if ((code === 'ENOENT' || code === 'ENOTDIR') && dirname(at) !== at) {
        if (code === 'ENOTDIR') throw ConfigError.ofSetting('ingester.walDir', `${walDir} lies under a file, not a directory`);
        at = dirname(at);
        continue;
      }
      throw ConfigError.ofSetting('ingester.walDir', `${walDir} cannot be read (${code ?? (e as Error).message})`);
    }
    if (!st.isDirectory()) throw ConfigError.ofSetting('ingester.walDir', at === resolve(walDir) ? `${walDir} is not a directory` : `${walDir} lies under a file, not a directory`);
    try {
      accessSync(at, fsConstants.W_OK | fsConstants.X_OK);
    } catch (e) {
      throw ConfigError.ofSetting('ingester.walDir', `${walDir} cannot be written (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
    if (at !== resolve(walDir)) {
      // The root is still to be made under `at`: access() passes for root on a file system that
      // refuses directories (/proc), so one is made there and removed at once; a refusal here
      // comes before the catalog file and the warehouse are made.
      let probe: string;
      try {
        probe = mkdtempSync(join(at, '.siglake-probe-'));
      } catch (e) {
        const err = e as NodeJS.ErrnoException;
        throw ConfigError.ofSetting('ingester.walDir', `${walDir} cannot be made (${err.code ?? err.message}: mkdir under ${at})`);
      }
      rmdirSync(probe);
    }
    return;
  }
}
