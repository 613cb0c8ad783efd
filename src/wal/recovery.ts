// The start-up entry point: repair every lane under a WAL root (or the lanes
// one worker owns) before anything is written, and hand back the next segment
// number of each lane plus totals. It logs nothing and counts nothing: the
// caller logs each cut and adds `truncatedBytes` to
// siglake_wal_truncated_bytes_total.

import { listLaneDirs, type LaneLocation } from './layout.js';
import { repairLane, type LaneRecovery, type RepairOptions } from './repair.js';

export interface LaneRecoveryEntry {
  readonly lane: LaneLocation;
  readonly recovery: LaneRecovery;
}

export interface WalRecovery {
  /** One entry per lane repaired, in listLaneDirs order. */
  readonly lanes: readonly LaneRecoveryEntry[];
  /** Next segment number by lane directory, for LaneWriter's `nextSegment`. */
  readonly nextSegment: ReadonlyMap<string, number>;
  readonly truncatedBytes: number;
  /** Lanes whose last segment was cut. */
  readonly cutLanes: number;
  /** Cuts of a corrupt (not merely torn) tail: whole records may have been lost. */
  readonly corruptCuts: number;
  readonly removedTmp: number;
  /** Damaged earlier segments found (only with `scanAll`). */
  readonly damaged: number;
}

export function recoverWal(
  walDir: string,
  filter?: (lane: LaneLocation) => boolean,
  opts: RepairOptions = {},
): WalRecovery {
  const lanes: LaneRecoveryEntry[] = [];
  const nextSegment = new Map<string, number>();
  let truncatedBytes = 0;
  let cutLanes = 0;
  let corruptCuts = 0;
  let removedTmp = 0;
  let damaged = 0;
  for (const lane of listLaneDirs(walDir)) {
    if (filter !== undefined && !filter(lane)) continue;
    const recovery = repairLane(lane.dir, opts);
    lanes.push({ lane, recovery });
    nextSegment.set(lane.dir, recovery.nextSegment);
    truncatedBytes += recovery.truncatedBytes;
    if (recovery.cut !== null) {
      cutLanes++;
      if (recovery.cut.kind === 'corrupt') corruptCuts++;
    }
    removedTmp += recovery.removedTmp.length;
    damaged += recovery.damaged.length;
  }
  return { lanes, nextSegment, truncatedBytes, cutLanes, corruptCuts, removedTmp, damaged };
}
