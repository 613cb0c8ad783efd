// `siglake wal dump|verify` given one tenant's lane directory of a WAL root,
// found at stop 55: in a root holding no other lane (the root marker there),
// the tenant was read from the path by the rule for a lane outside any root
// ("the directory above looks like a root holding other lanes"), so acme's
// records were printed as the default tenant's. Inside a root, the root says
// whose lane it is.

import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { dumpLines, runCli } from '../helpers/ingester.js';
import { acmeWal, walTestLeftovers } from '../helpers/written-wal.js';

const { dirs } = walTestLeftovers();

describe('a lane directory given to wal dump and verify', () => {
  it("acme's logs lane in a root holding no other lane: its records are acme's, not the default tenant's", { timeout: 120_000 }, async () => {
    const { dataDir, wal } = await acmeWal('stop', 2, 'siglake-lane-tenant-');
    dirs.push(dataDir);
    const lane = path.join(wal, 'acme', 'logs');
    for (const dir of [lane, path.relative(process.cwd(), lane)]) {
      const d = runCli(['wal', 'dump', dir]);
      expect(d.status, d.stderr).toBe(0);
      expect(dumpLines(d.stdout).map((l) => [l.tenant, l.table, l.texts])).toEqual([
        ['acme', 'logs', ['acme-0']],
        ['acme', 'logs', ['acme-1']],
      ]);
      const v = runCli(['wal', 'verify', dir]);
      expect(v.status, v.stdout).toBe(0);
      expect(v.stdout).toContain(`lane acme logs ${dir}: 1 segments, 2 records`);
    }
  });
});
