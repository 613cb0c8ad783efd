// `siglake drain`: lands everything a WAL volume holds in the Iceberg tables,
// for a pod whose volume is about to go (a StatefulSet scaled down, a node
// retired). Run it on the volume once the ingester that wrote it has stopped
// (its shutdown seals every live segment), or let the ingester run it as the
// last step of its own shutdown (`ingester.drainOnShutdown`).
//
//   siglake drain [--wal-dir …] [--catalog-url …] [--warehouse …] [flags]
//
// Every segment counts as sealed (nothing writes the WAL any more); rounds run
// until no sealed segment is left, then the WAL is checked: a segment that
// still holds records (a table whose commit failed, a corrupt segment) makes
// the drain fail, and the volume must not be deleted.
//
// Output: the log line `drained` with {segmentsLanded, rows, commits, left: [paths]}.
// Exit codes: 0 the WAL holds no unlanded record; 1 something is left (or the
// catalog/warehouse failed); 2 a bad flag or setting, or a --wal-dir that is
// not a WAL root (missing, or without the marker, a journal or a lane).

import { statSync } from 'node:fs';
import type { Logger } from 'pino';
import { loadCommandSettings } from '../config/load.js';
import { createLogger } from '../log.js';
import { drainRootProblem, listLaneDirs } from '../wal/layout.js';
import { listLaneFiles } from '../wal/segment-files.js';
import { SEGMENT_HEADER_SIZE } from '../wal/format.js';
import { CompactorSetup, type CompactorSettings } from './compactor-setup.js';

export interface DrainResult {
  readonly segmentsLanded: number;
  readonly rows: number;
  readonly commits: number;
  /** Segments that still hold records after the drain (empty: the volume may go). */
  readonly left: string[];
}

/** Rounds bound: a drain that keeps finding work this often is not converging. */
const MAX_ROUNDS = 10_000;

export async function drainWal(settings: CompactorSettings, log: Logger): Promise<DrainResult> {
  const setup = await CompactorSetup.open(settings, 'stopped', log);
  let segmentsLanded = 0;
  let rows = 0;
  let commits = 0;
  try {
    for (let i = 0; i < MAX_ROUNDS; i++) {
      const r = await setup.compactor.runRound();
      segmentsLanded += r.retired;
      rows += r.rows;
      commits += r.commits;
      if (r.failedTables > 0 || !r.backlog) break;
    }
  } finally {
    await setup.close();
  }
  return { segmentsLanded, rows, commits, left: unlandedSegments(settings.walDir) };
}

/** Segments that hold more than a header: what the volume still owes the lake. */
export function unlandedSegments(walDir: string): string[] {
  const left: string[] = [];
  for (const lane of listLaneDirs(walDir)) {
    const files = listLaneFiles(lane.dir);
    for (const f of [...files.segments, ...files.tmp]) {
      let size: number;
      try {
        size = statSync(f.path).size;
      } catch {
        continue;
      }
      if (size > SEGMENT_HEADER_SIZE) left.push(f.path);
    }
  }
  return left.sort();
}

export async function runDrainCommand(argv: string[]): Promise<number> {
  const loaded = loadCommandSettings(argv, { command: 'drain' });
  if (loaded === undefined) return 2;
  const settings = loaded.settings;
  const notRoot = drainRootProblem(settings.walDir);
  if (notRoot !== null) {
    process.stderr.write(`siglake: ${notRoot}\n`);
    return 2;
  }
  const log = createLogger(settings.logLevel, 'siglake-drain');
  let result: DrainResult;
  try {
    result = await drainWal(settings, log);
  } catch (e) {
    log.error({ err: (e as Error).message, code: (e as { code?: string }).code }, 'drain failed');
    process.stderr.write(`siglake: drain failed: ${(e as Error).message}\n`);
    return 1;
  }
  return reportDrain(result, log) ? 0 : 1;
}

/** Logs the outcome; true when the WAL holds no unlanded record. */
export function reportDrain(result: DrainResult, log: Logger): boolean {
  if (result.left.length > 0) {
    log.error(result, 'drain incomplete: WAL segments still hold records; keep the volume');
    return false;
  }
  log.info(result, 'drained');
  return true;
}
