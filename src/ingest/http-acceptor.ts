// OTLP/HTTP on uWebSockets.js: POST /v1/logs and /v1/traces, plus the admin
// endpoints. Headers are read synchronously in the handler (uWS requests die
// with it), admission runs, and the body streams in under the size cap. A body
// that arrives in one chunk is copied once, straight into the worker's ring;
// a body in several chunks is gathered in one buffer sized from
// Content-Length first, so a slow upload never holds ring space that other
// requests of the shard are waiting behind.

import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { IngestError, type ErrorCode } from '../errors.js';
import { FLAG_BUDGET_EXHAUSTED, FLAG_GZIP, FLAG_JSON, Signal } from '../shard/frames.js';
import type { Lane } from '../lanes/lane-table.js';
import type { AcceptorOptions } from './acceptor-options.js';
import type { BudgetSink, IngestHeaders } from './admission.js';
import { auditNote, type AuditNote } from '../tenants/audit-log.js';
import type { BudgetRefusal } from '../tenants/declared-tenants.js';
import type { PendingRequest } from '../shard/dispatcher.js';
import { Answers } from './answers.js';
import { CONTENT_TYPES, DRAINING, EMPTY_RESPONSE, Encoding, logRefusal, refusalBody, statusLine, type EncodingCode } from './responses.js';
import type { Uws } from './uws-loader.js';
import { UNKNOWN_HTTP_PATH, UNSUPPORTED_SIGNALS, type UnsupportedSignal } from './unsupported-signals.js';

export interface HttpAcceptorOptions extends AcceptorOptions {
  uws: Uws;
  isReady(): boolean;
  /** Why a started process is not ready (a compactor failing past its bound), else undefined. */
  notReadyReason?(): string | undefined;
  /** Extra routes (test hooks) registered before the catch-all. */
  extraRoutes?: (app: TemplatedApp) => void;
  /** False when /metrics has its own address (server.metricsListen): this port answers it 404. */
  serveMetrics?: boolean;
}

const ENDPOINT_LOGS = 0;
/** A refused request whose declared body is at most this is kept alive (uWS skips the body). */
const EARLY_REFUSAL_KEEPALIVE_BYTES = 64 * 1024;
const ENDPOINT_TRACES = 1;
/** Bodies up to this are counted in flight but never refused by its bound (see #reserveDeclared). */
const SMALL_BODY_BYTES = 64 * 1024;
/** A refused body is read and dropped for at most this long and this many bytes before the answer and a close. */
const LINGER_MS = 2000;
const LINGER_BYTES = 16 * 1024 * 1024;

const tooLarge = new IngestError('SIGLAKE_BODY_TOO_LARGE', 'request body too large (--max-request-bytes)');
const badContentType = new IngestError(
  'SIGLAKE_UNSUPPORTED_MEDIA',
  'unsupported content type: use application/x-protobuf or application/json',
);
const badEncoding = new IngestError('SIGLAKE_UNSUPPORTED_MEDIA', 'unsupported content encoding: use gzip or none');
const requestTimeout = new IngestError(
  'SIGLAKE_REQUEST_TIMEOUT',
  'request body not received in time (--request-timeout-secs)',
);
const badTransferEncoding = new IngestError(
  'SIGLAKE_TRANSFER_ENCODING',
  'unsupported Transfer-Encoding: only exactly "chunked" is understood (use Content-Encoding: gzip to compress)',
);
const conflictingLength = new IngestError('SIGLAKE_BAD_HEADER', 'bad header: Content-Length sent twice with different values');

/** The headers one ingest request is decided on, collected into one reused record. */
type HeaderRecord = IngestHeaders & {
  contentType: string;
  contentEncoding: string;
  contentLength: number;
  chunked: boolean;
  conflictingLength: boolean;
  badTransferEncoding: boolean;
};

/** Whether the request is a HEAD (answered without a body). uWS gives the method lower-cased. */
function isHead(req: HttpRequest): boolean {
  return req.getMethod() === 'head';
}

/** Parses the content type into the response encoding; -1 when unusable. */
function encodingOf(contentType: string): number {
  const semi = contentType.indexOf(';');
  const base = (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
  if (base === 'application/x-protobuf') return Encoding.PROTOBUF;
  if (base === 'application/protobuf') return Encoding.PROTOBUF_ALT;
  if (base === 'application/json') return Encoding.JSON;
  return -1;
}

/** One ingest request in flight on a connection. */
class HttpIngest implements PendingRequest, BudgetSink {
  aborted = false;
  /** Its audit note, while the audit stream is on. */
  audit: AuditNote | undefined = undefined;
  /** [declared tenants] a budget admission found exhausted: the worker validates the body, then this 429 is sent. */
  budget: BudgetRefusal | undefined = undefined;
  done = false;
  lane: Lane | undefined = undefined;
  /** Chunks that arrive while a JWT is verified, or a multi-chunk body. */
  buf: Uint8Array | undefined = undefined;
  len = 0;
  deadline = 0;
  flags = 0;
  /** Answered with a refusal already (a late admission must not send the body). */
  refused = false;
  /** Close the connection after a refusal sent before the body was read (large or open-ended). */
  closeOnRefusal = false;
  /** Whether the answer being written closes the connection. */
  closeAfterAnswer = false;
  /** Handed to the dispatcher: the worker answers it, whatever the client does meanwhile. */
  sent = false;
  /** Bytes this request holds of the in-flight bound. */
  reserved = 0;
  /** A refusal decided while the body still comes: answered once it is drained (#lingerRefuse). */
  lingering: IngestError | undefined = undefined;
  lingerLeft = 0;

  constructor(
    readonly acceptor: HttpAcceptor,
    readonly res: HttpResponse,
    readonly endpoint: number,
    readonly encoding: EncodingCode,
    readonly contentLength: number,
  ) {}

  complete(code: ErrorCode | undefined, records: number, message: string | undefined): void {
    this.acceptor.answer(this, code, records, message);
  }

  append(chunk: Uint8Array): void {
    const need = this.len + chunk.length;
    if (this.buf === undefined || need > this.buf.length) {
      const size = Math.max(need, this.contentLength > 0 ? this.contentLength : 0, this.buf ? this.buf.length * 2 : 16384);
      const next = new Uint8Array(size);
      if (this.buf !== undefined) next.set(this.buf.subarray(0, this.len));
      this.buf = next;
    }
    this.buf.set(chunk, this.len);
    this.len = need;
  }
}

export class HttpAcceptor {
  readonly #o: HttpAcceptorOptions;
  readonly #app: TemplatedApp;
  #listenSocket: us_listen_socket | undefined;
  #port = 0;
  readonly #uploads = new Set<HttpIngest>();
  readonly #timer: NodeJS.Timeout;
  // Header collection without a closure per request.
  readonly #h: HeaderRecord = {
    authorization: undefined,
    authorizationCount: 0,
    orgId: undefined,
    orgIdCount: 0,
    index: undefined,
    indexCount: 0,
    audit: undefined,
    contentType: '',
    contentEncoding: '',
    contentLength: -1,
    chunked: false,
    conflictingLength: false,
    badTransferEncoding: false,
  };
  readonly #collect = (k: string, v: string): void => {
    const h = this.#h;
    switch (k) {
      case 'authorization':
        h.authorization = v;
        h.authorizationCount += v.includes(',') ? 2 : 1;
        break;
      case 'x-scope-orgid':
        h.orgId = v;
        h.orgIdCount++;
        break;
      case 'x-siglake-index':
        h.index = v;
        h.indexCount++;
        break;
      case 'content-type':
        h.contentType = v;
        break;
      case 'content-encoding':
        h.contentEncoding = v;
        break;
      case 'content-length':
        // Two different lengths: uWS reads by the first, a proxy may by the
        // other (request smuggling). RFC 9112 §6.3: refuse.
        if (h.contentLength !== -1 && h.contentLength !== Number(v)) h.conflictingLength = true;
        h.contentLength = Number(v);
        break;
      case 'transfer-encoding':
        h.chunked = true;
        // uWS decodes any Transfer-Encoding as chunked; only exactly `chunked` is (RFC 9112 §6.1).
        if (v.trim().toLowerCase() !== 'chunked') h.badTransferEncoding = true;
        break;
    }
  };

  readonly #answers: Answers<HttpIngest>;
  #corking: HttpIngest | undefined = undefined;
  readonly #writeOk = (): void => {
    const state = this.#corking!;
    const enc = state.encoding;
    state.res.writeHeader('Content-Type', CONTENT_TYPES[enc]).end(EMPTY_RESPONSE[enc]);
  };

  constructor(opts: HttpAcceptorOptions) {
    this.#o = opts;
    this.#answers = new Answers(
      opts.log,
      opts.metrics,
      {
        sendOk: (state) => this.#sendOk(state),
        sendRefusal: (state, err) => this.#sendRefusal(state, err),
      },
      (e, note) => opts.admission.refused(e, note),
    );
    const app = opts.uws.App();
    this.#app = app;
    app.post('/v1/logs', (res, req) => this.#ingest(res, req, ENDPOINT_LOGS));
    app.post('/v1/traces', (res, req) => this.#ingest(res, req, ENDPOINT_TRACES));
    // HEAD is answered wherever GET is, with GET's status and no body (RFC 9110 §9.3.2): a body
    // after a HEAD answer is read by the client as the next response.
    if (opts.serveMetrics !== false) {
      app.get('/metrics', (res) => this.#metrics(res, false));
      app.head('/metrics', (res) => this.#metrics(res, true));
    }
    const healthz = (res: HttpResponse, req: HttpRequest) => this.#plain(res, req, '200 OK', 'ok\n');
    app.get('/healthz', healthz);
    app.head('/healthz', healthz);
    const readyz = (res: HttpResponse, req: HttpRequest) => {
      const started = opts.isReady();
      const reason = started ? opts.notReadyReason?.() : undefined;
      const ready = started && !opts.isDraining() && reason === undefined;
      const body = ready ? 'ready\n' : opts.isDraining() ? 'draining\n' : reason !== undefined ? `not ready: ${reason}\n` : 'starting\n';
      this.#plain(res, req, ready ? '200 OK' : '503 Service Unavailable', body);
    };
    app.get('/readyz', readyz);
    app.head('/readyz', readyz);
    opts.extraRoutes?.(app);
    // Metrics and profiles: 404 with the refusal body of a signal Siglake does not store, before admission.
    for (const signal of UNSUPPORTED_SIGNALS) app.any(signal.httpPath, (res, req) => this.#unsupportedSignal(res, req, signal));
    // A 405 names the allowed method (RFC 9110 §15.5.6).
    app.any('/v1/logs', (res, req) => this.#plain(res, req, '405 Method Not Allowed', 'use POST\n', 'POST'));
    app.any('/v1/traces', (res, req) => this.#plain(res, req, '405 Method Not Allowed', 'use POST\n', 'POST'));
    app.any('/*', (res, req) => this.#unknownPath(res, req));
    this.#timer = setInterval(() => this.#expireUploads(), 1000);
    this.#timer.unref();
  }

  get port(): number {
    return this.#port;
  }

  listen(): Promise<number> {
    const { uws, host, port } = this.#o;
    return new Promise((resolve, reject) => {
      this.#app.listen(host, port, (socket) => {
        if (!socket) {
          reject(new Error(`cannot listen on ${host}:${port} for OTLP/HTTP`));
          return;
        }
        this.#listenSocket = socket;
        this.#port = uws.us_socket_local_port(socket as never);
        resolve(this.#port);
      });
    });
  }

  /** Stops accepting connections; requests on open connections are still answered. */
  stopListening(): void {
    if (this.#listenSocket !== undefined) {
      this.#o.uws.us_listen_socket_close(this.#listenSocket);
      this.#listenSocket = undefined;
    }
  }

  close(): void {
    this.stopListening();
    clearInterval(this.#timer);
  }

  /**
   * A text answer; to HEAD, its status and headers (the body's Content-Length written by hand)
   * without the body. uWS 20's endWithoutBody(length) does not end the response, and a handler
   * returning so aborts the process.
   */
  #plain(res: HttpResponse, req: HttpRequest, status: string, body: string, allow?: string): void {
    const head = isHead(req);
    res.cork(() => {
      res.writeStatus(status).writeHeader('Content-Type', 'text/plain');
      if (allow !== undefined) res.writeHeader('Allow', allow);
      if (head) res.writeHeader('Content-Length', String(Buffer.byteLength(body))).endWithoutBody();
      else res.end(body);
    });
  }

  /**
   * A request for a signal Siglake does not store (unsupported-signals.ts):
   * 404 with a google.rpc.Status (ErrorInfo SIGLAKE_SIGNAL_UNSUPPORTED) in the
   * request's encoding, before any admission check.
   */
  #unsupportedSignal(res: HttpResponse, req: HttpRequest, signal: UnsupportedSignal): void {
    const err = signal.http;
    this.#o.unsupported.count(signal, 'http');
    this.#o.log.debug({ code: err.code, status: err.httpStatus, signal: signal.name, transport: 'http' }, err.message);
    this.#notServed(res, req, err, encodingOf(req.getHeader('content-type')));
  }

  /**
   * A path this port does not serve: with an OTLP content type, 404 with the
   * google.rpc.Status of SIGLAKE_UNKNOWN_PATH naming the OTLP paths (an
   * exporter given a wrong URL reads why); otherwise the plain `not found`.
   */
  #unknownPath(res: HttpResponse, req: HttpRequest): void {
    const enc = encodingOf(req.getHeader('content-type'));
    if (enc < 0) this.#plain(res, req, '404 Not Found', 'not found\n');
    else this.#notServed(res, req, UNKNOWN_HTTP_PATH, enc);
  }

  /**
   * Answers `err` in the request's encoding (`enc` from encodingOf; text when
   * unusable). Its body is read and dropped first, within the bounds of a
   * lingering refusal, so that an exporter still writing a large batch sees
   * the answer (final) rather than a reset (which it retries); past them the
   * answer goes out with a close.
   */
  #notServed(res: HttpResponse, req: HttpRequest, err: IngestError, enc: number): void {
    const encoding = (enc < 0 ? Encoding.TEXT : enc) as EncodingCode;
    const length = req.getHeader('content-length');
    const hasBody = req.getHeader('transfer-encoding') !== '' || (length !== '' && length !== '0');
    const head = isHead(req);
    let ended = false;
    let timer: NodeJS.Timeout | undefined;
    const answer = (close: boolean): void => {
      if (ended) return;
      ended = true;
      if (timer !== undefined) clearTimeout(timer);
      const body = refusalBody(err, encoding);
      res.cork(() => {
        res.writeStatus(statusLine(err.httpStatus)).writeHeader('Content-Type', CONTENT_TYPES[encoding]);
        if (head) res.writeHeader('Content-Length', String(body.length)).endWithoutBody();
        else res.end(body, close);
      });
    };
    res.onAborted(() => {
      ended = true;
      if (timer !== undefined) clearTimeout(timer);
    });
    if (!hasBody) {
      answer(false);
      return;
    }
    let left = LINGER_BYTES;
    timer = setTimeout(() => answer(true), LINGER_MS);
    timer.unref();
    res.onData((chunk, isLast) => {
      if (ended) return;
      left -= chunk.byteLength;
      if (isLast) answer(false);
      else if (left < 0) answer(true);
    });
  }

  #metrics(res: HttpResponse, head: boolean): void {
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    this.#o.metrics.registry.metrics().then(
      (text) => {
        if (aborted) return;
        res.cork(() => {
          res.writeHeader('Content-Type', this.#o.metrics.registry.contentType);
          if (head) res.writeHeader('Content-Length', String(Buffer.byteLength(text))).endWithoutBody();
          else res.end(text);
        });
      },
      (err: unknown) => {
        this.#o.log.error({ err: (err as Error).message }, 'metrics collection failed');
        if (!aborted) res.cork(() => res.writeStatus('500 Internal Server Error').end());
      },
    );
  }

  /**
   * One ingest request, in the order of contract §4: read the headers, refuse
   * what needs no admission, admit (maybe asynchronously), check the body's
   * headers, then receive the body and dispatch it.
   */
  #ingest(res: HttpResponse, req: HttpRequest, endpoint: number): void {
    const h = this.#readHeaders(req);
    // The request's note (its peer address while auditing), for its refusal's audit event and tenant count.
    const adm = this.#o.admission;
    h.audit = adm.notes ? auditNote(adm.auditing ? Buffer.from(res.getRemoteAddressAsText()).toString() : undefined) : undefined;
    const enc = encodingOf(h.contentType);
    const state = new HttpIngest(
      this,
      res,
      endpoint,
      enc < 0 ? Encoding.TEXT : (enc as EncodingCode),
      Number.isFinite(h.contentLength) ? h.contentLength : -1,
    );
    state.audit = h.audit;
    res.onAborted(() => this.#aborted(state));
    // Refused before its body was read: close the connection rather than read
    // and throw away a large or open-ended body (small ones are skipped by uWS).
    state.closeOnRefusal = h.chunked || h.contentLength > EARLY_REFUSAL_KEEPALIVE_BYTES || !Number.isFinite(h.contentLength);
    const early = this.#o.isDraining()
      ? DRAINING
      : h.conflictingLength
        ? conflictingLength
        : h.badTransferEncoding
          ? badTransferEncoding
          : undefined;
    if (early !== undefined) {
      this.#refuse(state, early, true);
      return;
    }
    const full = this.#reserveDeclared(state);
    if (full !== undefined) {
      this.#refuse(state, full, state.closeOnRefusal);
      return;
    }
    let admitted: Lane | Promise<Lane>;
    try {
      admitted = this.#o.admission.admit(endpoint === ENDPOINT_LOGS ? 'logs' : 'traces', h, state);
    } catch (e) {
      this.#refuse(state, e, state.closeOnRefusal);
      return;
    }
    const headerProblem = this.#checkBodyHeaders(state, enc, h.contentEncoding);
    if (admitted instanceof Promise) {
      admitted.then(
        (lane) => this.#admittedLater(state, lane, headerProblem),
        (err: unknown) => {
          if (!state.aborted && !state.refused) this.#refuse(state, err, true);
        },
      );
    } else {
      state.lane = admitted;
      if (headerProblem === tooLarge) {
        this.#lingerRefuse(state, tooLarge);
      } else if (headerProblem !== undefined) {
        this.#refuse(state, headerProblem, state.closeOnRefusal);
        return;
      }
    }
    this.#receiveBody(state);
  }

  /** Collects the request's headers into the reused header record (no closure, no allocation). */
  #readHeaders(req: HttpRequest): HeaderRecord {
    const h = this.#h;
    h.authorization = undefined;
    h.authorizationCount = 0;
    h.orgId = undefined;
    h.orgIdCount = 0;
    h.index = undefined;
    h.indexCount = 0;
    h.contentType = '';
    h.contentEncoding = '';
    h.contentLength = -1;
    h.chunked = false;
    h.conflictingLength = false;
    h.badTransferEncoding = false;
    req.forEach(this.#collect);
    return h;
  }

  /**
   * The body checks that need only headers (contract §4 step 11): content
   * type, encoding, declared length. Sets the frame flags; returns the
   * refusal, if any (sent once admission has reserved the lane).
   */
  #checkBodyHeaders(state: HttpIngest, enc: number, contentEncoding: string): IngestError | undefined {
    const cenc = contentEncoding.trim().toLowerCase();
    const gzip = cenc === 'gzip' || cenc === 'x-gzip';
    state.flags =
      (state.endpoint === ENDPOINT_LOGS ? Signal.LOGS : Signal.TRACES) |
      (enc === Encoding.JSON ? FLAG_JSON : 0) |
      (gzip ? FLAG_GZIP : 0) |
      (state.budget !== undefined ? FLAG_BUDGET_EXHAUSTED : 0);
    if (enc < 0) return badContentType;
    if (!gzip && cenc !== '' && cenc !== 'identity') return badEncoding;
    if (state.contentLength > this.#o.maxRequestBytes) return tooLarge;
    return undefined;
  }

  /** Admission finished after a wait (a JWT verification, a Redis lease) while the body streamed in. */
  #admittedLater(state: HttpIngest, lane: Lane, headerProblem: IngestError | undefined): void {
    state.lane = lane;
    if (state.budget !== undefined) state.flags |= FLAG_BUDGET_EXHAUSTED;
    if (state.aborted || state.refused) {
      // The client left, or the body was refused (too large, too slow) meanwhile.
      this.#releaseLane(state);
      return;
    }
    if (headerProblem === tooLarge) {
      this.#lingerRefuse(state, tooLarge);
      return;
    }
    if (headerProblem !== undefined) {
      this.#refuse(state, headerProblem, state.closeOnRefusal);
      return;
    }
    if (state.done) this.#send(state);
  }

  /**
   * Bytes in flight are bounded before anything else is spent on a request
   * (contract §6). A small body (an ordinary exporter batch) is counted but
   * never refused, so that large uploads that stall cannot lock everyone out;
   * a body over --max-request-bytes is refused 413 later, never reserved.
   */
  #reserveDeclared(state: HttpIngest): IngestError | undefined {
    const n = state.contentLength;
    if (n <= 0 || n > this.#o.maxRequestBytes) return undefined;
    if (n <= SMALL_BODY_BYTES) this.#o.inflight.force(n);
    else {
      const full = this.#o.inflight.reserve(n);
      if (full !== undefined) return full;
    }
    state.reserved = n;
    return undefined;
  }

  /** Streams the body in under the size cap and the receive deadline, then dispatches it. */
  #receiveBody(state: HttpIngest): void {
    if (state.lingering === undefined) {
      state.deadline = Date.now() + this.#o.requestTimeoutSecs * 1000;
      this.#uploads.add(state);
    }
    const max = this.#o.maxRequestBytes;
    state.res.onData((chunk, isLast) => {
      if (state.aborted) return;
      if (state.lingering !== undefined) {
        // Refused, its body still coming: read and drop it, within bounds, then answer.
        state.lingerLeft -= chunk.byteLength;
        if (isLast) this.#endLinger(state, false);
        else if (state.lingerLeft < 0) this.#endLinger(state, true);
        return;
      }
      if (state.done) return;
      const view = new Uint8Array(chunk);
      if (state.len + view.length > max) {
        // Answered at once; uWS reads on and drops what is left of the body,
        // and cuts the connection itself if much more keeps coming.
        this.#refuse(state, tooLarge, false);
        return;
      }
      if (state.len + view.length > state.reserved) {
        // A body without (or past) its Content-Length: reserve as it comes.
        const more = state.len + view.length - state.reserved;
        const full = state.len + view.length <= SMALL_BODY_BYTES ? (this.#o.inflight.force(more), undefined) : this.#o.inflight.reserve(more);
        if (full !== undefined) {
          this.#refuse(state, full, true);
          return;
        }
        state.reserved += more;
      }
      if (!isLast) {
        state.append(view);
        return;
      }
      this.#uploads.delete(state);
      state.done = true;
      if (state.lane === undefined) {
        // Admission is still waiting: #admittedLater sends it.
        state.append(view);
      } else if (state.buf === undefined) {
        // The whole body in one chunk: one copy, into the ring (`foreign`: uWS's
        // memory, at whatever alignment the headers left it).
        state.sent = true;
        this.#o.dispatcher.dispatch(state.lane, state.flags, view, state, true);
      } else {
        state.append(view);
        this.#send(state);
      }
    });
  }

  /**
   * The client closed the connection before its answer. A request still being
   * received (or waiting for its admission) gives back everything it held at
   * once: its queue slot, a lane and tenant slot it made, its bytes (contract
   * §6). One already handed to a writer is answered by it, and answer() lets go.
   */
  #aborted(state: HttpIngest): void {
    state.aborted = true;
    this.#uploads.delete(state);
    this.#o.metrics.aborted(state.endpoint);
    if (state.sent) return;
    state.done = true;
    state.buf = undefined;
    this.#releaseBytes(state);
    // A lane still being admitted is given back when its admission resolves (#admittedLater sees `aborted`).
    this.#releaseLane(state);
  }

  #releaseBytes(state: HttpIngest): void {
    if (state.reserved === 0) return;
    this.#o.inflight.release(state.reserved);
    state.reserved = 0;
  }

  /**
   * A lingering refusal (contract §6): a client told its body is too large while
   * it is still writing gets a reset, not the 413, and OTLP clients retry a reset
   * but drop a 413. So the refusal is decided and everything the request held
   * is given back at once, but the answer goes out once the body has been read
   * and dropped, or LINGER_MS or LINGER_BYTES have passed (then with a close):
   * a client cannot hold the connection longer than that, and nothing is
   * buffered meanwhile.
   */
  #lingerRefuse(state: HttpIngest, err: IngestError): void {
    // Counted, logged and audited now, as any refusal: the answer itself waits (#endLinger).
    logRefusal(this.#o.log, err, state.endpoint);
    this.#o.metrics.request(state.endpoint, err.httpStatus);
    this.#o.admission.refused(err, state.audit);
    state.done = true;
    state.refused = true;
    state.buf = undefined;
    this.#releaseBytes(state);
    this.#releaseLane(state);
    state.lingering = err;
    state.lingerLeft = LINGER_BYTES;
    state.deadline = Date.now() + LINGER_MS;
    this.#uploads.add(state);
  }

  #endLinger(state: HttpIngest, close: boolean): void {
    const err = state.lingering;
    if (err === undefined) return;
    state.lingering = undefined;
    this.#uploads.delete(state);
    state.closeAfterAnswer = close;
    this.#sendRefusal(state, err);
  }

  #send(state: HttpIngest): void {
    state.sent = true;
    const body = state.buf === undefined ? EMPTY_RESPONSE[0]! : state.buf.subarray(0, state.len);
    this.#o.dispatcher.dispatch(state.lane!, state.flags, body, state);
  }

  /**
   * Refuses a request that has not reached a worker: ends its upload, gives
   * back the lane admission reserved (if it got that far), and answers.
   */
  #refuse(state: HttpIngest, err: unknown, close: boolean): void {
    state.done = true;
    state.refused = true;
    state.buf = undefined;
    this.#releaseBytes(state);
    this.#uploads.delete(state);
    this.#releaseLane(state);
    state.closeAfterAnswer = close;
    this.#answers.refuse(state, err);
  }

  /** Gives back the lane reservation of a request that never reached a worker. */
  #releaseLane(state: HttpIngest): void {
    const lane = state.lane;
    if (lane === undefined) return;
    state.lane = undefined;
    this.#o.dispatcher.finishUnsent(lane);
  }

  /** Called by the dispatcher when the worker answered (the lane is already finished). */
  answer(state: HttpIngest, code: ErrorCode | undefined, records: number, message: string | undefined): void {
    state.buf = undefined;
    this.#releaseBytes(state);
    if (state.aborted && code === undefined) {
      // Written, but the client left (or uWS dropped a pipelined request) before
      // the answer: it never saw a 200, so it is not counted as one (499).
      this.#o.metrics.request(state.endpoint, 499);
      this.#o.metrics.records(state.endpoint, records);
      return;
    }
    state.closeAfterAnswer = false;
    if (code === 'SIGLAKE_BUDGET_EXHAUSTED' && state.budget !== undefined) {
      // [declared tenants] the body was valid and the budget exhausted (contract §4 step 12).
      this.#answers.refuse(state, this.#o.admission.budgetRefused(state.budget));
      return;
    }
    this.#answers.completed(state, code, records, message);
  }

  #sendOk(state: HttpIngest): void {
    if (state.aborted) return;
    // cork() runs its callback at once: hand it the state through a field,
    // so answering allocates no closure.
    this.#corking = state;
    state.res.cork(this.#writeOk);
    this.#corking = undefined;
  }

  #sendRefusal(state: HttpIngest, err: IngestError): void {
    if (state.aborted) return;
    const res = state.res;
    const body = refusalBody(err, state.encoding);
    const close = state.closeAfterAnswer;
    res.cork(() => {
      res.writeStatus(statusLine(err.httpStatus)).writeHeader('Content-Type', CONTENT_TYPES[state.encoding]);
      if (err.retryAfterSecs > 0) res.writeHeader('Retry-After', String(err.retryAfterSecs));
      res.end(body, close);
    });
  }

  #expireUploads(): void {
    const now = Date.now();
    for (const state of this.#uploads) {
      if (now < state.deadline) continue;
      if (state.lingering !== undefined) this.#endLinger(state, true);
      else this.#refuse(state, requestTimeout, true);
    }
  }
}
