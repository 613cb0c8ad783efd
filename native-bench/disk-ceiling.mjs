#!/usr/bin/env node
// The disk ceiling: sequential writes of one block size, each followed by
// fdatasync, for a number of seconds, in the directory the WAL would use.
// What `batch` durability can reach at best with that many bytes per sync.
// Prints one JSON line: block, ops, secs, opsPerSec, mbPerSec, p50Ms, p99Ms.
//
//   node native-bench/disk-ceiling.mjs --block 262144 --secs 5 --dir DIR [--keep-pages]
//
// After each fdatasync the written pages leave the page cache (posix_fadvise
// DONTNEED, through Siglake's native addon, as --wal-drop-synced-pages does
// for WAL segments), so that the figure is the disk's and not the time the
// kernel takes to find fresh pages for the next write, which on this
// project's VMs is most of a 256 KiB write's cost (docs/performance.md,
// "Releasing synced WAL pages"). --keep-pages (or no addon built) leaves
// them cached; the JSON says which (`dropPages`).

import { closeSync, existsSync, fdatasyncSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { block: { type: 'string', default: '4096' }, secs: { type: 'string', default: '5' }, dir: { type: 'string', default: tmpdir() }, 'keep-pages': { type: 'boolean', default: false } } });
const ADDON = join(dirname(fileURLToPath(import.meta.url)), '..', 'native', 'build', 'Release', 'siglake_native.node');
let addon = null;
if (!values['keep-pages'] && existsSync(ADDON)) addon = createRequire(import.meta.url)(ADDON);
const block = Number(values.block);
const secs = Number(values.secs);
const dir = mkdtempSync(join(values.dir, 'siglake-disk-ceiling-'));
const fd = openSync(join(dir, 'seq.dat'), 'w');
const buf = Buffer.alloc(block);
for (let i = 0; i < block; i++) buf[i] = (i * 131) & 0xff;
const lat = [];
let ops = 0;
const start = process.hrtime.bigint();
const end = start + BigInt(Math.round(secs * 1e9));
let now = start;
let written = 0;
const maxFile = 1 << 30; // wrap at 1 GiB so the disk does not fill
try {
  while (now < end) {
    const t0 = now;
    writeSync(fd, buf, 0, block, written % maxFile);
    if (addon !== null) {
      const errno = addon.fdatasyncDropSync(fd);
      if (errno !== 0) throw new Error(`fdatasync failed: errno ${errno}`);
    } else {
      fdatasyncSync(fd);
    }
    written += block;
    ops++;
    now = process.hrtime.bigint();
    lat.push(Number(now - t0) / 1e6);
  }
} finally {
  closeSync(fd);
  rmSync(dir, { recursive: true, force: true });
}
lat.sort((a, b) => a - b);
const elapsed = Number(now - start) / 1e9;
const pct = (p) => lat[Math.min(lat.length - 1, Math.ceil((p / 100) * lat.length) - 1)];
console.log(JSON.stringify({ block, dropPages: addon !== null, ops, secs: elapsed, opsPerSec: ops / elapsed, mbPerSec: (ops * block) / 1e6 / elapsed, p50Ms: pct(50), p99Ms: pct(99) }));
