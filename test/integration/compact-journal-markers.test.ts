// Under `--wal-fsync batch` a compactor beside the ingester takes a lane's
// segments only up to its `.sealed` marker (src/compactor/seal-rule.ts): a
// rotated segment is durable only after a checkpoint. So the marker must also
// cover what a crashed life left (the next life marks it after replay), and a
// journal directory a batch run left must not hold a later `interval` run to
// that rule (the ingester removes its own).

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { JOURNAL_ROOT, journalDirName } from '../../src/wal/journal-format.js';
import { readSealedMarker } from '../../src/wal/sealed-marker.js';
import { listLaneFiles } from '../../src/wal/segment-files.js';
import { startIngester, tempDir, type RunningIngester } from '../helpers/ingester.js';
import { exportLogs, makeLogRecords } from '../helpers/otel.js';

const live = new Set<RunningIngester>();
afterAll(async () => {
  for (const ing of live) await ing.kill9();
});

async function start(dataDir: string, args: string[]): Promise<RunningIngester> {
  const ing = await startIngester({ dataDir, args: ['--compactor=false', '--wal-segment-bytes', '4096', ...args] });
  live.add(ing);
  return ing;
}

describe('segment markers under the commit journal', () => {
  it('a batch life killed with -9: the next one marks every segment it left; an interval start removes the journal directory', async () => {
    const dataDir = tempDir();
    const first = await start(dataDir, ['--wal-fsync', 'batch']);
    const target = { url: first.url, grpcAddress: first.grpcAddress, headers: {} };
    for (let i = 0; i < 8; i++) {
      const bodies = Array.from({ length: 4 }, (_, k) => `marker-${i}-${k}-${'x'.repeat(400)}`);
      const r = await exportLogs(target, 'http', await makeLogRecords(bodies));
      expect(r.ok, r.error?.message).toBe(true);
    }
    const lane = path.join(first.walDir, 'logs');
    const highest = listLaneFiles(lane).maxNumber;
    expect(highest, 'the lane rotated').toBeGreaterThan(2);
    await first.kill9();
    live.delete(first);

    const second = await start(dataDir, ['--wal-fsync', 'batch']);
    // Nothing written in this life: every segment on disk is the earlier life's, durable after replay.
    expect(listLaneFiles(lane).maxNumber).toBe(highest);
    expect(readSealedMarker(lane)).toBe(highest);
    expect(fs.existsSync(path.join(second.walDir, JOURNAL_ROOT, journalDirName(0, 1)))).toBe(true);
    await second.kill9();
    live.delete(second);

    const third = await start(dataDir, ['--wal-fsync', 'interval']);
    expect(fs.existsSync(path.join(third.walDir, JOURNAL_ROOT, journalDirName(0, 1)))).toBe(false);
    expect(await third.stop()).toBe(0);
    live.delete(third);
  });
});
