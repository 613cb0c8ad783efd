// OTLP/HTTP on uWebSockets.js: POST /v1/logs and /v1/traces, plus the admin
// endpoints. Headers are read synchronously in the handler (uWS requests die
// with it), admission runs, and the body streams in under the size cap. A body
// that arrives in one chunk is copied once, straight into the worker's ring;
// a body in several chunks is gathered in one buffer sized from
// Content-Length first, so a slow upload never holds ring space that other
// requests of the shard are waiting behind.

import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { IngestError } from '../errors.js';
import { FLAG_GZIP, FLAG_JSON, Signal } from '../lanes/frames.js';
import type { Lane } from '../lanes/lane-table.js';
import type { AcceptorOptions } from './acceptor-options.js';
import type { IngestHeaders } from './admission.js';
import type { PendingRequest } from './dispatcher.js';
import {
  CONTENT_TYPES,
  DRAINING,
  EMPTY_RESPONSE,
  Encoding,
  errorForStatus,
  INTERNAL,
  refusalBody,
  statusLine,
  type EncodingCode,
} from './responses.js';
import type { Uws } from './uws-loader.js';

export interface HttpAcceptorOptions extends AcceptorOptions {
  uws: Uws;
  isReady(): boolean;
  /** Why a started process is not ready (a compactor failing past its bound), else undefined. */
  notReadyReason?(): string | undefined;
  /** Extra routes (test hooks) registered before the catch-all. */
  extraRoutes?: (app: TemplatedApp) => void;
}

const ENDPOINT_LOGS = 0;
/** A refused request whose declared body is at most this is kept alive (uWS skips the body). */
const EARLY_REFUSAL_KEEPALIVE_BYTES = 64 * 1024;
const ENDPOINT_TRACES = 1;

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
const conflictingLength = new IngestError('SIGLAKE_BAD_HEADER', 'bad header: Content-Length sent twice with different values');

/** Parses the content type into the response encoding; -1 when unusable. */
function encodingOf(contentType: string): number {
  const semi = contentType.indexOf(';');
  const base = (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
  if (base === 'application/x-protobuf' || base === 'application/protobuf') return Encoding.PROTOBUF;
  if (base === 'application/json') return Encoding.JSON;
  return -1;
}

/** One ingest request in flight on a connection. */
class HttpIngest implements PendingRequest {
  aborted = false;
  done = false;
  lane: Lane | undefined = undefined;
  admitting = false;
  /** Chunks that arrive while a JWT is verified, or a multi-chunk body. */
  buf: Uint8Array | undefined = undefined;
  len = 0;
  deadline = 0;
  flags = 0;
  /** Answered with a refusal already (a late admission must not send the body). */
  refused = false;

  constructor(
    readonly acceptor: HttpAcceptor,
    readonly res: HttpResponse,
    readonly endpoint: number,
    readonly encoding: EncodingCode,
    readonly contentLength: number,
  ) {}

  complete(status: number, records: number, message: string | undefined): void {
    this.acceptor.answer(this, status, records, message);
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
  readonly #h: IngestHeaders & {
    contentType: string;
    contentEncoding: string;
    contentLength: number;
    chunked: boolean;
    conflictingLength: boolean;
  } = {
    authorization: undefined,
    orgId: undefined,
    orgIdCount: 0,
    index: undefined,
    indexCount: 0,
    remote: undefined,
    contentType: '',
    contentEncoding: '',
    contentLength: -1,
    chunked: false,
    conflictingLength: false,
  };
  readonly #collect = (k: string, v: string): void => {
    const h = this.#h;
    switch (k) {
      case 'authorization':
        h.authorization = v;
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
        break;
    }
  };

  #corking: HttpIngest | undefined = undefined;
  readonly #writeOk = (): void => {
    const state = this.#corking!;
    const enc = state.encoding;
    state.res.writeHeader('Content-Type', CONTENT_TYPES[enc]).end(EMPTY_RESPONSE[enc]);
  };

  constructor(opts: HttpAcceptorOptions) {
    this.#o = opts;
    const app = opts.uws.App();
    this.#app = app;
    app.post('/v1/logs', (res, req) => this.#ingest(res, req, ENDPOINT_LOGS));
    app.post('/v1/traces', (res, req) => this.#ingest(res, req, ENDPOINT_TRACES));
    app.get('/metrics', (res) => this.#metrics(res));
    app.get('/healthz', (res) => {
      res.cork(() => res.writeHeader('Content-Type', 'text/plain').end('ok\n'));
    });
    app.get('/readyz', (res) => {
      const started = opts.isReady();
      const reason = started ? opts.notReadyReason?.() : undefined;
      const ready = started && !opts.isDraining() && reason === undefined;
      const body = ready ? 'ready\n' : opts.isDraining() ? 'draining\n' : reason !== undefined ? `not ready: ${reason}\n` : 'starting\n';
      res.cork(() =>
        res.writeStatus(ready ? '200 OK' : '503 Service Unavailable').writeHeader('Content-Type', 'text/plain').end(body),
      );
    });
    opts.extraRoutes?.(app);
    app.any('/v1/logs', (res) => this.#plain(res, '405 Method Not Allowed', 'use POST\n'));
    app.any('/v1/traces', (res) => this.#plain(res, '405 Method Not Allowed', 'use POST\n'));
    app.any('/*', (res) => this.#plain(res, '404 Not Found', 'not found\n'));
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

  #plain(res: HttpResponse, status: string, body: string): void {
    res.cork(() => res.writeStatus(status).writeHeader('Content-Type', 'text/plain').end(body));
  }

  #metrics(res: HttpResponse): void {
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    this.#o.metrics.registry.metrics().then(
      (text) => {
        if (aborted) return;
        res.cork(() => res.writeHeader('Content-Type', this.#o.metrics.registry.contentType).end(text));
      },
      (err: unknown) => {
        this.#o.log.error({ err: (err as Error).message }, 'metrics collection failed');
        if (!aborted) res.cork(() => res.writeStatus('500 Internal Server Error').end());
      },
    );
  }

  #ingest(res: HttpResponse, req: HttpRequest, endpoint: number): void {
    const h = this.#h;
    h.authorization = undefined;
    h.orgId = undefined;
    h.orgIdCount = 0;
    h.index = undefined;
    h.indexCount = 0;
    h.contentType = '';
    h.contentEncoding = '';
    h.contentLength = -1;
    h.chunked = false;
    h.conflictingLength = false;
    req.forEach(this.#collect);
    // [declared tenants] the peer for the audit stream, read only while it is on.
    h.remote = this.#o.admission.auditing ? Buffer.from(res.getRemoteAddressAsText()).toString() : undefined;
    // Refused before its body was read: close the connection rather than read
    // and throw away a large or open-ended body (small ones are skipped by uWS).
    const closeOnRefusal = h.chunked || h.contentLength > EARLY_REFUSAL_KEEPALIVE_BYTES || !Number.isFinite(h.contentLength);

    const enc = encodingOf(h.contentType);
    const state = new HttpIngest(
      this,
      res,
      endpoint,
      enc < 0 ? Encoding.TEXT : (enc as EncodingCode),
      Number.isFinite(h.contentLength) ? h.contentLength : -1,
    );
    res.onAborted(() => {
      state.aborted = true;
      this.#uploads.delete(state);
    });
    if (this.#o.isDraining()) {
      this.#refuse(state, DRAINING, true);
      return;
    }
    if (h.conflictingLength) {
      this.#refuse(state, conflictingLength, true);
      return;
    }

    let admitted: Lane | Promise<Lane>;
    try {
      admitted = this.#o.admission.admit(endpoint === ENDPOINT_LOGS ? 'logs' : 'traces', h);
    } catch (e) {
      this.#refuse(state, e, closeOnRefusal);
      return;
    }
    // Body checks that need only headers (contract §4 step 9).
    const cenc = h.contentEncoding.trim().toLowerCase();
    const gzip = cenc === 'gzip' || cenc === 'x-gzip';
    const headerProblem =
      enc < 0
        ? badContentType
        : !gzip && cenc !== '' && cenc !== 'identity'
          ? badEncoding
          : state.contentLength > this.#o.maxRequestBytes
            ? tooLarge
            : undefined;
    state.flags =
      (endpoint === ENDPOINT_LOGS ? Signal.LOGS : Signal.TRACES) |
      (enc === Encoding.JSON ? FLAG_JSON : 0) |
      (gzip ? FLAG_GZIP : 0);

    if (admitted instanceof Promise) {
      state.admitting = true;
      admitted.then(
        (lane) => {
          state.admitting = false;
          state.lane = lane;
          if (state.aborted || state.refused) {
            // The client left, or the body was refused (too large, too slow) meanwhile.
            this.#finishUnsent(state, 499);
            return;
          }
          if (headerProblem !== undefined) {
            this.#refuseAdmitted(state, headerProblem, closeOnRefusal);
            return;
          }
          if (state.done) this.#send(state);
        },
        (err: unknown) => {
          state.admitting = false;
          if (!state.aborted && !state.refused) this.#refuse(state, err, true);
        },
      );
    } else {
      state.lane = admitted;
      if (headerProblem !== undefined) {
        this.#refuseAdmitted(state, headerProblem, closeOnRefusal);
        return;
      }
    }

    state.deadline = Date.now() + this.#o.requestTimeoutSecs * 1000;
    this.#uploads.add(state);
    const max = this.#o.maxRequestBytes;
    res.onData((chunk, isLast) => {
      if (state.aborted) return;
      if (state.done) return;
      const view = new Uint8Array(chunk);
      if (state.len + view.length > max) {
        this.#uploads.delete(state);
        state.done = true;
        // Answered at once; uWS reads on and drops what is left of the body,
        // and cuts the connection itself if much more keeps coming.
        if (state.lane !== undefined) this.#refuseAdmitted(state, tooLarge, false);
        else this.#refuse(state, tooLarge, false);
        return;
      }
      if (isLast) {
        this.#uploads.delete(state);
        state.done = true;
        if (state.buf === undefined && state.lane !== undefined) {
          // The whole body in one chunk: one copy, into the ring.
          this.#o.dispatcher.dispatch(state.lane, state.flags, view, state);
          return;
        }
        state.append(view);
        if (state.lane !== undefined) this.#send(state);
        return;
      }
      state.append(view);
    });
  }

  #send(state: HttpIngest): void {
    const body = state.buf === undefined ? EMPTY_RESPONSE[0]! : state.buf.subarray(0, state.len);
    this.#o.dispatcher.dispatch(state.lane!, state.flags, body, state);
  }

  /** Refusal before a lane was reserved. */
  #refuse(state: HttpIngest, err: unknown, close: boolean): void {
    const e = err instanceof IngestError ? err : INTERNAL;
    if (!(err instanceof IngestError)) {
      this.#o.log.error({ err: (err as Error)?.message }, 'unexpected error during admission');
    }
    state.done = true;
    state.refused = true;
    this.#uploads.delete(state);
    this.#o.metrics.request(state.endpoint, e.httpStatus);
    this.#write(state, e.httpStatus, e, close);
  }

  /** Refusal after admission reserved a lane slot: the lane is finished too. */
  #refuseAdmitted(state: HttpIngest, err: IngestError, close = false): void {
    state.done = true;
    state.refused = true;
    this.#uploads.delete(state);
    this.#finishUnsent(state, err.httpStatus);
    this.#o.metrics.request(state.endpoint, err.httpStatus);
    this.#write(state, err.httpStatus, err, close);
  }

  /** Releases the lane reservation of a request that never reached a worker. */
  #finishUnsent(state: HttpIngest, status: number): void {
    const lane = state.lane;
    if (lane === undefined) return;
    state.lane = undefined;
    this.#o.dispatcher.finishUnsent(lane, status);
  }

  /** Called by the dispatcher when the worker answered (the lane is already finished). */
  answer(state: HttpIngest, status: number, records: number, message: string | undefined): void {
    this.#o.metrics.request(state.endpoint, status);
    if (status === 200) this.#o.metrics.records(state.endpoint, records);
    if (status === 200) {
      if (state.aborted) return;
      // cork() runs its callback at once: hand it the state through a field,
      // so answering allocates no closure.
      this.#corking = state;
      state.res.cork(this.#writeOk);
      this.#corking = undefined;
      return;
    }
    this.#write(state, status, errorForStatus(status, message), false);
  }

  #write(state: HttpIngest, status: number, err: IngestError, close: boolean): void {
    if (state.aborted) return;
    const res = state.res;
    const body = refusalBody(err, state.encoding);
    res.cork(() => {
      res.writeStatus(statusLine(status)).writeHeader('Content-Type', CONTENT_TYPES[state.encoding]);
      if (err.retryAfterSecs > 0) res.writeHeader('Retry-After', String(err.retryAfterSecs));
      res.end(body, close);
    });
  }

  #expireUploads(): void {
    const now = Date.now();
    for (const state of this.#uploads) {
      if (now < state.deadline) continue;
      if (state.lane !== undefined) this.#refuseAdmitted(state, requestTimeout, true);
      else this.#refuse(state, requestTimeout, true);
    }
  }
}
