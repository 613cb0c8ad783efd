// `npm run test:chaos`: the long versions of the reliability suites
// (SIGLAKE_CHAOS=1: 40 kill -9 rounds per fsync mode, 100,000 fuzz cases,
// 40 worker kills, 10,000 idle connections, ...), one file at a time so
// that they do not compete for the cores. The short versions run in `npm test`.

import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export default defineConfig({
  root,
  test: {
    include: ['test/reliability/**/*.test.ts'],
    env: { SIGLAKE_CHAOS: '1' },
    testTimeout: 4 * 3600_000,
    hookTimeout: 600_000,
    maxWorkers: 1,
    pool: 'forks',
  },
});
