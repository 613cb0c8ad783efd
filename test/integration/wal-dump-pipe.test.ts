// `siglake wal dump` as a person uses it in a shell: piped into `head` it stops
// quietly with exit 0 (as cat does), each record carries its time also as ISO
// 8601, and a WAL the compactor has landed and retired says so on stderr
// instead of printing nothing.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { RecordType } from '../../src/wal/format.js';
import { LOGS_TABLE, laneDir } from '../../src/wal/layout.js';
import { LaneWriter } from '../../src/wal/lane-writer.js';
import { CLI, runCli, startIngester, tempDir } from '../helpers/ingester.js';
import { exportLogs, makeLogRecords } from '../helpers/otel.js';

const made: string[] = [];
afterAll(() => {
  for (const d of made) fs.rmSync(d, { recursive: true, force: true });
});

describe('siglake wal dump in a pipe', () => {
  it('| head stops quietly: exit 0, nothing on stderr, ISO time beside timeMs', async () => {
    const base = tempDir('siglake-wal-pipe-');
    made.push(base);
    const walDir = path.join(base, 'wal');
    // Far more than a pipe buffer holds: the dump must meet the closed pipe mid-way.
    const w = new LaneWriter({ dir: laneDir(walDir, 'default', LOGS_TABLE), segmentBytes: 1 << 20, now: () => 1_767_225_600_000 });
    for (let i = 0; i < 20_000; i++) {
      const payload = Buffer.from(`record-${i}`);
      w.stage(RecordType.LOGS, 1, 1_767_225_601_000 + i, payload);
      if (i % 100 === 99) w.flush();
    }
    w.flush();
    await w.close();
    const r = spawnSync('bash', ['-c', `"${process.execPath}" "${CLI}" wal dump "${walDir}" | head -n 3; echo "siglake-exit=\${PIPESTATUS[0]}"`], { encoding: 'utf8', timeout: 60_000 });
    expect(r.stderr).toBe('');
    const lines = r.stdout.trim().split('\n');
    expect(lines).toHaveLength(4);
    expect(lines[3]).toBe('siglake-exit=0');
    const first = JSON.parse(lines[0]!) as { timeMs: number; time: string };
    expect(first.timeMs).toBe(1_767_225_601_000);
    expect(first.time).toBe('2026-01-01T00:00:01.000Z');
  });

  it('a WAL whose segments were landed and retired says so on stderr', async () => {
    const dataDir = tempDir('siglake-wal-landed-');
    made.push(dataDir);
    const walDir = path.join(dataDir, 'wal');
    const flags = ['--wal-dir', walDir, '--catalog-url', `sqlite:${path.join(dataDir, 'catalog.db')}`, '--warehouse', path.join(dataDir, 'warehouse')];
    // Two lives: two sealed segments in the one lane.
    for (const life of [1, 2]) {
      const ing = await startIngester({ dataDir, args: ['--compactor=false'] });
      const target = { url: ing.url, grpcAddress: ing.grpcAddress, headers: {} };
      expect((await exportLogs(target, 'http', await makeLogRecords([`life${life}-a`, `life${life}-b`]))).ok).toBe(true);
      expect(await ing.stop()).toBe(0);
    }
    const before = runCli(['wal', 'dump', walDir]);
    expect(before.status).toBe(0);
    expect(before.stdout.trim().split('\n')).toHaveLength(2);
    expect(before.stderr).toBe('');

    const compact = spawnSync(process.execPath, [CLI, 'compact', '--once', '--ingester-stopped', ...flags], { encoding: 'utf8', timeout: 60_000 });
    expect(compact.status).toBe(0);

    const after = runCli(['wal', 'dump', walDir]);
    expect(after.status).toBe(0);
    expect(after.stdout).toBe('');
    expect(after.stderr).toBe('siglake wal dump: no records: 2 segments landed in Iceberg and retired by the compactor\n');
  });
});
