// Which WAL segments are sealed: finished, never to be appended to again, so
// the compactor may land them (docs/iceberg.md "When a segment is sealed").
//
// The writer fdatasyncs and closes a segment before it creates the next one,
// so every segment below a lane's highest number is sealed. Whether the
// highest one is depends on who may still write it:
//
// - `running` (standalone `siglake compact` beside a live ingester): never;
//   it waits until a newer segment exists.
// - `stopped` (`siglake compact --ingester-stopped`: no ingester runs on this
//   WAL): every segment, the highest included; the operator vouches for it.
// - `in-process` (the compactor inside `siglake ingest`): also every segment
//   that existed when the compactor started. It starts after WAL recovery,
//   and a writer never appends to a segment of an earlier life, so those are
//   sealed even when still the highest of their lane.
//
// A `.seg.tmp` counts for "highest": its segment is being created, so the
// ones below it are finished. In every mode, a segment at or below the lane's
// `.sealed` marker (src/wal/sealed-marker.ts) is sealed: the writer records
// there each segment it seals by age or at shutdown, so a lane that went quiet
// is landed without waiting for its next segment.
//
// `journaled` (the WAL root has a `batch`-mode commit journal directory,
// `.journal/shard-<k>-of-<W>`): rotation takes no sync there, so a segment
// below the lane's highest may hold bytes only the journal has durably, and
// after a machine crash, until the ingester's replay has run, it may be
// torn, short or empty. Then `running` and `in-process` take a segment only
// at or below the marker, which the checkpoint writes once the segment is
// durable and no journal file that names it is left (the highest segment it
// made durable that is never appended to again: rotated or sealed), plus, in
// process, the earlier life's segments (recovery replayed the journal before
// the compactor started). The cost is a landing delay of at most one
// checkpoint interval (10 s). A directory left by an earlier `batch` run
// under `interval` or `never` would keep this rule (a longer delay, until a
// seal); the ingester removes its own when it starts in those modes.

export type SealMode = 'running' | 'stopped' | 'in-process';

export class SealRule {
  readonly mode: SealMode;
  /** in-process: lane directory → its highest segment number when the compactor started. */
  readonly #boundary: ReadonlyMap<string, number>;

  constructor(mode: SealMode, boundary: ReadonlyMap<string, number> = new Map()) {
    this.mode = mode;
    this.#boundary = boundary;
  }

  /**
   * Whether segment `number` of lane `dir`, whose highest number (segments and
   * tmp files) is `highest` and whose `.sealed` marker says `sealedUpTo`, is sealed.
   * `journaled`: the WAL root has a `batch`-mode commit journal (hasShardJournal).
   */
  isSealed(dir: string, number: number, highest: number, sealedUpTo = 0, journaled = false): boolean {
    if (number <= sealedUpTo) return true;
    if (number < highest && (!journaled || this.mode === 'stopped')) return true;
    switch (this.mode) {
      case 'stopped':
        return true;
      case 'running':
        return false;
      case 'in-process':
        return number <= (this.#boundary.get(dir) ?? 0);
    }
  }
}
