// Closed-loop load with a ledger: each client sends requests whose log bodies
// (or span names) are unique markers, to a random lane (tenant × index ×
// signal) over a random transport and encoding, and records the answer. After
// a crash, a kill or a shutdown the ledger says which markers were
// acknowledged; checkLedger() then looks for every one of them in `siglake wal
// dump`, in the lane it was sent to.

import { RawGrpcClient } from '../../helpers/grpc-client.js';
import type { DumpLine, RunningIngester } from '../../helpers/ingester.js';
import { gzip, jsonBytes, logsJson, logsProto, tracesJson, tracesProto } from '../../helpers/otlp-bodies.js';
import { expect } from 'vitest';
import type { Prng } from './prng.js';
import { dumpWal } from './wal-files.js';
import { sleep, until } from '../../helpers/wait.js';

export interface LaneChoice {
  tenant: string;
  index?: string;
  signal: 'logs' | 'traces';
}

/** `tenant/logs`, `tenant/traces` or `tenant/index:<name>`. */
export function laneKey(l: LaneChoice): string {
  return `${l.tenant}/${l.index !== undefined ? `index:${l.index}` : l.signal}`;
}

export function dumpLaneKey(d: DumpLine): string {
  return `${d.tenant}/${d.table === 'index' ? `index:${d.index}` : d.table}`;
}

/** Every lane of tenants × ([no index] + indexes) × signals (an index lane takes both signals). */
export function laneMatrix(tenants: string[], indexes: string[]): LaneChoice[] {
  const out: LaneChoice[] = [];
  for (const tenant of tenants) {
    out.push({ tenant, signal: 'logs' }, { tenant, signal: 'traces' });
    for (const index of indexes) out.push({ tenant, index, signal: 'logs' }, { tenant, index, signal: 'traces' });
  }
  return out;
}

export type Transport = 'http-proto' | 'http-json' | 'http-gzip' | 'grpc';

export interface LedgerEntry {
  texts: string[];
  lane: string;
  signal?: 'logs' | 'traces';
  transport: Transport;
  /** HTTP status; for gRPC the HTTP status of the same row (contract §6); -1 for a transport error. */
  status: number;
  start: number;
  end: number;
  /** Free-form: which client, which shard. */
  shard?: number;
}

const GRPC_TO_HTTP: Record<number, number> = { 0: 200, 3: 400, 4: 408, 7: 403, 8: 429, 13: 500, 14: 503, 16: 401 };

export class Ledger {
  readonly entries: LedgerEntry[] = [];

  add(e: LedgerEntry): void {
    this.entries.push(e);
  }

  get acked(): LedgerEntry[] {
    return this.entries.filter((e) => e.status === 200);
  }

  statusCounts(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const e of this.entries) out[String(e.status)] = (out[String(e.status)] ?? 0) + 1;
    return out;
  }
}

export interface LedgerCheck {
  /** Acknowledged markers not found anywhere in the dump. */
  lost: string[];
  /** Acknowledged markers found, but in another lane. */
  misplaced: string[];
  /** Texts the dump holds more than once. */
  duplicated: string[];
  /** Texts in the dump that no request of the ledger carried (with `ownPrefix`). */
  invented: string[];
  /** Markers not acknowledged (500, reset, …) that are in the WAL anyway: allowed, counted. */
  unackedPresent: number;
  ackedRequests: number;
  ackedRecords: number;
}

/** Checks the ledger against a dump; only dump texts starting with `ownPrefix` are judged as this ledger's. */
export function checkLedger(ledger: Ledger, dump: DumpLine[], ownPrefix: string): LedgerCheck {
  const where = new Map<string, string>();
  const duplicated: string[] = [];
  for (const d of dump) {
    const lane = dumpLaneKey(d);
    for (const t of d.texts) {
      if (!t.startsWith(ownPrefix)) continue;
      if (where.has(t)) duplicated.push(t);
      where.set(t, lane);
    }
  }
  const lost: string[] = [];
  const misplaced: string[] = [];
  const sent = new Set<string>();
  let unackedPresent = 0;
  let ackedRequests = 0;
  let ackedRecords = 0;
  for (const e of ledger.entries) {
    for (const t of e.texts) sent.add(t);
    if (e.status === 200) {
      ackedRequests++;
      for (const t of e.texts) {
        ackedRecords++;
        const lane = where.get(t);
        if (lane === undefined) lost.push(`${t} (${e.transport} → ${e.lane})`);
        else if (lane !== e.lane) misplaced.push(`${t}: sent to ${e.lane}, found in ${lane}`);
      }
    } else if (e.texts.some((t) => where.has(t))) {
      unackedPresent++;
    }
  }
  const invented = [...where.keys()].filter((t) => !sent.has(t));
  return { lost, misplaced, duplicated, invented, unackedPresent, ackedRequests, ackedRecords };
}

export interface LoadOptions {
  ing: RunningIngester;
  prng: Prng;
  ledger: Ledger;
  /** Marker prefix, unique per run (e.g. `crash-batch-r3`). */
  tag: string;
  lanes: LaneChoice[];
  clients: number;
  /** Relative weights of the transports. */
  transports?: readonly (readonly [number, Transport])[];
  /** Records per request: 1..maxRecords. */
  maxRecords?: number;
  /** Chance that a request carries a large resource attribute of up to `maxPadBytes`. */
  padChance?: number;
  maxPadBytes?: number;
  /** Sends X-Scope-OrgID for tenants other than `default` (the server runs --trust-tenant-header). */
  tenantHeader?: boolean;
  /** Per-request timeout (a hang guard, not a latency bar). */
  timeoutMs?: number;
  /** Shard of each lane, recorded on the ledger entry. */
  shardOf?: (l: LaneChoice) => number;
  /** Pause between a client's requests (ms); default none. */
  pauseMs?: number;
}

const DEFAULT_TRANSPORTS: readonly (readonly [number, Transport])[] = [
  [5, 'http-proto'],
  [2, 'http-json'],
  [1, 'http-gzip'],
  [3, 'grpc'],
];

/** Closed-loop clients; stop() ends them after their current request. */
export class LoadRun {
  #stop = false;
  readonly #loops: Promise<void>[] = [];
  readonly #grpc: RawGrpcClient[] = [];
  sent = 0;

  constructor(readonly o: LoadOptions) {
    for (let c = 0; c < o.clients; c++) {
      const rpc = new RawGrpcClient(o.ing.grpcAddress);
      this.#grpc.push(rpc);
      this.#loops.push(this.#client(c, o.prng.fork(), rpc));
    }
  }

  get acked(): number {
    return this.o.ledger.acked.length;
  }

  async #client(c: number, prng: Prng, rpc: RawGrpcClient): Promise<void> {
    const o = this.o;
    const transports = o.transports ?? DEFAULT_TRANSPORTS;
    for (let seq = 0; !this.#stop; seq++) {
      const lane = prng.pick(o.lanes);
      const transport = prng.weighted(transports);
      const n = 1 + prng.int(o.maxRecords ?? 3);
      const texts = Array.from({ length: n }, (_, k) => `${o.tag}-c${c}-${seq}-${k}`);
      const pad = prng.chance(o.padChance ?? 0.1) ? 'p'.repeat(1 + prng.int(o.maxPadBytes ?? 64 * 1024)) : 'reliability';
      const headers: Record<string, string> = {};
      if (lane.index !== undefined) headers['x-siglake-index'] = lane.index;
      if ((o.tenantHeader ?? true) && lane.tenant !== 'default') headers['x-scope-orgid'] = lane.tenant;
      const start = Date.now();
      const status = await this.#send(lane, transport, texts, pad, headers, rpc);
      o.ledger.add({
        texts,
        lane: laneKey(lane),
        signal: lane.signal,
        transport,
        status,
        start,
        end: Date.now(),
        ...(o.shardOf ? { shard: o.shardOf(lane) } : {}),
      });
      this.sent++;
      if (status === -1) await sleep(20); // the server is gone or going: do not spin
      else if (o.pauseMs) await sleep(o.pauseMs);
    }
  }

  async #send(
    lane: LaneChoice,
    transport: Transport,
    texts: string[],
    pad: string,
    headers: Record<string, string>,
    rpc: RawGrpcClient,
  ): Promise<number> {
    const timeoutMs = this.o.timeoutMs ?? 30_000;
    const logs = lane.signal === 'logs';
    if (transport === 'grpc') {
      const body = logs ? logsProto(texts, pad) : tracesProto(texts, pad);
      const r = await rpc.export(lane.signal, body, headers, timeoutMs);
      return GRPC_TO_HTTP[r.code] ?? -1;
    }
    let body: Uint8Array;
    let contentType = 'application/x-protobuf';
    if (transport === 'http-json') {
      body = jsonBytes(logs ? logsJson(texts, pad) : tracesJson(texts, pad));
      contentType = 'application/json';
    } else {
      body = logs ? logsProto(texts, pad) : tracesProto(texts, pad);
    }
    if (transport === 'http-gzip') {
      body = gzip(body);
      headers['content-encoding'] = 'gzip';
    }
    try {
      const res = await fetch(`${this.o.ing.url}/v1/${lane.signal}`, {
        method: 'POST',
        body,
        headers: { 'content-type': contentType, ...headers },
        signal: AbortSignal.timeout(timeoutMs),
      });
      await res.arrayBuffer();
      return res.status;
    } catch {
      return -1;
    }
  }

  /** Ends every client after its current request. */
  async stop(): Promise<void> {
    this.#stop = true;
    await Promise.all(this.#loops);
    for (const r of this.#grpc) r.close();
  }
}

export { sleep, until };

/**
 * The ledger against `siglake wal dump` of `walDir`: every acknowledged marker
 * is there, in its lane, once, and nothing with the suite's prefix was invented.
 */
export function expectLedgerIntact(ledger: Ledger, walDir: string, ownPrefix: string, context = ''): LedgerCheck {
  const c = checkLedger(ledger, dumpWal(walDir), ownPrefix);
  expect(c.lost, `${context}acknowledged markers lost`).toEqual([]);
  expect(c.misplaced, `${context}markers in the wrong lane`).toEqual([]);
  expect(c.duplicated, `${context}markers stored twice`).toEqual([]);
  expect(c.invented, `${context}markers never sent`).toEqual([]);
  return c;
}
