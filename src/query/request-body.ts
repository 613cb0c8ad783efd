// The body of a query request: `{"sql": "…"}` (application/json) or the SQL
// itself (text/plain), at most MAX_BODY_BYTES.

import type { IncomingMessage } from 'node:http';
import { QueryError } from './query-error.js';

export const MAX_BODY_BYTES = 1024 * 1024;

/** Reads the whole body, refusing past the cap (413) without buffering the rest. */
export async function readBody(req: IncomingMessage): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? '0');
  if (declared > MAX_BODY_BYTES) {
    req.resume();
    throw new QueryError('SIGLAKE_BODY_TOO_LARGE', `request body over ${MAX_BODY_BYTES} bytes`);
  }
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) {
      req.resume();
      throw new QueryError('SIGLAKE_BODY_TOO_LARGE', `request body over ${MAX_BODY_BYTES} bytes`);
    }
    parts.push(chunk as Buffer);
  }
  return Buffer.concat(parts);
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
