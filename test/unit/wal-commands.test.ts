// recoverWal, `wal verify` and `wal dump` over a WAL root with several tenants,
// written by the real LaneWriter.

import { appendFileSync, copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { walDump, walVerify, type DescribePayload } from '../../src/wal/commands.js';
import { RecordType } from '../../src/wal/format.js';
import { LOGS_TABLE, TRACES_TABLE, indexTable, laneDir, type WalTable } from '../../src/wal/layout.js';
import { LaneWriter } from '../../src/wal/lane-writer.js';
import { recoverWal } from '../../src/wal/recovery.js';
import { writeSealedMarker } from '../../src/wal/sealed-marker.js';

let base: string;
let walDir: string;

const LANES: [string, WalTable, string[]][] = [
  ['default', LOGS_TABLE, ['d-log-1', 'd-log-2']],
  ['default', TRACES_TABLE, ['d-span']],
  ['default', indexTable('errors'), ['d-err']],
  ['acme', LOGS_TABLE, ['a-log']],
  ['beta', TRACES_TABLE, ['b-span-1', 'b-span-2', 'b-span-3']],
];

async function build(): Promise<void> {
  for (const [tenant, table, texts] of LANES) {
    const w = new LaneWriter({ dir: laneDir(walDir, tenant, table), segmentBytes: 80, now: () => 1_767_225_600_000 });
    for (const t of texts) {
      w.stage(table.kind === 'traces' ? RecordType.TRACES : RecordType.LOGS, t.length, 1_767_225_601_000, Buffer.from(t));
      w.flush();
    }
    await w.close();
  }
  // Junk the walk must skip (a name that can never be a tenant: a file named as one, `README`, blocks that tenant's writes and fails verify).
  writeFileSync(join(walDir, 'README.txt'), 'not a lane');
  mkdirSync(join(walDir, 'tmp', 'logs'), { recursive: true });
  mkdirSync(join(walDir, '.snapshot', 'logs'), { recursive: true });
}

const collect = () => {
  const lines: string[] = [];
  return { lines, out: (l: string) => lines.push(l) };
};
const describeText: DescribePayload = (type, payload) => [`${type}:${Buffer.from(payload).toString()}`];

beforeEach(async () => {
  base = mkdtempSync(join(tmpdir(), 'siglake-wal-commands-'));
  walDir = join(base, 'wal');
  await build();
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

describe('wal dump', () => {
  it('prints one JSON line per record with tenant, table, segment and texts', async () => {
    const c = collect();
    expect(await walDump(walDir, c.out, describeText)).toBe(0);
    const rows = c.lines.map((l) => JSON.parse(l));
    expect(rows.length).toBe(8);
    expect(c.lines[0]).toBe(
      '{"tenant":"default","table":"logs","segment":"00000001.seg","offset":32,"type":"logs","records":7,"timeMs":1767225601000,"time":"2026-01-01T00:00:01.000Z","texts":["1:d-log-1"]}',
    );
    // segmentBytes 80 holds the header and one 31-byte record: the second record rotated.
    expect(rows[1]).toMatchObject({ tenant: 'default', table: 'logs', segment: '00000002.seg', offset: 32 });
    expect(Object.keys(rows.find((r) => r.table === 'index'))).toEqual(['tenant', 'table', 'index', 'segment', 'offset', 'type', 'records', 'timeMs', 'time', 'texts']);
    expect(rows.find((r) => r.table === 'index')).toMatchObject({ tenant: 'default', index: 'errors', texts: ['1:d-err'] });
    expect(rows.filter((r) => r.tenant === 'beta').map((r) => [r.type, r.texts[0]])).toEqual([
      ['traces', '2:b-span-1'],
      ['traces', '2:b-span-2'],
      ['traces', '2:b-span-3'],
    ]);
    expect(new Set(rows.map((r) => r.tenant))).toEqual(new Set(['default', 'acme', 'beta']));
  });

  it('dumps a single lane directory, reading its tenant from the path', async () => {
    const c = collect();
    expect(await walDump(join(walDir, 'beta', 'traces'), c.out, describeText)).toBe(0);
    expect(c.lines.map((l) => JSON.parse(l)).map((r) => [r.tenant, r.table, r.segment])).toEqual([
      ['beta', 'traces', '00000001.seg'],
      ['beta', 'traces', '00000002.seg'],
      ['beta', 'traces', '00000003.seg'],
    ]);
  });

  it('reports a payload it cannot describe, and a torn tail, and keeps going', async () => {
    const lane = laneDir(walDir, 'acme', LOGS_TABLE);
    appendFileSync(join(lane, '00000001.seg'), Buffer.from([2, 0, 0]));
    writeSealedMarker(lane, 0); // a crash's tear: in a segment above the marker (a sealed one is never torn)
    const c = collect();
    const code = await walDump(lane, c.out, () => {
      throw new Error('not protobuf');
    });
    expect(code).toBe(0);
    expect(c.lines.map((l) => JSON.parse(l))).toEqual([
      { tenant: 'acme', table: 'logs', segment: '00000001.seg', offset: 32, type: 'logs', records: 5, timeMs: 1_767_225_601_000, time: '2026-01-01T00:00:01.000Z', texts: [], describeError: 'not protobuf' },
      { tenant: 'acme', table: 'logs', segment: '00000001.seg', offset: 61, stop: 'torn', why: 'record header cut short (3 of 24 bytes)' },
    ]);
  });
});

describe('wal verify', () => {
  it('passes a clean root, naming every lane', async () => {
    const c = collect();
    expect(await walVerify(walDir, c.out)).toBe(0);
    expect(c.lines.filter((l) => l.startsWith('lane ')).length).toBe(5);
    expect(c.lines.at(-1)).toBe('verify: 5 lanes, 8 segments, 8 records, 0 torn tails, 0 problems: OK');
  });

  it('allows gaps but not two files with one number or a non-canonical name', async () => {
    const lane = laneDir(walDir, 'beta', TRACES_TABLE);
    rmSync(join(lane, '00000002.seg'));
    expect(await walVerify(walDir, () => undefined)).toBe(0);
    copyFileSync(join(lane, '00000001.seg'), join(lane, '000000001.seg'));
    const c = collect();
    expect(await walVerify(lane, c.out)).toBe(1);
    expect(c.lines.some((l) => l.includes('segment number 1 used twice'))).toBe(true);
    expect(c.lines.some((l) => l.includes('non-canonical segment name 000000001.seg'))).toBe(true);
  });

  it('reports leftovers and unknown files without failing', async () => {
    const lane = laneDir(walDir, 'default', LOGS_TABLE);
    writeFileSync(join(lane, '00000009.seg.tmp'), Buffer.alloc(5));
    writeFileSync(join(lane, 'notes.txt'), 'hi');
    const c = collect();
    expect(await walVerify(walDir, c.out)).toBe(0);
    expect(c.lines).toContain('  leftover 00000009.seg.tmp (recovery deletes it)');
    expect(c.lines).toContain('  unexpected entry notes.txt (ignored)');
  });

  it('exits 2 when the directory cannot be read', async () => {
    const c = collect();
    expect(await walVerify(join(base, 'nope'), c.out)).toBe(2);
    expect(c.lines[0]).toMatch(/nope/);
    expect(await walDump(join(walDir, 'README.txt'), () => undefined, describeText)).toBe(2);
  });

  it('exits 2 for a directory that is no WAL (a mistyped path, a volume not mounted); an empty root is clean', async () => {
    const empty = join(base, 'not-a-wal');
    mkdirSync(join(empty, 'lost+found'), { recursive: true });
    const c = collect();
    expect(await walVerify(empty, c.out)).toBe(2);
    expect(c.lines).toEqual([`${empty}: not a WAL directory (no .siglake-wal-root, no .journal, no lane, no segment)`]);
    const d = collect();
    expect(await walDump(empty, d.out, describeText)).toBe(2);
    expect(JSON.parse(d.lines[0]!)).toEqual({ error: `${empty}: not a WAL directory (no .siglake-wal-root, no .journal, no lane, no segment)` });
    // A root of a release before the marker: the compactor's WAL id (or a live ingester's lock) says so.
    const older = join(base, 'older-root');
    mkdirSync(older);
    writeFileSync(join(older, '.siglake-wal-id'), 'a'.repeat(32));
    const o = collect();
    expect(await walVerify(older, o.out)).toBe(0);
    // The root an ingester made before its first request: the marker alone.
    writeFileSync(join(empty, '.siglake-wal-root'), '');
    const e = collect();
    expect(await walVerify(empty, e.out)).toBe(0);
    expect(e.lines.at(-1)).toBe('verify: 0 lanes, 0 segments, 0 records, 0 torn tails, 0 problems: OK');
  });
});

describe('recoverWal', () => {
  it("repairs only the lanes the filter keeps and sums what it cut", async () => {
    const acme = laneDir(walDir, 'acme', LOGS_TABLE);
    const dflt = laneDir(walDir, 'default', LOGS_TABLE);
    const acmeSeg = join(acme, '00000001.seg');
    const dfltSeg = join(dflt, '00000002.seg');
    const acmeSize = statSync(acmeSeg).size;
    const dfltSize = statSync(dfltSeg).size;
    appendFileSync(acmeSeg, Buffer.alloc(100)); // zero-filled tail
    appendFileSync(dfltSeg, Buffer.from([1, 0, 0, 0, 50, 0, 0, 0])); // torn record header
    // As a crash leaves it: the torn segment above the lane's marker (a sealed one is never torn,
    // and repair keeps its bytes as damage).
    writeSealedMarker(dflt, 1);
    writeFileSync(join(acme, '00000004.seg.tmp'), 'x');

    const shard = recoverWal(walDir, (lane) => lane.tenant !== 'default');
    expect(shard.lanes.map((l) => `${l.lane.tenant}/${l.lane.table.kind}`)).toEqual(['acme/logs', 'beta/traces']);
    expect(shard.truncatedBytes).toBe(100);
    expect(shard.cutLanes).toBe(1);
    expect(shard.corruptCuts).toBe(0);
    expect(shard.removedTmp).toBe(1);
    expect(shard.nextSegment.get(acme)).toBe(5);
    expect(shard.nextSegment.get(laneDir(walDir, 'beta', TRACES_TABLE))).toBe(4);
    expect(statSync(acmeSeg).size).toBe(acmeSize);
    // The writers of this test sealed their lanes at close (the .sealed marker stays).
    expect(readdirSync(acme).filter((n) => !n.startsWith('.'))).toEqual(['00000001.seg']);
    expect(statSync(dfltSeg).size).toBe(dfltSize + 8); // not this shard's lane

    const all = recoverWal(walDir);
    expect(all.lanes.length).toBe(5);
    expect(all.truncatedBytes).toBe(8);
    const cut = all.lanes.find((l) => l.lane.dir === dflt)?.recovery.cut;
    expect(cut).toEqual({ segment: dfltSeg, kind: 'torn', offset: dfltSize, bytes: 8, why: 'record header cut short (8 of 24 bytes)' });
    expect(statSync(dfltSeg).size).toBe(dfltSize);
    expect(await walVerify(walDir, () => undefined)).toBe(0);
  });
});
