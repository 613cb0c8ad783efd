// Regression (compactor-lands-live-segment), found by the fuzz suite: with the
// in-process compactor on (the default), acknowledged records vanished from
// the WAL and a segment was left with a zeroed header ("bad magic" at offset
// 0). The compactor thread takes its "segments of an earlier life" boundary
// by listing the WAL when the thread has started and opened the catalog
// (src/compactor/compactor-setup.ts, CompactorSetup.open), which is after the
// ingester is ready and serving: segments the current life is still appending
// to count as sealed, get landed, and are retired (emptied with truncate, as
// their lane's highest) under the writer, which goes on writing at its old
// offset into a now sparse file.
//
// The row's invariant with the compactor on: every acknowledged record is
// either still in the WAL or landed in an Iceberg table, and the WAL verifies
// clean after a graceful stop.

import fs from 'node:fs';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, describe, expect, it } from 'vitest';
import { startIngester, type RunningIngester } from '../helpers/ingester.js';
import { LoadRun, Ledger, laneMatrix, sleep, until } from './lib/load.js';
import { Prng } from './lib/prng.js';
import { baseSeed, recordFigures } from './lib/scale.js';
import { dumpWal, verifyWal } from './lib/wal-files.js';

const seed = baseSeed('compactor-live-segment');
const live = new Set<RunningIngester>();
let figures: Record<string, unknown> = {};

afterAll(async () => {
  for (const ing of live) await ing.kill9();
  recordFigures('compactor-live-segment', { seed, ...figures });
});

/** Log bodies and span names in every Parquet file under `dir` (landed, committed or not). */
async function parquetTexts(dir: string): Promise<Set<string>> {
  const files: string[] = [];
  const walk = (d: string) => {
    if (!fs.existsSync(d)) return;
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.parquet')) files.push(p);
    }
  };
  walk(dir);
  const out = new Set<string>();
  if (files.length === 0) return out;
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  try {
    for (const f of files) {
      const r = await conn.runAndReadAll(`SELECT * FROM read_parquet('${f.replace(/'/g, "''")}')`);
      for (const row of r.getRowObjectsJson() as Record<string, unknown>[]) {
        for (const col of ['body', 'name']) if (typeof row[col] === 'string') out.add(row[col] as string);
      }
    }
  } finally {
    conn.closeSync();
    db.closeSync();
  }
  return out;
}

describe('regression (compactor-lands-live-segment): the in-process compactor never takes a segment the ingester still writes', () => {
  it('every acknowledged record is in the WAL or landed; the WAL verifies clean', async () => {
    const prng = new Prng(seed);
    // Load from the moment it listens, so that lanes have live segments before the compactor thread looks.
    const ing = await startIngester({
      workers: 2,
      waitFor: 'listening',
      // The compactor runs at SCHED_IDLE (the default placement): beside the rest of a suite on two
      // cores it may get no CPU for minutes. A lag bound of 5 s raises it as it would any busy host's.
      args: ['--trust-tenant-header', '--compact-interval-secs', '1', '--wal-segment-bytes', String(512 * 1024), '--compactor-idle-max-lag-secs', '5'],
    });
    live.add(ing);
    const ledger = new Ledger();
    const load = new LoadRun({
      ing,
      prng,
      ledger,
      tag: 'cls',
      lanes: laneMatrix(['default', 'acme'], []),
      clients: 6,
      padChance: 0,
      transports: [[1, 'http-proto'], [1, 'grpc']],
    });
    await until(() => ledger.acked.length >= 200, 60_000, 'acknowledgements');
    // Compaction rounds land and retire segments while the lanes keep writing.
    let retired = 0;
    const deadline = Date.now() + 90_000;
    while (retired < 4 && Date.now() < deadline) {
      await sleep(250);
      retired = (await ing.metric('siglake_compactor_segments_retired_total')) ?? 0;
    }
    await sleep(2000);
    await load.stop();
    const m = await ing.metrics();
    const corrupt = m.get('siglake_compactor_corrupt_segments_total') ?? 0;
    expect(await ing.stop()).toBe(0);
    live.delete(ing);

    const v = verifyWal(ing.walDir);
    const inWal = new Set(dumpWal(ing.walDir, { allowDamaged: true }).flatMap((d) => d.texts));
    const landed = await parquetTexts(path.join(ing.dataDir, 'data', 'warehouse'));
    const lost = ledger.acked.flatMap((e) => e.texts).filter((t) => !inWal.has(t) && !landed.has(t));
    figures = {
      segmentsRetired: retired,
      corruptSegmentsSeen: corrupt,
      acked: ledger.acked.length,
      inWal: inWal.size,
      landed: landed.size,
      lost: lost.length,
      verifyStatus: v.status,
      damaged: v.damaged.slice(0, 5),
    };
    // The test exercised what it is about: segments landed and retired during the load.
    expect(retired, 'segments retired by the compactor during the load').toBeGreaterThanOrEqual(4);
    expect(corrupt).toBe(0);
    expect(v.damaged, v.output).toEqual([]);
    expect(v.status, v.output).toBe(0);
    expect(lost.slice(0, 10), `${lost.length} acknowledged records neither in the WAL nor landed`).toEqual([]);
    // Room for its own waits (60 s for acknowledgements, 90 s for retirements: the compactor runs at
    // SCHED_IDLE, so a machine busy with other work slows its rounds) and the stop and checks after them.
  }, 240_000);
});
