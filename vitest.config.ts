import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // test/interop needs peers from test/interop/install.sh: `npm run test:interop`.
    exclude: ['**/node_modules/**', '**/.git/**', 'test/interop/**'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration tests start real processes; two cores are shared between them.
    maxWorkers: 2,
    pool: 'forks',
  },
});
