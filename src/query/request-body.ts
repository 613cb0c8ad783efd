// The body of a query request: `{"sql": "…"}` (application/json) or the SQL
// itself (text/plain), at most MAX_BODY_BYTES.

import { isUtf8 } from 'node:buffer';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { QueryError } from './query-error.js';

export const MAX_BODY_BYTES = 1024 * 1024;

/**
 * `Expect` (RFC 9110 §10.1.1). A caller that sends `Expect: 100-continue`
 * waits for `100 Continue` before its body; the server asks for the body
 * only once the request passed everything decided on its head
 * (authentication, tenant, concurrency, a declared Content-Length within the
 * limit), so a refusal is answered at once and the body never sent. (Node
 * answered 100 Continue to every such request before the server saw it,
 * so a body the server would refuse with 413 was invited first.) Any other
 * expectation is answered 417 (query-server.ts).
 */
const CONTINUE = /(?:^|\W)100-continue(?:$|\W)/i; // Node's own test (it emits checkContinue for these)

/** Requests told 100 Continue. */
const invited = new WeakSet<IncomingMessage>();

/** Whether the request expects 100 Continue before it sends its body. */
export function expectsContinue(req: IncomingMessage): boolean {
  const expect = req.headers.expect;
  return expect !== undefined && CONTINUE.test(expect);
}

/**
 * Whether the caller waits to be asked for its body (an `Expect` header) and
 * was not asked: its body may never come, so a refusal is answered at once,
 * with `Connection: close` (what the caller does next is not known).
 */
export function bodyNotInvited(req: IncomingMessage): boolean {
  return req.headers.expect !== undefined && !invited.has(req);
}

export interface ReadBodyOptions {
  /** Aborted when the server stops: a body still coming is refused (503). */
  readonly stopping?: AbortSignal;
  /** The answer, to send 100 Continue on when the caller waits for it. */
  readonly res?: ServerResponse;
  /** The most bytes taken (default MAX_BODY_BYTES). */
  readonly maxBytes?: number;
}

/**
 * Reads the whole body, refusing past the cap (413) without buffering the rest.
 * Plain listeners rather than the stream's async iterator: the iterator's
 * promise machinery cost about 0.1 ms per request, a measurable share of a
 * footer-only query (docs/performance.md, issue 15).
 */
export function readBody(req: IncomingMessage, opts: ReadBodyOptions = {}): Promise<Buffer> {
  const { stopping, res } = opts;
  const maxBytes = opts.maxBytes ?? MAX_BODY_BYTES;
  // A caller that hung up before the body was read (during a JWKS fetch, say): its request
  // never emits end or close again, so waiting on them left the request in flight for good
  // (and the server's stop waiting on it).
  if (callerGone(req)) return Promise.reject(prematureClose());
  if (stopping?.aborted === true) return Promise.reject(stoppingError());
  const declared = Number(req.headers['content-length'] ?? '0');
  if (declared > maxBytes) return Promise.reject(tooLarge(maxBytes));
  if (res !== undefined && expectsContinue(req) && !invited.has(req) && !res.headersSent) {
    invited.add(req);
    // The answer may keep the connection again: the body comes, and is read to its end.
    res.removeHeader('connection');
    res.writeContinue();
  }
  return new Promise<Buffer>((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    const done = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
      stopping?.removeEventListener('abort', onStop);
    };
    // The server stops: a body still coming (a slow or stalled caller) does not hold it.
    const onStop = () => {
      done();
      req.pause();
      reject(stoppingError());
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        done();
        // The rest is read (within a bound) or the connection cut by the refusal's answer (drainBounded).
        req.pause();
        reject(tooLarge(maxBytes));
        return;
      }
      parts.push(chunk);
    };
    const onEnd = () => {
      done();
      resolve(parts.length === 1 ? parts[0]! : Buffer.concat(parts, size));
    };
    const onError = (e: Error) => {
      done();
      reject(e);
    };
    // The caller hung up before the body ended.
    const onClose = () => {
      done();
      reject(prematureClose());
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
    stopping?.addEventListener('abort', onStop, { once: true });
  });
}

/** Whether the caller's connection is gone (its request can no longer be read nor answered). */
export function callerGone(req: IncomingMessage): boolean {
  // Not req.destroyed: a request is destroyed once its body has been read, its caller still there.
  return req.readableAborted || req.socket === null || req.socket.destroyed;
}

function prematureClose(): Error {
  return Object.assign(new Error('the request closed before its body ended'), { code: 'ERR_STREAM_PREMATURE_CLOSE' });
}

function stoppingError(): QueryError {
  return new QueryError('SIGLAKE_UNAVAILABLE', 'the query server is shutting down', { retryAfterSecs: 1 });
}

/** At most this much of a refused request's body is read before its answer; past it the connection is cut. */
export const LINGER_BYTES = 1024 * 1024;
/** ...and for at most this long. */
export const LINGER_MS = 2000;

/**
 * The rest of a refused request's body (a 401, a 413, …), read and dropped
 * before the refusal is answered, as ingest's lingering refusal does: true
 * once it ended, false when LINGER_BYTES or LINGER_MS passed first, the
 * caller hung up, or `stopping` aborted (then the answer goes with
 * `Connection: close` and the connection ends once it is written). Read
 * without a bound (req.resume()), a caller could stream gigabytes into a
 * refusal.
 */
export function drainBounded(req: IncomingMessage, stopping?: AbortSignal): Promise<boolean> {
  if (req.complete || req.readableEnded) {
    req.resume();
    return Promise.resolve(true);
  }
  // Never asked for: not waited for (the caller may be waiting for us).
  if (bodyNotInvited(req)) return Promise.resolve(false);
  if (callerGone(req) || stopping?.aborted === true) return Promise.resolve(false);
  return new Promise<boolean>((resolve) => {
    let left = LINGER_BYTES;
    const finish = (ended: boolean) => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('close', onCut);
      stopping?.removeEventListener('abort', onCut);
      if (!ended) req.pause();
      resolve(ended);
    };
    const timer = setTimeout(() => finish(false), LINGER_MS);
    const onData = (chunk: Buffer) => {
      left -= chunk.length;
      if (left < 0) finish(false);
    };
    const onEnd = () => finish(true);
    const onCut = () => finish(false);
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('close', onCut);
    stopping?.addEventListener('abort', onCut, { once: true });
    req.resume();
  });
}

function tooLarge(maxBytes: number): QueryError {
  return new QueryError('SIGLAKE_BODY_TOO_LARGE', `request body over ${maxBytes} bytes`);
}

/** The content types a query body may have. */
const SQL_TYPES: ReadonlySet<string> = new Set(['application/json', 'text/plain']);

/**
 * What the request's head says of its body, checked before the body is
 * asked for (a refusal then invites no `Expect: 100-continue` body): a
 * content type of SQL_TYPES (none: JSON) with a charset read as UTF-8, and
 * no content coding but `identity` (RFC 9110 §8.4: 415 for a coding the
 * server does not take; the body was read as it came, so a gzip body was
 * refused as bytes not UTF-8, never for its encoding).
 */
export function checkBodyHead(contentType: string | undefined, contentEncoding: string | undefined): void {
  const type = (contentType ?? 'application/json').split(';')[0]!.trim().toLowerCase();
  if (!SQL_TYPES.has(type)) throw unsupportedType(type);
  checkCharset(contentType ?? '');
  for (const coding of (contentEncoding ?? '').split(',')) {
    const c = coding.trim().toLowerCase();
    if (c !== '' && c !== 'identity') {
      throw new QueryError('SIGLAKE_UNSUPPORTED_MEDIA', `content encoding ${JSON.stringify(c.slice(0, 40))} is not supported: send the body uncompressed (no Content-Encoding)`);
    }
  }
}

function unsupportedType(type: string): QueryError {
  return new QueryError('SIGLAKE_UNSUPPORTED_MEDIA', `content type ${type} is not supported: use application/json or text/plain`);
}

/** A UTF-16 code unit of a surrogate pair with no partner (a JSON `\ud800` escape): no character at all. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * The SQL text of a body, by its content type. Text the engine would not read
 * as sent is refused, never altered: bytes that are not UTF-8 and lone
 * surrogates (each became U+FFFD inside the statement, a string literal
 * included), and a NUL character (the engine's parser stops there: the rest,
 * a WHERE clause say, was silently left out of the statement that ran).
 */
export function sqlOf(body: Buffer, contentType: string | undefined): string {
  const type = (contentType ?? 'application/json').split(';')[0]!.trim().toLowerCase();
  const asciiOnly = (type === 'application/json' || type === 'text/plain') && checkCharset(contentType ?? '');
  if (typeof asciiOnly === 'string' && !isAscii(body)) {
    throw new QueryError(
      'SIGLAKE_UNSUPPORTED_MEDIA',
      `charset ${JSON.stringify(asciiOnly)} is not supported for a body with bytes past ASCII (it is read as UTF-8, where such a byte means another character): send the body as UTF-8 (charset=utf-8, or no charset)`,
    );
  }
  if ((type === 'application/json' || type === 'text/plain') && !isUtf8(body)) {
    throw new QueryError('SIGLAKE_BAD_BODY', 'the body is not valid UTF-8: send the SQL as UTF-8 text');
  }
  let sql: unknown;
  if (type === 'application/json') {
    let doc: unknown;
    try {
      doc = JSON.parse(withoutBom(body.toString('utf8')));
    } catch {
      throw new QueryError('SIGLAKE_BAD_BODY', 'the body is not JSON: send {"sql": "<statement>"} or text/plain SQL');
    }
    sql = doc !== null && typeof doc === 'object' && !Array.isArray(doc) ? (doc as Record<string, unknown>)['sql'] : undefined;
    if (typeof sql !== 'string') throw new QueryError('SIGLAKE_BAD_BODY', 'the body must be {"sql": "<statement>"}');
  } else if (type === 'text/plain') {
    sql = withoutBom(body.toString('utf8'));
  } else {
    throw unsupportedType(type);
  }
  const text = sql as string;
  if (text.includes('\0')) {
    throw new QueryError('SIGLAKE_BAD_SQL', 'the SQL holds a NUL character (U+0000): the engine would read the statement only up to it; remove it');
  }
  if (LONE_SURROGATE.test(text)) {
    throw new QueryError('SIGLAKE_BAD_SQL', 'the SQL holds a lone surrogate (a \\ud800-\\udfff escape without its pair), which is no character: send the character itself');
  }
  if (text.trim() === '') throw new QueryError('SIGLAKE_BAD_SQL', 'no SQL statement in the request');
  return text;
}

/** Charsets read (as UTF-8: US-ASCII is a subset of it); names compared without case (RFC 9110 §8.3.2). */
const READ_CHARSETS: ReadonlySet<string> = new Set(['utf-8', 'utf8', 'us-ascii']);

/**
 * Charsets whose ASCII characters are UTF-8's bytes: a body in one of them
 * holding only ASCII bytes is the same text read as UTF-8, so it is read;
 * one with a byte past ASCII is refused 415 (never guessed). Apache
 * HttpClient's StringEntity labels a body `text/plain; charset=ISO-8859-1`
 * by default: such SQL ran before stop 55, which refused every charset but
 * UTF-8 and US-ASCII on the head.
 */
const ASCII_READ_CHARSETS: ReadonlySet<string> = new Set(['iso-8859-1', 'iso8859-1', 'iso_8859-1', 'latin1', 'latin-1', 'l1', 'windows-1252', 'cp1252']);

/** Whether every byte is ASCII (below 0x80). */
function isAscii(body: Buffer): boolean {
  for (let i = 0; i < body.length; i++) if (body[i]! >= 0x80) return false;
  return true;
}

/**
 * A `charset` parameter of the content type (RFC 9110 §8.3.1: `;
 * name=token` or `name="quoted string"`, names without case) must name a
 * charset the body is read in, else 415 naming it: the body is read as
 * UTF-8 only. (It was never looked at: a UTF-16 body was read as UTF-8 and
 * refused for what that made of it, bytes not UTF-8 or NUL characters.)
 * A charset of ASCII_READ_CHARSETS passes here; the name it returns (else
 * false) tells sqlOf to refuse its body if a byte is past ASCII. Other
 * parameters are ignored.
 */
function checkCharset(contentType: string): string | false {
  const at = contentType.indexOf(';');
  if (at < 0) return false;
  let asciiOnly: string | false = false;
  PARAMETER.lastIndex = at;
  for (let m = PARAMETER.exec(contentType); m !== null; m = PARAMETER.exec(contentType)) {
    if (m[1]!.toLowerCase() !== 'charset') continue;
    const charset = (m[2] !== undefined ? m[2].replace(/\\(.)/g, '$1') : m[3]!).toLowerCase();
    if (ASCII_READ_CHARSETS.has(charset)) asciiOnly = charset;
    else if (!READ_CHARSETS.has(charset)) {
      const shown = JSON.stringify(charset.slice(0, 40));
      throw new QueryError('SIGLAKE_UNSUPPORTED_MEDIA', `charset ${shown} is not supported: send the body as UTF-8 (charset=utf-8, or no charset)`);
    }
  }
  return asciiOnly;
}

/** One `; name=value` parameter: its name, then its value quoted (group 2, escapes still in) or not (group 3, up to the next `;`). */
const PARAMETER = /;\s*([^=;\s]*)\s*=?\s*(?:"((?:[^"\\]|\\.)*)"?|([^;]*?))\s*(?=;|$)/gy;

/** The text without a leading UTF-8 byte order mark, which some clients write (RFC 8259 §8.1 lets a parser ignore it). */
function withoutBom(text: string): string {
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}
