// `siglake compact` takes the settings it uses and refuses, with exit code 2,
// a flag of a setting only `siglake ingest` reads, instead of ignoring it.

import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runCli, tempDir } from '../helpers/ingester.js';

describe('siglake compact flags', () => {
  it('refuses an ingest-only flag (exit 2, naming it) and creates nothing', () => {
    const dir = tempDir();
    for (const flag of [['--http-listen', '127.0.0.1:0'], ['--workers', '2'], ['--rate-limit-per-sec', '5'], ['--wal-fsync', 'never']]) {
      const r = runCli(['compact', '--once', '--wal-dir', `${dir}/wal`, '--catalog-url', `sqlite:${dir}/catalog.db`, '--warehouse', `${dir}/wh`, ...flag]);
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toContain(`flag ${flag[0]} is a setting of siglake ingest`);
    }
    expect(fs.existsSync(`${dir}/catalog.db`), 'a refused run opens no catalog').toBe(false);
    // The same run without the ingest flag works (beside an ingester: a WAL not made yet is no error;
    // --ingester-stopped, like drain, refuses a path that is no WAL root: wal-root.test.ts).
    expect(runCli(['compact', '--once', '--wal-dir', `${dir}/wal`, '--catalog-url', `sqlite:${dir}/catalog.db`, '--warehouse', `${dir}/wh`, '--log-level', 'warn']).status).toBe(0);
  });
});
