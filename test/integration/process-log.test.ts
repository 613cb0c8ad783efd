// The process logger (src/log.ts, every siglake command's and thread's) writes
// its lines synchronously, as docs/tenants.md says: a process's last words (a
// stop's "stopped", an exit's error) reach stdout in the order they were
// written, before the process ends. Before, pino's default stream wrote from
// libuv's thread pool, which the ingester also uses (fdatasync, the audit
// file): with the pool busy, a line waited there while the lines after it were
// flushed at process.exit, so it came out after them or not at all (the full
// suite saw an ingester's audit warning after its "stopped" on a loaded machine).

import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const LOG_JS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../dist/log.js');

describe('regression (log-tail-lost-at-exit): the process logger', () => {
  it('writes every line before process.exit, in order, while libuv\'s thread pool is busy', () => {
    // Four slow jobs hold the pool's four threads; then six lines and an exit.
    const script = [
      `import crypto from 'node:crypto';`,
      `const { createLogger } = await import(${JSON.stringify(LOG_JS)});`,
      `const log = createLogger('info', 'log-test');`,
      `for (let k = 0; k < 4; k++) crypto.pbkdf2('p', 's', 1_000_000, 32, 'sha256', () => {});`,
      `for (let i = 0; i < 5; i++) log.info({ i }, 'line');`,
      `log.info('last');`,
      `process.exit(0);`,
    ].join('\n');
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 60_000,
      env: { ...process.env, SIGLAKE_LOG_FORMAT: 'json', UV_THREADPOOL_SIZE: '4' },
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const got = r.stdout
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as { msg: string; i?: number });
    expect(got.map((l) => (l.msg === 'last' ? 'last' : l.i))).toEqual([0, 1, 2, 3, 4, 'last']);
  });
});
