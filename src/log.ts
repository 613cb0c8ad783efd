// The process logger: JSON lines on stdout (pino). Nothing here ever logs
// telemetry bodies or token text; callers pass facts, not requests.

import pino, { type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string, name = 'siglake'): Logger {
  return pino({
    name,
    level,
    base: { pid: process.pid },
    // Belt and braces: if a caller ever passes these fields, they are hidden.
    redact: { paths: ['authorization', 'token', '*.authorization', '*.token', 'headers.authorization'], censor: '[redacted]' },
  });
}
