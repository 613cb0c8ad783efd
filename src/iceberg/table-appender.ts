// One append commit to one Iceberg table, the way Iceberg's optimistic
// concurrency works (spec "Commit Conflict Resolution and Retry"):
//
//   1. write the manifest of the new data files (once: its entries inherit
//      their sequence number, so a retry reuses it),
//   2. read the table's current metadata (the catalog row's metadata_location),
//   3. write a manifest list = the parent's manifests + ours, and the next
//      `<n>-<uuid>.metadata.json` with our snapshot as current,
//   4. compare-and-swap metadata_location from the file read in 2 to the new
//      one (or insert the row, for a table's first commit),
//   5. on a conflict, drop the files of 3 and go back to 2.
//
// Before each attempt the caller's precheck sees the table as it is now and
// may abandon the append (the compactor does when the table already records
// the WAL segments it was about to add). A commit whose outcome was lost (the
// catalog connection dropped after the UPDATE) is recognised on the next
// attempt by its snapshot id in the table's history.

import { randomInt, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AvroRecord } from './avro-file.js';
import { IcebergError } from './iceberg-error.js';
import { ManifestList } from './manifest-list.js';
import { MERGE_DEFAULTS, mergeManifests, mergePolicyOf, type ManifestMergePolicy } from './manifest-merge.js';
import { ManifestWriter, type WrittenManifest } from './manifest-writer.js';
import type { DataFileInfo } from './parquet-data-writer.js';
import type { SqlCatalog } from './sql-catalog.js';
import { isNotFound, type ObjectStorage } from './storage.js';
import { TableMetadata, type SnapshotView } from './table-metadata.js';
import type { TableSchema } from './table-schema.js';

export interface LoadedTable {
  readonly metadataLocation: string;
  readonly metadata: TableMetadata;
}

export interface AppendRequest {
  readonly namespace: string;
  readonly table: string;
  readonly schema: TableSchema;
  /** Where a table created by this append lives (an existing table keeps its own location). */
  readonly location: string;
  readonly files: readonly DataFileInfo[];
  /** Summary entries of the new snapshot (the compactor's WAL progress); earlier `siglake.` entries carry over. */
  readonly summary: Readonly<Record<string, string>>;
  /**
   * Table properties the commit sets (the compactor's WAL progress again): unlike a snapshot's
   * summary they outlive snapshot expiry and another engine's commits, which keep the properties
   * and know nothing of Siglake's summary entries.
   */
  readonly properties?: Readonly<Record<string, string>>;
  /** Sees the table before each attempt (null: no table yet); false abandons the append. */
  readonly precheck?: (table: LoadedTable | null) => boolean;
}

export type AppendResult =
  | { readonly status: 'committed'; readonly snapshotId: bigint; readonly sequenceNumber: bigint; readonly metadataLocation: string; readonly attempts: number }
  | { readonly status: 'abandoned'; readonly attempts: number };

export interface TableAppenderOptions {
  readonly catalog: SqlCatalog;
  readonly storage: ObjectStorage;
  /** Attempts before giving up with SIGLAKE_ICEBERG_COMMIT_RETRIES. Default 50. */
  readonly maxAttempts?: number;
  readonly now?: () => number;
  /** Called on every lost compare-and-swap (for metrics). */
  readonly onConflict?: () => void;
  /** Called with every attempt's files written, just before the catalog swap (crash tests hook here). */
  readonly beforeSwap?: () => void | Promise<void>;
  /** Manifest merging where the table's properties do not say (Iceberg Java's defaults). */
  readonly manifestMerge?: ManifestMergePolicy;
}

const SUMMARY_CARRY_PREFIX = 'siglake.';

export class TableAppender {
  readonly #catalog: SqlCatalog;
  readonly #storage: ObjectStorage;
  readonly #maxAttempts: number;
  readonly #now: () => number;
  readonly #onConflict: () => void;
  readonly #beforeSwap: (() => void | Promise<void>) | undefined;
  readonly #mergeDefaults: ManifestMergePolicy;
  /** Manifests found not to fit this writer's schema: never read again for a merge (mergeManifests). */
  readonly #unfit = new Set<string>();

  constructor(opts: TableAppenderOptions) {
    this.#catalog = opts.catalog;
    this.#storage = opts.storage;
    this.#maxAttempts = opts.maxAttempts ?? 50;
    this.#now = opts.now ?? Date.now;
    this.#onConflict = opts.onConflict ?? (() => undefined);
    this.#beforeSwap = opts.beforeSwap;
    this.#mergeDefaults = opts.manifestMerge ?? MERGE_DEFAULTS;
  }

  /** The table's current metadata, or null when the catalog has no such table. */
  async load(namespace: string, table: string): Promise<LoadedTable | null> {
    const loc = await this.#catalog.metadataLocation(namespace, table);
    if (loc === null) return null;
    const text = Buffer.from(await this.#storage.get(loc)).toString('utf8');
    return { metadataLocation: loc, metadata: TableMetadata.parse(text, loc) };
  }

  async append(req: AppendRequest): Promise<AppendResult> {
    if (req.files.length === 0) throw new IcebergError('SIGLAKE_ICEBERG_ARGUMENT', 'an append needs at least one data file');
    const snapshotId = BigInt(randomInt(1, 2 ** 47)) * 64n + BigInt(randomInt(0, 64));
    let manifest: WrittenManifest | null = null;
    for (let attempt = 1; attempt <= this.#maxAttempts; attempt++) {
      const current = await this.load(req.namespace, req.table);
      if (current !== null) {
        const mine = current.metadata.snapshot(snapshotId);
        if (mine !== undefined) {
          return { status: 'committed', snapshotId, sequenceNumber: mine.sequenceNumber, metadataLocation: current.metadataLocation, attempts: attempt };
        }
        current.metadata.checkSchema(req.schema);
      }
      if (req.precheck !== undefined && !req.precheck(current)) {
        if (manifest !== null) await this.#storage.delete(manifest.location).catch(() => undefined);
        return { status: 'abandoned', attempts: attempt };
      }
      const location = current?.metadata.location ?? req.location;
      manifest ??= await ManifestWriter.write(
        this.#storage,
        `${location}/metadata/${randomUUID()}-m0.avro`,
        req.schema,
        snapshotId,
        req.files,
      );
      let written: { ok: true; sequenceNumber: bigint; metadataLocation: string } | { ok: false };
      try {
        written = await this.#attempt(req, current, snapshotId, manifest, attempt);
      } catch (e) {
        // A file of the parent snapshot gone because the table moved on since it was read (another
        // writer committed and snapshot expiry removed the parent and deleted its files): a lost
        // race, as a failed swap is. Under metadata still current it is a real failure.
        if (current === null || !isNotFound(e) || (await this.#catalog.metadataLocation(req.namespace, req.table)) === current.metadataLocation) throw e;
        written = { ok: false };
      }
      if (written.ok) {
        return { status: 'committed', snapshotId, sequenceNumber: written.sequenceNumber, metadataLocation: written.metadataLocation, attempts: attempt };
      }
      this.#onConflict();
      await sleep(Math.min(1000, 5 * 2 ** Math.min(attempt, 8)) * (0.5 + Math.random()));
    }
    throw new IcebergError(
      'SIGLAKE_ICEBERG_COMMIT_RETRIES',
      `${req.namespace}.${req.table}: commit still conflicting after ${this.#maxAttempts} attempts`,
    );
  }

  async #attempt(
    req: AppendRequest,
    current: LoadedTable | null,
    snapshotId: bigint,
    manifest: WrittenManifest,
    attempt: number,
  ): Promise<{ ok: true; sequenceNumber: bigint; metadataLocation: string } | { ok: false }> {
    const now = this.#now();
    const base = current?.metadata ?? TableMetadata.create(req.location, req.schema, now);
    const location = base.location;
    const parent = base.currentSnapshot();
    const sequenceNumber = base.lastSequenceNumber + 1n;
    // Every manifest of the parent with a live file: one that only records an earlier snapshot's
    // deletes (retention's) is not carried on.
    const carried = parent === null ? [] : (await ManifestList.read(this.#storage, parent.manifestList)).filter((m) => !onlyDeletes(m));
    const merged = await mergeManifests(this.#storage, {
      location,
      schema: req.schema,
      snapshotId,
      sequenceNumber,
      inherited: carried,
      policy: mergePolicyOf(current?.metadata ?? null, this.#mergeDefaults),
      unfit: this.#unfit,
    });
    const dropMerged = async () => {
      for (const p of merged.written) await this.#storage.delete(p).catch(() => undefined);
    };
    const listLocation = `${location}/metadata/snap-${snapshotId}-${attempt}-${randomUUID()}.avro`;
    try {
      await ManifestList.write(this.#storage, listLocation, {
        snapshotId,
        parentSnapshotId: parent?.snapshotId ?? null,
        sequenceNumber,
        inherited: merged.list,
        added: manifest,
      });
    } catch (e) {
      await dropMerged();
      throw e;
    }
    const manifests = {
      created: 1 + merged.written.length,
      replaced: merged.replaced,
      kept: carried.length - merged.replaced,
    };
    const snap: SnapshotView = {
      snapshotId,
      parentSnapshotId: parent?.snapshotId ?? null,
      sequenceNumber,
      timestampMs: now,
      manifestList: listLocation,
      summary: summaryOf(parent, req, manifest, manifests),
    };
    const next = base.withAppend(snap, current?.metadataLocation ?? null, now, req.properties);
    const metadataLocation = `${location}/metadata/${TableMetadata.nextFileName(current?.metadataLocation ?? null)}`;
    try {
      await this.#storage.putNew(metadataLocation, Buffer.from(next.toJson(), 'utf8'));
      await this.#beforeSwap?.();
    } catch (e) {
      // Nothing refers to this attempt's files yet (the swap did not run): they go.
      await this.#storage.delete(listLocation).catch(() => undefined);
      await dropMerged();
      throw e;
    }
    let ok: boolean;
    if (current === null) {
      await this.#catalog.ensureNamespace(req.namespace);
      ok = await this.#catalog.createTable(req.namespace, req.table, metadataLocation);
    } else {
      ok = await this.#catalog.swapMetadataLocation(req.namespace, req.table, current.metadataLocation, metadataLocation);
    }
    if (ok) return { ok: true, sequenceNumber, metadataLocation };
    // Lost the race: these two files were never referenced by the catalog.
    await this.#storage.delete(metadataLocation).catch(() => undefined);
    await this.#storage.delete(listLocation).catch(() => undefined);
    await dropMerged();
    return { ok: false };
  }
}

function summaryOf(
  parent: SnapshotView | null,
  req: AppendRequest,
  manifest: WrittenManifest,
  manifests: { created: number; replaced: number; kept: number },
): Record<string, string> {
  const prev = parent?.summary ?? {};
  let bytes = 0n;
  const days = new Set<number>();
  for (const f of req.files) {
    bytes += BigInt(f.fileSizeInBytes);
    days.add(f.partitionDay);
  }
  const total = (key: string, added: bigint): string | undefined => {
    if (parent === null) return String(added);
    const p = prev[key];
    return p === undefined || !/^\d+$/.test(p) ? undefined : String(BigInt(p) + added);
  };
  const out: Record<string, string> = {
    operation: 'append',
    'added-data-files': String(manifest.addedFiles),
    'added-records': String(manifest.addedRows),
    'added-files-size': String(bytes),
    'changed-partition-count': String(days.size),
    // As Iceberg Java's merge appends report them.
    'manifests-created': String(manifests.created),
    'manifests-kept': String(manifests.kept),
    'manifests-replaced': String(manifests.replaced),
  };
  const totals: [string, bigint][] = [
    ['total-records', manifest.addedRows],
    ['total-files-size', bytes],
    ['total-data-files', BigInt(manifest.addedFiles)],
    ['total-delete-files', 0n],
    ['total-position-deletes', 0n],
    ['total-equality-deletes', 0n],
  ];
  for (const [k, added] of totals) {
    const v = total(k, added);
    if (v !== undefined) out[k] = v;
  }
  for (const [k, v] of Object.entries(prev)) if (k.startsWith(SUMMARY_CARRY_PREFIX)) out[k] = v;
  for (const [k, v] of Object.entries(req.summary)) out[k] = v;
  return out;
}

/** A manifest-list entry whose manifest holds only DELETED entries (counts as v2 requires them). */
function onlyDeletes(m: AvroRecord): boolean {
  const n = (v: unknown) => Number(v ?? -1);
  return n(m['added_files_count']) === 0 && n(m['existing_files_count']) === 0 && n(m['deleted_files_count']) > 0;
}
