// A record header whose payload length is damaged, in a segment made long
// and sparse (`truncate -s`), found and left at stop 52: the reader took the
// declared length at its word as long as the file could hold it, and
// allocated it (up to 4 GiB) and read it before the CRC failed. `wal verify`
// and `wal dump` died on a length past Node's largest buffer, and otherwise
// held gigabytes for a record no writer made; start-up recovery did the same.
// Now a header declaring more than the writer ever stores
// (MAX_RECORD_PAYLOAD) is damage at its offset, refused before anything is
// read, and a record longer than any read so far has its CRC checked through
// the reader's buffer before that buffer grows to hold it. What must hold:
// each process finishes normally, names the offset of the bad header, keeps
// every record before it, and its peak resident set stays far below the
// length the header declares.

import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { dumpLines, runCli, startIngester } from '../helpers/ingester.js';
import { maxRssEnv, peakRssBytes } from '../helpers/max-rss.js';
import { acmeWal, sendLog, walTestLeftovers } from '../helpers/written-wal.js';
import { MAX_RECORD_PAYLOAD, MAX_SEGMENT_FILE_BYTES, RECORD_HEADER_SIZE } from '../../src/wal/format.js';

const GIB = 2 ** 30;
const MIB = 2 ** 20;
/** Far below what either bad header declares (the smaller is 768 MiB), well above what a CLI or an ingester holds. */
const RSS_CEILING = 400 * MIB;
const ARGS = ['--trust-tenant-header', '--compactor=false'];
const { dirs, live } = walTestLeftovers();

/** A record header (type logs, one record) declaring `length` payload bytes, with a CRC that matches nothing. */
function badHeader(length: number): Buffer {
  const h = Buffer.alloc(RECORD_HEADER_SIZE);
  h[0] = 1;
  h.writeUInt32LE(length, 4);
  h.writeUInt32LE(0x5eed_c0de, 8);
  h.writeUInt32LE(1, 12);
  h.writeUInt32LE(1_767_225_600_000 % 2 ** 32, 16);
  h.writeUInt32LE(Math.floor(1_767_225_600_000 / 2 ** 32), 20);
  return h;
}

/**
 * An ingester that wrote acme-0..2, then was stopped (its last segment sealed)
 * or killed (unsealed); then acme's last segment gets `header` appended and
 * is made `size` bytes long, sparse. Returns the WAL and where the header lies.
 */
async function written(how: 'stop' | 'kill9', header: Buffer, size: number): Promise<{ dataDir: string; wal: string; seg: string; offset: number }> {
  const { dataDir, wal, seg, size: offset } = await acmeWal(how, 3, `siglake-oversized-${how}-`);
  dirs.push(dataDir);
  fs.appendFileSync(seg, header);
  fs.truncateSync(seg, size); // sparse: no block past the header is written
  return { dataDir, wal, seg, offset };
}

/** `siglake wal <cmd> wal`, with its peak RSS. */
function cli(cmd: 'verify' | 'dump', wal: string): { status: number | null; stdout: string; stderr: string; peak: number } {
  const rss = path.join(path.dirname(wal), `rss-${cmd}-${Math.random().toString(36).slice(2)}`);
  const r = runCli(['wal', cmd, wal], { timeoutMs: 120_000, env: maxRssEnv(rss) });
  expect(r.signal, `wal ${cmd} did not finish: ${r.stderr}`).toBeNull();
  return { ...r, peak: peakRssBytes(rss) };
}

describe('a record header declaring a huge payload in a long sparse segment', () => {
  it('4 GiB − 1, more than the writer ever stores, in a sealed 8 GiB segment: verify and dump report it at its offset, exit 1, and hold no more than usual', { timeout: 120_000 }, async () => {
    expect(0xffff_ffff).toBeGreaterThan(MAX_RECORD_PAYLOAD);
    expect(8 * GIB).toBeGreaterThan(MAX_SEGMENT_FILE_BYTES);
    const { wal, seg, offset } = await written('stop', badHeader(0xffff_ffff), 8 * GIB);

    const v = cli('verify', wal);
    expect(v.stderr).toBe('');
    expect(v.status, v.stdout).toBe(1);
    expect(v.stdout).toContain(
      `DAMAGED: ${path.basename(seg)} at offset ${offset}: record declares a payload of 4294967295 bytes, more than the writer ever stores (at most ${MAX_RECORD_PAYLOAD})`,
    );
    expect(v.stdout).toMatch(/verify: \d+ lanes, \d+ segments, 3 records, 0 torn tails, 1 problems: FAILED/);
    expect(v.peak).toBeLessThan(RSS_CEILING);

    const d = cli('dump', wal);
    expect(d.status, d.stderr).toBe(1);
    expect(dumpLines(d.stdout).filter((l) => l.tenant === 'acme').flatMap((l) => l.texts ?? [])).toEqual(['acme-0', 'acme-1', 'acme-2']);
    const stop = d.stdout
      .split('\n')
      .filter((l) => l.includes('"stop"'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(stop).toEqual([expect.objectContaining({ tenant: 'acme', segment: path.basename(seg), offset, stop: 'corrupt' })]);
    expect(String(stop[0]!['why'])).toContain('record declares a payload of 4294967295 bytes');
    expect(d.peak).toBeLessThan(RSS_CEILING);
  });

  it("768 MiB (within the bound) in a killed ingester's unsealed 1 GiB segment: verify reports the cut to come, the start cuts there and keeps every record, memory stays flat", { timeout: 120_000 }, async () => {
    const declared = 768 * MIB;
    expect(declared).toBeLessThanOrEqual(MAX_RECORD_PAYLOAD);
    const { dataDir, wal, seg, offset } = await written('kill9', badHeader(declared), GIB);

    const v = cli('verify', wal);
    expect(v.stdout).toContain(`${path.basename(seg)} at offset ${offset}: record CRC mismatch`);
    expect(v.stdout).toMatch(/verify: \d+ lanes, \d+ segments, 3 records, /);
    expect(v.peak).toBeLessThan(RSS_CEILING);

    const rss = path.join(dataDir, 'rss-ingest');
    const ing = await startIngester({ dataDir, args: ARGS, timeoutMs: 60_000, env: maxRssEnv(rss) });
    live.add(ing);
    const cut = ing.logs.find((l) => l.msg.startsWith('WAL tail repaired'));
    expect(cut).toMatchObject({ segment: seg, offset, truncatedBytes: GIB - offset });
    expect(fs.statSync(seg).size).toBe(offset);
    expect((await sendLog(ing.url, 'acme', 'acme-after')).status).toBe(200);
    expect(await ing.stop()).toBe(0);
    live.delete(ing);
    expect(peakRssBytes(rss)).toBeLessThan(RSS_CEILING);

    const after = runCli(['wal', 'verify', wal]);
    expect(after.status, after.stdout).toBe(0);
    const d = runCli(['wal', 'dump', wal]);
    expect(d.status, d.stderr).toBe(0);
    expect(dumpLines(d.stdout).filter((l) => l.tenant === 'acme').flatMap((l) => l.texts)).toEqual(['acme-0', 'acme-1', 'acme-2', 'acme-after']);
  });
});
