// The compactor's record of what it landed survives another engine's
// maintenance. A compactor is killed after its commit and before it retires
// the segment (the crash window exactly-once must survive); then Spark runs
// the maintenance docs/iceberg.md lists (rewrite_data_files, then
// expire_snapshots), so the current snapshot is Spark's, with no Siglake
// summary entry, and the snapshots that held them are gone. The next
// compactor must retire the segment without landing its records again
// (before stop 48 it read its progress only from snapshot summaries, and
// every record was in the table twice).

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import { FileStorage } from '../../src/iceberg/file-storage.js';
import { TableMetadata } from '../../src/iceberg/table-metadata.js';
import { SEGMENT_HEADER_SIZE } from '../../src/wal/format.js';
import { listLaneFiles } from '../../src/wal/segment-files.js';
import { laneDir, LOGS_TABLE } from '../../src/wal/layout.js';
import { CLI, startIngester, tempDir } from '../helpers/ingester.js';
import { DAY1_NS, PYTHON, pythonPeer, runProcess, siglake, sparkJars } from './helpers.js';
import type { PyCatalog } from './readers.js';

interface SparkView {
  tables: Record<string, { count: number; markers: string[]; snapshots: [string, string | null, string][] }>;
  maintained: [string, string, unknown[]][];
}

describe('WAL progress after another engine rewrites and expires snapshots (Spark 4.1 + Iceberg, pyiceberg 0.12)', () => {
  const root = tempDir('siglake-interop-progress-');
  const warehouse = path.join(root, 'warehouse');
  const db = path.join(root, 'catalog.db');
  const dataDir = path.join(root, 'ingester');
  const walDir = path.join(dataDir, 'wal');
  const flags = ['--wal-dir', walDir, '--catalog-url', `sqlite:${db}`, '--warehouse', warehouse];
  const where = ['--warehouse', `file://${warehouse}`, '--name', 'siglake'];

  afterAll(() => {
    if (!process.env['KEEP']) fs.rmSync(root, { recursive: true, force: true });
  });

  it('a segment landed before a crash is retired, not landed again, once Spark has expired the snapshots that recorded it', async () => {
    fs.mkdirSync(dataDir, { recursive: true });
    const markers = ['progress-0', 'progress-1', 'progress-2'];
    const ing = await startIngester({ dataDir, args: ['--compactor=false', '--catalog-url', `sqlite:${db}`, '--warehouse', warehouse] });
    try {
      const body = {
        resourceLogs: [
          {
            resource: { attributes: [{ key: 'service.name', value: { stringValue: 'progress' } }] },
            scopeLogs: [{ logRecords: markers.map((m, i) => ({ timeUnixNano: String(DAY1_NS + BigInt(i)), body: { stringValue: m } })) }],
          },
        ],
      };
      const r = await fetch(`${ing.url}/v1/logs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      expect(r.status).toBe(200);
    } finally {
      expect(await ing.stop()).toBe(0);
    }

    // Killed right after its commit, before it retires the segment.
    const crashed = await runProcess(process.execPath, [CLI, 'compact', '--once', ...flags], {
      env: { SIGLAKE_TEST_HOOKS: '1', SIGLAKE_TEST_CRASH_AFTER_COMMITS: '1' },
      timeoutMs: 120_000,
    });
    expect(crashed.code, crashed.stderr).toBeNull();
    const lane = laneDir(walDir, 'default', LOGS_TABLE);
    const kept = listLaneFiles(lane).segments.filter((s) => fs.statSync(s.path).size > SEGMENT_HEADER_SIZE);
    expect(kept, 'the landed segment is still in the WAL').toHaveLength(1);

    // Spark's maintenance: its own snapshot becomes current; Siglake's are expired.
    const spark = await pythonPeer<SparkView>(
      'spark_peer.py',
      ['--uri', `jdbc:sqlite:${db}`, ...where, '--jars', sparkJars(), '--time-from', '2026-01-15T00:00:00+00:00', '--attr', 'k=v', '--maintain', 'rewrite_data_files', '--maintain', 'expire', 'main.logs'],
      { PYSPARK_SUBMIT_ARGS: '--driver-memory 768m pyspark-shell', PYSPARK_PYTHON: PYTHON },
    );
    expect(spark.maintained.map(([, step]) => step)).toEqual(['rewrite_data_files', 'expire']);
    expect(spark.tables['main.logs']!.count).toBe(3);
    expect(spark.tables['main.logs']!.snapshots.map((s) => s[2]), 'only Spark\'s replace snapshot is left').toEqual(['replace']);
    const cat = SqlCatalog.open(`sqlite:${db}`, 'siglake');
    try {
      const loc = (await cat.metadataLocation('main', 'logs'))!;
      const meta = TableMetadata.parse(Buffer.from(await new FileStorage(warehouse).get(loc)).toString('utf8'), loc);
      expect(Object.keys(meta.currentSnapshot()!.summary).filter((k) => k.startsWith('siglake.wal.')), 'no summary entry is left').toEqual([]);
      expect(Object.keys(meta.properties()).filter((k) => k.startsWith('siglake.wal.')), 'the table property keeps the progress').toHaveLength(1);
    } finally {
      await cat.close();
    }

    const again = await siglake(['compact', '--once', ...flags]);
    expect(again.code, again.stderr).toBe(0);
    expect(listLaneFiles(lane).segments.filter((s) => fs.statSync(s.path).size > SEGMENT_HEADER_SIZE), 'retired').toEqual([]);
    const py = await pythonPeer<PyCatalog>('pyiceberg_peer.py', ['--uri', `sqlite:///${db}`, ...where]);
    expect(py.tables['main.logs']!.rows, 'every record once').toBe(3);
    expect(py.tables['main.logs']!.markers).toEqual(markers);
  });
});
