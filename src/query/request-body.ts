// The body of a query request: `{"sql": "…"}` (application/json) or the SQL
// itself (text/plain), at most MAX_BODY_BYTES.

import type { IncomingMessage } from 'node:http';
import { QueryError } from './query-error.js';

export const MAX_BODY_BYTES = 1024 * 1024;

/**
 * Reads the whole body, refusing past the cap (413) without buffering the rest.
 * Plain listeners rather than the stream's async iterator: the iterator's
 * promise machinery cost about 0.1 ms per request, a measurable share of a
 * footer-only query (docs/performance.md, issue 15).
 */
export function readBody(req: IncomingMessage): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? '0');
  if (declared > MAX_BODY_BYTES) {
    req.resume();
    return Promise.reject(tooLarge());
  }
  return new Promise<Buffer>((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    const done = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        done();
        req.resume();
        reject(tooLarge());
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
      reject(Object.assign(new Error('the request closed before its body ended'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

function tooLarge(): QueryError {
  return new QueryError('SIGLAKE_BODY_TOO_LARGE', `request body over ${MAX_BODY_BYTES} bytes`);
}

/** The SQL text of a body, by its content type. */
export function sqlOf(body: Buffer, contentType: string | undefined): string {
  const type = (contentType ?? 'application/json').split(';')[0]!.trim().toLowerCase();
  let sql: unknown;
  if (type === 'application/json') {
    let doc: unknown;
    try {
      doc = JSON.parse(body.toString('utf8'));
    } catch {
      throw new QueryError('SIGLAKE_BAD_BODY', 'the body is not JSON: send {"sql": "<statement>"} or text/plain SQL');
    }
    sql = doc !== null && typeof doc === 'object' && !Array.isArray(doc) ? (doc as Record<string, unknown>)['sql'] : undefined;
    if (typeof sql !== 'string') throw new QueryError('SIGLAKE_BAD_BODY', 'the body must be {"sql": "<statement>"}');
  } else if (type === 'text/plain') {
    sql = body.toString('utf8');
  } else {
    throw new QueryError('SIGLAKE_UNSUPPORTED_MEDIA', `content type ${type} is not supported: use application/json or text/plain`);
  }
  if ((sql as string).trim() === '') throw new QueryError('SIGLAKE_BAD_SQL', 'no SQL statement in the request');
  return sql as string;
}
