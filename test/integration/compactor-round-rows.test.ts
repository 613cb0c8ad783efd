// A compaction round's row budget (src/compactor/compactor.ts,
// DEFAULT_MAX_ROUND_ROWS): one request of many tiny log records is a few MiB,
// well inside the round's byte budget, but millions of rows of work; the
// round landed it whole (8 million empty records: about 80 s) while every
// other tenant's landing waited behind it. A round now stops once it has
// landed its rows, inside the segment and the record if need be, records in
// the table how far it got, and the next round starts at the next lane.
//
// The WAL is written by a real ingester (compactor off), then landed by
// `siglake compact --once`: both segments are sealed before the first round,
// so the order is deterministic (lanes are taken in name order, `flood`
// before `other`).

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { duckParquet, duckQuery, icebirdDataFiles, icebirdRows } from '../helpers/iceberg.js';
import { post } from '../helpers/http.js';
import { listFiles, runCli, startIngester } from '../helpers/ingester.js';
import { useLocalLake } from '../helpers/local-lake.js';
import { jsonBytes, logsJson } from '../helpers/otlp-bodies.js';
import { DEFAULT_MAX_ROUND_ROWS } from '../../src/compactor/compactor.js';

/** Over two rounds' budget: the flood needs three rounds. */
const RECORDS = 2 * DEFAULT_MAX_ROUND_ROWS + 75_000;

function varint(n: number): number[] {
  const out: number[] = [];
  for (; n > 127; n = Math.floor(n / 128)) out.push((n & 127) | 128);
  out.push(n);
  return out;
}

/** A length-delimited protobuf field: tag byte, length, contents. */
function field(tag: number, contents: Uint8Array): Buffer {
  return Buffer.concat([Buffer.from([tag, ...varint(contents.length)]), contents]);
}

/** ExportLogsServiceRequest of `n` log records in one scope, record i with only an int body i (about 8 bytes each). */
function tinyRecords(n: number): Buffer {
  const parts: Buffer[] = [];
  for (let i = 0; i < n; i++) {
    const anyValue = Buffer.from([0x18, ...varint(i)]); // AnyValue.int_value
    const record = Buffer.from([0x2a, anyValue.length, ...anyValue]); // LogRecord.body
    parts.push(Buffer.from([0x12, record.length]), record); // ScopeLogs.log_records
  }
  return field(0x0a, field(0x12, Buffer.concat(parts))); // request.resource_logs → ResourceLogs.scope_logs
}

interface Snapshot {
  'timestamp-ms': number;
  'sequence-number': number;
  summary: Record<string, string>;
}

function snapshotsOf(metadataLocation: string): Snapshot[] {
  const meta = JSON.parse(fs.readFileSync(fileURLToPath(metadataLocation), 'utf8')) as { snapshots: Snapshot[] };
  return [...meta.snapshots].sort((a, b) => a['sequence-number'] - b['sequence-number']);
}

describe('a compaction round is bounded by rows as well as bytes', () => {
  const lake = useLocalLake('siglake-round-rows-');
  const { dir, flags } = lake;
  const walDir = path.join(dir, 'wal');
  const liveSegments = () => listFiles(walDir).filter((f) => f.endsWith('.seg') && fs.statSync(path.join(walDir, f)).size > 0);

  /** The flood (one request of RECORDS tiny records, tenant `flood`) and one record of tenant `other`, stored by a fresh ingester that then stops. */
  async function storeBoth(flood: string, other: string): Promise<void> {
    const ing = await startIngester({ dataDir: dir, args: ['--trust-tenant-header', '--compactor=false', ...flags] });
    try {
      const a = await post(ing.url, '/v1/logs', tinyRecords(RECORDS), { headers: { 'x-scope-orgid': flood } });
      expect(a.status).toBe(200);
      const b = await post(ing.url, '/v1/logs', jsonBytes(logsJson(['beside-the-flood'])), { contentType: 'application/json', headers: { 'x-scope-orgid': other } });
      expect(b.status).toBe(200);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
  }

  /** Every flood row landed exactly once: RECORDS rows, bodies 0 … RECORDS-1 each once. */
  async function expectFloodLandedOnce(flood: string, other: string): Promise<void> {
    const loc = (await lake.catalog.metadataLocation(`tenant_${flood}`, 'logs'))!;
    const files = await icebirdDataFiles(loc);
    const [r] = await duckQuery(
      `SELECT count(*) AS n, count(DISTINCT body) AS d, min(CAST(body AS BIGINT)) AS lo, max(CAST(body AS BIGINT)) AS hi FROM ${duckParquet(files.map((f) => f.path))}`,
    );
    expect(r).toEqual({ n: String(RECORDS), d: String(RECORDS), lo: '0', hi: String(RECORDS - 1) });
    expect((await icebirdRows((await lake.catalog.metadataLocation(`tenant_${other}`, 'logs'))!)).map((x) => x['body'])).toEqual(['beside-the-flood']);
    expect(liveSegments()).toEqual([]);
  }

  it("one request of many tiny records lands over several rounds, and another tenant's record lands before it is done", async () => {
    await storeBoth('flood', 'other');
    const c = runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', walDir, ...flags], { timeoutMs: 240_000 });
    expect(c.status, c.stderr).toBe(0);

    const rounds = c.stdout
      .split('\n')
      .filter((l) => l.includes('"compaction round"'))
      .map((l) => JSON.parse(l) as { rows: number; backlog: boolean });
    // No round landed more than its budget of rows; the flood took three.
    expect(rounds.map((r) => r.rows)).toEqual([DEFAULT_MAX_ROUND_ROWS, DEFAULT_MAX_ROUND_ROWS, RECORDS + 1 - 2 * DEFAULT_MAX_ROUND_ROWS]);
    expect(rounds.map((r) => r.backlog)).toEqual([true, true, false]);

    // The flood's table took a snapshot per round; the other tenant's one snapshot came before the flood's last.
    const flood = snapshotsOf((await lake.catalog.metadataLocation('tenant_flood', 'logs'))!);
    const other = snapshotsOf((await lake.catalog.metadataLocation('tenant_other', 'logs'))!);
    expect(flood).toHaveLength(3);
    expect(other).toHaveLength(1);
    expect(other[0]!['timestamp-ms']).toBeLessThan(flood[2]!['timestamp-ms']);
    expect(flood.map((s) => Number(s.summary['added-records']))).toEqual(rounds.map((r, i) => (i === 1 ? r.rows - 1 : r.rows)));
    await expectFloodLandedOnce('flood', 'other');
  }, 300_000);

  it('a compactor killed after landing part of the request goes on from there, and lands every record once', async () => {
    // (Its own tenants: the first test's tables are in the lake.)
    await storeBoth('flood2', 'other2');
    // Commits: round 1 the flood's first part, round 2 the other tenant then the flood's second part: killed there.
    const crashed = runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', walDir, ...flags], {
      env: { SIGLAKE_TEST_HOOKS: '1', SIGLAKE_TEST_CRASH_AFTER_COMMITS: '3' },
      timeoutMs: 240_000,
    });
    expect(crashed.signal).toBe('SIGKILL');
    expect(snapshotsOf((await lake.catalog.metadataLocation('tenant_flood2', 'logs'))!)).toHaveLength(2);
    expect(liveSegments()).toHaveLength(2);

    const again = runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', walDir, ...flags], { timeoutMs: 240_000 });
    expect(again.status, again.stderr).toBe(0);
    await expectFloodLandedOnce('flood2', 'other2');
  }, 300_000);
});
