// Following a real siglake process's JSON log lines on stdout: the one place
// that splits them, keeps them, and waits for a message (start-up's 'ready').

import type { ChildProcess } from 'node:child_process';

export interface LogLine {
  level: number;
  msg: string;
  [k: string]: unknown;
}

/** What a started process exposes to followLogLines (RunningIngester, RunningQuery). */
export interface LoggingProcess {
  readonly logs: LogLine[];
  stderr: string;
  readonly exited: Promise<number | null>;
}

/**
 * Keeps every JSON line `child` prints in `proc.logs` (and its stderr in
 * `proc.stderr`), calls `onLine` for each, and resolves once a line's `msg`
 * is `waitFor`; rejects, naming `what` and the stderr, when that takes longer
 * than `timeoutMs` or the process exits first.
 */
export function followLogLines(
  child: ChildProcess,
  proc: LoggingProcess,
  opts: { what: string; waitFor: string; timeoutMs: number; onLine?: (line: LogLine) => void },
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`${opts.what} did not log '${opts.waitFor}' in time; stderr: ${proc.stderr}`)), opts.timeoutMs);
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => {
      buf += chunk;
      for (let nl = buf.indexOf('\n'); nl !== -1; nl = buf.indexOf('\n')) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        let parsed: LogLine;
        try {
          parsed = JSON.parse(line) as LogLine;
        } catch {
          continue;
        }
        proc.logs.push(parsed);
        opts.onLine?.(parsed);
        if (parsed.msg === opts.waitFor) {
          clearTimeout(timer);
          resolve();
        }
      }
    });
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (c: string) => {
      proc.stderr += c;
    });
    void proc.exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${opts.what} exited with ${code} before '${opts.waitFor}'; stderr: ${proc.stderr}`));
    });
  });
}
