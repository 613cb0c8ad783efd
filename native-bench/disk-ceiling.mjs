#!/usr/bin/env node
// The disk ceiling: sequential writes of one block size, each followed by
// fdatasync, for a number of seconds, in the directory the WAL would use.
// What `batch` durability can reach at best with that many bytes per sync.
// Prints one JSON line: block, ops, secs, opsPerSec, mbPerSec, p50Ms, p99Ms.
//
//   node native-bench/disk-ceiling.mjs --block 262144 --secs 5 --dir DIR

import { closeSync, fdatasyncSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { block: { type: 'string', default: '4096' }, secs: { type: 'string', default: '5' }, dir: { type: 'string', default: tmpdir() } } });
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
    fdatasyncSync(fd);
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
console.log(JSON.stringify({ block, ops, secs: elapsed, opsPerSec: ops / elapsed, mbPerSec: (ops * block) / 1e6 / elapsed, p50Ms: pct(50), p99Ms: pct(99) }));
