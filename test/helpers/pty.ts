// Runs a command on a pseudo-terminal of a given width, the way a person in a
// terminal runs it: `script` (util-linux) gives the child a pty, `stty cols`
// sets its width, so process.stdout.isTTY and .columns are what a real
// terminal gives. Output comes back with the pty's \r\n turned into \n.

import { spawn } from 'node:child_process';

export interface PtyRun {
  code: number | null;
  /** stdout and stderr together, as the terminal showed them. */
  output: string;
}

const quote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

export function runInPty(argv: readonly string[], opts: { cols?: number; timeoutMs?: number; env?: Record<string, string> } = {}): Promise<PtyRun> {
  const cols = opts.cols ?? 80;
  const inner = `stty cols ${cols} rows 50; exec ${argv.map(quote).join(' ')}`;
  return new Promise((resolve, reject) => {
    const child = spawn('script', ['-qec', inner, '/dev/null'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...(opts.env ?? {}) },
    });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (output += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (output += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output: output.replace(/\r\n/g, '\n') });
    });
  });
}

/** What a terminal finally shows of a line rewritten in place with \r and ESC[K: the text after the last \r. */
export function screenLines(output: string): string[] {
  return output.split('\n').map((l) => {
    const parts = l.replace(/\x1b\[K/g, '').split('\r');
    return parts[parts.length - 1]!;
  });
}
