// The process logger: JSON lines on stdout (pino), written synchronously (a
// reader of stdout that stalls holds the thread at its next line; nothing is
// lost or reordered at exit). Nothing here ever logs telemetry bodies or token
// text; callers pass facts, not requests.
//
// When stdout is a terminal (someone running `siglake` by hand), each line is
// printed readably instead: time, level, name, message, then the fields as
// key=value. Anything else (a pipe, a file, a log collector) gets JSON lines.
// Set SIGLAKE_LOG_FORMAT=json (or pretty) to choose regardless.

import pino, { type DestinationStream, type Logger } from 'pino';
import tty from 'node:tty';

export type { Logger };

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO ', 40: 'WARN ', 50: 'ERROR', 60: 'FATAL' };
const COLOURS: Record<number, string> = { 10: '90', 20: '36', 30: '32', 40: '33', 50: '31', 60: '35' };
const OMIT = new Set(['level', 'time', 'msg', 'name', 'pid', 'hostname']);

function fieldText(v: unknown): string {
  if (typeof v === 'string') return /^[^\s"=]+$/.test(v) ? v : JSON.stringify(v);
  return JSON.stringify(v);
}

/** One JSON log line as a readable line. Exported for the tests. */
export function prettyLine(json: string, colour: boolean): string {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  const level = Number(o['level']);
  const t = new Date(Number(o['time']));
  const time = Number.isFinite(t.getTime()) ? t.toISOString().slice(11, 23) : '';
  const tag = LEVELS[level] ?? String(level);
  const lvl = colour ? `\x1b[${COLOURS[level] ?? '0'}m${tag}\x1b[0m` : tag;
  const fields = Object.entries(o)
    .filter(([k]) => !OMIT.has(k))
    .map(([k, v]) => `${k}=${fieldText(v)}`)
    .join(' ');
  return `${time} ${lvl} ${String(o['name'] ?? '')}: ${String(o['msg'] ?? '')}${fields ? `  ${fields}` : ''}\n`;
}

function wantsPretty(): boolean {
  const f = process.env['SIGLAKE_LOG_FORMAT'];
  if (f === 'json') return false;
  if (f === 'pretty') return true;
  // fd 1 itself: process.stdout of a worker thread is a pipe to the main thread.
  return tty.isatty(1);
}

function prettyDestination(): DestinationStream {
  const colour = tty.isatty(1) && process.env['NO_COLOR'] === undefined;
  return { write: (line: string) => void process.stdout.write(prettyLine(line, colour)) };
}

/** `stderr`: log lines go to stderr (a command whose stdout is its result, one JSON line per item). */
export function createLogger(level: string, name = 'siglake', o: { stderr?: boolean } = {}): Logger {
  const options = {
    name,
    level,
    base: { pid: process.pid },
    // Belt and braces: if a caller ever passes these fields, they are hidden.
    redact: { paths: ['authorization', 'token', '*.authorization', '*.token', 'headers.authorization'], censor: '[redacted]' },
  };
  if (wantsPretty()) return pino(options, prettyDestination());
  // Synchronous, on stdout as on stderr: pino's default stream writes from libuv's pool, and a
  // line still in flight when the process exits (a full pipe: retried on a timer that never
  // fires) was lost, and the lines after it written first: a stop's last words came out of
  // order or not at all (docs/reliability.md, log-tail-lost-at-exit).
  return pino(options, pino.destination({ fd: o.stderr === true ? 2 : 1, sync: true }));
}

/**
 * At most one line per key per interval: a failure that repeats on every
 * request (a full disk) is logged once a second with how many were left out,
 * not thousands of times.
 */
export class LogThrottle {
  readonly #last = new Map<string, { at: number; suppressed: number }>();
  constructor(readonly intervalMs = 1000) {}

  /** -1 to stay quiet; else how many lines of `key` were left out since the last one. */
  take(key: string, now = Date.now()): number {
    const e = this.#last.get(key);
    if (e === undefined) {
      if (this.#last.size >= 1024) this.#last.clear();
      this.#last.set(key, { at: now, suppressed: 0 });
      return 0;
    }
    if (now - e.at < this.intervalMs) {
      e.suppressed++;
      return -1;
    }
    const n = e.suppressed;
    e.at = now;
    e.suppressed = 0;
    return n;
  }
}
