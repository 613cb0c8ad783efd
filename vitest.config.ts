import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // test/interop needs servers built by install scripts: npm run test:interop*.
    exclude: [...configDefaults.exclude, 'test/interop/**'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration tests start real processes; two cores are shared between them.
    maxWorkers: 2,
    pool: 'forks',
  },
});
