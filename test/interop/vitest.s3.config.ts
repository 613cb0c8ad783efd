// The S3 warehouse suites (test/interop/s3-*.test.ts): they need the SeaweedFS
// binary that test/interop/seaweedfs/install.sh builds, and PostgreSQL.
// Run: bash test/interop/seaweedfs/install.sh && npm run test:interop:s3
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/interop/s3-*.test.ts'],
    testTimeout: 180_000,
    hookTimeout: 180_000,
    // Each file starts its own SeaweedFS and ingesters; two cores are shared.
    maxWorkers: 1,
    pool: 'forks',
  },
});
