// pyiceberg's view of a landed fixture (peers/pyiceberg_peer.py), and the
// answers every reader must give, computed from what was acknowledged.

import { DAY2_ISO, pythonPeer, type LandedFixture } from './helpers.js';

export interface PyTable {
  format_version: number;
  metadata_location: string;
  schema: { id: number; name: string; type: string; required: boolean; key_id?: number; value_id?: number }[];
  arrow_types: Record<string, string>;
  parquet_field_ids: Record<string, number | null>[];
  spec: { source_id: number; field_id: number; transform: string; name: string }[];
  rows: number;
  markers: string[];
  services: string[];
  days: string[];
  current_snapshot_id: string | null;
  history: { snapshot_id: string; timestamp_ms: number }[];
  snapshots: { snapshot_id: string; parent_id: string | null; operation: string; summary: Record<string, string> }[];
  files: { file_path: string; record_count: number; file_format: string; content: number; partition: Record<string, unknown> }[];
  queries: { count: number; by_service: [string, number][]; attr_count?: number; time_count?: number };
  /** inspect.entries(): [file path, status, snapshot id, sequence number, file sequence number], sorted. */
  entries: [string, number, string, number, number][];
}

export interface PyCatalog {
  namespaces: string[];
  tables: Record<string, PyTable>;
}

export function pyicebergView(fx: LandedFixture): Promise<PyCatalog> {
  return pythonPeer<PyCatalog>('pyiceberg_peer.py', [
    '--uri',
    fx.uris.pyiceberg,
    '--warehouse',
    fx.uris.warehouseUri,
    '--name',
    'siglake',
    '--time-from',
    DAY2_ISO,
    '--attr',
    'k=v',
  ]);
}

/** The answers a reader must give for `table`, computed from what was acknowledged. */
export function expectedQueries(fx: LandedFixture, table: string): { count: number; by_service: [string, number][]; attr_count: number; time_count: number } {
  const acked = fx.acked.get(table)!;
  const services = new Map<string, number>();
  for (const a of acked) services.set(a.service, (services.get(a.service) ?? 0) + 1);
  return {
    count: acked.length,
    by_service: [...services.entries()].sort((x, y) => (x[0] < y[0] ? -1 : 1)),
    attr_count: acked.filter((a) => a.k === 'v').length,
    time_count: acked.filter((a) => a.day2).length,
  };
}
