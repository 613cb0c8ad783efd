// `siglake query`: the HTTP API of contract query §3 on query.listen.
//
// A query request goes through, in order (contract query §4, §5):
//   shard endpoint only: the X-Siglake-Shard-Token, else 401
//   authentication (shared with ingest: OIDC > static tokens > open), else 401
//   tenant routing and the allow-list (tenant-gate.ts), else 403
//   coordinator (query.shards set): forward to the tenant's shard, answer as it did
//   the tenant's concurrency slot, else 429
//   the tenant context at the catalog's current snapshots (engine-pool.ts)
//   the one read-only statement (statement-guard.ts), within the timeout (504)
// The index API (/api/v1/indexes…) goes through authentication and tenant
// routing the same way, then src/indexes/http-handlers.ts, on the node that
// received it (it is not forwarded: the catalog is shared).
// Nothing tenant-specific exists before the third step passes.

import { timingSafeEqual, createHash } from 'node:crypto';
import fs from 'node:fs';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Authenticator } from '../auth/authenticator.js';
import { authenticatorFromSettings } from '../auth/from-settings.js';
import { headerToken, type Settings } from '../config/settings.js';
import { ConfigError } from '../errors.js';
import { FileStorage } from '../iceberg/file-storage.js';
import { handleIndexRequest, isIndexApiPath, MAX_INDEX_BODY_BYTES, type IndexChange } from '../indexes/http-handlers.js';
import { IndexRegistry, PROP_RETENTION_DAYS } from '../indexes/registry.js';
import { PROP_SCHEMA_VERSION } from '../migrate/migrate.js';
import type { ObjectStorage } from '../iceberg/storage.js';
import { closeWarehouse, isS3Warehouse } from '../iceberg/warehouse.js';
import { missingSqliteCatalog, SqlCatalog } from '../iceberg/sql-catalog.js';
import type { Logger } from '../log.js';
import { namespaceOf } from '../tenancy/identifier.js';
import { sendError, sendForwarded, sendJson, sendNdjson, sendResult, wantsNdjson } from './answers.js';
import { TenantSlots, type Slot } from './concurrency.js';
import { EnginePool, tableVisible } from './engine-pool.js';
import { openLocalFiles } from './local-files.js';
import { asQueryError, QueryError } from './query-error.js';
import { QueryMetrics, type QueryEndpoint } from './query-metrics.js';
import { runQuery, timeoutError } from './query-runner.js';
import { callerGone, checkBodyHead, drainBounded, expectsContinue, readBody, sqlOf } from './request-body.js';
import { ShardForwarder } from './shard-forwarder.js';
import { TableFilesReader } from './table-files.js';
import { TenantGate } from './tenant-gate.js';
import { TenantIndex } from '../tenants/tenant-index.js';
import { auditNote, deferredAuditLog, indexChangeEvent, openDeferredAuditLog, reloadIndexChanges, type AuditLog, type AuditNote } from '../tenants/audit-log.js';
import { loadTenantsAtStart, readTenantsFileText, TenantsReloader } from '../tenants/tenants-reloader.js';

export interface QueryServerOptions {
  readonly settings: Settings;
  readonly log: Logger;
}

/** The refusals the audit stream records: a caller turned away, not a query that failed (bad SQL, a timeout, an engine error). */
const AUDITED_REFUSALS: ReadonlySet<string> = new Set([
  'SIGLAKE_UNAUTHENTICATED',
  'SIGLAKE_TENANT_DENIED',
  'SIGLAKE_TENANT_AMBIGUOUS',
  'SIGLAKE_SQL_REFUSED',
  'SIGLAKE_QUERY_CONCURRENCY',
]);

export class QueryServer {
  readonly #s: Settings;
  readonly #log: Logger;
  readonly #auth: Authenticator;
  readonly #gate: TenantGate;
  readonly #catalog: SqlCatalog;
  // Set by start(), before the port listens: an S3 warehouse's client is loaded on demand.
  #storage: ObjectStorage | undefined;
  #reader!: TableFilesReader;
  #indexes!: IndexRegistry;
  #pool: EnginePool | undefined;
  readonly #slots: TenantSlots;
  readonly #metrics: QueryMetrics;
  readonly #forwarder: ShardForwarder | undefined;
  readonly #shardTokenDigest: Buffer | undefined;
  readonly #stopping = new AbortController();
  readonly #http: http.Server;
  readonly #audit: AuditLog | undefined;
  /** Each request's audit note while auditing (set by #endpoint, filled by #principalOf). */
  readonly #notes = new WeakMap<IncomingMessage, AuditNote>();
  readonly #tenantsReloader: TenantsReloader | undefined;
  #draining = false;
  #inFlight = 0;
  /** Answers passed on from a shard (the coordinator does not count their timeouts as its own). */
  readonly #forwarded = new WeakSet<ServerResponse>();
  /** Called each time #inFlight reaches 0 (stop() waiting on it). */
  #idle: (() => void) | undefined;

  constructor(opts: QueryServerOptions) {
    const s = opts.settings;
    this.#s = s;
    this.#log = opts.log;
    if (s.queryTenantClaim !== undefined && s.oidcIssuer === undefined) {
      throw new ConfigError('query.oidc.tenantClaim: needs OIDC (set auth.oidc.issuer)');
    }
    const declared = loadDeclared(s);
    this.#gate = new TenantGate({ tenantClaim: s.queryTenantClaim, allowedTenants: s.queryAllowedTenants, declared: declared?.index });
    const shardToken = readShardToken(s);
    if (s.queryShards.length > 0 && shardToken === undefined) {
      throw new ConfigError('query.shards: needs query.shardToken or query.shardTokenFile (the shards verify it)');
    }
    this.#shardTokenDigest = shardToken === undefined ? undefined : digest(shardToken);
    this.#forwarder = s.queryShards.length > 0 ? new ShardForwarder(s.queryShards, shardToken!, s.queryTimeoutSecs) : undefined;
    this.#auth = authenticatorFromSettings(s);
    this.#catalog = SqlCatalog.open(s.catalogUrl, s.catalogName);
    this.#slots = new TenantSlots(s.queryMaxConcurrentPerTenant);
    this.#metrics = new QueryMetrics(
      { running: () => this.#slots.total, contexts: () => this.#pool?.size ?? 0, cache: () => this.#pool?.fileStats ?? NO_CACHE_STATS },
      { declaredTenants: s.tenantsFile !== undefined, declared: () => this.#gate.declaredCount },
    );
    // The audit stream: every index change made through the index API, and
    // tenants reloads. (It was opened only with a tenants file, and index
    // changes were never written.)
    // Checked now, made only in start() right before the listen (a refused start leaves no file).
    this.#audit = s.auditFile !== undefined ? deferredAuditLog(s.auditFile, opts.log) : undefined;
    // The tenants file is reloaded as on ingest: SIGHUP and file change; a bad
    // file keeps the old set, logs one line, counts, and writes an audit event.
    if (s.tenantsFile !== undefined) {
      const gate = this.#gate;
      const file = s.tenantsFile;
      this.#tenantsReloader = new TenantsReloader({
        file,
        tenants: {
          // An overlap the file alone decides throws; the reloader names the file.
          // A reload that changes a tenant's index subset writes an index_change, as on ingest.
          replace: (decls) => {
            const before = gate.declaredSubsets();
            const r = gate.replaceDeclared(decls);
            const audit = this.#audit;
            if (audit !== undefined) for (const ev of reloadIndexChanges(before, gate.declaredSubsets())) audit.write(ev);
            return r;
          },
          get size() {
            return gate.declaredCount;
          },
        },
        log: opts.log,
        loadedText: declared?.text,
        ...(this.#metrics.reloadFailures !== undefined ? { metrics: { reloadFailures: this.#metrics.reloadFailures } } : {}),
        ...(this.#audit !== undefined ? { audit: this.#audit } : {}),
      });
    }
    // headersTimeout and requestTimeout (server.requestTimeoutSecs, as on ingest; it was accepted
    // and ignored) bound how long a caller may take to send its request: headers, then the whole
    // body, at most 1 MiB. The query runs after that and is bound by query.timeoutSecs. Node's
    // defaults (60 s, 300 s, checked every 30 s) let a stalled caller hold a connection and a request
    // for minutes. A request past either is answered 408 by Node and its connection closed.
    const requestTimeout = s.requestTimeoutSecs * 1000;
    this.#http = http.createServer(
      { requestTimeout, headersTimeout: Math.min(HEADERS_TIMEOUT_MS, requestTimeout), connectionsCheckingInterval: 1_000 },
      (req, res) => void this.#handle(req, res),
    );
    // Expect (RFC 9110 §10.1.1, request-body.ts): with these listeners Node leaves both to the
    // server. 100-continue: the body is asked for (readBody) only once the request passed what its
    // head decides; until then the connection is to close after the answer (a refusal does not
    // wait for a body the caller was never asked for). Anything else: 417 (#handle).
    this.#http.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
      res.setHeader('connection', 'close');
      void this.#handle(req, res);
    });
    this.#http.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => void this.#handle(req, res));
    this.#http.keepAliveTimeout = 10_000;
  }

  get port(): number {
    return (this.#http.address() as AddressInfo).port;
  }

  get role(): 'coordinator' | 'worker' {
    return this.#forwarder === undefined ? 'worker' : 'coordinator';
  }

  async start(): Promise<void> {
    const s = this.#s;
    // Read-only: no probe write (the ingester's compactor probes the bucket); a
    // store that cannot be read shows as a 5xx on the first query.
    const storage: ObjectStorage = isS3Warehouse(s.warehousePath)
      ? new (await import('../iceberg/s3-storage.js')).S3Storage({
          uri: s.warehousePath,
          endpoint: s.warehouseS3Endpoint,
          region: s.warehouseS3Region,
          forcePathStyle: s.warehouseS3ForcePathStyle,
        })
      : new FileStorage(s.warehousePath);
    this.#storage = storage;
    this.#reader = new TableFilesReader(storage);
    this.#indexes = new IndexRegistry({ catalog: this.#catalog, storage, maxPerTenant: s.queryMaxIndexesPerTenant });
    const files = await openLocalFiles(storage, { dir: s.queryCacheDir, maxMib: s.queryCacheMaxMib });
    this.#pool = new EnginePool(this.#catalog, this.#reader, files, {
      memoryLimitMib: s.queryMemoryLimitMib,
      onUnreadable: (namespace, table, err) => this.#log.warn({ namespace, table, err: (err as Error).message }, 'table not readable: its queries answer 500, the tenant\'s other tables answer'),
    });
    const { host, port } = this.#s.queryListen;
    await new Promise<void>((resolve, reject) => {
      this.#http.once('error', reject);
      this.#http.listen(port, host, () => {
        this.#http.off('error', reject);
        resolve();
      });
    });
    // Listening was the last step that can fail the start: the audit file is made only now.
    if (this.#audit !== undefined) openDeferredAuditLog(this.#audit, s.auditFile!);
    this.#tenantsReloader?.start();
    if (missingSqliteCatalog(s.catalogUrl) !== null) {
      // The driver creates it: a mistyped path would otherwise serve empty answers without a word.
      // (Not refused: a query server may start before the ingester beside it has made the file.)
      this.#log.warn(
        { catalog: s.catalogUrl },
        'catalog file did not exist: created empty; every query sees no tables until an ingester or compactor writes there (check --catalog-url)',
      );
    }
    try {
      await this.#catalog.ready();
    } catch (e) {
      this.#log.warn({ err: (e as Error).message }, 'catalog not reachable yet; /readyz answers 503 until it is');
    }
  }

  /**
   * Graceful stop: refuse new queries (503), let running ones finish for up
   * to server.shutdownTimeoutSecs, interrupt the rest, close the engines and the catalog.
   */
  async stop(): Promise<number> {
    this.#draining = true;
    this.#tenantsReloader?.close();
    this.#http.close();
    await this.#whenIdle(this.#s.shutdownTimeoutSecs * 1000);
    const interrupted = this.#inFlight;
    // Interrupts running queries and forwards, and refuses bodies still coming (503): each answers within milliseconds.
    this.#stopping.abort();
    // Bounded too: a request that still does not end (it waits on something that ignores the
    // stop) held the process past SIGTERM for good. Its connection is closed below.
    await this.#whenIdle(STOP_GRACE_MS);
    if (this.#inFlight > 0) {
      this.#log.warn({ requests: this.#inFlight, graceMs: STOP_GRACE_MS }, 'requests still in flight after the shutdown deadline: closing their connections');
    }
    this.#http.closeAllConnections();
    this.#pool?.close();
    if (this.#storage !== undefined) closeWarehouse(this.#storage);
    await this.#catalog.close();
    await this.#audit?.close();
    return interrupted;
  }

  /** Resolves once no request is in flight, or after `ms`. */
  async #whenIdle(ms: number): Promise<void> {
    if (this.#inFlight === 0) return;
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      this.#idle = () => {
        clearTimeout(t);
        resolve();
      };
    });
    this.#idle = undefined;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0]!;
    try {
      if (unmetExpectation(req) && !isApiPath(path)) {
        // The API's endpoints answer it in #endpoint (counted there).
        res.setHeader('connection', 'close');
        sendError(res, expectationFailed());
        return;
      }
      switch (path) {
        case '/healthz':
          res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
          return;
        case '/readyz':
          return await this.#readyz(res);
        case '/metrics':
          res.writeHead(200, { 'content-type': this.#metrics.registry.contentType });
          res.end(await this.#metrics.registry.metrics());
          return;
        case '/api/v1/sql':
          return await this.#endpoint(req, res, 'sql', 'POST', () => this.#sql(req, res, false));
        case '/api/v1/sql/shard':
          return await this.#endpoint(req, res, 'sql_shard', 'POST', () => this.#sql(req, res, true));
        case '/api/v1/tables':
          return await this.#endpoint(req, res, 'tables', 'GET', () => this.#tables(req, res));
        default:
          // Served on the node that received it, coordinator or not: an index
          // lives in the shared catalog, and contract §5 forwards only queries.
          if (isIndexApiPath(path)) return await this.#endpoint(req, res, 'indexes', undefined, () => this.#indexApi(req, res, path));
          req.resume();
          sendError(res, new QueryError('SIGLAKE_NOT_FOUND', `no endpoint ${path}`));
      }
    } catch (e) {
      this.#log.error({ err: (e as Error).message }, 'query request failed');
      if (!res.headersSent) sendError(res, asQueryError(e));
      else res.destroy();
    }
  }

  async #readyz(res: ServerResponse): Promise<void> {
    if (this.#draining) {
      res.writeHead(503, { 'content-type': 'text/plain' }).end('stopping\n');
      return;
    }
    try {
      await this.#catalog.ready();
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ready\n');
    } catch {
      res.writeHead(503, { 'content-type': 'text/plain' }).end('catalog not reachable\n');
    }
  }

  /** Counts the request in flight, answers refusals, records the metrics. */
  async #endpoint(req: IncomingMessage, res: ServerResponse, endpoint: QueryEndpoint, method: string | undefined, run: () => Promise<void>): Promise<void> {
    const started = performance.now();
    this.#inFlight++;
    let cut = false;
    // The caller hung up before its whole answer was written: counted 499 (nginx's "client closed
    // request"), logged at debug; not a server failure. (It was counted 500 or 503 and logged at warn.)
    let gone = false;
    /** The status counted for a request that lost its connection: 499, or 408 when Node's requestTimeout cut it. */
    let lost = 499;
    const onGone = () => {
      if (!res.writableFinished) gone = true;
    };
    res.once('close', onGone);
    // While auditing: what #principalOf learns of the caller, for a refusal's event.
    const note = this.#audit !== undefined ? auditNote(req.socket.remoteAddress) : undefined;
    if (note !== undefined) this.#notes.set(req, note);
    try {
      // An expectation other than 100-continue (Node answered it 417 with no body, uncounted, and
      // kept the connection open for a body it never read).
      if (unmetExpectation(req)) throw expectationFailed();
      // HEAD is answered wherever GET is (RFC 9110 §9.3.2: the same head, no body; Node sends none).
      if (method !== undefined && req.method !== method && !(method === 'GET' && req.method === 'HEAD')) {
        const allow = method === 'GET' ? 'GET, HEAD' : method;
        res.setHeader('allow', allow);
        throw new QueryError('SIGLAKE_METHOD_NOT_ALLOWED', `${req.method ?? '?'} is not allowed here; use ${allow}`);
      }
      if (this.#draining) throw new QueryError('SIGLAKE_UNAVAILABLE', 'the query server is shutting down', { retryAfterSecs: 1 });
      await run();
    } catch (e) {
      const err = asQueryError(e);
      // A caller turned away (declared-tenants.md §4: one event for every refusal): its credential,
      // its tenant, a statement beyond its namespace, its concurrency. A query that failed is not one.
      if (note !== undefined && AUDITED_REFUSALS.has(err.code)) {
        this.#audit!.write({ event: 'refusal', tenant: note.tenant, subject: note.subject, reason: err.reason ?? err.code, remote: note.remote });
      }
      if (err.reason !== undefined) this.#metrics.denied(err.reason);
      if (err.code === 'SIGLAKE_TENANT_AMBIGUOUS') this.#metrics.ambiguous();
      if (gone || callerGone(req)) {
        gone = true;
        // Node's requestTimeout ended it (answered 408 and closed): counted as the 408 the caller got.
        if (requestTimedOut(req)) {
          lost = 408;
          this.#log.debug({ endpoint }, 'request not received within server.requestTimeoutSecs: answered 408');
        } else this.#log.debug({ code: err.code, endpoint }, 'caller hung up before its answer');
        res.destroy();
        return;
      }
      if (err.httpStatus >= 500 && err.code !== 'SIGLAKE_QUERY_TIMEOUT') this.#log.warn({ code: err.code, endpoint, err: causeOf(e) }, 'query failed');
      if (!res.headersSent) {
        // The rest of the body is read, within a bound, before the answer (the caller may still be
        // writing: a reset while it does can lose the answer); past the bound the answer says
        // Connection: close and the connection ends once it is written.
        if (!(await drainBounded(req, this.#stopping.signal))) res.setHeader('connection', 'close');
        if (!res.headersSent) sendError(res, err);
      } else {
        // The status line is out: a cut connection is the only way left to say the answer failed
        // (left open, the caller waited forever), and it is counted as the failure it is.
        cut = true;
        res.destroy();
      }
    } finally {
      res.off('close', onGone);
      this.#metrics.answered(endpoint, gone ? lost : cut ? 500 : res.statusCode, (performance.now() - started) / 1000, this.#forwarded.has(res));
      this.#inFlight--;
      if (this.#inFlight === 0) this.#idle?.();
    }
  }

  /** Authentication and tenant routing: the tenant, or throws the 401/403. */
  async #tenantOf(req: IncomingMessage): Promise<string> {
    return (await this.#principalOf(req)).tenant;
  }

  /** The caller's tenant and verified subject (`sub`, when the credential carries one). */
  async #principalOf(req: IncomingMessage): Promise<{ tenant: string; subject: string | null }> {
    const { claims } = await this.#auth.authenticate(req.headers.authorization);
    const sub = claims?.['sub'];
    const subject = typeof sub === 'string' ? sub : null;
    const note = this.#notes.get(req);
    if (note !== undefined) note.subject = subject;
    const tenant = this.#gate.resolve(claims);
    if (note !== undefined) note.tenant = tenant;
    return { tenant, subject };
  }

  async #sql(req: IncomingMessage, res: ServerResponse, viaShard: boolean): Promise<void> {
    if (viaShard) this.#checkShardToken(req);
    const tenant = await this.#tenantOf(req);
    // The body's content type, charset and coding, from the head: a 415 invites no body and takes no slot.
    checkBodyHead(req.headers['content-type'], req.headers['content-encoding']);
    // One of the tenant's slots before the body is read, for a query run here and for one passed
    // on to a shard alike: a 429 to `Expect: 100-continue` invites no body, and a tenant's bodies
    // being received count against its limit. (Taken after the body, a tenant could have any
    // number of bodies of up to 1 MiB arriving at once, each held until server.requestTimeoutSecs;
    // a coordinator took none at all, as Loki's query frontend bounds a tenant's outstanding
    // requests itself.)
    const slot = this.#slots.acquire(tenant);
    if (this.#forwarder !== undefined && !viaShard) {
      try {
        await this.#forward(req, res, tenant, this.#forwarder);
      } finally {
        slot.release();
      }
      return;
    }
    let sql: string;
    try {
      sql = sqlOf(await readBody(req, { stopping: this.#stopping.signal, res }), req.headers['content-type']);
    } catch (e) {
      slot.release();
      throw e;
    }
    const started = performance.now();
    // A caller that hangs up stops its query (nobody would read the answer), as
    // does the server's stop. One controller per request, unhooked at the end
    // (AbortSignal.any would tie each request's signal to the long-lived one).
    const cancel = new AbortController();
    const onClose = () => {
      if (!res.writableEnded) cancel.abort();
    };
    const onStop = () => cancel.abort();
    res.once('close', onClose);
    this.#stopping.signal.addEventListener('abort', onStop, { once: true });
    if (this.#stopping.signal.aborted) cancel.abort();
    try {
      // query.timeoutSecs bounds the whole request: reading the tables' metadata from the catalog
      // and the warehouse, then the query. (A catalog that did not answer left the caller waiting
      // past it, for as long as the catalog took.)
      const limitMs = this.#s.queryTimeoutSecs * 1000;
      const lease = await withinDeadline(this.#pool!.acquire(tenant, this.#gate.indexesOf(tenant)), limitMs, this.#s.queryTimeoutSecs, slot, (l) => l.release());
      let result;
      try {
        result = await runQuery(lease.engine, sql, {
          maxRows: this.#s.queryMaxRows,
          maxBytes: this.#s.queryMaxResultMib * 1024 * 1024,
          timeoutMs: Math.max(1, limitMs - (performance.now() - started)),
          limitSecs: this.#s.queryTimeoutSecs,
          signal: cancel.signal,
        });
      } finally {
        lease.release();
      }
      // The slot is held until the answer is handed to the socket, and a caller that takes no byte
      // of it for query.timeoutSecs is cut: a tenant has at most query.maxConcurrentPerTenant
      // answers in the heap. (The slot went back once the answer was queued: a caller that never
      // read its answers kept each of them, up to query.maxResultMib, for as long as it kept the
      // connection open, as many as it liked.)
      if (wantsNdjson(req.headers.accept)) await sendNdjson(res, result, limitMs);
      else await sendResult(res, result, Math.round(performance.now() - started), limitMs);
    } finally {
      res.off('close', onClose);
      this.#stopping.signal.removeEventListener('abort', onStop);
      slot.release();
    }
  }

  /** /api/v1/sql on a coordinator: the caller's body passed on to its tenant's shard, the answer back unchanged. */
  async #forward(req: IncomingMessage, res: ServerResponse, tenant: string, forwarder: ShardForwarder): Promise<void> {
    const body = await readBody(req, { stopping: this.#stopping.signal, res });
    // A caller that hangs up aborts the request to the shard (whose query stops with it), as
    // does the server's stop (answered 503, as a local query is; a forward was left running
    // until the shard's timeout, and its caller got a 502 long after the process should have gone).
    const hangUp = new AbortController();
    const onHangUp = () => {
      if (!res.writableEnded) hangUp.abort();
    };
    const onStop = () => hangUp.abort();
    res.once('close', onHangUp);
    this.#stopping.signal.addEventListener('abort', onStop, { once: true });
    if (this.#stopping.signal.aborted) hangUp.abort();
    try {
      const answer = await forwarder.forward(
        tenant,
        { body, contentType: req.headers['content-type'], accept: req.headers.accept, authorization: req.headers.authorization },
        hangUp.signal,
      );
      this.#forwarded.add(res);
      await sendForwarded(res, answer);
    } finally {
      res.off('close', onHangUp);
      this.#stopping.signal.removeEventListener('abort', onStop);
    }
  }

  #checkShardToken(req: IncomingMessage): void {
    const given = req.headers['x-siglake-shard-token'];
    const ok = this.#shardTokenDigest !== undefined && typeof given === 'string' && timingSafeEqual(digest(given), this.#shardTokenDigest);
    if (!ok) throw new QueryError('SIGLAKE_UNAUTHENTICATED', 'unauthenticated: shard token missing or wrong');
  }

  /**
   * The index API (contract §3, §6) for the caller's tenant, resolved exactly
   * as a query's is (same 401/403 and counters) before the body is read.
   */
  async #indexApi(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const { tenant, subject } = await this.#principalOf(req);
    // HEAD: GET's answer without its body (Node writes none for a HEAD).
    const method = req.method === 'HEAD' ? 'GET' : (req.method ?? 'GET');
    // One of the tenant's query.maxConcurrentPerTenant slots, as a query takes (concurrency.ts);
    // taken before the body is asked for, so a 429 to `Expect: 100-continue` invites no body.
    const slot = this.#slots.acquire(tenant);
    try {
      // A definition over MAX_INDEX_BODY_BYTES is refused on its Content-Length (before 100 Continue).
      const body = method === 'PUT' ? await readBody(req, { stopping: this.#stopping.signal, res, maxBytes: MAX_INDEX_BODY_BYTES }) : undefined;
      if (body === undefined) req.resume();
      const audit = this.#audit;
      // Every index change is audited (declared-tenants.md §4), with who made it and from where.
      const onChange =
        audit === undefined ? undefined : (c: IndexChange) => audit.write(indexChangeEvent(tenant, c.index, c.action, 'index_api', subject, req.socket.remoteAddress ?? null));
      // query.timeoutSecs from the body on, as a listing: 504 past it, the slot kept until the
      // catalog and warehouse work ends (a change may still be made after the 504; a PUT or DELETE
      // retried then answers what it finds). It had no bound: a catalog or warehouse that did not
      // answer left the caller waiting for as long as it took.
      const work = handleIndexRequest({ method, path, ...(body !== undefined ? { body } : {}) }, tenant, this.#indexes, this.#gate.indexesOf(tenant), onChange);
      const answer = await withinDeadline(work, this.#s.queryTimeoutSecs * 1000, this.#s.queryTimeoutSecs, slot);
      res.writeHead(answer.status, answer.headers);
      res.end(answer.body);
    } finally {
      slot.release();
    }
  }

  async #tables(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const tenant = await this.#tenantOf(req);
    req.resume();
    // One of the tenant's slots, and query.timeoutSecs, as a query (it reads the same catalog and
    // metadata files: it took no slot and had no bound, so one tenant could keep any number of them
    // going, each for as long as a read took).
    const slot = this.#slots.acquire(tenant);
    try {
      const tables = await withinDeadline(this.#listTables(tenant), this.#s.queryTimeoutSecs * 1000, this.#s.queryTimeoutSecs, slot);
      sendJson(res, 200, { tables });
    } finally {
      slot.release();
    }
  }

  /** The rows of GET /api/v1/tables. */
  async #listTables(tenant: string): Promise<TableRow[]> {
    const ns = namespaceOf(tenant);
    const indexes = this.#gate.indexesOf(tenant);
    const tables: TableRow[] = [];
    for (const { name, metadataLocation } of await this.#catalog.tableLocations(ns)) {
      if (!tableVisible(name, indexes)) continue;
      const kind = name === 'logs' || name === 'traces' ? name : 'index';
      let t;
      try {
        t = await this.#reader.read(ns, metadataLocation);
      } catch (e) {
        // One table that cannot be read is listed with what is unknown as null; the others as ever
        // (it failed the whole listing, with the server's path in the answer).
        this.#log.warn({ namespace: ns, table: name, err: (e as Error).message }, 'table not readable: listed without its row count');
      }
      // An index carries its retention (the registry's property); logs and traces have the
      // retention.logsDays / retention.tracesDays setting (0: kept for ever), which the query server
      // shares with the compactor that enforces it (before stop 47: null).
      const retention = name === 'logs' ? this.#s.retentionLogsDays : name === 'traces' ? this.#s.retentionTracesDays : t?.properties[PROP_RETENTION_DAYS];
      const version = t?.properties[PROP_SCHEMA_VERSION];
      tables.push({
        name,
        kind,
        rowCount: t === undefined ? null : t.rowCount,
        retentionDays: retention === undefined ? null : Number(retention),
        schemaVersion: version === undefined ? null : Number(version),
      });
    }
    return tables;
  }
}

interface TableRow {
  readonly name: string;
  readonly kind: string;
  readonly rowCount: number | null;
  readonly retentionDays: number | null;
  readonly schemaVersion: number | null;
}

/** Whether the caller sent an expectation other than 100-continue (Node emits checkExpectation for it). */
function unmetExpectation(req: IncomingMessage): boolean {
  return req.headers.expect !== undefined && !expectsContinue(req);
}

/** 417: only 100-continue is understood (RFC 9110 §10.1.1 allows this answer to any other). */
function expectationFailed(): QueryError {
  return new QueryError('SIGLAKE_EXPECTATION_FAILED', 'Expect: only 100-continue is supported');
}

/** The paths #endpoint serves. */
function isApiPath(path: string): boolean {
  return path === '/api/v1/sql' || path === '/api/v1/sql/shard' || path === '/api/v1/tables' || isIndexApiPath(path);
}

/** How long the caller may take to send its headers. */
const HEADERS_TIMEOUT_MS = 10_000;
/** After the shutdown deadline's interrupt, how long stop() waits for the interrupted requests to answer. */
const STOP_GRACE_MS = 2_000;

/**
 * The server-side cause of a 5xx, for the log: the error's message, without the
 * engine's `LINE n: <statement>` excerpt and the quoted values (the SQL and a tenant's data are
 * never logged), at most 500 characters.
 */
function causeOf(e: unknown): string {
  const message = e instanceof Error ? e.message : String(e);
  // The engine quotes the values it trips on ("Could not convert string 'x' …"): a tenant's data,
  // never logged at info level; the quotes stay, so the message's shape still says what failed.
  return message
    .replace(/\n*LINE \d+:[\s\S]*$/, '')
    .replace(/'(?:[^']|'')*'/g, "'…'")
    .replace(/"(?:[^"]|"")*"/g, '"…"')
    .slice(0, 500);
}

/** Whether Node's requestTimeout (or headersTimeout) ended this request's connection. */
function requestTimedOut(req: IncomingMessage): boolean {
  const errored = (req.socket as { errored?: unknown } | null)?.errored as { code?: unknown } | null | undefined;
  return errored?.code === 'ERR_HTTP_REQUEST_TIMEOUT';
}

const NO_CACHE_STATS = { hits: 0, misses: 0, evictions: 0, bytes: 0, files: 0 };

function digest(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}

/**
 * The declared tenants of --tenants-file at start-up, or undefined. A bad file
 * stops it (exit 2): `invalid tenants.file (<source>): <file>: …`, an overlap
 * of two tenants included.
 */
function loadDeclared(s: Settings): { index: TenantIndex; text: string } | undefined {
  const file = s.tenantsFile;
  if (file === undefined) return undefined;
  return loadTenantsAtStart(file, () => {
    const { decls, text } = readTenantsFileText(file);
    return { index: new TenantIndex(decls), text };
  });
}

function readShardToken(s: Settings): string | undefined {
  if (s.queryShardTokenFile !== undefined) {
    let text: string;
    try {
      text = fs.readFileSync(s.queryShardTokenFile, 'utf8');
    } catch {
      throw ConfigError.ofSetting('query.shardTokenFile', `cannot read ${s.queryShardTokenFile}`);
    }
    const token = text.split('\n')[0]!.trim();
    if (token === '') throw new ConfigError('query.shardTokenFile: the file holds no token');
    try {
      return headerToken(token);
    } catch (e) {
      throw ConfigError.ofSetting('query.shardTokenFile', `${s.queryShardTokenFile}: the token ${(e as Error).message}`);
    }
  }
  return s.queryShardToken;
}

/**
 * What `work` gives, or a 504 once `ms` passed. Past it, `slot` stays taken
 * until the work settles (it goes on: a context build serves the tenant's
 * next query, and is shared with the tenant's other queries waiting on it),
 * and what it gives then is disposed of at once (a lease released: its query
 * never runs).
 */
function withinDeadline<T>(work: Promise<T>, ms: number, limitSecs: number, slot: Slot, dispose?: (late: T) => void): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      slot.holdUntil(
        work.then(
          (v) => dispose?.(v),
          () => undefined,
        ),
      );
      reject(timeoutError(limitSecs));
    }, ms);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}
