// Writing answers: a query result as JSON or NDJSON (contract query §3), a
// refusal as {"error": {...}}, a coordinator's forwarded answer as is.

import type { ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import type { QueryError } from './query-error.js';
import type { QueryResult } from './query-runner.js';
import type { ForwardedAnswer } from './shard-forwarder.js';

/**
 * Whether the caller asked for NDJSON: `application/x-ndjson` in Accept with a
 * q above 0 and not below `application/json`'s (a tie is NDJSON, the one
 * named for it). `application/x-ndjson;q=0` says "not this".
 */
export function wantsNdjson(accept: string | undefined): boolean {
  if (accept === undefined) return false;
  let ndjson = -1;
  let json = -1;
  for (const range of accept.split(',')) {
    const [type, ...params] = range.split(';').map((x) => x.trim().toLowerCase());
    let q = 1;
    for (const p of params) {
      const m = /^q\s*=\s*([0-9.]+)$/.exec(p);
      if (m !== null) q = Number(m[1]);
    }
    if (!Number.isFinite(q)) q = 0;
    if (type === 'application/x-ndjson') ndjson = Math.max(ndjson, q);
    else if (type === 'application/json') json = Math.max(json, q);
  }
  return ndjson > 0 && ndjson >= json;
}

export function sendError(res: ServerResponse, err: QueryError): void {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (err.retryAfterSecs > 0) headers['retry-after'] = String(err.retryAfterSecs);
  res.writeHead(err.httpStatus, headers);
  res.end(err.body());
}

export function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const text = JSON.stringify(value); // before the status line: a failure here is still an error answer
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(text);
}

const ROW_BATCH = 512;

/**
 * Writes `parts` (made one at a time, as the caller takes them) and ends the
 * answer, with backpressure: the next part is made only once the last one
 * left for the socket. Resolves once the whole answer is handed to the
 * socket; a caller that takes no byte of it for `idleMs` has its connection
 * cut (and so does one that hangs up): rejects then. (Written all at once,
 * an answer a caller never read stayed in the server's heap for as long as
 * the connection stayed open, its concurrency slot already given back: eight
 * such callers of 60 MB answers took the process from 0.1 to 1.9 GiB.)
 */
async function writeAnswer(res: ServerResponse, parts: Iterable<string>, idleMs: number): Promise<void> {
  for (const part of parts) {
    if (!res.write(part)) await progress(res, 'drain', idleMs);
  }
  res.end();
  if (!res.writableFinished) await progress(res, 'finish', idleMs);
}

/** Resolves on `event` of `res`; rejects (and cuts the connection) after `idleMs` without it, or when the connection closes first. */
function progress(res: ServerResponse, event: 'drain' | 'finish', idleMs: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const done = () => {
      clearTimeout(timer);
      res.off(event, onEvent);
      res.off('close', onClose);
    };
    const onEvent = () => {
      done();
      resolve();
    };
    const onClose = () => {
      done();
      reject(Object.assign(new Error('the caller hung up before its whole answer was written'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }));
    };
    const timer = setTimeout(() => {
      done();
      res.destroy();
      reject(Object.assign(new Error(`the caller took no part of its answer for ${idleMs / 1000} s: connection cut`), { code: 'ERR_STREAM_PREMATURE_CLOSE' }));
    }, idleMs);
    res.once(event, onEvent);
    res.once('close', onClose);
  });
}

/**
 * `{"columns", "rows", "rowCount", "truncated", "elapsedMs"}`, written a batch
 * of rows at a time: the answer is never one string (V8 refuses strings past
 * about 512 MiB, and an answer that size once left its caller waiting on a
 * connection that never got a byte). `idleMs`: see writeAnswer.
 */
export function sendResult(res: ServerResponse, result: QueryResult, elapsedMs: number, idleMs: number): Promise<void> {
  const rows = result.rows;
  const head = `{"columns":${JSON.stringify(result.columns)},"rows":[`;
  const tail = `],"rowCount":${rows.length},"truncated":${result.truncated},"elapsedMs":${elapsedMs}}`;
  const first = rowsText(rows, 0);
  res.writeHead(200, { 'content-type': 'application/json' });
  function* parts(): Generator<string> {
    yield head + first;
    for (let i = ROW_BATCH; i < rows.length; i += ROW_BATCH) yield ',' + rowsText(rows, i);
    yield tail;
  }
  return writeAnswer(res, parts(), idleMs);
}

/** Rows [from, from + ROW_BATCH) as JSON array elements, comma-separated. */
function rowsText(rows: QueryResult['rows'], from: number): string {
  let out = '';
  const end = Math.min(rows.length, from + ROW_BATCH);
  for (let i = from; i < end; i++) out += (i > from ? ',' : '') + JSON.stringify(rows[i]);
  return out;
}

/**
 * One JSON object per row (column name → value), one row per line. Whether
 * the rows were cut at query.maxRows is in X-Siglake-Truncated, their number
 * in X-Siglake-Row-Count. A column name repeated in the select list keeps its
 * last value: alias columns to keep them apart.
 */
export function sendNdjson(res: ServerResponse, result: QueryResult, idleMs: number): Promise<void> {
  res.writeHead(200, {
    'content-type': 'application/x-ndjson',
    'x-siglake-truncated': String(result.truncated),
    'x-siglake-row-count': String(result.rows.length),
  });
  const names = result.columns.map((c) => c.name);
  function* parts(): Generator<string> {
    for (let i = 0; i < result.rows.length; i += ROW_BATCH) {
      let out = '';
      for (const row of result.rows.slice(i, i + ROW_BATCH)) {
        // No prototype: a column named __proto__ is a field like any other (on {} it set the prototype and vanished).
        const obj = Object.create(null) as Record<string, unknown>;
        for (let c = 0; c < names.length; c++) obj[names[c]!] = row[c];
        out += JSON.stringify(obj) + '\n';
      }
      yield out;
    }
  }
  return writeAnswer(res, parts(), idleMs);
}

/**
 * Streams a shard's answer to the caller (backpressure both ways). A shard
 * that fails mid-body (or a caller that hangs up) ends the caller's
 * connection: the status line is already sent, so a cut body is the only
 * way to say the answer is incomplete.
 */
export function sendForwarded(res: ServerResponse, answer: ForwardedAnswer): Promise<void> {
  res.writeHead(answer.status, answer.headers);
  return pipeline(answer.body, res).catch(() => {
    answer.body.destroy();
    res.destroy();
  });
}
