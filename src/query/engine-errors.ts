// DuckDB's errors as answers. The engine prefixes each message with its class
// ("Parser Error: …", "Permission Error: …"); problems of the query itself
// are the client's (400, the engine's message); the rest (I/O, memory,
// internal) are the server's (500).

import { QueryError } from './query-error.js';

const SERVER_SIDE = /^(IO|Internal|Fatal|FATAL|Out of Memory|Connection|Unknown|Invalid Configuration|INTERRUPT) Error/;

export function engineError(e: unknown): QueryError {
  if (e instanceof QueryError) return e;
  const message = e instanceof Error ? e.message : String(e);
  if (SERVER_SIDE.test(message)) return new QueryError('SIGLAKE_QUERY_ENGINE', message);
  return new QueryError('SIGLAKE_BAD_SQL', message);
}
