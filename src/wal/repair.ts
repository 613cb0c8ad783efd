// Start-up repair of one lane directory (docs/wal-format.md "Repair"):
// delete `.seg.tmp` leftovers, cut the last segment back to its last whole
// record, and choose the next segment number. It returns facts and logs
// nothing; the caller logs the cut and adds it to
// siglake_wal_truncated_bytes_total.

import { closeSync, fstatSync, openSync } from 'node:fs';
import { CorruptionError } from '../errors.js';
import { NODE_FILE_OPS, type FileOps } from './file-ops.js';
import { FORMAT_VERSION, MAX_SEGMENT_FILE_BYTES, SEGMENT_MAGIC } from './format.js';
import { refuseNewer } from './newer-format.js';
import { readSealedMarker } from './sealed-marker.js';
import { listLaneFiles } from './segment-files.js';
import { SegmentReader, type SegmentStop } from './segment-reader.js';
import { WalWriteError } from './wal-write-error.js';
import { fileZeros } from './zeros.js';

/** A cut made at the end of a lane's last segment. */
export interface TailCut {
  /** Path of the segment that was cut. */
  readonly segment: string;
  /** `torn`: an unfinished append. `corrupt`: written bytes went bad; whole records after the cut may be lost. */
  readonly kind: 'torn' | 'corrupt';
  /** The new size of the segment: the offset of the first bad byte (0 when its header was bad). */
  readonly offset: number;
  /** Bytes removed. */
  readonly bytes: number;
  readonly why: string;
}

export interface LaneRecovery {
  readonly dir: string;
  /** `.seg` files in the directory. */
  readonly segments: number;
  /** Highest segment number in use (0 when none). */
  readonly lastSegment: number;
  /** The number a writer must use for its next (first) segment. */
  readonly nextSegment: number;
  /** `.seg.tmp` files deleted. */
  readonly removedTmp: readonly string[];
  /** Bytes cut: from the last segment (0 when it ended cleanly), and those of `earlierCuts`. */
  readonly truncatedBytes: number;
  readonly cut: TailCut | null;
  /** With `cutTornEarlier`: torn tails cut from segments before the last (above the `.sealed` marker). */
  readonly earlierCuts: readonly TailCut[];
  /** Earlier segments that do not end cleanly; not repaired. Filled only with `scanAll`. */
  readonly damaged: readonly CorruptionError[];
  /** Entries that are neither segments nor tmp files; left alone. */
  readonly unknownFiles: readonly string[];
  /** Entries named as segments (or tmp files) that are not regular files: left alone, their numbers skipped. */
  readonly notFiles: readonly string[];
}

export interface RepairOptions {
  readonly ops?: FileOps;
  /** Also read every earlier segment and report damage (costs a read of the whole lane). */
  readonly scanAll?: boolean;
  /**
   * `batch` mode, after the commit journal's replay: also cut a torn (never
   * a corrupt) tail of every segment before the last that is above the
   * lane's `.sealed` marker. Rotation takes no sync there, so a machine
   * crash can leave a round that was never acknowledged torn at the end of
   * a segment it rotated away from; replay has put back every acknowledged
   * byte, so a torn stop after them holds none (docs/wal-format.md "Repair").
   */
  readonly cutTornEarlier?: boolean;
}

export function repairLane(dir: string, opts: RepairOptions = {}): LaneRecovery {
  const ops = opts.ops ?? NODE_FILE_OPS;
  const files = listLaneFiles(dir);
  const removedTmp: string[] = [];
  for (const t of files.tmp) {
    ops.unlink(t.path);
    removedTmp.push(t.name);
  }
  if (removedTmp.length > 0) ops.fsyncDir(dir);

  const segs = files.segments;
  const damaged: CorruptionError[] = [];
  if (opts.scanAll) {
    for (let i = 0; i < segs.length - 1; i++) {
      const err = stopAsError(SegmentReader.scan(segs[i].path).stop, segs[i].path);
      if (err !== null) damaged.push(err);
    }
  }

  const earlierCuts: TailCut[] = [];
  const sealed = readSealedMarker(dir);
  if (opts.cutTornEarlier) {
    for (let i = 0; i < segs.length - 1; i++) {
      const seg = segs[i];
      if (seg.number <= sealed) continue;
      const scan = SegmentReader.scan(seg.path);
      if (scan.stop.kind !== 'torn') continue;
      truncateFile(ops, seg.path, scan.stop.offset);
      earlierCuts.push({ segment: seg.path, kind: 'torn', offset: scan.stop.offset, bytes: scan.size - scan.stop.offset, why: scan.stop.why });
    }
  }

  let cut: TailCut | null = null;
  const last = segs.length > 0 ? segs[segs.length - 1] : null;
  if (last !== null) {
    const scan = SegmentReader.scan(last.path);
    const stop = scan.stop;
    if (stop.kind !== 'end') {
      // A segment of a newer release is refused, never read as damage and cut to nothing.
      refuseNewer(last.path, 'segment', SEGMENT_MAGIC, FORMAT_VERSION);
      if (!canBeTorn(last, sealed, stop)) {
        // Sealed (a clean stop, or a checkpoint, synced it and then marked it): no crash can tear
        // it, so a bad byte is damage (a damaged length reads as a record running past the end),
        // and cutting there would destroy the acknowledged records after it. It is reported and
        // kept, as damage before the tail is. Only a tail of zeros, which holds nothing, is cut.
        const err = stopAsError(stop, last.path);
        if (err !== null && !damaged.some((d) => d.segment === err.segment)) damaged.push(err);
      } else {
        truncateFile(ops, last.path, stop.offset);
        const why = stop.kind === 'torn' ? stop.why : stop.error.why;
        cut = { segment: last.path, kind: stop.kind, offset: stop.offset, bytes: scan.size - stop.offset, why };
      }
    }
  }

  return {
    dir,
    segments: segs.length,
    lastSegment: last?.number ?? 0,
    nextSegment: files.maxNumber + 1,
    removedTmp,
    truncatedBytes: (cut?.bytes ?? 0) + earlierCuts.reduce((sum, c) => sum + c.bytes, 0),
    cut,
    earlierCuts,
    damaged,
    unknownFiles: files.unknown,
    notFiles: files.notFiles.map((f) => `${f.name} (${f.kind})`),
  };
}

/** A stop other than a clean end, as the CorruptionError that names it. */
export function stopAsError(stop: SegmentStop, segment: string): CorruptionError | null {
  if (stop.kind === 'end') return null;
  if (stop.kind === 'corrupt') return stop.error;
  return new CorruptionError(segment, stop.offset, `torn: ${stop.why}`);
}

/**
 * Whether a lane's last segment may hold a crash's torn tail at `stop`: one
 * above the lane's `.sealed` marker may; a sealed one (synced before it was
 * marked) only as a tail of zeros, which holds nothing.
 */
export function canBeTorn(seg: { readonly number: number; readonly path: string }, sealed: number, stop: SegmentStop): boolean {
  if (seg.number > sealed) return true;
  return stop.kind === 'torn' && zeroFrom(seg.path, stop.offset);
}

/**
 * Whether every byte of `path` from `offset` on is zero, read in large blocks.
 * False without reading for a file longer than any segment the writer makes:
 * its tail is damage whatever it holds.
 */
function zeroFrom(path: string, offset: number): boolean {
  const fd = openSync(path, 'r');
  try {
    const size = fstatSync(fd).size;
    if (size > MAX_SEGMENT_FILE_BYTES) return false;
    return fileZeros(fd, offset, size);
  } finally {
    closeSync(fd);
  }
}

function truncateFile(ops: FileOps, path: string, length: number): void {
  let fd: number;
  try {
    fd = ops.open(path, 'r+');
  } catch (err) {
    throw new WalWriteError('open', path, err);
  }
  try {
    ops.ftruncate(fd, length);
    ops.fdatasyncSync(fd);
  } catch (err) {
    throw new WalWriteError('truncate', path, err);
  } finally {
    ops.close(fd);
  }
}
