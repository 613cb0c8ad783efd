// The `.sealed` marker of a lane directory: the highest segment number the
// writer has sealed (fdatasync'd, closed, never to be appended to again).
// The compactor may land every segment up to it even while the ingester runs
// and the lane has gone quiet (its last segment is still the highest).
//
// Written with a rename, so a reader sees the old number or the new one. Not
// fsync'd: a marker lost in a machine crash only makes the compactor wait for
// the lane's next segment or the next start, never take an unsealed one.
//
// In `batch` mode (the commit journal) a seal takes no sync: the checkpoint
// writes the marker, after it made the segment durable (fdatasync, directory
// fsync) and deleted the journal files that held its records
// (docs/wal-format.md "Checkpoint"); at start-up, markRecoveredLanes marks
// the earlier lives' segments, after the same syncs.

import fs from 'node:fs';
import path from 'node:path';
import { errnoCode, NODE_FILE_OPS, type FileOps } from './file-ops.js';
import { formatSegmentName } from './format.js';
import { readRegularFile } from './regular-file.js';

export const SEALED_MARKER = '.sealed';

export function writeSealedMarker(dir: string, segment: number): void {
  const target = path.join(dir, SEALED_MARKER);
  const tmp = `${target}.tmp`;
  try {
    fs.writeFileSync(tmp, `${segment}\n`, { flag: 'wx' });
  } catch (err) {
    if (errnoCode(err) !== 'EEXIST') throw err;
    // Left by a crash, or put there: removed, then made again exclusively (writeSealedMarkerAsync says why).
    fs.unlinkSync(tmp);
    fs.writeFileSync(tmp, `${segment}\n`, { flag: 'wx' });
  }
  fs.renameSync(tmp, target);
}

/**
 * writeSealedMarker on the libuv thread pool (a checkpoint's).
 *
 * Both write `.sealed.tmp` with an exclusive create (O_CREAT|O_EXCL, which
 * neither follows a symbolic link nor opens a FIFO), and on EEXIST remove
 * what stands there and create it again: a plain write went through whatever
 * stood under the name, so a FIFO put there blocked the seal's open for ever
 * (the stop never finished, and in `interval` mode the worker's thread, its
 * requests with it), and a link was written through, over the file it named.
 * The common case costs nothing more: nothing stands there.
 */
export async function writeSealedMarkerAsync(dir: string, segment: number): Promise<void> {
  const target = path.join(dir, SEALED_MARKER);
  const tmp = `${target}.tmp`;
  try {
    await fs.promises.writeFile(tmp, `${segment}\n`, { flag: 'wx' });
  } catch (err) {
    if (errnoCode(err) !== 'EEXIST') throw err;
    await fs.promises.unlink(tmp);
    await fs.promises.writeFile(tmp, `${segment}\n`, { flag: 'wx' });
  }
  await fs.promises.rename(tmp, target);
}

/**
 * The sealed segment number, or 0 when there is no (readable, well-formed)
 * marker. Anything but a short regular file under the name reads as none:
 * a FIFO there blocked every reader (recovery, the compactor, `wal verify`)
 * for ever.
 */
export function readSealedMarker(dir: string): number {
  let text: string;
  try {
    text = readRegularFile(path.join(dir, SEALED_MARKER), 64).toString('utf8');
  } catch {
    return 0;
  }
  const m = /^(\d{1,15})\n$/.exec(text);
  return m === null ? 0 : Number(m[1]);
}

/**
 * `batch` mode, at start-up (after the journal's replay and the tail
 * repair): marks sealed the segments of earlier lives of each lane in
 * `nextSegment` (lane directory → next segment number) whose marker is
 * lower than `next - 1`, since this life never appends to them. First it
 * makes that segment durable (fdatasync) and its name (fsync of the lane
 * directory): a round killed between its lane write and its journal write
 * left records no journal entry holds, in a segment that may exist only in
 * the page cache, and a marker must never name a segment a power loss could
 * still cut or lose (the compactor lands what a marker names). A lane whose
 * sync fails is left unmarked: the marker is only a hint, and without it the
 * compactor waits for this life's first marker. Returns the lanes marked.
 */
export function markRecoveredLanes(nextSegment: ReadonlyMap<string, number>, ops: FileOps = NODE_FILE_OPS): number {
  let marked = 0;
  for (const [dir, next] of nextSegment) {
    if (next <= 1 || readSealedMarker(dir) >= next - 1) continue;
    try {
      let fd = -1;
      try {
        fd = ops.open(path.join(dir, formatSegmentName(next - 1)), 'r+');
      } catch (err) {
        // Gone (a number burnt by a failed creation): nothing of it to make durable.
        if (errnoCode(err) !== 'ENOENT') throw err;
      }
      if (fd >= 0) {
        try {
          ops.fdatasyncSync(fd);
        } finally {
          ops.close(fd);
        }
      }
      ops.fsyncDir(dir);
      writeSealedMarker(dir, next - 1);
      marked++;
    } catch {
      // Left unmarked (see above).
    }
  }
  return marked;
}
