// Retention (contract §7, docs/iceberg.md "Retention"): per table, one
// Iceberg snapshot that removes every data file whose time_day partition is
// before the cut-off (today − days, UTC), then snapshot expiry and deletion
// of the files no kept snapshot references.
//
// Crash safety. Step 1 is a normal compare-and-set commit: before it the
// table is unchanged, after it readers no longer see the old days (their
// files stay, referenced by older snapshots). Step 2 computes the files only
// expired snapshots reference, writes that list to a file under metadata/,
// and commits metadata without the expired snapshots and with the property
// `siglake.retention.pending-delete` naming the list, in one compare-and-set.
// Only then are files deleted; the next round (of any process) deletes what a
// pending list names (missing files are fine) and clears the property. A file
// a kept snapshot references is never in a list: the list is computed from
// the very metadata the commit replaces, and a concurrent append only adds
// files.
//
// What is deleted. Only files under the table's own location: a manifest, a
// statistics entry or a pending list naming anything else (another table's
// file, another tenant's: Iceberg lets a writer name any path, and another
// engine's add_files or write.data.path does) is left where it is and
// counted in the round's warning; the query server refuses such a table for
// the same reason (src/query/table-files.ts). A table whose property
// `gc.enabled` is `false` has no snapshot expired and no file deleted, as
// Iceberg Java's expire_snapshots refuses it ("deleting files may corrupt
// other tables"); its drops are committed as ever.

import { randomInt, randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { AvroFile, type AvroRecord } from '../iceberg/avro-file.js';
import { LosslessJson, type JsonValue } from '../iceberg/lossless-json.js';
import { ManifestList, normalize } from '../iceberg/manifest-list.js';
import { ManifestWriter } from '../iceberg/manifest-writer.js';
import type { SqlCatalog } from '../iceberg/sql-catalog.js';
import { isNotFound, type ObjectStorage } from '../iceberg/storage.js';
import { TableAppender, type LoadedTable } from '../iceberg/table-appender.js';
import { TableMetadata, type SnapshotView } from '../iceberg/table-metadata.js';
import { TableSchema } from '../iceberg/table-schema.js';
import type { LabelledCounts } from '../indexes/labelled-counts.js';
import { PROP_RETENTION_DAYS } from '../indexes/registry.js';
import { isUnder } from '../query/table-files.js';

type JsonObject = { [key: string]: JsonValue };

const DAY_MS = 86_400_000;
const PENDING = 'siglake.retention.pending-delete';
/** Iceberg's table property that turns garbage collection (expiry, file deletion) off. */
const GC_ENABLED = 'gc.enabled';
const STATUS_DELETED = 2;
/** A read of a table's files that found the table moved on since (see Retention.#stale). */
const STALE = Symbol('stale');

export interface RetentionOptions {
  readonly catalog: SqlCatalog;
  readonly storage: ObjectStorage;
  readonly log: Logger;
  readonly logsDays: number;
  readonly tracesDays: number;
  readonly snapshotMaxAgeHours: number;
  readonly now?: () => number;
  readonly counts?: LabelledCounts;
  /** Test hook: called at each step of a table's round (kill -9 tests). */
  readonly step?: (name: 'dropped' | 'expired' | 'deleting') => void;
}

export interface TableRetention {
  readonly namespace: string;
  readonly table: string;
  readonly days: number;
  readonly filesDropped: number;
  readonly snapshotsExpired: number;
  /** Branches and tags removed for being older than their `max-ref-age-ms` (see agedOutRefs). */
  readonly refsRemoved: number;
  readonly filesDeleted: number;
}

export class Retention {
  readonly #o: RetentionOptions;
  readonly #appender: TableAppender;
  readonly #now: () => number;

  constructor(o: RetentionOptions) {
    this.#o = o;
    this.#appender = new TableAppender({ catalog: o.catalog, storage: o.storage });
    this.#now = o.now ?? Date.now;
  }

  /** One round over every table of every namespace. A table that fails is logged and left for the next round. */
  async runOnce(): Promise<{ tables: TableRetention[]; failed: number }> {
    const out: TableRetention[] = [];
    let failed = 0;
    for (const ns of await this.#o.catalog.namespaces()) {
      for (const table of await this.#o.catalog.tables(ns)) {
        try {
          const r = await this.table(ns, table);
          if (r !== null) out.push(r);
        } catch (e) {
          failed++;
          this.#o.counts?.inc('siglake_retention_table_failures_total', { table });
          this.#o.log.error({ table: `${ns}.${table}`, err: (e as Error).message }, 'retention failed for a table; next round retries');
        }
      }
    }
    return { tables: out, failed };
  }

  /** Retention of one table; null when it is not a Siglake table. */
  async table(ns: string, table: string): Promise<TableRetention | null> {
    let loaded = await this.#appender.load(ns, table);
    if (loaded === null) return null;
    const props = propsOf(loaded.metadata);
    const kind = props['siglake.table-kind'];
    if (kind !== 'logs' && kind !== 'traces') return null;
    const schema = kind === 'logs' ? TableSchema.LOGS : TableSchema.TRACES;
    const days = table === 'logs' ? this.#o.logsDays : table === 'traces' ? this.#o.tracesDays : Number(props[PROP_RETENTION_DAYS] ?? 0) || 0;
    // gc.enabled not true: the table's files may be another table's too (Spark's snapshot procedure
    // sets it false): nothing is expired or deleted, as Iceberg Java refuses; the drop still commits.
    // Read as Java reads it (Boolean.parseBoolean): absent is true, any value but "true" is false.
    const gcProp = props[GC_ENABLED];
    const gc = gcProp === undefined || String(gcProp).toLowerCase() === 'true';
    if (!gc) this.#o.log.debug({ table: `${ns}.${table}` }, 'retention: gc.enabled is false; no snapshot expired, no file deleted');
    let filesDeleted = gc ? await this.#finishPending(ns, table, loaded) : 0;
    let filesDropped = 0;
    if (days > 0) {
      const cutoffDay = Math.floor(this.#now() / DAY_MS) - days;
      filesDropped = await this.#dropBefore(ns, table, schema, cutoffDay);
      this.#o.step?.('dropped');
    }
    loaded = (await this.#appender.load(ns, table))!;
    const { expired, refsRemoved } = gc ? await this.#expire(ns, table, loaded) : { expired: 0, refsRemoved: 0 };
    this.#o.step?.('expired');
    if (expired > 0) filesDeleted += await this.#finishPending(ns, table, (await this.#appender.load(ns, table))!);
    if (filesDeleted > 0) this.#o.counts?.inc('siglake_retention_files_deleted_total', { table }, filesDeleted);
    if (filesDropped > 0 || expired > 0 || filesDeleted > 0 || refsRemoved > 0) {
      this.#o.log.info({ table: `${ns}.${table}`, days, filesDropped, snapshotsExpired: expired, refsRemoved, filesDeleted }, 'retention');
    }
    return { namespace: ns, table, days, filesDropped, snapshotsExpired: expired, refsRemoved, filesDeleted };
  }

  /** Step 1: one snapshot without the data files of days before `cutoffDay`. Returns the files dropped. */
  async #dropBefore(ns: string, table: string, schema: TableSchema, cutoffDay: number): Promise<number> {
    for (let attempt = 1; attempt <= 50; attempt++) {
      const cur = await this.#appender.load(ns, table);
      const parent = cur?.metadata.currentSnapshot() ?? null;
      if (cur === null || parent === null) return 0;
      // A file of the current snapshot that is gone because this read of the table is stale (another
      // round replaced the snapshot and expired it meanwhile): read the table again.
      const written: string[] = [];
      const readOrStale = async (loc: string): Promise<Uint8Array | typeof STALE> => {
        try {
          return await this.#o.storage.get(loc);
        } catch (e) {
          if (!(await this.#stale(ns, table, cur, e))) throw e;
          for (const f of written) await this.#o.storage.delete(f).catch(() => undefined);
          return STALE;
        }
      };
      const listBytes = await readOrStale(parent.manifestList);
      if (listBytes === STALE) continue;
      const list = AvroFile.decode(listBytes, parent.manifestList).records.map(normalize);
      const snapshotId = BigInt(randomInt(1, 2 ** 47)) * 64n + BigInt(randomInt(0, 64));
      const sequenceNumber = cur.metadata.lastSequenceNumber + 1n;
      const location = cur.metadata.location;
      const keptList: AvroRecord[] = [];
      let dropped = 0;
      let droppedRows = 0n;
      let droppedBytes = 0n;
      let droppedDeleteFiles = 0;
      let stale = false;
      for (const m of list) {
        const manifestBytes = await readOrStale(String(m['manifest_path']));
        if (manifestBytes === STALE) {
          stale = true;
          break;
        }
        const { records, metadata, schema: writer } = AvroFile.decode(manifestBytes, String(m['manifest_path']));
        const live = records.filter((e) => e['status'] !== STATUS_DELETED);
        // A manifest left with deleted entries only (an earlier delete) is carried no further.
        if (live.length === 0 && records.length > 0) continue;
        const old = live.filter((e) => dayOf(e, schema) < cutoffDay);
        if (old.length === 0) {
          keptList.push(m);
          continue;
        }
        const isDeletes = Number(m['content'] ?? 0) === 1;
        if (isDeletes) droppedDeleteFiles += old.length;
        else dropped += old.length;
        let oldRows = 0n;
        for (const e of old) {
          const f = e['data_file'] as AvroRecord;
          oldRows += BigInt(f['record_count'] as bigint);
          if (isDeletes) continue;
          droppedBytes += BigInt(f['file_size_in_bytes'] as bigint);
        }
        if (!isDeletes) droppedRows += oldRows;
        const keep = live.filter((e) => dayOf(e, schema) >= cutoffDay);
        // Delete files of dropped days only: the manifest goes (their data files go with them, and a
        // reader that cannot apply deletes, Siglake's own, then reads the table again).
        if (isDeletes && keep.length === 0) continue;
        // The manifest again: its surviving entries EXISTING and the dropped ones DELETED by this
        // snapshot (spec: a deleted file's entry has status 2 and the deleting snapshot's id), all
        // with their inherited sequence numbers made explicit. Engines that expire snapshots by
        // these entries (Iceberg Java's, Trino's) find the dropped files through them.
        const mSeq = m['sequence_number'] as bigint;
        const explicit = (e: AvroRecord) => ({
          sequence_number: e['sequence_number'] ?? mSeq,
          file_sequence_number: e['file_sequence_number'] ?? mSeq,
        });
        const entries: AvroRecord[] = [
          ...keep.map((e) => ({ ...e, status: 0, snapshot_id: e['snapshot_id'] ?? m['added_snapshot_id'], ...explicit(e) })),
          ...old.map((e) => ({ ...e, status: STATUS_DELETED, snapshot_id: snapshotId, ...explicit(e) })),
        ];
        const path = `${location}/metadata/${randomUUID()}-m0.avro`;
        // The Iceberg keys of the old header only: avro.schema and avro.codec describe the bytes
        // written now (copied, they named the other writer's codec over uncompressed blocks).
        const icebergKeys = Object.fromEntries([...metadata].filter(([k]) => !k.startsWith('avro.')));
        // In the source manifest's own writer schema: another engine's fields (nan_value_counts, an
        // equality-delete file's equality_ids, which the spec requires) stay with their entries.
        // (Siglake's own entry schema dropped them. Leaving such a manifest alone, as the manifest
        // merge does, is no option here: its old days would stay visible.)
        const bytes = AvroFile.encode(rewriteSchema(writer, schema), entries, icebergKeys);
        await this.#o.storage.putNew(path, bytes);
        written.push(path);
        let minSeq = mSeq;
        let minDay = Infinity;
        let maxDay = -Infinity;
        let rows = 0n;
        for (const e of entries) {
          const d = dayOf(e, schema);
          minDay = Math.min(minDay, d);
          maxDay = Math.max(maxDay, d);
        }
        for (const e of entries.slice(0, keep.length)) {
          if ((e['sequence_number'] as bigint) < minSeq) minSeq = e['sequence_number'] as bigint;
          rows += BigInt((e['data_file'] as AvroRecord)['record_count'] as bigint);
        }
        keptList.push({
          ...m,
          manifest_path: path,
          manifest_length: BigInt(bytes.length),
          sequence_number: sequenceNumber,
          min_sequence_number: minSeq,
          added_snapshot_id: snapshotId,
          added_files_count: 0,
          existing_files_count: keep.length,
          deleted_files_count: old.length,
          added_rows_count: 0n,
          existing_rows_count: rows,
          deleted_rows_count: oldRows,
          partitions: [{ contains_null: false, contains_nan: null, lower_bound: int32(minDay), upper_bound: int32(maxDay) }],
        });
      }
      if (stale) continue;
      if (dropped === 0 && droppedDeleteFiles === 0) return 0;
      const listLocation = `${location}/metadata/snap-${snapshotId}-${attempt}-${randomUUID()}.avro`;
      await this.#o.storage.putNew(
        listLocation,
        AvroFile.encode(ManifestList.schema, keptList, {
          'snapshot-id': String(snapshotId),
          'parent-snapshot-id': String(parent.snapshotId),
          'sequence-number': String(sequenceNumber),
          'format-version': '2',
        }),
      );
      const now = this.#now();
      const summary: Record<string, string> = {};
      for (const [k, v] of Object.entries(parent.summary)) if (k.startsWith('siglake.')) summary[k] = v;
      const total = (k: string, minus: bigint) => {
        const p = parent.summary[k];
        if (p !== undefined && /^\d+$/.test(p)) summary[k] = String(BigInt(p) - minus);
      };
      summary['operation'] = 'delete';
      summary['deleted-data-files'] = String(dropped);
      summary['deleted-records'] = String(droppedRows);
      summary['removed-files-size'] = String(droppedBytes);
      total('total-data-files', BigInt(dropped));
      total('total-records', droppedRows);
      total('total-files-size', droppedBytes);
      for (const k of ['total-delete-files', 'total-position-deletes', 'total-equality-deletes']) if (parent.summary[k] !== undefined) summary[k] = parent.summary[k]!;
      if (droppedDeleteFiles > 0) {
        // Delete files of the dropped days go with them; what they counted of the totals is no longer known exactly.
        summary['removed-delete-files'] = String(droppedDeleteFiles);
        total('total-delete-files', BigInt(droppedDeleteFiles));
        delete summary['total-position-deletes'];
        delete summary['total-equality-deletes'];
      }
      const snap: SnapshotView = { snapshotId, parentSnapshotId: parent.snapshotId, sequenceNumber, timestampMs: now, manifestList: listLocation, summary };
      const next = cur.metadata.withAppend(snap, cur.metadataLocation, now);
      const nextLoc = `${location}/metadata/${TableMetadata.nextFileName(cur.metadataLocation)}`;
      await this.#o.storage.putNew(nextLoc, Buffer.from(next.toJson(), 'utf8'));
      if (await this.#o.catalog.swapMetadataLocation(ns, table, cur.metadataLocation, nextLoc)) return dropped;
      for (const f of [nextLoc, listLocation, ...written]) await this.#o.storage.delete(f).catch(() => undefined);
      await new Promise((r) => setTimeout(r, Math.min(1000, 5 * 2 ** Math.min(attempt, 8)) * (0.5 + Math.random())));
    }
    throw new Error(`${ns}.${table}: retention commit still conflicting after 50 attempts`);
  }

  /**
   * Step 2: commits the metadata without the refs past their max-ref-age-ms, without expired
   * snapshots and with the list of files only they referenced. Returns the snapshots expired and
   * the refs removed by this round's commit.
   */
  async #expire(ns: string, table: string, loaded: LoadedTable): Promise<{ expired: number; refsRemoved: number }> {
    const none = { expired: 0, refsRemoved: 0 };
    // What the first attempt set out to expire: when a later attempt (after a lost commit or a
    // stale read) finds none of it left, another round did the work, and this one says so.
    const wanted = new Set<bigint>();
    for (let attempt = 1; attempt <= 50; attempt++) {
      const cur = attempt === 1 ? loaded : await this.#appender.load(ns, table);
      if (cur === null) return none;
      const doc = LosslessJson.parse(cur.metadata.toJson()) as JsonObject;
      const props = (doc['properties'] as JsonObject | undefined) ?? {};
      if (typeof props[PENDING] === 'string') {
        // An earlier round's deletions come first (another round's commit, just made, when this
        // one's lost: it deletes them).
        this.#doneByAnother(ns, table, wanted, cur.metadata.snapshots);
        return none;
      }
      const currentId = cur.metadata.currentSnapshotId;
      const snaps = cur.metadata.snapshots;
      const now = this.#now();
      // A branch or tag (never main) whose snapshot is older than its max-ref-age-ms (the ref's
      // own, else the table property history.expire.max-ref-age-ms; unset: kept for ever) goes in
      // this very commit, as Iceberg Java's and Spark's expire_snapshots remove it. Unlike the
      // max-snapshot-age bounds this one is obeyed as set, shorter or not: it is an explicit order
      // to drop the ref. The snapshots only it kept are then judged below as any other, without it.
      const refsGone = agedOutRefs(doc, snaps, props, now);
      if (refsGone.length > 0) {
        const refs = { ...((doc['refs'] as JsonObject | undefined) ?? {}) };
        for (const name of refsGone) delete refs[name];
        doc['refs'] = refs;
      }
      const refIds = new Set<string>();
      for (const r of Object.values((doc['refs'] as JsonObject | undefined) ?? {})) refIds.add(String((r as JsonObject)['snapshot-id']));
      // The age past which a snapshot may go: retention.snapshotMaxAgeHours, or longer where the
      // table (history.expire.max-snapshot-age-ms) or a branch holding the snapshot
      // (max-snapshot-age-ms) asks for longer, as Spark's expire_snapshots reads them. Never
      // shorter: the setting is what keeps files under queries planned before a commit.
      const maxAge = maxAgeBySnapshot(doc, snaps, props, this.#o.snapshotMaxAgeHours * 3_600_000);
      // A snapshot's age counts from when it stopped being current, not from when it was made: a
      // query planned on it a moment before it was replaced reads its files for snapshotMaxAgeHours
      // more. (By creation time, retention's own drop on a table quiet for a day deleted the files
      // of the snapshot it had just replaced, under any query reading them.)
      const replaced = replacedAt(doc, snaps);
      // Whatever the clocks say, a branch keeps its newest min-snapshots-to-keep ancestors (the
      // ref's own setting, else the table property history.expire.min-snapshots-to-keep, else 1:
      // Iceberg Java's and Spark's expire_snapshots keep the same).
      const byCount = keptByCount(doc, snaps, currentId, props);
      const expire = snaps.filter(
        (s) =>
          s.snapshotId !== currentId &&
          !refIds.has(String(s.snapshotId)) &&
          !byCount.has(s.snapshotId) &&
          (replaced.get(s.snapshotId) ?? s.timestampMs) < now - maxAge(s.snapshotId),
      );
      this.#warnClockAhead(ns, table, doc, snaps);
      if (expire.length === 0) {
        this.#doneByAnother(ns, table, wanted, snaps);
        if (refsGone.length === 0) return none;
        // Refs to remove and no snapshot to expire (each still kept: current, named by another ref,
        // among a branch's newest, or replaced too recently): a commit of the refs alone.
        if (!(await this.#commitDoc(ns, table, cur, doc))) continue;
        this.#refsRemovedLog(ns, table, refsGone);
        return { expired: 0, refsRemoved: refsGone.length };
      }
      if (attempt === 1) for (const s of expire) wanted.add(s.snapshotId);
      const expireIds = new Set(expire.map((s) => s.snapshotId));
      const kept = snaps.filter((s) => !expireIds.has(s.snapshotId));
      // Every file a kept snapshot references must be known before anything is deleted: a read of
      // their lists that fails aborts this table's expiry (the next round retries), where skipping
      // it would have deleted live files that an expired snapshot referenced too.
      let keptFiles: Set<string>;
      let goneFiles: Set<string>;
      try {
        keptFiles = await this.#reachable(kept, true);
        goneFiles = await this.#reachable(expire, false);
      } catch (e) {
        // A file of a snapshot this round keeps is gone because the metadata read is stale: another
        // round (retention in another process) expired that snapshot meanwhile and deleted its
        // files. Not a failure: read the table again (the commit below would have lost anyway).
        if (await this.#stale(ns, table, cur, e)) continue;
        throw e;
      }
      // Statistics (Puffin) and partition-statistics files are per snapshot: an expired snapshot's
      // entries go from the metadata with it (as Iceberg Java's and pyiceberg's expiry remove
      // them), and their files are deleted unless a kept entry names the same file. An entry of a
      // snapshot already gone (an expiry before this one kept them) goes too: the metadata names
      // no snapshot that is not there.
      const keptIds = new Set(kept.map((s) => s.snapshotId));
      const stats = splitStatistics(doc, keptIds);
      const location = cur.metadata.location;
      const unkept = [...goneFiles, ...stats.gone].filter((f) => !keptFiles.has(f) && !stats.kept.has(f));
      // Only what lies under the table's own location is ever deleted (see the header).
      const toDelete = this.#ownFiles(ns, table, location, unkept);
      const listLoc = `${location}/metadata/retention-${randomUUID()}.json`;
      await this.#o.storage.putNew(listLoc, Buffer.from(JSON.stringify(toDelete), 'utf8'));
      doc['snapshots'] = (doc['snapshots'] as JsonObject[]).filter((s) => !expireIds.has(BigInt(s['snapshot-id'] as number | bigint)));
      doc['snapshot-log'] = ((doc['snapshot-log'] as JsonObject[] | undefined) ?? []).filter((s) => !expireIds.has(BigInt(s['snapshot-id'] as number | bigint)));
      doc['properties'] = { ...props, [PENDING]: listLoc };
      if (!(await this.#commitDoc(ns, table, cur, doc))) {
        await this.#o.storage.delete(listLoc).catch(() => undefined);
        continue;
      }
      this.#refsRemovedLog(ns, table, refsGone);
      return { expired: expire.length, refsRemoved: refsGone.length };
    }
    throw new Error(`${ns}.${table}: snapshot expiry still conflicting after 50 attempts`);
  }

  /**
   * The files of `files` under the table's location `location`; the others
   * (another table's or tenant's, or written as some other URI) are left
   * alone and counted in one warning.
   */
  #ownFiles(ns: string, table: string, location: string, files: readonly string[]): string[] {
    const base = fileUri(location.replace(/\/+$/, ''));
    const own = files.filter((f) => isUnder(fileUri(f), base));
    if (own.length < files.length) {
      this.#o.log.warn(
        { table: `${ns}.${table}`, files: files.length - own.length },
        "retention: files outside the table's location are named by its metadata; left alone (Siglake deletes only under a table's own location)",
      );
    }
    return own;
  }

  /** The refs a commit removed: their count at info (in the round's line), their names at debug. */
  #refsRemovedLog(ns: string, table: string, names: readonly string[]): void {
    if (names.length > 0) this.#o.log.debug({ table: `${ns}.${table}`, refs: names }, 'retention: removed refs older than their max-ref-age-ms');
  }

  /** Deletes the files a committed pending list names, then clears the property. Returns the data files deleted. */
  async #finishPending(ns: string, table: string, loaded: LoadedTable): Promise<number> {
    let cur: LoadedTable | null = loaded;
    for (let attempt = 1; attempt <= 50 && cur !== null; attempt++) {
      const doc = LosslessJson.parse(cur.metadata.toJson()) as JsonObject;
      const props = (doc['properties'] as JsonObject | undefined) ?? {};
      const listLoc = props[PENDING];
      if (typeof listLoc !== 'string') return 0;
      let files: string[];
      let isList = false;
      // A list is read only from under the table's own location (see the header): a property naming
      // anything else (another table's or tenant's file) is treated as a list that is gone, and that
      // file is neither read as a list nor deleted.
      const ownList = this.#ownFiles(ns, table, cur.metadata.location, [listLoc]).length === 1;
      try {
        if (!ownList) throw Object.assign(new Error(`pending delete list outside the table's location: ${listLoc}`), { code: 'ENOENT' });
        const text = Buffer.from(await this.#o.storage.get(listLoc)).toString('utf8');
        let parsed: unknown;
        try {
          parsed = JSON.parse(text);
        } catch {
          parsed = undefined;
        }
        // Not a list of locations (damaged, or not Siglake's): nothing in it can be trusted to delete.
        isList = Array.isArray(parsed);
        files = Array.isArray(parsed) ? parsed.filter((x): x is string => typeof x === 'string') : [];
        if (!isList) this.#o.log.warn({ table: `${ns}.${table}`, list: listLoc }, 'retention: the pending delete list is not a list of files; clearing it, deleting nothing it names');
      } catch (e) {
        if (!isNotFound(e)) throw e;
        // The list is gone: a concurrent round finished it (and cleared the property, or is about
        // to), or an orphan-file cleanup removed it (nothing in Iceberg's metadata references it).
        // Its files cannot be known any more; waiting for it would stop this table's retention for
        // ever. Reload: a property that still names it is cleared, and the round goes on.
        cur = await this.#appender.load(ns, table);
        if (cur === null) return 0;
        const now = (LosslessJson.parse(cur.metadata.toJson()) as JsonObject)['properties'] as JsonObject | undefined;
        if (now?.[PENDING] !== listLoc) continue; // finished by another round, or a new list: look again
        this.#o.log.warn(
          { table: `${ns}.${table}`, list: listLoc },
          'retention: the pending delete list is gone; clearing it (the files it named, if not yet deleted, stay as orphans for an orphan-file cleanup)',
        );
        const cleared = LosslessJson.parse(cur.metadata.toJson()) as JsonObject;
        const { [PENDING]: _gone, ...others } = now;
        cleared['properties'] = others;
        if (await this.#commitDoc(ns, table, cur, cleared)) return 0;
        cur = await this.#appender.load(ns, table);
        continue;
      }
      this.#o.step?.('deleting');
      let data = 0;
      // A list written before deletes were bounded to the table's location, or by anyone else.
      for (const f of this.#ownFiles(ns, table, cur.metadata.location, files)) {
        await this.#o.storage.delete(f);
        // Data files only (a partition-statistics file under metadata/ may be Parquet too).
        if (f.endsWith('.parquet') && !f.includes('/metadata/')) data++;
      }
      const { [PENDING]: _done, ...rest } = props;
      doc['properties'] = rest;
      if (await this.#commitDoc(ns, table, cur, doc)) {
        // Not a list: whatever that file is (the table's own, named by someone else's commit), it stays.
        if (isList) await this.#o.storage.delete(listLoc);
        return data;
      }
      cur = await this.#appender.load(ns, table);
    }
    return 0;
  }

  /**
   * Every manifest list, manifest and live data file the snapshots reference.
   * `kept`: snapshots that stay, whose lists must all be read (a failure
   * throws); else expired ones, whose list or manifest may already be gone
   * (an earlier, interrupted expiry: nothing of it left to delete). Any other
   * failure to read an expired snapshot's (a 503, EIO) throws too: the commit
   * removes the snapshot, and the files only it referenced could never be
   * found again.
   */
  async #reachable(snaps: readonly SnapshotView[], kept: boolean): Promise<Set<string>> {
    const out = new Set<string>();
    const seenManifests = new Set<string>();
    const unreadable = (what: string, e: unknown) =>
      new Error(`snapshot expiry stopped: ${what} of ${kept ? 'a kept' : 'an expired'} snapshot could not be read (${(e as Error).message}); nothing deleted`, { cause: e });
    // An expired snapshot's file that is not there is skipped; any other failure stops the expiry.
    const skip = (e: unknown) => !kept && isNotFound(e);
    for (const s of snaps) {
      out.add(s.manifestList);
      let list: AvroRecord[];
      try {
        list = await ManifestList.read(this.#o.storage, s.manifestList);
      } catch (e) {
        if (!skip(e)) throw unreadable(`the manifest list ${s.manifestList}`, e);
        continue;
      }
      for (const m of list) {
        const p = String(m['manifest_path']);
        out.add(p);
        if (seenManifests.has(p)) continue;
        seenManifests.add(p);
        let records: AvroRecord[];
        try {
          records = AvroFile.decode(await this.#o.storage.get(p), p).records;
        } catch (e) {
          if (!skip(e)) throw unreadable(`the manifest ${p}`, e);
          continue;
        }
        // A DELETED entry records a removal: the file is live only in the snapshots before it.
        for (const e of records) if (e['status'] !== STATUS_DELETED) out.add(String((e['data_file'] as AvroRecord)['file_path']));
      }
    }
    return out;
  }

  /**
   * Whether `e`, thrown reading the files of metadata `cur`, comes from that
   * metadata being stale: the store says a file is not there and the table
   * has moved on since `cur` was read (another round expired the snapshot
   * and deleted it). The caller then reads the table again. A file missing
   * under metadata that is still current is a real failure.
   */
  async #stale(ns: string, table: string, cur: LoadedTable, e: unknown): Promise<boolean> {
    if (!isNotFound(e)) return false;
    return (await this.#o.catalog.metadataLocation(ns, table)) !== cur.metadataLocation;
  }

  /**
   * Warns when the table's newest commit time is ahead of this host's clock
   * by more than Iceberg Java's one-minute tolerance: a writer's clock is
   * ahead or this one's behind, and snapshot ages here are off by as much
   * (docs/runbooks.md "Clocks and retention").
   */
  #warnClockAhead(ns: string, table: string, doc: JsonObject, snaps: readonly SnapshotView[]): void {
    let newest = Number(doc['last-updated-ms'] ?? 0);
    for (const s of snaps) newest = Math.max(newest, s.timestampMs);
    const ahead = newest - this.#now();
    if (ahead > 60_000) {
      this.#o.log.warn(
        { table: `${ns}.${table}`, aheadMs: ahead },
        "retention: the table's last commit is timestamped ahead of this host's clock (a writer's clock is ahead, or this host's is behind); snapshot ages are off by as much",
      );
    }
  }

  /** Logs that another round expired what this one set out to (its own commit lost, or its read was stale). */
  #doneByAnother(ns: string, table: string, wanted: ReadonlySet<bigint>, snaps: readonly SnapshotView[]): void {
    if (wanted.size === 0) return;
    const left = snaps.filter((s) => wanted.has(s.snapshotId)).length;
    if (left > 0) return;
    this.#o.log.info({ table: `${ns}.${table}`, snapshots: wanted.size }, 'retention: another round expired these snapshots first; nothing left to do here');
  }

  async #commitDoc(ns: string, table: string, cur: LoadedTable, doc: JsonObject): Promise<boolean> {
    // Never before the last commit's time (TableMetadata.commitFloorMs: Iceberg Java refuses a log that goes back).
    const now = cur.metadata.commitFloorMs(this.#now());
    doc['last-updated-ms'] = now;
    const log = [...((doc['metadata-log'] as JsonValue[] | undefined) ?? []), { 'timestamp-ms': cur.metadata.lastUpdatedMs, 'metadata-file': cur.metadataLocation }];
    doc['metadata-log'] = log.slice(Math.max(0, log.length - 100));
    const nextLoc = `${cur.metadata.location}/metadata/${TableMetadata.nextFileName(cur.metadataLocation)}`;
    await this.#o.storage.putNew(nextLoc, Buffer.from(LosslessJson.stringify(doc), 'utf8'));
    if (await this.#o.catalog.swapMetadataLocation(ns, table, cur.metadataLocation, nextLoc)) return true;
    await this.#o.storage.delete(nextLoc).catch(() => undefined);
    return false;
  }
}

/**
 * A retention property or ref field as a positive integer (a JSON number, a
 * 64-bit one LosslessJson reads as bigint, or a property's digits), else
 * null (not set). One past 2^53 (Long.MAX_VALUE, Iceberg's "for ever") is
 * Infinity, never "not set": read as unset, a table asking to keep its
 * snapshots for ever got retention.snapshotMaxAgeHours instead.
 */
function positive(v: unknown): number | null {
  let n: bigint;
  if (typeof v === 'bigint') n = v;
  else if (typeof v === 'number' && Number.isInteger(v)) n = BigInt(v);
  else if (typeof v === 'string' && /^\d+$/.test(v.trim())) n = BigInt(v.trim());
  else return null;
  if (n <= 0n) return null;
  return n > BigInt(Number.MAX_SAFE_INTEGER) ? Infinity : Number(n);
}

/**
 * The refs to remove for their age, as Iceberg Java's RemoveSnapshots and
 * Spark's expire_snapshots remove them: every branch or tag but `main` whose
 * snapshot was made longer ago than its `max-ref-age-ms` (the ref's own
 * value, else the table property `history.expire.max-ref-age-ms`; neither
 * set: never). Age is this host's `now` minus the snapshot's `timestamp-ms`,
 * as Iceberg compares it: a writer's clock ahead keeps the ref longer; this
 * host's ahead (or the writer's behind) by D removes it up to D early, the
 * same D by which snapshot expiry and the cut-off day are early
 * (docs/runbooks.md "Clocks and retention"). A value that is not a
 * positive integer counts as not set (a ref's then falls to the table's);
 * a ref whose snapshot is not in the metadata, or with no snapshot id, is
 * left alone (its age is unknown; it keeps no file either).
 */
function agedOutRefs(doc: JsonObject, snaps: readonly SnapshotView[], props: JsonObject, now: number): string[] {
  const tableMax = positive(props['history.expire.max-ref-age-ms']);
  const madeAt = new Map(snaps.map((s) => [s.snapshotId, s.timestampMs]));
  const out: string[] = [];
  for (const [name, r] of Object.entries((doc['refs'] as JsonObject | undefined) ?? {})) {
    if (name === 'main') continue;
    const ref = r as JsonObject | null;
    const id = ref?.['snapshot-id'];
    if (ref === null || typeof ref !== 'object' || (typeof id !== 'number' && typeof id !== 'bigint')) continue;
    const maxAge = positive(ref['max-ref-age-ms']) ?? tableMax;
    const at = madeAt.get(BigInt(id));
    if (maxAge === null || at === undefined) continue;
    if (now - at > maxAge) out.push(name);
  }
  return out;
}

/**
 * How old (ms) each snapshot may get before expiry: `settingMs`, or longer
 * where the table property `history.expire.max-snapshot-age-ms` or a branch
 * whose ancestry holds the snapshot (its ref's `max-snapshot-age-ms`) says
 * longer. Values that are not positive integers are ignored.
 */
function maxAgeBySnapshot(doc: JsonObject, snaps: readonly SnapshotView[], props: JsonObject, settingMs: number): (id: bigint) => number {
  const base = Math.max(settingMs, positive(props['history.expire.max-snapshot-age-ms']) ?? 0);
  const byId = new Map(snaps.map((s) => [s.snapshotId, s]));
  const longer = new Map<bigint, number>();
  const refs = (doc['refs'] as JsonObject | undefined) ?? {};
  for (const r of Object.values(refs)) {
    const ref = r as JsonObject | null;
    const id = ref?.['snapshot-id'];
    if (ref === null || (typeof id !== 'number' && typeof id !== 'bigint') || (ref['type'] ?? 'branch') !== 'branch') continue;
    const age = positive(ref['max-snapshot-age-ms']);
    if (age === null || age <= base) continue;
    // Its ancestry, once each (a parent id that loops is not followed twice).
    const seen = new Set<bigint>();
    for (let at: bigint | null = BigInt(id); at !== null && !seen.has(at); at = byId.get(at)?.parentSnapshotId ?? null) {
      seen.add(at);
      longer.set(at, Math.max(longer.get(at) ?? 0, age));
    }
  }
  return (id) => Math.max(base, longer.get(id) ?? 0);
}

/**
 * The snapshots each branch keeps by count: its head and its ancestors (by
 * parent id), `min-snapshots-to-keep` of them in all, the ref's own value,
 * else the table property `history.expire.min-snapshots-to-keep`, else 1.
 * The current snapshot counts as the head of `main` when no ref names it.
 */
function keptByCount(doc: JsonObject, snaps: readonly SnapshotView[], currentId: bigint | null, props: JsonObject): Set<bigint> {
  const out = new Set<bigint>();
  const tableMin = positive(props['history.expire.min-snapshots-to-keep']) ?? 1;
  const byId = new Map(snaps.map((s) => [s.snapshotId, s]));
  const heads: [bigint, number][] = [];
  const refs = (doc['refs'] as JsonObject | undefined) ?? {};
  for (const r of Object.values(refs)) {
    const ref = r as JsonObject | null;
    const id = ref?.['snapshot-id'];
    if (ref === null || (typeof id !== 'number' && typeof id !== 'bigint') || (ref['type'] ?? 'branch') !== 'branch') continue;
    heads.push([BigInt(id), positive(ref['min-snapshots-to-keep']) ?? tableMin]);
  }
  if (currentId !== null && !heads.some(([id]) => id === currentId)) heads.push([currentId, tableMin]);
  for (const [head, min] of heads) {
    let id: bigint | null = head;
    // At most every snapshot (a count of Long.MAX_VALUE is Infinity; a parent loop must end).
    for (let n = 0; n < Math.min(min, byId.size) && id !== null; n++) {
      const s = byId.get(id);
      if (s === undefined) break;
      out.add(id);
      id = s.parentSnapshotId;
    }
  }
  return out;
}

/**
 * Removes from `doc` the `statistics` and `partition-statistics` entries of
 * snapshots not in `keptIds`. Returns the files of the removed entries
 * (`gone`) and those of the entries that stay (`kept`: a file both name is
 * not deleted).
 */
function splitStatistics(doc: JsonObject, keptIds: ReadonlySet<bigint>): { gone: string[]; kept: Set<string> } {
  const gone: string[] = [];
  const kept = new Set<string>();
  for (const key of ['statistics', 'partition-statistics']) {
    const list = doc[key];
    if (!Array.isArray(list)) continue;
    const stay: JsonValue[] = [];
    for (const entry of list) {
      const e = entry as JsonObject | null;
      const id = e?.['snapshot-id'];
      const path = e?.['statistics-path'];
      // An entry that is not what the spec says (no snapshot id) is another engine's business: kept.
      const keep = typeof id !== 'number' && typeof id !== 'bigint' ? true : keptIds.has(BigInt(id));
      if (keep) {
        stay.push(entry);
        if (typeof path === 'string') kept.add(path);
      } else if (typeof path === 'string') {
        gone.push(path);
      }
    }
    doc[key] = stay;
  }
  return { gone, kept };
}

function propsOf(m: TableMetadata): Record<string, JsonValue> {
  const doc = LosslessJson.parse(m.toJson()) as JsonObject;
  return (doc['properties'] as JsonObject | undefined) ?? {};
}

function dayOf(e: AvroRecord, schema: TableSchema): number {
  const part = (e['data_file'] as AvroRecord)['partition'] as AvroRecord;
  const d = part[schema.partitionFieldName];
  return d === null || d === undefined ? Number.MAX_SAFE_INTEGER : Number(d);
}

/**
 * The schema a dropped-from manifest is written again in: its own writer
 * schema, so that every field another engine wrote is kept, plus any entry
 * field this rewrite sets that it lacks (a v1 manifest's sequence numbers,
 * made explicit here), taken from Siglake's entry schema. A writer schema
 * that is not a manifest entry record at all falls back to Siglake's.
 */
function rewriteSchema(writer: unknown, schema: TableSchema): unknown {
  const own = ManifestWriter.entrySchema(schema) as { fields: { name: string }[] };
  const w = writer as { type?: unknown; fields?: { name: string }[] } | null;
  if (w?.type !== 'record' || !Array.isArray(w.fields) || !w.fields.some((f) => f.name === 'data_file')) return own;
  const have = new Set(w.fields.map((f) => f.name));
  const missing = own.fields.filter((f) => !have.has(f.name));
  return missing.length === 0 ? writer : { ...w, fields: [...w.fields, ...missing] };
}

/** `file:/x` (Iceberg Java's form of a local path) as `file:///x`, so that both forms compare equal; anything else as it is. */
function fileUri(location: string): string {
  return /^file:\/(?!\/)/.test(location) ? `file://${location.slice(5)}` : location;
}

function int32(d: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32LE(d, 0);
  return b;
}

/**
 * When each snapshot stopped being current: the time of the next entry of
 * the snapshot log (Iceberg's history of the current snapshot). One never
 * current (not in the log) counts from the first snapshot made after it;
 * failing that, from its own time.
 */
function replacedAt(doc: JsonObject, snaps: readonly SnapshotView[]): Map<bigint, number> {
  const out = new Map<bigint, number>();
  const log = ((doc['snapshot-log'] as JsonObject[] | undefined) ?? []).map((e) => ({
    id: BigInt(e['snapshot-id'] as number | bigint),
    at: Number(e['timestamp-ms']),
  }));
  for (let i = 0; i + 1 < log.length; i++) {
    const prev = out.get(log[i]!.id);
    // A snapshot current twice (a rollback) stays as long as its last spell asks.
    out.set(log[i]!.id, Math.max(prev ?? 0, log[i + 1]!.at));
  }
  const logged = new Set(log.map((e) => e.id));
  const times = snaps.map((t) => t.timestampMs).sort((a, b) => a - b);
  for (const s of snaps) {
    if (logged.has(s.snapshotId)) continue;
    // The first time above its own (binary search over the sorted times).
    let lo = 0;
    let hi = times.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (times[mid]! > s.timestampMs) hi = mid;
      else lo = mid + 1;
    }
    if (lo < times.length) out.set(s.snapshotId, times[lo]!);
  }
  return out;
}
