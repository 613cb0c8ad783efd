// Writing answers: a query result as JSON or NDJSON (contract query §3), a
// refusal as {"error": {...}}, a coordinator's forwarded answer as is.

import type { ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import type { QueryError } from './query-error.js';
import type { QueryResult } from './query-runner.js';
import type { ForwardedAnswer } from './shard-forwarder.js';

export function wantsNdjson(accept: string | undefined): boolean {
  return accept !== undefined && /(^|,)\s*application\/x-ndjson\s*(;|,|$)/i.test(accept);
}

export function sendError(res: ServerResponse, err: QueryError): void {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (err.retryAfterSecs > 0) headers['retry-after'] = String(err.retryAfterSecs);
  res.writeHead(err.httpStatus, headers);
  res.end(err.body());
}

export function sendJson(res: ServerResponse, status: number, value: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
}

/** `{"columns", "rows", "rowCount", "truncated", "elapsedMs"}`. */
export function sendResult(res: ServerResponse, result: QueryResult, elapsedMs: number): void {
  sendJson(res, 200, {
    columns: result.columns,
    rows: result.rows,
    rowCount: result.rows.length,
    truncated: result.truncated,
    elapsedMs,
  });
}

/**
 * One JSON object per row (column name → value), one row per line. Whether
 * the rows were cut at query.maxRows is in X-Siglake-Truncated, their number
 * in X-Siglake-Row-Count. A column name repeated in the select list keeps its
 * last value: alias columns to keep them apart.
 */
export function sendNdjson(res: ServerResponse, result: QueryResult): void {
  res.writeHead(200, {
    'content-type': 'application/x-ndjson',
    'x-siglake-truncated': String(result.truncated),
    'x-siglake-row-count': String(result.rows.length),
  });
  const names = result.columns.map((c) => c.name);
  const BATCH = 512;
  for (let i = 0; i < result.rows.length; i += BATCH) {
    let out = '';
    for (const row of result.rows.slice(i, i + BATCH)) {
      const obj: Record<string, unknown> = {};
      for (let c = 0; c < names.length; c++) obj[names[c]!] = row[c];
      out += JSON.stringify(obj) + '\n';
    }
    res.write(out);
  }
  res.end();
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
