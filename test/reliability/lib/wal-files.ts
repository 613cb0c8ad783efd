// Offline views of a WAL directory for the reliability suites: which segment
// files each lane holds (numbers, sizes, leftovers), and what `siglake wal
// verify` says about them, parsed.

import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { CLI, runCli, type DumpLine } from '../../helpers/ingester.js';
import { RECORD_HEADER_SIZE, SEGMENT_HEADER_SIZE } from '../../../src/wal/format.js';
import { readSealedMarker } from '../../../src/wal/sealed-marker.js';

export interface LaneFilesSnapshot {
  /** Segment numbers with their sizes, ascending. */
  segments: { n: number; size: number }[];
  /** Numbers of `<n>.seg.tmp` leftovers. */
  tmp: number[];
}

/** lane directory (relative to the WAL root) → its files. */
export type WalSnapshot = Map<string, LaneFilesSnapshot>;

export function snapshotWal(walDir: string): WalSnapshot {
  const out: WalSnapshot = new Map();
  const walk = (dir: string) => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) {
        walk(p);
        continue;
      }
      const m = /^(\d+)\.seg(\.tmp)?$/.exec(e.name);
      if (!m) continue;
      const lane = path.relative(walDir, dir);
      const l = out.get(lane) ?? { segments: [], tmp: [] };
      out.set(lane, l);
      if (m[2]) l.tmp.push(Number(m[1]));
      else l.segments.push({ n: Number(m[1]), size: fs.statSync(p).size });
    }
  };
  walk(walDir);
  for (const l of out.values()) {
    l.segments.sort((a, b) => a.n - b.n);
    l.tmp.sort((a, b) => a - b);
  }
  return out;
}

/** The highest segment number a lane has used (a `.tmp` counts), 0 for none. */
export function highestNumber(l: LaneFilesSnapshot | undefined): number {
  if (l === undefined) return 0;
  return Math.max(0, ...l.segments.map((s) => s.n), ...l.tmp);
}

export interface VerifyReport {
  status: number | null;
  output: string;
  lanes: number;
  segments: number;
  records: number;
  tornTails: number;
  problems: number;
  /** Bytes recovery will cut, summed over the torn tails reported. */
  bytesToCut: number;
  leftoverTmp: number;
  damaged: string[];
}

export function verifyWal(walDir: string): VerifyReport {
  const r = runCli(['wal', 'verify', walDir]);
  const output = r.stdout + r.stderr;
  const summary = /verify: (\d+) lanes, (\d+) segments, (\d+) records, (\d+) torn tails, (\d+) problems: (OK|FAILED)/.exec(r.stdout);
  let bytesToCut = 0;
  for (const m of r.stdout.matchAll(/recovery cuts (\d+) bytes/g)) bytesToCut += Number(m[1]);
  return {
    status: r.status,
    output,
    lanes: summary ? Number(summary[1]) : -1,
    segments: summary ? Number(summary[2]) : -1,
    records: summary ? Number(summary[3]) : -1,
    tornTails: summary ? Number(summary[4]) : -1,
    problems: summary ? Number(summary[5]) : -1,
    bytesToCut,
    leftoverTmp: [...r.stdout.matchAll(/leftover /g)].length,
    damaged: r.stdout.split('\n').filter((l) => l.includes('DAMAGED')),
  };
}

/**
 * What must hold between a snapshot taken before a process life and one taken
 * after it (crash or not): no segment file disappeared, none grew a number it
 * already had, and every segment created in that life has a number above every
 * number the lane had used before it. Returns the violations.
 */
export function numberingViolations(before: WalSnapshot, after: WalSnapshot): string[] {
  const out: string[] = [];
  for (const [lane, b] of before) {
    const a = after.get(lane);
    const have = new Set((a?.segments ?? []).map((s) => s.n));
    for (const s of b.segments) if (!have.has(s.n)) out.push(`${lane}: segment ${s.n} disappeared`);
  }
  for (const [lane, a] of after) {
    const b = before.get(lane);
    const old = new Set((b?.segments ?? []).map((s) => s.n));
    const high = highestNumber(b);
    for (const s of a.segments) {
      if (old.has(s.n)) continue;
      if (s.n <= high) out.push(`${lane}: new segment ${s.n} reuses a number at or below ${high}, the highest used before`);
    }
    const seen = new Set<number>();
    for (const s of a.segments) {
      if (seen.has(s.n)) out.push(`${lane}: segment number ${s.n} twice`);
      seen.add(s.n);
    }
  }
  return out;
}

/**
 * `siglake wal dump DIR`, parsed, for WALs of any size (the shared helper's
 * spawnSync keeps at most 1 MiB of output). An absent directory dumps as nothing.
 */
export function dumpWal(dir: string, opts: { allowDamaged?: boolean } = {}): DumpLine[] {
  if (!fs.existsSync(dir)) return [];
  const r = spawnSync(process.execPath, [CLI, 'wal', 'dump', dir], {
    encoding: 'utf8',
    maxBuffer: 2 * 1024 * 1024 * 1024,
    timeout: 300_000,
  });
  if (r.status !== 0 && !(opts.allowDamaged === true && r.status === 1)) throw new Error(`wal dump ${dir} failed (status ${r.status}, ${r.error?.message ?? ''}): ${r.stderr}`);
  const out: DumpLine[] = [];
  for (const l of r.stdout.split('\n')) if (l.startsWith('{')) out.push(JSON.parse(l) as DumpLine);
  return out;
}

export type TornKind = 'short-header' | 'short-payload' | 'zero-blocks';

/**
 * Appends to the last segment of a lane what a crash in the middle of an
 * append leaves (docs/wal-format.md, "torn"): part of a record header, a
 * whole valid record header whose payload stops short, or zeroed blocks the
 * file system allocated but never wrote. Returns the bytes appended.
 */
export function appendTornTail(laneDir: string, kind: TornKind, rand: (n: number) => number): number {
  const names = fs
    .readdirSync(laneDir)
    .filter((n) => /^\d+\.seg$/.test(n))
    .sort((a, b) => Number.parseInt(a, 10) - Number.parseInt(b, 10));
  const last = names[names.length - 1];
  if (last === undefined) return 0;
  // A crash tears only a segment its own life was appending to: never one at or below the lane's
  // `.sealed` marker (synced, then marked; recovery keeps such a segment's damage as damage).
  if (Number.parseInt(last, 10) <= readSealedMarker(laneDir)) return 0;
  const file = path.join(laneDir, last);
  const size = fs.statSync(file).size;
  let tail: Buffer;
  if (size < SEGMENT_HEADER_SIZE) {
    // A segment whose header was cut already: only a header prefix can follow.
    tail = Buffer.alloc(1 + rand(SEGMENT_HEADER_SIZE - 1 - size), 0x53);
    if (size + tail.length >= SEGMENT_HEADER_SIZE) tail = tail.subarray(0, SEGMENT_HEADER_SIZE - 1 - size);
    if (tail.length === 0) return 0;
  } else if (kind === 'short-header') {
    tail = Buffer.alloc(1 + rand(RECORD_HEADER_SIZE - 1));
    tail[0] = 1; // a logs record's type byte: the rest of the header never made it
  } else if (kind === 'short-payload') {
    const declared = 64 + rand(4096);
    const present = rand(declared);
    tail = Buffer.alloc(RECORD_HEADER_SIZE + present, 0x2a);
    tail[0] = 1; // type logs
    tail[1] = 0; // flags
    tail.writeUInt16LE(0, 2); // reserved
    tail.writeUInt32LE(declared, 4); // payload length, past the end of the file
    tail.writeUInt32LE(0x12345678, 8); // CRC: cannot be checked, the payload is not all there
    tail.writeUInt32LE(1, 12); // record count
    tail.writeUInt32LE(Date.now() % 0x100000000, 16);
    tail.writeUInt32LE(0, 20);
  } else {
    tail = Buffer.alloc(1 + rand(8192));
  }
  fs.appendFileSync(file, tail);
  return tail.length;
}
