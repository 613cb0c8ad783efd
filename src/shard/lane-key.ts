// The one name of a lane, (tenant, table), in every form the threads and the
// tools need it. Before this type the key was spelled four ways by hand
// (`i:x`, `index:x`, `index.x`, `indexes/x`), and the worker rebuilt the
// acceptor's key to find its lanes on disk: if the two ever differed, two
// workers would open the same files. Every form is derived here from one
// LaneKey, so they cannot drift.

import { indexTable, laneDir, LOGS_TABLE, TRACES_TABLE, type LaneLocation, type WalTable } from '../wal/layout.js';

export type SignalName = 'logs' | 'traces';

export class LaneKey {
  /**
   * The identity: `<tenant>/logs`, `<tenant>/traces` or `<tenant>/i:<index>`
   * (so an index named `logs` is its own lane). Its FNV-1a hash picks the shard.
   */
  readonly key: string;

  private constructor(
    readonly tenant: string,
    readonly table: WalTable,
  ) {
    this.key = `${tenant}/${table.kind === 'index' ? `i:${table.name}` : table.kind}`;
  }

  /**
   * The lane of a request: the signal's default table, or a managed index
   * (which takes both signals: the compactor splits them by record type).
   */
  static of(tenant: string, signal: SignalName, index: string | undefined): LaneKey {
    return new LaneKey(tenant, index !== undefined ? indexTable(index) : signal === 'logs' ? LOGS_TABLE : TRACES_TABLE);
  }

  /** The lane of a directory found on disk. */
  static at(location: Pick<LaneLocation, 'tenant' | 'table'>): LaneKey {
    return new LaneKey(location.tenant, location.table);
  }

  /** The managed index, or undefined for a default table. */
  get index(): string | undefined {
    return this.table.kind === 'index' ? this.table.name : undefined;
  }

  /** The worker shard that owns the lane: FNV-1a of `key`, so a restarted worker finds its lanes on disk without being told. */
  shard(workers: number): number {
    const key = this.key;
    let h = 0x811c9dc5;
    for (let i = 0; i < key.length; i++) {
      h ^= key.charCodeAt(i);
      h = Math.imul(h, 0x01000193);
    }
    return (h >>> 0) % workers;
  }

  /** The lane's directory under the WAL root (contract §7). */
  walDir(walRoot: string): string {
    return laneDir(walRoot, this.tenant, this.table);
  }

  /** For log lines and metric labels: `<tenant>/logs`, `<tenant>/traces`, `<tenant>/indexes/<index>` (the directory's shape). */
  get label(): string {
    return `${this.tenant}/${this.table.kind === 'index' ? `indexes/${this.table.name}` : this.table.kind}`;
  }

  /** The Iceberg table (in the tenant's namespace) a record of the lane lands in. */
  icebergTable(signal: SignalName): string {
    if (signal === 'traces') return 'traces';
    return this.table.kind === 'index' ? this.table.name : 'logs';
  }

  /**
   * The lane part of the compactor's progress key in Iceberg snapshot
   * summaries: `logs`, `traces` or `index.<name>`. Persisted in tables that
   * exist: never change its spelling.
   */
  get progressKey(): string {
    return this.table.kind === 'index' ? `index.${this.table.name}` : this.table.kind;
  }
}
