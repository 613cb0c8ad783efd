import { crc32c } from '@node-rs/crc32';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  RECORD_HEADER_SIZE,
  RecordType,
  SEGMENT_HEADER_SIZE,
  crcRun,
  decodeRecordHeader,
  decodeSegmentHeader,
  encodeRecordHeader,
  encodeSegmentHeader,
  formatSegmentName,
  parseSegmentName,
  recordCrc,
} from '../../src/wal/format.js';
import { LOGS_TABLE, TRACES_TABLE, indexTable, laneDir, listLaneDirs, locateLaneDir } from '../../src/wal/layout.js';
import { WalArgumentError } from '../../src/wal/wal-argument-error.js';

describe('format', () => {
  it('crcRun, the JavaScript CRC of short headers, is the CRC-32C of the native one, continued from any CRC', () => {
    const b = Buffer.alloc(300);
    for (let i = 0; i < b.length; i++) b[i] = (i * 131 + 7) & 0xff;
    for (const [from, to] of [[0, 0], [0, 1], [3, 35], [0, 300], [17, 200]] as const) {
      for (const seed of [0, 1, 0xdeadbeef, 0xffffffff]) {
        expect(crcRun(seed, b, from, to)).toBe(to > from ? crc32c(b.subarray(from, to), seed) : seed);
      }
    }
  });

  it('encodes a segment header byte for byte as documented', () => {
    const b = Buffer.alloc(40, 0xee);
    encodeSegmentHeader(b, 4, 0x1_0000_0002, 1_767_225_600_123);
    expect(b.subarray(4, 8).toString('latin1')).toBe('SLWL');
    expect(b.readUInt16LE(8)).toBe(1);
    expect(b.readUInt16LE(10)).toBe(32);
    expect(b.readBigUInt64LE(12)).toBe(0x1_0000_0002n);
    expect(b.readBigUInt64LE(20)).toBe(1_767_225_600_123n);
    expect(b.readUInt32LE(28)).toBe(0);
    expect(b.readUInt32LE(32)).toBe(crc32c(b.subarray(4, 32)));
    expect(b[3]).toBe(0xee);
    expect(b[36]).toBe(0xee);
    expect(decodeSegmentHeader(b, 4, 0x1_0000_0002)).toEqual({ version: 1, segment: 0x1_0000_0002, createdMs: 1_767_225_600_123 });
    expect(decodeSegmentHeader(b, 4, 7)).toMatch(/does not match file name/);
  });

  it('round-trips the largest safe 64-bit values and refuses larger ones', () => {
    const b = Buffer.alloc(SEGMENT_HEADER_SIZE);
    encodeSegmentHeader(b, 0, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
    expect(decodeSegmentHeader(b, 0, 0)).toEqual({ version: 1, segment: Number.MAX_SAFE_INTEGER, createdMs: Number.MAX_SAFE_INTEGER });
    expect(() => encodeSegmentHeader(b, 0, 0, 1)).toThrow(WalArgumentError);
    expect(() => encodeSegmentHeader(b, 0, 1, -1)).toThrow(WalArgumentError);
    b.writeBigUInt64LE(1n << 53n, 8);
    b.writeUInt32LE(crc32c(b.subarray(0, 28)), 28);
    expect(decodeSegmentHeader(b, 0, 0)).toBe('segment header value out of range');
  });

  it('encodes a record header whose CRC covers [0,8) ++ [12,24+L)', () => {
    const payload = Buffer.from('a payload of some bytes');
    const b = Buffer.alloc(RECORD_HEADER_SIZE + 8);
    encodeRecordHeader(b, 8, RecordType.TRACES, 42, 1_767_225_600_999, payload);
    const h = b.subarray(8, 8 + RECORD_HEADER_SIZE);
    expect(h[0]).toBe(2);
    expect(h[1]).toBe(0);
    expect(h.readUInt16LE(2)).toBe(0);
    expect(h.readUInt32LE(4)).toBe(payload.length);
    expect(h.readUInt32LE(12)).toBe(42);
    expect(h.readBigUInt64LE(16)).toBe(1_767_225_600_999n);
    const expected = crc32c(Buffer.concat([h.subarray(0, 8), h.subarray(12, 24), payload]));
    expect(h.readUInt32LE(8)).toBe(expected);
    expect(recordCrc(b, 8, payload)).toBe(expected);
    expect(decodeRecordHeader(b, 8)).toEqual({ type: 2, length: payload.length, crc: expected, count: 42, timeMs: 1_767_225_600_999 });
  });

  it('computes the CRC-32C check value', () => {
    // A record header of zeros except the type, and "123456789" as payload, cross-checked with the native CRC.
    const b = Buffer.alloc(RECORD_HEADER_SIZE);
    b[0] = 1;
    const p = Buffer.from('123456789');
    expect(recordCrc(b, 0, p)).toBe(crc32c(Buffer.concat([b.subarray(0, 8), b.subarray(12), p])));
    expect(crc32c(p)).toBe(0xe3069283);
  });

  it('names segments %08d.seg and parses names strictly', () => {
    expect(formatSegmentName(1)).toBe('00000001.seg');
    expect(formatSegmentName(99_999_999)).toBe('99999999.seg');
    expect(formatSegmentName(123_456_789)).toBe('123456789.seg');
    expect(parseSegmentName('00000001.seg')).toEqual({ number: 1, tmp: false, canonical: true });
    expect(parseSegmentName('123456789.seg')).toEqual({ number: 123_456_789, tmp: false, canonical: true });
    expect(parseSegmentName('00000007.seg.tmp')).toEqual({ number: 7, tmp: true, canonical: true });
    expect(parseSegmentName('000000001.seg')).toEqual({ number: 1, tmp: false, canonical: false });
    expect(parseSegmentName('1.seg')).toEqual({ number: 1, tmp: false, canonical: false });
    for (const bad of ['00000000.seg', 'x.seg', '00000001.seg.bak', '00000001.SEG', '-1.seg', '99999999999999999999.seg', '']) {
      expect(parseSegmentName(bad)).toBeNull();
    }
  });
});

describe('layout', () => {
  let base: string;
  let walDir: string;
  beforeAll(() => {
    // The root sits one level down so that its parent holds nothing but it.
    base = mkdtempSync(join(tmpdir(), 'siglake-wal-layout-'));
    walDir = join(base, 'wal');
    mkdirSync(walDir);
  });
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  it('places the default tenant at the root and others beneath their own directory', () => {
    expect(laneDir('/w', 'default', LOGS_TABLE)).toBe('/w/logs');
    expect(laneDir('/w', 'default', TRACES_TABLE)).toBe('/w/traces');
    expect(laneDir('/w', 'default', indexTable('errors'))).toBe('/w/indexes/errors');
    expect(laneDir('/w', 'acme', LOGS_TABLE)).toBe('/w/acme/logs');
    expect(laneDir('/w', 'acme', TRACES_TABLE)).toBe('/w/acme/traces');
    expect(laneDir('/w', 'acme', indexTable('errors'))).toBe('/w/acme/indexes/errors');
  });

  it('lists every lane and skips reserved names, hidden entries and junk', () => {
    const dirs = [
      'logs',
      'traces',
      'indexes/errors',
      'indexes/.hidden',
      'acme/logs',
      'acme/indexes/slow',
      'acme/junk',
      'beta/traces',
      'default/logs', // not the default tenant: its lanes are at the root
      'metrics/logs',
      'tmp/logs',
      'checkpoints/logs',
      'Archive/logs', // reserved names compare case-insensitively
      '.trash/logs',
      'bad name/logs',
      'empty-tenant',
    ];
    for (const d of dirs) mkdirSync(join(walDir, d), { recursive: true });
    writeFileSync(join(walDir, 'README'), 'x');
    writeFileSync(join(walDir, 'acme', 'traces'), 'a file, not a lane');
    const lanes = listLaneDirs(walDir).map((l) => [l.tenant, l.table.kind === 'index' ? `index:${l.table.name}` : l.table.kind, l.dir]);
    expect(lanes).toEqual([
      ['default', 'logs', join(walDir, 'logs')],
      ['default', 'traces', join(walDir, 'traces')],
      ['default', 'index:errors', join(walDir, 'indexes/errors')],
      ['acme', 'logs', join(walDir, 'acme/logs')],
      ['acme', 'index:slow', join(walDir, 'acme/indexes/slow')],
      ['beta', 'traces', join(walDir, 'beta/traces')],
    ]);
    expect(listLaneDirs(join(walDir, 'missing'))).toEqual([]);
  });

  it('reads a single lane directory back to its tenant and table', () => {
    expect(locateLaneDir(join(walDir, 'logs'))).toEqual({ dir: join(walDir, 'logs'), tenant: 'default', table: LOGS_TABLE });
    expect(locateLaneDir(join(walDir, 'acme/logs'))?.tenant).toBe('acme');
    expect(locateLaneDir(join(walDir, 'acme/indexes/slow'))).toEqual({
      dir: join(walDir, 'acme/indexes/slow'),
      tenant: 'acme',
      table: indexTable('slow'),
    });
    expect(locateLaneDir(join(walDir, 'indexes/errors'))?.tenant).toBe('default');
    expect(locateLaneDir(join(walDir, 'acme'))).toBeNull();
  });
});
