// Retiring landed segments keeps the WAL's numbering rule: a segment with a
// higher one beside it goes, the lane's highest is cut to an empty file that
// keeps its number.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { retireSegment, segmentCreatedMs } from '../../src/wal/retire.js';
import { LaneWriter } from '../../src/wal/lane-writer.js';
import { RecordType } from '../../src/wal/format.js';
import { listLaneFiles } from '../../src/wal/segment-files.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

async function laneWithTwoSegments(): Promise<string> {
  const dir = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'siglake-retire-')), 'logs');
  dirs.push(path.dirname(dir));
  const w = new LaneWriter({ dir, segmentBytes: 1 << 20, now: () => 1_700_000_000_000 });
  w.stage(RecordType.LOGS, 1, 1_700_000_000_000, Buffer.from('first'));
  w.flush();
  await w.seal();
  w.stage(RecordType.LOGS, 1, 1_700_000_000_001, Buffer.from('second'));
  w.flush();
  await w.close();
  return dir;
}

describe('retireSegment', () => {
  it('deletes a segment that has a higher one, and empties the highest so its number stays taken', async () => {
    const dir = await laneWithTwoSegments();
    const [lo, hi] = listLaneFiles(dir).segments;
    expect(segmentCreatedMs(lo!.path)).toBe(1_700_000_000_000);
    const loSize = fs.statSync(lo!.path).size;
    const hiSize = fs.statSync(hi!.path).size;

    expect(retireSegment({ laneDir: dir, path: lo!.path, size: loSize, hasHigher: true })).toBe(true);
    expect(fs.existsSync(lo!.path)).toBe(false);

    expect(retireSegment({ laneDir: dir, path: hi!.path, size: hiSize, hasHigher: false })).toBe(true);
    expect(fs.statSync(hi!.path).size).toBe(0);
    expect(segmentCreatedMs(hi!.path)).toBeNull();
    expect(listLaneFiles(dir).segments.map((s) => path.basename(s.path))).toEqual([path.basename(hi!.path)]);

    // Nothing left to do: already empty, or already gone.
    expect(retireSegment({ laneDir: dir, path: hi!.path, size: 0, hasHigher: false })).toBe(false);
    expect(retireSegment({ laneDir: dir, path: lo!.path, size: loSize, hasHigher: true })).toBe(false);
  });

  it('keeps a segment that grew since it was read: its new records have not landed', async () => {
    // A compactor that took a live segment as sealed (beside an ingester it could not see) cut it
    // to zero under the writer, who went on appending at its old offset: records lost.
    const dir = await laneWithTwoSegments();
    const [, hi] = listLaneFiles(dir).segments;
    const readAt = fs.statSync(hi!.path).size;
    fs.appendFileSync(hi!.path, Buffer.alloc(64, 1)); // the writer's next append
    expect(retireSegment({ laneDir: dir, path: hi!.path, size: readAt, hasHigher: false })).toBe(false);
    expect(fs.statSync(hi!.path).size).toBe(readAt + 64);
  });
});
