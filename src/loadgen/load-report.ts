// Adds up what the client threads posted into the run's report: totals and
// rates, status counts, the latency histogram and its percentiles, and a
// timeline per interval. Intervals inside the warm-up are kept in the
// timeline (marked) and left out of everything else.

import { IntervalStats, type IntervalMessage } from './interval-stats.js';
import { LatencyHistogram, type HistogramSnapshot } from './latency-histogram.js';
import type { DoneMessage } from './load-client.js';
import type { LoadgenOptions } from './loadgen-options.js';
import type { ReadyMessage } from './load-worker.js';

export interface LatencySummary {
  count: number;
  min: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
}

export interface TimelinePoint {
  /** Seconds from the start (warm-up included) to the start of the interval. */
  t: number;
  warmup: boolean;
  requests: number;
  ok: number;
  errors: number;
  records: number;
  requestsPerSec: number;
  okPerSec: number;
  mbPerSec: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
}

export interface LoadReportJson {
  tool: 'siglake loadgen';
  schema: 1;
  startedAt: string;
  config: Record<string, unknown>;
  prepare: { lanes: number; distinctBodies: number; bodyPoolBytes: number; ms: number };
  elapsedSecs: number;
  totals: { issued: number; requests: number; ok: number; errors: number; bytes: number; rawBytes: number; records: number };
  rates: { requestsPerSec: number; okPerSec: number; recordsPerSec: number; mbPerSec: number; rawMbPerSec: number };
  statusCounts: Record<string, number>;
  errorSamples: Record<string, string>;
  /** Latency of every request counted, in milliseconds (fixed rate: from when it was due). */
  latencyMs: LatencySummary;
  histogram: HistogramSnapshot;
  fixedRate: { targetPerSec: number; achievedPerSec: number; maxBacklog: number; unsent: number } | null;
  timeline: TimelinePoint[];
}

const round = (n: number, digits = 3): number => Number(n.toFixed(digits));

export function latencySummary(h: LatencyHistogram): LatencySummary {
  const ms = (us: number): number => round(us / 1000);
  return {
    count: h.count,
    min: ms(h.min),
    mean: ms(h.mean),
    p50: ms(h.percentile(50)),
    p90: ms(h.percentile(90)),
    p99: ms(h.percentile(99)),
    p999: ms(h.percentile(99.9)),
    max: ms(h.max),
  };
}

export class LoadReport {
  readonly #o: LoadgenOptions;
  readonly #startedAt: number;
  readonly #warmupIntervals: number;
  readonly #intervals = new Map<number, IntervalStats>();
  readonly #total = new IntervalStats();
  readonly #ready: ReadyMessage[] = [];
  readonly #done: DoneMessage[] = [];
  #elapsedSecs = 0;

  /** `startedAt`: Date.now() at which sending starts (warm-up included). */
  constructor(opts: LoadgenOptions, startedAt: number) {
    this.#o = opts;
    this.#startedAt = startedAt;
    this.#warmupIntervals = Math.round((opts.warmupSecs * 1000) / opts.intervalMs);
  }

  addReady(m: ReadyMessage): void {
    this.#ready.push(m);
  }

  addInterval(m: IntervalMessage): void {
    let s = this.#intervals.get(m.index);
    if (s === undefined) {
      s = new IntervalStats();
      this.#intervals.set(m.index, s);
    }
    s.add(m);
    if (m.index >= this.#warmupIntervals) this.#total.add(m);
  }

  addDone(m: DoneMessage): void {
    this.#done.push(m);
  }

  /** Counted so far (after warm-up). */
  get total(): IntervalStats {
    return this.#total;
  }

  /** The stats of interval `index`, if any request completed in it. */
  interval(index: number): IntervalStats | undefined {
    return this.#intervals.get(index);
  }

  /** Sets the measured time: from the end of warm-up to `endAt` (Date.now()). */
  finish(endAt: number): void {
    const o = this.#o;
    const measuredStart = this.#startedAt + o.warmupSecs * 1000;
    const bound = o.durationSecs > 0 ? o.durationSecs : Infinity;
    this.#elapsedSecs = Math.max(0.001, Math.min(bound, (endAt - measuredStart) / 1000));
  }

  toJSON(): LoadReportJson {
    const o = this.#o;
    const t = this.#total;
    const secs = this.#elapsedSecs;
    const errors = t.completed - t.ok;
    const indexes = [...this.#intervals.keys()].sort((a, b) => a - b);
    const last = indexes.length > 0 ? indexes[indexes.length - 1] : -1;
    const timeline: TimelinePoint[] = [];
    const perSec = 1000 / o.intervalMs;
    for (let i = 0; i <= last; i++) {
      const s = this.#intervals.get(i) ?? new IntervalStats();
      const lat = latencySummary(s.hist);
      timeline.push({
        t: round((i * o.intervalMs) / 1000),
        warmup: i < this.#warmupIntervals,
        requests: s.completed,
        ok: s.ok,
        errors: s.completed - s.ok,
        records: s.records,
        requestsPerSec: round(s.completed * perSec, 1),
        okPerSec: round(s.ok * perSec, 1),
        mbPerSec: round((s.bytes * perSec) / 1e6),
        p50Ms: lat.p50,
        p90Ms: lat.p90,
        p99Ms: lat.p99,
        maxMs: lat.max,
      });
    }
    const issued = this.#done.reduce((n, d) => n + d.issued, 0);
    const samples: Record<string, string> = {};
    for (const d of this.#done) for (const [k, v] of Object.entries(d.samples)) samples[k] ??= v;
    return {
      tool: 'siglake loadgen',
      schema: 1,
      startedAt: new Date(this.#startedAt).toISOString(),
      config: {
        protocol: o.protocol,
        target: o.target,
        signal: o.signal,
        encoding: o.encoding,
        gzip: o.gzip,
        bodyBytes: o.bodyBytes,
        tenants: o.tenants,
        tenantMode: o.tenantMode,
        indexes: o.indexes,
        mode: o.rate === undefined ? 'closed-loop' : 'fixed-rate',
        rate: o.rate ?? null,
        connections: o.connections,
        streams: o.protocol === 'grpc' ? o.streams : 1,
        threads: o.threads,
        durationSecs: o.durationSecs,
        requests: o.requests ?? null,
        warmupSecs: o.warmupSecs,
        intervalMs: o.intervalMs,
        seed: o.seed,
      },
      prepare: {
        lanes: this.#ready.reduce((n, r) => n + r.lanes, 0),
        distinctBodies: this.#ready.reduce((n, r) => n + r.bodies, 0),
        bodyPoolBytes: this.#ready.reduce((n, r) => n + r.poolBytes, 0),
        ms: round(Math.max(0, ...this.#ready.map((r) => r.prepareMs)), 1),
      },
      elapsedSecs: round(secs),
      totals: { issued, requests: t.completed, ok: t.ok, errors, bytes: t.bytes, rawBytes: t.rawBytes, records: t.records },
      rates: {
        requestsPerSec: round(t.completed / secs, 1),
        okPerSec: round(t.ok / secs, 1),
        recordsPerSec: round(t.records / secs, 1),
        mbPerSec: round(t.bytes / 1e6 / secs),
        rawMbPerSec: round(t.rawBytes / 1e6 / secs),
      },
      statusCounts: Object.fromEntries([...t.statuses].sort(([a], [b]) => a.localeCompare(b))),
      errorSamples: samples,
      latencyMs: latencySummary(t.hist),
      histogram: t.hist.snapshot(),
      fixedRate:
        o.rate === undefined
          ? null
          : {
              targetPerSec: o.rate,
              achievedPerSec: round(t.completed / secs, 1),
              maxBacklog: Math.max(0, ...this.#done.map((d) => d.maxBacklog)),
              unsent: this.#done.reduce((n, d) => n + d.unsent, 0),
            },
      timeline,
    };
  }

  /** The human summary printed at the end. */
  static text(r: LoadReportJson): string {
    const c = r.config;
    const n = (v: number, d = 0): string => v.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
    const kib = (c.bodyBytes as number) >= 1024 ? `${n((c.bodyBytes as number) / 1024, 0)} KiB` : `${String(c.bodyBytes)} B`;
    const load =
      c.mode === 'closed-loop'
        ? `closed loop, ${String(c.connections)} connections${c.protocol === 'grpc' ? ` x ${String(c.streams)} streams` : ''}`
        : `fixed rate ${n(c.rate as number)}/s, up to ${String(c.connections)} connections`;
    const lines = [
      `siglake loadgen: ${String(c.target)} ${String(c.protocol)} ${c.protocol === 'http' ? String(c.encoding) : 'protobuf'}${c.gzip ? '+gzip' : ''} ${String(c.signal)}, ~${kib} bodies, ${String(c.tenants)} tenant(s)${(c.indexes as number) > 0 ? ` x ${String(c.indexes)} indexes` : ''}, ${load}, ${String(c.threads)} thread(s), ${n(r.elapsedSecs, 1)} s`,
      `  requests   ${n(r.totals.requests).padStart(12)}  ${n(r.rates.requestsPerSec, 1).padStart(12)}/s   ok ${n(r.totals.ok)}  errors ${n(r.totals.errors)}`,
      `  records    ${n(r.totals.records).padStart(12)}  ${n(r.rates.recordsPerSec, 1).padStart(12)}/s`,
      `  bytes      ${n(r.totals.bytes).padStart(12)}  ${n(r.rates.mbPerSec, 2).padStart(12)} MB/s on the wire (${n(r.rates.rawMbPerSec, 2)} MB/s uncompressed)`,
      `  status     ${Object.entries(r.statusCounts).map(([k, v]) => `${k}: ${n(v)}`).join('   ') || 'none'}`,
      `  latency ms p50 ${r.latencyMs.p50}  p90 ${r.latencyMs.p90}  p99 ${r.latencyMs.p99}  p99.9 ${r.latencyMs.p999}  max ${r.latencyMs.max}  mean ${r.latencyMs.mean}`,
    ];
    if (r.fixedRate !== null) {
      lines.push(`  fixed rate target ${n(r.fixedRate.targetPerSec, 1)}/s achieved ${n(r.fixedRate.achievedPerSec, 1)}/s, most due and unsent at once ${n(r.fixedRate.maxBacklog)}, never sent ${n(r.fixedRate.unsent)}`);
    }
    for (const [k, v] of Object.entries(r.errorSamples)) lines.push(`  sample     ${k}: ${v}`);
    return lines.join('\n') + '\n';
  }
}
