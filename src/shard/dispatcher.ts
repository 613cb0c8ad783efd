// The worker pool's client, on the acceptor thread: moves admitted requests to
// the worker that owns their lane and brings the answers back. One SPSC request ring and one completion ring per shard, on
// SharedArrayBuffers; one shared doorbell the acceptor waits on with
// Atomics.waitAsync. Piscina runs one long "serve shard k" task per worker;
// when a worker dies its task rejects, its in-flight requests are refused
// SIGLAKE_WORKER_DIED, and the shard task runs again on fresh rings (the new worker repairs
// the shard's WAL tails before it reads a frame).

import type { Piscina } from 'piscina';
import type { ErrorCode } from '../errors.js';
import type { Logger } from '../log.js';
import type { AuditNote } from '../tenants/audit-log.js';
import { ByteRing } from '../lanes/byte-ring.js';
import { copyIntoShared } from '../lanes/shared-copy.js';
import type { Lane, LaneTable } from '../lanes/lane-table.js';
import { WorkerStats } from '../metrics/worker-stats.js';
import { CompletionRing, Doorbell, outcomeOfCompletion } from './completion-ring.js';
import { encodeFrame, encodeLaneSpec, FRAME_PREFIX_BYTES, FrameKind, writeFramePrefix, type LaneSpec } from './frames.js';
import { ControlWord, type ShardTaskArgs, type WorkerSettings } from './protocol.js';
import { InflightTable } from './inflight-table.js';
import { AcceptorTrace, roundTracePath } from './round-trace.js';

/** Whoever waits for the answer: an HTTP response or a gRPC call. */
export interface PendingRequest {
  /**
   * `code` is undefined when the request was stored, else why not; `message`
   * is the worker's own explanation of a refusal, when it gave one.
   */
  complete(code: ErrorCode | undefined, records: number, message: string | undefined): void;
  /** The request's audit note (its verified subject and peer), when admission gave it one: the first-admission events of the request that stored. */
  readonly audit?: AuditNote | undefined;
}

/**
 * The size a shard's request ring keeps to while its worker keeps up
 * (ByteRing.create): the ring is sized for the largest request (twice
 * --max-request-bytes), but only what was in flight at once, and this, is
 * ever touched. Measured on 16 cores: with the whole ring cycled, 15 workers
 * held 15 x 32 MiB of ring resident (docs/performance.md, "On 16 cores").
 */
export const RING_SOFT_BYTES = 1 << 20;

interface BacklogItem {
  frame: Uint8Array;
  tag: number;
}

class ShardHandle {
  ring: ByteRing;
  compl: CompletionRing;
  readonly control: Int32Array;
  readonly stats = WorkerStats.create();
  readonly backlog: BacklogItem[] = [];
  /**
   * The worker's life, as lanes remember being announced to it
   * (Lane.announcedEpoch): a new one (renew) knows no lane until told.
   */
  epoch = 1;
  task: Promise<unknown> | undefined;
  incarnation = 0;
  /** Deaths in a row of incarnations that never became ready (their WAL recovery failed): the restart's backoff. */
  failedStarts = 0;

  constructor(
    readonly shard: number,
    readonly ringBytes: number,
    readonly complSlots: number,
  ) {
    this.ring = ByteRing.create(ringBytes, RING_SOFT_BYTES);
    this.compl = CompletionRing.create(complSlots);
    this.control = new Int32Array(new SharedArrayBuffer(64));
  }

  get ready(): boolean {
    return Atomics.load(this.control, ControlWord.READY) === this.incarnation;
  }

  renew(): void {
    this.ring = ByteRing.create(this.ringBytes, RING_SOFT_BYTES);
    this.compl = CompletionRing.create(this.complSlots);
    this.epoch++;
    this.backlog.length = 0;
  }
}

export interface DispatcherOptions {
  pool: Piscina;
  workers: number;
  lanes: LaneTable;
  settings: WorkerSettings;
  maxRequestBytes: number;
  log: Logger;
  /**
   * Called for every finished request (answered, or refused before it was
   * sent) before its PendingRequest completes. `written` is there for a request
   * a worker answered: its code (undefined: stored), records and bytes: the
   * OTLP protobuf bytes it wrote when stored, else the body as received
   * (declared tenants' budgets and counters). `note`: the request's audit
   * note, when it has one (the first-admission events name who stored).
   */
  onFinish(lane: Lane, stored: boolean, written?: WorkerAnswer, note?: AuditNote): void;
}

/** What a worker answered for one request (DispatcherOptions.onFinish). */
export interface WorkerAnswer {
  readonly code: ErrorCode | undefined;
  readonly records: number;
  readonly bytes: number;
}

export class Dispatcher {
  readonly #opts: DispatcherOptions;
  readonly #shards: ShardHandle[];
  readonly #doorbell = new Doorbell();
  /** Requests sent to a worker and not yet answered, with their lane and body bytes as received (a refusal's count). */
  readonly #inflight = new InflightTable<PendingRequest, Lane>();
  readonly #onCompletion: (reqId: number, code: number, records: number, message: string | undefined, bytes: number) => void;
  #closed = false;
  #stopping = false;
  #backlogTimer: NodeJS.Timeout | undefined;
  /** Frames that went to a backlog because their ring was full (siglake_ingest_ring_backlog_total). */
  #backlogged = 0;
  #readyWaiters: (() => void)[] = [];
  /** Rejects start() while it waits: a worker that dies before the first ready fails the start. */
  #failStart: ((e: Error) => void) | null = null;
  /** Test-only: the round trace (src/shard/round-trace.ts), when one is on. */
  readonly #trace: AcceptorTrace | null;

  constructor(opts: DispatcherOptions) {
    this.#opts = opts;
    const tracePath = roundTracePath();
    this.#trace = tracePath === undefined ? null : new AcceptorTrace(tracePath);
    const ringBytes = ByteRing.capacityFor(opts.maxRequestBytes + FRAME_PREFIX_BYTES);
    this.#shards = Array.from({ length: opts.workers }, (_, k) => new ShardHandle(k, ringBytes, 4096));
    this.#onCompletion = (reqId, code, records, message, bytes) => this.#complete(reqId, outcomeOfCompletion(code), records, message, bytes);
  }

  get workerStats(): readonly WorkerStats[] {
    return this.#shards.map((s) => s.stats);
  }

  get inflight(): number {
    return this.#inflight.size;
  }

  /** Frames that waited in a backlog because their shard's ring was full, since start. */
  get backlogged(): number {
    return this.#backlogged;
  }

  /** Starts every shard task and resolves once each worker has recovered its WAL tails. */
  async start(): Promise<void> {
    const ready = new Promise<void>((resolve, reject) => {
      // Cleared as the start resolves, not after its await: a death handled in between is a
      // running worker's (restarted), never a start failure rejecting a settled promise.
      this.#readyWaiters.push(() => {
        this.#failStart = null;
        resolve();
      });
      this.#failStart = reject;
    });
    for (const s of this.#shards) this.#runShard(s);
    void this.#completionLoop();
    await ready;
  }

  #allReady(): boolean {
    return this.#shards.every((s) => s.ready);
  }

  #runShard(s: ShardHandle): void {
    s.incarnation++;
    const known = this.#opts.lanes.lanesOfShard(s.shard);
    const args: ShardTaskArgs = {
      shard: s.shard,
      workers: this.#opts.workers,
      incarnation: s.incarnation,
      ringSab: s.ring.sab,
      complSab: s.compl.sab,
      doorbellSab: this.#doorbell.sab,
      controlSab: s.control.buffer as SharedArrayBuffer,
      statsSab: s.stats.sab,
      settings: this.#opts.settings,
      lanes: known.map(toSpec),
      ...(this.#trace !== null ? { traceSab: this.#trace.sab } : {}),
    };
    for (const l of known) l.announcedEpoch = s.epoch;
    const incarnation = s.incarnation;
    s.task = this.#opts.pool.run(args).then(
      () => {
        if (!this.#stopping) this.#onShardDeath(s, incarnation, new Error('shard task ended early'));
      },
      (err: unknown) => this.#onShardDeath(s, incarnation, err),
    );
  }

  #onShardDeath(s: ShardHandle, incarnation: number, err: unknown): void {
    if (incarnation !== s.incarnation || this.#closed) return;
    const wasReady = s.ready;
    if (this.#failStart !== null) {
      // Start-up: a worker whose WAL recovery failed (a file it cannot read or write, a file of a
      // newer release) would fail the same way again. Restarting it at once ran hundreds of
      // recoveries a second, never ready and never exiting; the start fails instead, naming why.
      const why = (err as Error)?.message ?? String(err);
      this.#failStart(new Error(`writer worker ${s.shard} could not recover its WAL: ${why}`));
      this.#failStart = null;
      return;
    }
    // Answers the dead worker posted before it died are still good: deliver them first.
    s.compl.drain(this.#onCompletion);
    const failed = this.#inflight.idsOfShard(s.shard);
    this.#opts.log.error(
      { shard: s.shard, err: (err as Error)?.message ?? String(err), failedRequests: failed.length },
      'writer worker died; refusing its in-flight requests (SIGLAKE_WORKER_DIED) and restarting the shard',
    );
    for (const reqId of failed) {
      this.#complete(reqId, 'SIGLAKE_WORKER_DIED', 0, 'write failed: the writer worker stopped; the request was not stored');
    }
    s.renew();
    if (this.#stopping) return;
    // A worker that died after it was ready restarts at once; one whose recovery keeps failing
    // waits longer each time (up to 5 s), so a broken lane does not spin a core.
    s.failedStarts = wasReady ? 0 : s.failedStarts + 1;
    if (s.failedStarts === 0) return this.#runShard(s);
    const delay = Math.min(5_000, 100 * 2 ** (s.failedStarts - 1));
    setTimeout(() => {
      if (!this.#stopping && !this.#closed) this.#runShard(s);
    }, delay).unref();
  }

  /**
   * Sends an admitted request's body to its lane's worker. `body` is copied
   * (into the ring, or into the backlog when the ring is full), so the caller
   * may pass a view that dies when it returns. `foreign`: `body` views memory
   * V8 did not allocate (a uWS chunk), whose alignment JavaScript cannot see
   * (src/lanes/shared-copy.ts).
   */
  dispatch(lane: Lane, flags: number, body: Uint8Array, req: PendingRequest, foreign = false): void {
    const reqId = this.#inflight.add(req, lane, lane.shard, body.length);
    const s = this.#shards[lane.shard]!;
    if (lane.announcedEpoch !== s.epoch) this.#announce(s, lane);
    this.#trace?.published(reqId);
    if (this.#drainBacklog(s) && this.#tryPush(s.ring, FrameKind.DATA, flags, lane.id, body, reqId, foreign)) {
      s.ring.wake();
      return;
    }
    s.backlog.push({ frame: encodeFrame(FrameKind.DATA, flags, lane.id, body), tag: reqId });
    this.#backlogged++;
    this.#scheduleBacklog();
  }

  /** Tells a lane's worker to forget a provisional lane that was released. */
  forget(lane: Lane): void {
    const s = this.#shards[lane.shard]!;
    if (lane.announcedEpoch !== s.epoch) return;
    lane.announcedEpoch = 0;
    this.#control(s, FrameKind.LANE_FORGET, lane.id, new Uint8Array(0));
  }

  #announce(s: ShardHandle, lane: Lane): void {
    lane.announcedEpoch = s.epoch;
    this.#control(s, FrameKind.LANE_OPEN, lane.id, encodeLaneSpec(lane));
  }

  #control(s: ShardHandle, kind: number, laneId: number, payload: Uint8Array): void {
    if (this.#drainBacklog(s) && this.#tryPush(s.ring, kind, 0, laneId, payload, 0)) {
      s.ring.wake();
      return;
    }
    s.backlog.push({ frame: encodeFrame(kind, 0, laneId, payload), tag: 0 });
    this.#backlogged++;
    this.#scheduleBacklog();
  }

  #tryPush(ring: ByteRing, kind: number, flags: number, laneId: number, body: Uint8Array, tag: number, foreign = false): boolean {
    const off = ring.reserve(FRAME_PREFIX_BYTES + body.length);
    if (off < 0) return false;
    const b = ring.bytes;
    writeFramePrefix(b, off, kind, flags, laneId);
    copyIntoShared(b, off + FRAME_PREFIX_BYTES, body, foreign);
    ring.publish(off, FRAME_PREFIX_BYTES + body.length, tag);
    return true;
  }

  /**
   * Moves into a shard's ring what of its backlog fits now, and says whether
   * the backlog is empty after it. A frame may go straight to the ring only
   * behind every frame waiting (order within a lane), and waiting for the
   * timer would send every frame of the next millisecond to the backlog too.
   */
  #drainBacklog(s: ShardHandle): boolean {
    const q = s.backlog;
    if (q.length === 0) return true;
    let i = 0;
    while (i < q.length && s.ring.push(q[i]!.frame, q[i]!.tag)) i++;
    if (i > 0) {
      q.splice(0, i);
      s.ring.wake();
    }
    return q.length === 0;
  }

  #flushBacklogs(): boolean {
    let pending = false;
    for (const s of this.#shards) if (!this.#drainBacklog(s)) pending = true;
    return pending;
  }

  #scheduleBacklog(): void {
    if (this.#backlogTimer !== undefined) return;
    this.#backlogTimer = setTimeout(() => {
      this.#backlogTimer = undefined;
      if (this.#flushBacklogs()) this.#scheduleBacklog();
    }, 1);
  }

  #complete(reqId: number, code: ErrorCode | undefined, records: number, message: string | undefined, stored = 0): void {
    const t = this.#inflight;
    const slot = t.find(reqId);
    if (slot < 0) return; // answered already (its worker died and it was refused)
    const req = t.req(slot);
    const lane = t.lane(slot);
    const received = t.bytes(slot);
    t.remove(slot);
    const drained = this.#trace?.now() ?? 0;
    // A stored request counts the OTLP protobuf bytes its worker wrote (the same for every
    // transport and encoding); a refused one the body as it came.
    this.#opts.onFinish(lane, code === undefined, { code, records, bytes: code === undefined ? stored : received }, req.audit);
    req.complete(code, records, message);
    this.#trace?.answered(reqId, drained);
  }

  /** Ends an admitted request that was refused before it reached a worker. */
  finishUnsent(lane: Lane): void {
    this.#opts.onFinish(lane, false);
  }

  async #completionLoop(): Promise<void> {
    const bell = this.#doorbell;
    while (!this.#closed) {
      const seen = bell.value();
      for (const s of this.#shards) {
        if (s.compl.drain(this.#onCompletion) > 0) s.compl.notifyRoom();
      }
      if (this.#trace !== null) this.#trace.woke = false;
      if (this.#readyWaiters.length > 0 && this.#allReady()) {
        for (const w of this.#readyWaiters.splice(0)) w();
      }
      if (bell.value() !== seen) {
        // More arrived while draining: let the event loop breathe, then drain again.
        await new Promise<void>((r) => setImmediate(r));
      } else {
        await bell.wait(seen, 1000);
        if (this.#trace !== null) this.#trace.woke = true;
      }
    }
  }

  /**
   * Stops taking work: waits (up to `timeoutMs`) for every in-flight request
   * to be answered, then tells each worker to seal and close its files.
   */
  async shutdown(timeoutMs: number): Promise<{ unanswered: number }> {
    const deadline = Date.now() + timeoutMs;
    while (this.#inflight.size > 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 10));
    }
    const unanswered = this.#inflight.size;
    this.#stopping = true;
    for (const s of this.#shards) this.#control(s, FrameKind.SHUTDOWN, 0, new Uint8Array(0));
    const left = Math.max(1000, deadline - Date.now());
    await Promise.race([
      Promise.allSettled(this.#shards.map((s) => s.task)),
      new Promise((r) => setTimeout(r, left).unref()),
    ]);
    this.#closed = true;
    this.#trace?.write();
    return { unanswered };
  }

  /** Test hook: the thread id of the worker serving `shard` (0 when not running). */
  threadIdOf(shard: number): number {
    const s = this.#shards[shard];
    return s === undefined ? 0 : Atomics.load(s.control, ControlWord.THREAD_ID);
  }

  get shardCount(): number {
    return this.#shards.length;
  }
}

function toSpec(lane: Lane): LaneSpec {
  return { id: lane.id, tenant: lane.tenant, index: lane.index, signal: lane.signal };
}

