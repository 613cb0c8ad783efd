// What both entry points of the compactor (the thread inside `siglake ingest`
// and `siglake compact`) build from the settings: the catalog, the warehouse
// storage and the Compactor.

import type { Logger } from 'pino';
import { SqlCatalog } from '../iceberg/sql-catalog.js';
import type { ObjectStorage } from '../iceberg/storage.js';
import { closeWarehouse, openWarehouse, type WarehouseSettings } from '../iceberg/warehouse.js';
import { linksInWal, listLaneDirs } from '../wal/layout.js';
import { listLaneFiles } from '../wal/segment-files.js';
import { Compactor } from './compactor.js';
import type { CompactorStats } from './compactor-stats.js';
import { SealRule, type SealMode } from './seal-rule.js';
import { logKeptJournal, replayForeignJournals } from '../wal/journal.js';

/** The settings the compactor reads (a plain object: it crosses to a worker thread). */
export interface CompactorSettings extends WarehouseSettings {
  readonly walDir: string;
  readonly catalogUrl: string;
  readonly catalogName: string;
  readonly warehousePath: string;
  readonly compactIntervalSecs: number;
  readonly compactMaxRoundBytes: number;
  readonly compactMaxRoundRows: number;
  /** compactor.maxValueChars (absent: MAX_VALUE_CHARS). */
  readonly compactMaxValueChars?: number;
  readonly logLevel: string;
  /** Retention inside the compactor loop (src/retention); absent: 0 = forever, 24 h snapshots. */
  readonly retentionLogsDays?: number;
  readonly retentionTracesDays?: number;
  readonly retentionSnapshotMaxAgeHours?: number;
}

export class CompactorSetup {
  readonly catalog: SqlCatalog;
  readonly storage: ObjectStorage;
  readonly compactor: Compactor;

  private constructor(catalog: SqlCatalog, storage: ObjectStorage, compactor: Compactor) {
    this.catalog = catalog;
    this.storage = storage;
    this.compactor = compactor;
  }

  static async open(
    s: CompactorSettings,
    mode: SealMode,
    log: Logger,
    extra: {
      stats?: CompactorStats;
      afterCommit?: (namespace: string, table: string) => void | Promise<void>;
      beforeCommit?: () => void | Promise<void>;
      /** in-process: the earlier-life boundary, taken before this life's writers started (earlierLifeBoundary). */
      boundary?: ReadonlyMap<string, number>;
    } = {},
  ): Promise<CompactorSetup> {
    if (mode === 'stopped') {
      // [commit journal] No ingester runs, so every lane's highest segment is
      // taken as sealed: first write back what a machine crash may have left
      // only in the batch-mode journals (docs/wal-format.md "Commit journal").
      for (const [dir, r] of replayForeignJournals(s.walDir, 0)) {
        log.info({ dir, files: r.files, entries: r.entries, rewritten: r.rewritten, rewrittenRecords: r.rewrittenRecords }, 'WAL journal replayed before compacting a stopped ingester');
        for (const k of r.kept) logKeptJournal(log, k);
      }
    }
    // The ingester refuses to start on one; a compactor of another process says so once, and goes on with the rest.
    for (const link of linksInWal(s.walDir)) {
      log.error({ link }, 'WAL symbolic link not followed: nothing written through it is landed (docs/wal-format.md "Directories")');
    }
    const catalog = SqlCatalog.open(s.catalogUrl, s.catalogName);
    let storage: ObjectStorage;
    try {
      storage = await openWarehouse(s);
    } catch (e) {
      await catalog.close().catch(() => undefined);
      throw e;
    }
    const boundary = mode === 'in-process' ? (extra.boundary ?? new Map<string, number>()) : new Map<string, number>();
    const compactor = await Compactor.create({
      walDir: s.walDir,
      catalog,
      storage,
      sealRule: new SealRule(mode, boundary),
      maxRoundWalBytes: s.compactMaxRoundBytes,
      maxRoundRows: s.compactMaxRoundRows,
      ...(s.compactMaxValueChars !== undefined ? { maxValueChars: s.compactMaxValueChars } : {}),
      log,
      ...(extra.stats !== undefined ? { stats: extra.stats } : {}),
      ...(extra.afterCommit !== undefined ? { afterCommit: extra.afterCommit } : {}),
      ...(extra.beforeCommit !== undefined ? { beforeCommit: extra.beforeCommit } : {}),
    });
    return new CompactorSetup(catalog, storage, compactor);
  }

  async close(): Promise<void> {
    closeWarehouse(this.storage);
    await this.catalog.close();
  }
}

/**
 * The highest segment number (segments and .seg.tmp) of every lane on disk.
 * Taken by the ingester BEFORE its writers start: a writer never appends to a
 * segment of an earlier life, so every segment at or below it is sealed. Taken
 * any later, it would count segments this life is still appending to.
 */
export function earlierLifeBoundary(walDir: string): Map<string, number> {
  const boundary = new Map<string, number>();
  for (const lane of listLaneDirs(walDir)) boundary.set(lane.dir, listLaneFiles(lane.dir).maxNumber);
  return boundary;
}
