// WAL append throughput in a worker, without fsync (performance.md P7:
// ≥ 1 GB/s append, ≥ 5 GB/s CRC-32C).
//
// Run (Node 20 cannot run .ts directly):
//   npx tsc -p tsconfig.test.json --noEmit false --outDir perf/results/tmp/build
//   node perf/results/tmp/build/perf/wal-append.bench.js [--time-ms 1000] [--dir /dev/shm]
// Prints the median (p50) time per iteration and the MB/s it implies.
//
// LaneWriter runs with a FileOps whose fdatasyncs do nothing (rotation syncs
// included): what is measured is staging (header + CRC) and the pwritev into
// the page cache. Payloads are views on a SharedArrayBuffer, as the ring hands
// them over. Beside it, the alternative the writer avoids: copying the batch
// into one buffer and writing that. Old segments are deleted between
// iterations so the disk does not fill.

import { crc32c } from '@node-rs/crc32';
import { closeSync, mkdtempSync, openSync, readdirSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Bench } from 'tinybench';
import { throughputRows } from './throughput-table.js';
import { NODE_FILE_OPS, type FileOps } from '../src/wal/file-ops.js';
import { RECORD_HEADER_SIZE, RecordType, encodeRecordHeader, formatSegmentName } from '../src/wal/format.js';
import { LaneWriter } from '../src/wal/lane-writer.js';

const arg = (name: string): string | undefined => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const timeMs = Number(arg('--time-ms') ?? 1000);
const root = mkdtempSync(join(arg('--dir') ?? tmpdir(), 'siglake-wal-bench-'));

const NO_SYNC: FileOps = { ...NODE_FILE_OPS, fdatasyncSync: () => undefined, fdatasync: async () => undefined };
const SEGMENT_BYTES = 64 << 20;

/** `n` payloads of `size` bytes, views at spread offsets of one SharedArrayBuffer. */
function sabPayloads(n: number, size: number): Uint8Array[] {
  const sab = new SharedArrayBuffer(n * (size + 64));
  const all = new Uint8Array(sab);
  for (let i = 0; i < all.length; i++) all[i] = (i * 2654435761) >>> 24;
  return Array.from({ length: n }, (_, i) => new Uint8Array(sab, i * (size + 64) + 13, size));
}

const bench = new Bench({ time: timeMs, warmup: true });
const bytesPerTask = new Map<string, number>();
let sink = 0;

function addWriter(label: string, n: number, size: number): void {
  const dir = join(root, label.replace(/\W+/g, '-'));
  const payloads = sabPayloads(n, size);
  const w = new LaneWriter({ dir, segmentBytes: SEGMENT_BYTES, fileOps: NO_SYNC });
  const bytes = n * (RECORD_HEADER_SIZE + size);
  let live = 0;
  const name = `LaneWriter stage+flush ${label}`;
  bytesPerTask.set(name, bytes);
  bench.add(
    name,
    () => {
      for (let i = 0; i < n; i++) w.stage(RecordType.LOGS, 10, 1_767_225_600_000, payloads[i]);
      sink += w.flush();
    },
    {
      afterEach: () => {
        // Delete segments the writer has rotated away from.
        if (w.segment !== live) {
          for (const f of readdirSync(dir)) if (f !== formatSegmentName(w.segment)) unlinkSync(join(dir, f));
          live = w.segment;
        }
      },
    },
  );
}

function addCopyAlternative(label: string, n: number, size: number): void {
  const dir = mkdtempSync(join(root, 'copy-'));
  const payloads = sabPayloads(n, size);
  const bytes = n * (RECORD_HEADER_SIZE + size);
  const path = join(dir, 'copy.seg');
  const fd = openSync(path, 'w');
  let pos = 0;
  const name = `  alternative: copy into one buffer + write ${label}`;
  bytesPerTask.set(name, bytes);
  bench.add(
    name,
    () => {
      const out = Buffer.allocUnsafe(bytes);
      let at = 0;
      for (let i = 0; i < n; i++) {
        encodeRecordHeader(out, at, RecordType.LOGS, 10, 1_767_225_600_000, payloads[i]);
        out.set(payloads[i], at + RECORD_HEADER_SIZE);
        at += RECORD_HEADER_SIZE + size;
      }
      sink += writeSync(fd, out, 0, bytes, pos);
      pos += bytes;
    },
    {
      afterEach: () => {
        if (pos >= SEGMENT_BYTES) pos = 0; // overwrite in place: the file stays at one segment
      },
    },
  );
  process.once('exit', () => closeSync(fd));
}

function addCrc(label: string, buf: Uint8Array): void {
  const name = `crc32c ${label}`;
  bytesPerTask.set(name, buf.length);
  bench.add(name, () => {
    sink ^= crc32c(buf);
  });
}

addWriter('16 KiB x 64', 64, 16 << 10);
addCopyAlternative('16 KiB x 64', 64, 16 << 10);
addWriter('1 KiB x 1024', 1024, 1 << 10);
addCopyAlternative('1 KiB x 1024', 1024, 1 << 10);
addWriter('256 KiB x 4', 4, 256 << 10);
addCrc('1 MiB Buffer', Buffer.from(sabPayloads(1, 1 << 20)[0]));
addCrc('1 MiB SharedArrayBuffer view', sabPayloads(1, 1 << 20)[0]);
addCrc('64 KiB SharedArrayBuffer view', sabPayloads(1, 64 << 10)[0]);

try {
  await bench.run();
} finally {
  rmSync(root, { recursive: true, force: true });
}

console.table(throughputRows(bench, bytesPerTask));
console.log(`node ${process.version}, ${timeMs} ms per task, files under ${arg('--dir') ?? tmpdir()} (sink ${sink !== 0 ? 'ok' : 'empty'})`);
