// DuckDB's errors as answers. The engine prefixes each message with its class
// ("Parser Error: …", "Permission Error: …"); problems of the query itself
// are the client's (400, the engine's message); the rest (I/O, memory,
// internal) are the server's (500). Out of memory names the limit that was hit.

import { QueryError } from './query-error.js';

const SERVER_SIDE = /^(IO|Internal|Fatal|FATAL|Out of Memory|Connection|Unknown|Invalid Configuration|INTERRUPT) Error/;

export function engineError(e: unknown): QueryError {
  if (e instanceof QueryError) return e;
  const message = e instanceof Error ? e.message : String(e);
  if (message.startsWith('Out of Memory Error')) {
    // In place of the engine's advice to set a spill directory, which no tenant can (tenant-engine.ts).
    const first = message.split('\n')[0]!;
    return new QueryError(
      'SIGLAKE_QUERY_ENGINE',
      `${first}: the query needs more memory than query.memoryLimitMib gives this tenant's queries, and nothing spills to disk; narrow it (time range, LIMIT, fewer columns)`,
    );
  }
  if (SERVER_SIDE.test(message)) return new QueryError('SIGLAKE_QUERY_ENGINE', message);
  return new QueryError('SIGLAKE_BAD_SQL', message);
}
