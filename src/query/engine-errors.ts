// DuckDB's errors as answers. The engine prefixes each message with its class
// ("Parser Error: …", "Permission Error: …"); problems of the query itself
// are the client's (400, the engine's message); the rest (I/O, memory,
// internal) are the server's (500). Out of memory names the limit that was hit.

import { QueryError } from './query-error.js';

const DATA_FILE = /^(Permission Error: Cannot access file "[^"]*\.parquet\/\*\*\/\*\.parquet"|IO Error: No files found that match the pattern|IO Error: Cannot open file|Invalid Input Error: Failed to read file)/;
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
  // A data file of the tenant's own tables gone or unreadable (the engine retries a missing file as a
  // glob, which allowed_paths then refuses): the server's problem, a 500, and no server path in it.
  if (DATA_FILE.test(message)) {
    return new QueryError('SIGLAKE_QUERY_ENGINE', "a data file of the tenant's tables could not be read (missing or unreadable): the table may have changed under the query; retry");
  }
  if (SERVER_SIDE.test(message)) return new QueryError('SIGLAKE_QUERY_ENGINE', message);
  return new QueryError('SIGLAKE_BAD_SQL', message);
}
