// A compaction round's row budget (src/compactor/compactor.ts,
// DEFAULT_MAX_ROUND_ROWS): one request of many tiny log records is a few MiB,
// well inside the round's byte budget, but millions of rows of work; the
// round landed it whole (8 million empty records: about 80 s) while every
// other tenant's landing waited behind it. A round now stops once it has
// landed its rows, inside the segment and the record if need be, records in
// the table how far it got, and the next round starts at the next lane. A span
// weighs 1 + its events + its links against the budget, so a request of
// span-heavy spans is cut between spans. The budget is a setting,
// compactor.maxRoundRows (--compact-max-round-rows).
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
import { until } from '../helpers/wait.js';
import { jsonBytes, logsJson, pbField, varint } from '../helpers/otlp-bodies.js';
import { DEFAULT_MAX_ROUND_ROWS } from '../../src/compactor/compactor.js';

/** The rows and backlog flag of each "compaction round" line in a compactor's log. */
function roundsOf(stdout: string): { rows: number; backlog: boolean }[] {
  return stdout
    .split('\n')
    .filter((l) => l.includes('"compaction round"'))
    .map((l) => JSON.parse(l) as { rows: number; backlog: boolean });
}

/** Over two rounds' budget: the flood needs three rounds. */
const RECORDS = 2 * DEFAULT_MAX_ROUND_ROWS + 75_000;


/** ExportLogsServiceRequest of `n` log records in one scope, record i with only an int body i (about 8 bytes each). */
function tinyRecords(n: number): Buffer {
  const parts: Buffer[] = [];
  for (let i = 0; i < n; i++) {
    const anyValue = Buffer.from([0x18, ...varint(i)]); // AnyValue.int_value
    const record = Buffer.from([0x2a, anyValue.length, ...anyValue]); // LogRecord.body
    parts.push(Buffer.from([0x12, record.length]), record); // ScopeLogs.log_records
  }
  return pbField(0x0a, pbField(0x12, Buffer.concat(parts))); // request.resource_logs → ResourceLogs.scope_logs
}

/** Spans of the span-heavy request, and empty events in each: a span weighs 1 + its events against the round's budget. */
const SPANS = 80;
const EVENTS = 8_192;
/** Spans a round lands: it adds spans while its budget is above 0, so the one that takes it to 0 or below is the last. */
const SPANS_PER_ROUND = Math.ceil(DEFAULT_MAX_ROUND_ROWS / (1 + EVENTS));

/** ExportTraceServiceRequest of SPANS spans in one scope, span i named `s<i>` with EVENTS empty events (about 16 KiB each). */
function eventfulSpans(): Buffer {
  const events = Buffer.alloc(2 * EVENTS);
  for (let k = 0; k < EVENTS; k++) events[2 * k] = 0x5a; // Span.events, an empty Event
  const parts: Buffer[] = [];
  for (let i = 0; i < SPANS; i++) {
    const traceId = Buffer.alloc(16, 0x11);
    const spanId = Buffer.alloc(8);
    spanId.writeUInt32BE(i + 1, 4);
    const span = Buffer.concat([pbField(0x0a, traceId), pbField(0x12, spanId), pbField(0x2a, Buffer.from(`s${i}`)), events]);
    parts.push(pbField(0x12, span)); // ScopeSpans.spans
  }
  return pbField(0x0a, pbField(0x12, Buffer.concat(parts))); // request.resource_spans → ResourceSpans.scope_spans
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

    const rounds = roundsOf(c.stdout);
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

  it("a request of span-heavy spans is cut between spans, each weighing 1 + its events, and another tenant's record lands before it is done", async () => {
    // One span of 8,192 empty events costs the compactor about what 8,192 empty log records do; a
    // span counted one row, so a request of 128 spans of 60,000 events each held a round 11 s.
    expect(SPANS_PER_ROUND).toBe(32);
    const ing = await startIngester({ dataDir: dir, args: ['--trust-tenant-header', '--compactor=false', ...flags] });
    try {
      const a = await post(ing.url, '/v1/traces', eventfulSpans(), { headers: { 'x-scope-orgid': 'eventful' } });
      expect(a.status).toBe(200);
      const b = await post(ing.url, '/v1/logs', jsonBytes(logsJson(['beside-the-spans'])), { contentType: 'application/json', headers: { 'x-scope-orgid': 'other3' } });
      expect(b.status).toBe(200);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
    const c = runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', walDir, ...flags], { timeoutMs: 240_000 });
    expect(c.status, c.stderr).toBe(0);
    const rounds = roundsOf(c.stdout);
    // Round 1: the first 32 spans; round 2: the other tenant's record (the lane after), then 32 more; round 3: the rest.
    expect(rounds.map((r) => r.rows)).toEqual([SPANS_PER_ROUND, SPANS_PER_ROUND + 1, SPANS - 2 * SPANS_PER_ROUND]);
    expect(rounds.map((r) => r.backlog)).toEqual([true, true, false]);

    const spans = snapshotsOf((await lake.catalog.metadataLocation('tenant_eventful', 'traces'))!);
    const other = snapshotsOf((await lake.catalog.metadataLocation('tenant_other3', 'logs'))!);
    expect(spans.map((s) => Number(s.summary['added-records']))).toEqual([SPANS_PER_ROUND, SPANS_PER_ROUND, SPANS - 2 * SPANS_PER_ROUND]);
    expect(other).toHaveLength(1);
    expect(other[0]!['timestamp-ms']).toBeLessThan(spans[2]!['timestamp-ms']);

    // Every span landed once, whole: its name once, its 8,192 events.
    const files = await icebirdDataFiles((await lake.catalog.metadataLocation('tenant_eventful', 'traces'))!);
    const [r] = await duckQuery(
      `SELECT count(*) AS n, count(DISTINCT name) AS d, min(json_array_length(events)) AS lo, max(json_array_length(events)) AS hi FROM ${duckParquet(files.map((f) => f.path))}`,
    );
    expect(r).toEqual({ n: String(SPANS), d: String(SPANS), lo: String(EVENTS), hi: String(EVENTS) });
    expect(liveSegments()).toEqual([]);
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

describe('compactor.maxRoundRows (--compact-max-round-rows) reaches the compactor', () => {
  const lake = useLocalLake('siglake-round-rows-flag-');
  const { dir, flags } = lake;
  const walDir = path.join(dir, 'wal');
  const addedPerSnapshot = async (tenant: string) =>
    snapshotsOf((await lake.catalog.metadataLocation(`tenant_${tenant}`, 'logs'))!).map((s) => Number(s.summary['added-records']));

  it('siglake compact: a request of 10 records lands 3 rows a round', async () => {
    const ing = await startIngester({ dataDir: dir, args: ['--trust-tenant-header', '--compactor=false', ...flags] });
    try {
      const r = await post(ing.url, '/v1/logs', jsonBytes(logsJson(Array.from({ length: 10 }, (_, i) => `r${i}`))), { contentType: 'application/json', headers: { 'x-scope-orgid': 'byflag' } });
      expect(r.status).toBe(200);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
    const c = runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', walDir, '--compact-max-round-rows', '3', ...flags]);
    expect(c.status, c.stderr).toBe(0);
    expect(await addedPerSnapshot('byflag')).toEqual([3, 3, 3, 1]);
  });

  it('siglake ingest: its compactor (a child process by default) lands 3 rows a round', async () => {
    const ing = await startIngester({
      dataDir: dir,
      args: ['--trust-tenant-header', '--wal-segment-max-age-secs', '1', '--compact-interval-secs', '1', '--compact-max-round-rows', '3', ...flags],
    });
    try {
      const r = await post(ing.url, '/v1/logs', jsonBytes(logsJson(Array.from({ length: 10 }, (_, i) => `i${i}`))), { contentType: 'application/json', headers: { 'x-scope-orgid': 'inflag' } });
      expect(r.status).toBe(200);
      await until(async () => (await addedPerSnapshot('inflag').catch(() => [])).reduce((a, b) => a + b, 0) === 10, 60_000, 'the 10 records landed', 200);
    } finally {
      expect(await ing.stop()).toBe(0);
    }
    expect(await addedPerSnapshot('inflag')).toEqual([3, 3, 3, 1]);
  }, 90_000);

  it('a value below 1 is refused with exit code 2 and one line', () => {
    for (const v of ['0', '-5', '1.5', 'many']) {
      const c = runCli(['compact', '--once', '--ingester-stopped', '--wal-dir', walDir, '--compact-max-round-rows', v, ...flags]);
      expect(c.status, `${v}: ${c.stderr}`).toBe(2);
      expect(c.stderr).toMatch(/^siglake: invalid compactor\.maxRoundRows \(flag --compact-max-round-rows\): .*\n$/);
    }
  });
});
