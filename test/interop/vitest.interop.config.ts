// `npm run test:interop`: Siglake against the reference implementations its
// users run (pyiceberg, Spark with Iceberg, the Python SDK, the OpenTelemetry
// Collector), installed by test/interop/install.sh into a cache outside the
// clone. One file at a time: the peers (a JVM, Python) are heavy on two cores.

import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export default defineConfig({
  root,
  test: {
    include: ['test/interop/**/*.test.ts'],
    testTimeout: 600_000,
    hookTimeout: 900_000,
    maxWorkers: 1,
    pool: 'forks',
  },
});
