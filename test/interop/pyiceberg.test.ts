// pyiceberg (the reference Python implementation, SqlCatalog + pyarrow) reads
// what Siglake's compactor landed, from the SQLite catalog and from the
// PostgreSQL one: every table of `main` and of two tenant namespaces, after
// two ingesters' WALs were landed by three `siglake compact` processes at
// once. What it returns must be exactly the acknowledged records, with the
// schema and partition spec docs/iceberg.md states, and its view of
// snapshots, history and data files must match what Siglake committed.

import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import { icebirdDataFiles, installFileFetch } from '../helpers/iceberg.js';
import { landFixture, type CatalogKind, type LandedFixture, type ProcResult } from './helpers.js';
import { expectedQueries, pyicebergView, type PyCatalog } from './readers.js';
import { LOGS_SCHEMA, TIME_DAY_SPEC, TRACES_SCHEMA } from './schema.js';

/** Every snapshot id a metadata file names, exactly (64-bit ids do not survive JSON.parse). */
function snapshotIdsIn(metadataJson: string): string[] {
  const snapshots = metadataJson.slice(metadataJson.indexOf('"snapshots"'));
  return [...new Set([...snapshots.matchAll(/"snapshot-id"\s*:\s*(-?\d+)/g)].map((m) => m[1]!))].sort();
}

describe.each(['sqlite', 'postgres'] as CatalogKind[])('pyiceberg 0.12 SqlCatalog on the %s catalog', (kind) => {
  let fx: LandedFixture;
  let view: PyCatalog;
  let restoreFetch: () => void;

  beforeAll(async () => {
    restoreFetch = installFileFetch();
    fx = await landFixture(kind, 'py');
    view = await pyicebergView(fx);
  }, 600_000);
  afterAll(async () => {
    restoreFetch();
    await fx?.cleanup();
  });

  it('of the three concurrent compactors, each WAL is landed once; a duplicate only abandons its commits', () => {
    const [a1, a2, b] = fx.compactRuns as [ProcResult, ProcResult, ProcResult];
    expect(b.code, b.stdout + b.stderr).toBe(0);
    // Two compactors on one WAL: whichever commits a table second finds its
    // segments recorded and abandons that commit (docs/iceberg.md, "Exactly
    // once"); `compact --once` counts that as a failed table and exits 1. The
    // two may split the tables between them, so both may exit 1.
    for (const r of [a1, a2]) {
      const lines = r.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { level: number; msg: string });
      expect(lines.filter((l) => l.level >= 50), r.stdout).toEqual([]);
      const warnings = lines.filter((l) => l.level === 40).map((l) => l.msg);
      expect(new Set(warnings).size <= 1 && warnings.every((m) => m.startsWith('commit abandoned')), r.stdout).toBe(true);
      expect(r.code, r.stdout + r.stderr).toBe(warnings.length > 0 ? 1 : 0);
    }
  });

  it('lists main and the two tenant namespaces, each with logs and traces, and nothing else', () => {
    expect(view.namespaces).toEqual(['main', 'tenant_acme', 'tenant_globex']);
    expect(Object.keys(view.tables).sort()).toEqual([...fx.acked.keys()].sort());
  });

  it('scan().to_arrow() returns exactly the acknowledged records of each tenant, none doubled', () => {
    for (const [name, acked] of fx.acked) {
      const t = view.tables[name]!;
      expect(t.rows, name).toBe(acked.length);
      expect(t.markers, name).toEqual(acked.map((a) => a.marker).sort());
      const tenant = name.startsWith('main.') ? 'default' : name.split('.')[0]!.slice('tenant_'.length);
      expect(t.services, name).toEqual([`svc-${tenant}-db`, `svc-${tenant}-web`]);
      expect(t.days, name).toEqual(['2026-01-15', '2026-01-16']);
    }
  });

  it('reads the field ids, types and time_day partition spec docs/iceberg.md states', () => {
    for (const [name, t] of Object.entries(view.tables)) {
      expect(t.format_version, name).toBe(2);
      expect(t.schema, name).toEqual(name.endsWith('.traces') ? TRACES_SCHEMA : LOGS_SCHEMA);
      expect(t.spec, name).toEqual(TIME_DAY_SPEC);
      // Every data file's Parquet schema, as pyarrow reads it, carries the same field ids.
      const ids: Record<string, number> = {};
      for (const f of t.schema) {
        ids[f.name] = f.id;
        if (f.key_id !== undefined) Object.assign(ids, { [`${f.name}.key`]: f.key_id, [`${f.name}.value`]: f.value_id });
      }
      expect(t.parquet_field_ids.length, name).toBe(t.files.length);
      for (const file of t.parquet_field_ids) expect(file, name).toEqual(ids);
      expect(t.arrow_types['time'], name).toBe('timestamp[us, tz=UTC]');
      expect(t.arrow_types['attributes'], name).toBe('map<string, string>');
      for (const file of t.files) {
        expect(file.file_format, file.file_path).toBe('PARQUET');
        expect(file.content, file.file_path).toBe(0);
        expect(Object.keys(file.partition)).toEqual(['time_day']);
      }
    }
  });

  it('holds one snapshot for each commit the compactors reported', () => {
    let commits = 0;
    for (const r of fx.compactRuns) {
      for (const line of r.stdout.split('\n').filter((l) => l.startsWith('{'))) {
        const j = JSON.parse(line) as { msg: string; commits?: number };
        if (j.msg === 'compaction round') commits += j.commits ?? 0;
      }
    }
    expect(commits).toBe(Object.values(view.tables).reduce((a, t) => a + t.snapshots.length, 0));
  });

  it('answers count, group by service, attributes[k] and time filters as acknowledged', () => {
    for (const name of fx.acked.keys()) expect(view.tables[name]!.queries, name).toEqual(expectedQueries(fx, name));
  });

  it('inspect.snapshots()/files() and history() agree with what the compactors committed: linear, one append per WAL', async () => {
    const catalog = SqlCatalog.open(fx.uris.siglake, 'siglake');
    try {
      for (const [name, t] of Object.entries(view.tables)) {
        const [ns, table] = name.split('.') as [string, string];
        const location = await catalog.metadataLocation(ns, table);
        expect(t.metadata_location, name).toBe(location);
        const metadata = fs.readFileSync(new URL(location!), 'utf8');
        expect(t.snapshots.map((s) => s.snapshot_id).sort(), name).toEqual(snapshotIdsIn(metadata));
        // Linear history: each snapshot's parent is the one before; the current one is the last.
        expect(t.snapshots.length, name).toBe(2);
        expect(t.history.map((h) => h.snapshot_id)).toEqual(t.snapshots.map((s) => s.snapshot_id));
        t.snapshots.forEach((s, i) => expect(s.parent_id, `${name} #${i}`).toBe(i === 0 ? null : t.snapshots[i - 1]!.snapshot_id));
        expect(t.current_snapshot_id).toBe(t.snapshots.at(-1)!.snapshot_id);
        // Two appends (one per WAL), whose added records add up to the rows: nothing landed twice.
        expect(t.snapshots.map((s) => s.operation)).toEqual(['append', 'append']);
        const added = t.snapshots.map((s) => Number(s.summary['added-records']));
        expect(added.reduce((a, b) => a + b, 0), name).toBe(t.rows);
        expect(Number(t.snapshots.at(-1)!.summary['total-records'])).toBe(t.rows);
        // Each append records its WAL's progress; the last carries both WALs' entries.
        const progress = Object.keys(t.snapshots.at(-1)!.summary).filter((k) => k.startsWith('siglake.wal.'));
        expect(progress.length, name).toBe(2);
        // inspect.files() lists the data files icebird finds through the same metadata.
        const icebird = await icebirdDataFiles(location!);
        expect(t.files.map((f) => [f.file_path, f.record_count]).sort()).toEqual(icebird.map((f) => [f.path, f.records]).sort());
        expect(t.files.reduce((a, f) => a + f.record_count, 0)).toBe(t.rows);
      }
    } finally {
      await catalog.close();
    }
  });
});
