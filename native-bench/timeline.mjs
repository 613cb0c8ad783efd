#!/usr/bin/env node
// Reads a round trace (SIGLAKE_TEST_ROUND_TRACE=<prefix>, src/shard/round-trace.ts)
// and says where a request's time between the acceptor and its worker went,
// and where each worker round's time went: run.mjs's `--only timeline` row, or
//
//   node native-bench/timeline.mjs PREFIX [--skip-ms 1000]
//
// prints the summary as JSON. Times are in microseconds; every figure is a
// median unless it says otherwise (p90, p99, mean, share).

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// The column order of src/shard/round-trace.ts (ACCEPTOR_COLUMNS, ROUND_COLUMNS).
const A = { published: 0, read: 1, posted: 2, round: 3, drained: 4, answered: 5, woke: 6, width: 7 };
const R = { start: 0, read: 1, written: 2, synced: 3, posted: 4, n: 5, slept: 6, width: 7 };

/** The rows of a trace file, each a view of `width` float64s. */
export function rowsOf(file, width) {
  const buf = readFileSync(file);
  const f = new Float64Array(buf.buffer, buf.byteOffset, Math.floor(buf.length / 8));
  const rows = [];
  for (let i = 0; i + width <= f.length; i += width) rows.push(f.subarray(i, i + width));
  return rows;
}

function quantile(sorted, q) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

/** p50, p90, p99 and mean of `values` times `scale` (by default ms to µs). */
function dist(values, scale = 1000) {
  const v = values.filter(Number.isFinite).map((x) => x * scale);
  v.sort((a, b) => a - b);
  const mean = v.length === 0 ? NaN : v.reduce((s, x) => s + x, 0) / v.length;
  return { n: v.length, p50: quantile(v, 0.5), p90: quantile(v, 0.9), p99: quantile(v, 0.99), mean };
}

/**
 * The summary of the trace files under `prefix`. `skipMs`: rows that began
 * within this long of the first are left out (the load's warm-up).
 */
export function analyse(prefix, skipMs = 1000) {
  const dir = path.dirname(prefix);
  const base = path.basename(prefix);
  const accFile = `${prefix}.acceptor.f64`;
  if (!existsSync(accFile)) throw new Error(`no acceptor trace at ${accFile} (did the process shut down cleanly?)`);
  const shardFiles = readdirSync(dir).filter((f) => f.startsWith(`${base}.shard`) && f.endsWith('.f64'));
  if (shardFiles.length === 0) throw new Error(`no worker trace beside ${accFile}`);
  let acc = rowsOf(accFile, A.width).filter((r) => r[A.published] > 0 && r[A.read] > 0 && r[A.posted] > 0);
  if (acc.length === 0) throw new Error(`${accFile} holds no request that went through a worker`);
  const t0 = acc.reduce((m, r) => Math.min(m, r[A.published]), Infinity);
  acc = acc.filter((r) => r[A.published] >= t0 + skipMs);

  const rounds = [];
  const gaps = { slept: [], awake: [] };
  const periods = [];
  let busy = 0;
  let span = 0;
  // Rounds that began before the one before them was answered (two in flight).
  let overlapped = 0;
  for (const f of shardFiles) {
    // With nothing to skip every round counts: t0 is the first request the acceptor's trace still
    // holds, and a round can begin before it when that request's row was not kept.
    const rs = rowsOf(path.join(dir, f), R.width).filter((r) => (skipMs <= 0 || r[R.start] >= t0 + skipMs) && Number.isFinite(r[R.posted]) && r[R.n] > 0);
    // Busy: the union of the rounds' [start, posted], which overlap with two rounds in flight.
    let busyTo = -Infinity;
    for (let i = 0; i < rs.length; i++) {
      const r = rs[i];
      rounds.push(r);
      busy += Math.max(0, r[R.posted] - Math.max(r[R.start], busyTo));
      busyTo = Math.max(busyTo, r[R.posted]);
      if (i > 0) {
        const p = rs[i - 1];
        if (r[R.start] < p[R.posted]) overlapped++;
        (r[R.slept] === 1 ? gaps.slept : gaps.awake).push(r[R.start] - p[R.posted]);
        periods.push(r[R.start] - p[R.start]);
      }
    }
    if (rs.length > 1) span += rs[rs.length - 1][R.posted] - rs[0][R.start];
  }
  const byStart = new Map(rounds.map((r) => [r[R.start], r]));
  // The worker's wake-up: for a round it slept before, from the first of its requests put in the ring to its start.
  const firstPublished = new Map();
  for (const r of acc) {
    const p = firstPublished.get(r[A.round]);
    if (p === undefined || r[A.published] < p) firstPublished.set(r[A.round], r[A.published]);
  }
  const workerWake = [];
  for (const [start, pub] of firstPublished) if (byStart.get(start)?.[R.slept] === 1) workerWake.push(start - pub);

  // The first completion of each round the acceptor drained right after waiting on the doorbell:
  // was the acceptor idle meanwhile (no publish or answer of its own between posted and drained:
  // the wake-up alone), or busy with other requests?
  const events = [];
  for (const r of acc) events.push(r[A.published], r[A.answered]);
  events.sort((a, b) => a - b);
  const anyBetween = (a, b) => {
    let lo = 0;
    let hi = events.length;
    while (lo < hi) {
      const m = (lo + hi) >> 1;
      if (events[m] <= a) lo = m + 1;
      else hi = m;
    }
    return lo < events.length && events[lo] < b;
  };
  const firstOfRound = new Map();
  const lastOfRound = new Map();
  for (const r of acc) {
    const f = firstOfRound.get(r[A.round]);
    if (f === undefined || r[A.drained] < f[A.drained]) firstOfRound.set(r[A.round], r);
    const l = lastOfRound.get(r[A.round]);
    if (l === undefined || r[A.answered] > l) lastOfRound.set(r[A.round], r[A.answered]);
  }
  const wakeIdle = [];
  const wakeBusy = [];
  const answerSpread = [];
  for (const [round, r] of firstOfRound) {
    answerSpread.push(lastOfRound.get(round) - r[A.drained]);
    if (r[A.woke] !== 1) continue;
    (anyBetween(r[A.posted], r[A.drained]) ? wakeBusy : wakeIdle).push(r[A.drained] - r[A.posted]);
  }

  const synced = (r) => (Number.isFinite(r[R.synced]) ? r[R.synced] : r[R.written]);
  const n = rounds.map((r) => r[R.n]);
  const totalN = n.reduce((s, x) => s + x, 0);
  const perReq = (col0, col1) => rounds.reduce((s, r) => s + (col1(r) - col0(r)), 0) / totalN;
  const at = (c) => (r) => r[c];
  return {
    requests: acc.length,
    rounds: rounds.length,
    workers: shardFiles.length,
    request: {
      // In the ring until the worker read it (the round in progress, then the wake-up).
      queued: dist(acc.map((r) => r[A.read] - r[A.published])),
      // From read to its completion posted (the rest of its round's reading, then write, sync, post).
      inRound: dist(acc.map((r) => r[A.posted] - r[A.read])),
      // From posted to drained by the acceptor.
      completionWake: dist(acc.map((r) => r[A.drained] - r[A.posted])),
      completionWakeAfterWait: dist(acc.filter((r) => r[A.woke] === 1).map((r) => r[A.drained] - r[A.posted])),
      completionWakeBusy: dist(acc.filter((r) => r[A.woke] === 0).map((r) => r[A.drained] - r[A.posted])),
      drainedAfterWaitShare: acc.filter((r) => r[A.woke] === 1).length / Math.max(1, acc.length),
      // The first completion of a round drained after a doorbell wait, the acceptor idle meanwhile (the wake-up alone)…
      acceptorWakeIdle: dist(wakeIdle),
      // …or busy with requests of its own meanwhile.
      acceptorWakeBusy: dist(wakeBusy),
      acceptorBusyShare: wakeBusy.length / Math.max(1, wakeBusy.length + wakeIdle.length),
      // From a round's first completion drained to its last answer written: the answers go out one at a time.
      answerSpread: dist(answerSpread),
      // From drained to its answer written (the corked write of one response).
      answer: dist(acc.map((r) => r[A.answered] - r[A.drained])),
      total: dist(acc.map((r) => r[A.answered] - r[A.published])),
    },
    round: {
      n: dist(n, 1),
      period: dist(periods),
      read: dist(rounds.map((r) => r[R.read] - r[R.start])),
      write: dist(rounds.map((r) => r[R.written] - r[R.read])),
      sync: dist(rounds.map((r) => synced(r) - r[R.written])),
      post: dist(rounds.map((r) => r[R.posted] - synced(r))),
      busy: dist(rounds.map((r) => r[R.posted] - r[R.start])),
      gapSlept: dist(gaps.slept),
      gapAwake: dist(gaps.awake),
      sleptShare: gaps.slept.length / Math.max(1, gaps.slept.length + gaps.awake.length),
      workerWake: dist(workerWake),
      // Worker thread time per request, in µs: reading and validating, writing, posting.
      perRequestUs: {
        read: perReq(at(R.start), at(R.read)) * 1000,
        write: perReq(at(R.read), at(R.written)) * 1000,
        sync: perReq(at(R.written), synced) * 1000,
        post: perReq(synced, at(R.posted)) * 1000,
      },
      busyShare: span > 0 ? busy / span : NaN,
      overlapShare: overlapped / Math.max(1, periods.length),
    },
  };
}

const us = (x) => (Number.isFinite(x) ? x.toFixed(1) : '-');

/** Log lines for a summary. */
export function describe(s) {
  const d = (x) => `p50 ${us(x.p50)} / p90 ${us(x.p90)} / p99 ${us(x.p99)} µs`;
  const q = s.request;
  const r = s.round;
  return [
    `timeline: ${s.requests} requests, ${s.rounds} rounds on ${s.workers} worker(s); ${us(r.n.p50)} requests a round (mean ${us(r.n.mean)})`,
    `  request: queued in the ring ${d(q.queued)}; in its round ${d(q.inRound)}; completion to acceptor ${d(q.completionWake)} (${(q.drainedAfterWaitShare * 100).toFixed(0)} % after a doorbell wait: ${d(q.completionWakeAfterWait)}); answer ${d(q.answer)}; total ${d(q.total)}`,
    `  acceptor wake-up (a round's first completion, after a doorbell wait): idle meanwhile ${d(q.acceptorWakeIdle)}; busy with other requests (${(q.acceptorBusyShare * 100).toFixed(0)} %) ${d(q.acceptorWakeBusy)}; a round's answers from first drained to last written ${d(q.answerSpread)}`,
    `  round: period ${d(r.period)}; read+validate ${d(r.read)}; write ${d(r.write)}; sync ${d(r.sync)}; post ${d(r.post)}`,
    `  between rounds: after sleeping (${(r.sleptShare * 100).toFixed(0)} % of rounds) ${d(r.gapSlept)}, without ${d(r.gapAwake)}; worker wake-up (first frame to round start) ${d(r.workerWake)}`,
    `  worker per request: read+validate ${us(r.perRequestUs.read)} µs, write ${us(r.perRequestUs.write)}, sync ${us(r.perRequestUs.sync)}, post ${us(r.perRequestUs.post)}; busy ${(r.busyShare * 100).toFixed(0)} % of the time; ${(r.overlapShare * 100).toFixed(0)} % of rounds began before the one before them was answered`,
  ];
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const prefix = process.argv[2];
  if (prefix === undefined) {
    process.stderr.write('usage: node native-bench/timeline.mjs PREFIX [--skip-ms N]\n');
    process.exit(2);
  }
  const i = process.argv.indexOf('--skip-ms');
  const s = analyse(prefix, i > 0 ? Number(process.argv[i + 1]) : 1000);
  for (const line of describe(s)) process.stderr.write(`${line}\n`);
  process.stdout.write(`${JSON.stringify(s)}\n`);
}
