// What a `batch` life makes durable before it relies on a crashed life's
// files (docs/wal-format.md "Recovery"), against the real file system with
// every sync recorded in order:
//
// - the start-up markers (markRecoveredLanes): a lane's `.sealed` marker is
//   raised over an earlier life's last segment only after that segment was
//   fdatasynced and its directory fsynced. A round killed between its lane
//   write and its journal write leaves records in a segment only the page
//   cache holds, and a marker must never name a segment a power loss could
//   still cut or lose: the compactor lands what a marker names.
// - directories found made: a life killed between a mkdir and its parent's
//   fsync leaves a directory whose name a power loss can still take; the next
//   life finds it (EEXIST) and fsyncs the parent all the same.

import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FdCache } from '../../src/wal/fd-cache.js';
import { NODE_FILE_OPS, type FileOps } from '../../src/wal/file-ops.js';
import { encodeSegmentHeader, formatSegmentName, RecordType, SEGMENT_HEADER_SIZE } from '../../src/wal/format.js';
import { JOURNAL_ROOT, journalDirName } from '../../src/wal/journal-format.js';
import { ShardJournal } from '../../src/wal/journal.js';
import { LaneWriter } from '../../src/wal/lane-writer.js';
import { LOGS_TABLE, laneDir } from '../../src/wal/layout.js';
import { markRecoveredLanes, readSealedMarker, SEALED_MARKER } from '../../src/wal/sealed-marker.js';

let wal: string;
beforeEach(() => {
  wal = mkdtempSync(join(tmpdir(), 'siglake-start-'));
});
afterEach(() => {
  rmSync(wal, { recursive: true, force: true });
});

/** node:fs, each sync logged as `fdatasync <path>` or `fsyncDir <path>` (paths relative to the WAL root), with the lane markers seen at that moment. */
function recordingOps(fail: { fdatasync?: string } = {}) {
  const log: string[] = [];
  const paths = new Map<number, string>();
  const rel = (p: string) => p.slice(wal.length + 1);
  const ops: FileOps = {
    ...NODE_FILE_OPS,
    open: (p, flags) => {
      const fd = NODE_FILE_OPS.open(p, flags);
      paths.set(fd, rel(p));
      return fd;
    },
    close: (fd) => {
      paths.delete(fd);
      NODE_FILE_OPS.close(fd);
    },
    fdatasyncSync: (fd) => {
      const p = paths.get(fd) ?? '?';
      if (fail.fdatasync !== undefined && p.startsWith(fail.fdatasync)) throw Object.assign(new Error('EIO: injected'), { code: 'EIO' });
      log.push(`fdatasync ${p}`);
      NODE_FILE_OPS.fdatasyncSync(fd);
    },
    mkdir: (p) => {
      log.push(`mkdir ${rel(p)}`);
      NODE_FILE_OPS.mkdir(p);
    },
    fsyncDir: (p) => {
      log.push(`fsyncDir ${p === wal ? '.' : rel(p)}`);
      NODE_FILE_OPS.fsyncDir(p);
    },
  };
  return { ops, log };
}

/** A lane directory holding segments 1..n (a header each) and, when given, a marker. */
function lane(tenant: string, segments: number, marker?: number): string {
  const dir = laneDir(wal, tenant, LOGS_TABLE);
  mkdirSync(dir, { recursive: true });
  for (let n = 1; n <= segments; n++) {
    const h = Buffer.alloc(SEGMENT_HEADER_SIZE);
    encodeSegmentHeader(h, 0, n, 1_700_000_000_000);
    writeFileSync(join(dir, formatSegmentName(n)), h);
  }
  if (marker !== undefined) writeFileSync(join(dir, SEALED_MARKER), `${marker}\n`);
  return dir;
}

describe('the start-up markers of a batch life (markRecoveredLanes)', () => {
  it('marks an earlier life\'s last segment only after it was fdatasynced and its directory fsynced', () => {
    const acme = lane('acme', 3, 1);
    const beta = lane('beta', 2);
    const { ops, log } = recordingOps();
    const seen: string[] = [];
    // The marker each sync saw: none raised before its lane's syncs.
    const watched: FileOps = {
      ...ops,
      fdatasyncSync: (fd) => {
        ops.fdatasyncSync(fd);
        seen.push(`${readSealedMarker(acme)}/${readSealedMarker(beta)}`);
      },
      fsyncDir: (p) => {
        ops.fsyncDir(p);
        seen.push(`${readSealedMarker(acme)}/${readSealedMarker(beta)}`);
      },
    };
    const marked = markRecoveredLanes(
      new Map([
        [acme, 4],
        [beta, 3],
      ]),
      watched,
    );
    expect(marked).toBe(2);
    expect(log).toEqual(['fdatasync acme/logs/00000003.seg', 'fsyncDir acme/logs', 'fdatasync beta/logs/00000002.seg', 'fsyncDir beta/logs']);
    expect(seen).toEqual(['1/0', '1/0', '3/0', '3/0']);
    expect(readSealedMarker(acme)).toBe(3);
    expect(readSealedMarker(beta)).toBe(2);
  });

  it('syncs nothing for a lane already marked, or with no segment yet', () => {
    const acme = lane('acme', 3, 3);
    const fresh = laneDir(wal, 'fresh', LOGS_TABLE);
    mkdirSync(fresh, { recursive: true });
    const { ops, log } = recordingOps();
    expect(
      markRecoveredLanes(
        new Map([
          [acme, 4],
          [fresh, 1],
        ]),
        ops,
      ),
    ).toBe(0);
    expect(log).toEqual([]);
    expect(existsSync(join(fresh, SEALED_MARKER))).toBe(false);
  });

  it('leaves a lane unmarked when its segment\'s fdatasync fails, and marks the others', () => {
    const acme = lane('acme', 2);
    const beta = lane('beta', 2);
    const { ops, log } = recordingOps({ fdatasync: 'acme/' });
    expect(
      markRecoveredLanes(
        new Map([
          [acme, 3],
          [beta, 3],
        ]),
        ops,
      ),
    ).toBe(1);
    expect(readSealedMarker(acme)).toBe(0);
    expect(readSealedMarker(beta)).toBe(2);
    expect(log).toEqual(['fdatasync beta/logs/00000002.seg', 'fsyncDir beta/logs']);
  });

  it('marks a lane whose last number was burnt by a failed creation (no such segment) after its directory\'s fsync', () => {
    const acme = lane('acme', 2);
    const { ops, log } = recordingOps();
    expect(markRecoveredLanes(new Map([[acme, 4]]), ops)).toBe(1);
    expect(log).toEqual(['fsyncDir acme/logs']);
    expect(readSealedMarker(acme)).toBe(3);
  });
});

describe('a directory found made is fsynced into its parent as one made now', () => {
  it('a lane\'s first segment of a life, in directories an earlier life made', () => {
    const dir = laneDir(wal, 'acme', LOGS_TABLE);
    mkdirSync(dir, { recursive: true });
    const { ops, log } = recordingOps();
    const w = new LaneWriter({ dir, segmentBytes: 1 << 20, fdCache: new FdCache(4, ops) });
    w.stage(RecordType.LOGS, 1, 1_700_000_000_000, Buffer.from('x'));
    w.flush();
    expect(log.slice(0, 2)).toEqual(['mkdir acme/logs', 'fsyncDir acme']);
    w.close();
  });

  it('a shard journal\'s directory', () => {
    const dir = join(wal, JOURNAL_ROOT, journalDirName(0, 1));
    mkdirSync(dir, { recursive: true });
    const { ops, log } = recordingOps();
    const j = new ShardJournal({ dir, ops });
    j.stage(new TextEncoder().encode('acme/logs'), 1, SEGMENT_HEADER_SIZE, [Buffer.alloc(0)], 0, 1, 0, 0);
    j.write();
    expect(log.slice(0, 2)).toEqual([`mkdir ${JOURNAL_ROOT}/${journalDirName(0, 1)}`, `fsyncDir ${JOURNAL_ROOT}`]);
    expect(readFileSync(join(dir, '00000001.jnl')).length).toBeGreaterThan(0);
    j.close();
  });
});
