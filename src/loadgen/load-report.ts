// Adds up what the client threads posted into the run's report: totals and
// rates, status counts, the latency histogram and its percentiles, and a
// timeline per interval. Intervals inside the warm-up are kept in the
// timeline (marked) and left out of everything else.

import { IntervalStats, type IntervalMessage } from './interval-stats.js';
import { LatencyHistogram, type HistogramSnapshot } from './latency-histogram.js';
import type { DoneMessage } from './load-client.js';
import type { LoadgenOptions } from './loadgen-options.js';
import type { ReadyMessage } from './load-worker.js';
import { verdictOf, type Verdict } from './refusal-hints.js';
import { fitLine, fmtMs, fmtNum, plural } from './text-format.js';

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
  /** Refused or failed per second. */
  refusedPerSec: number;
  recordsPerSec: number;
  /** Accepted bytes on the wire. */
  mbPerSec: number;
  /** Every request's bytes on the wire. */
  sentMbPerSec: number;
  /** Latencies of the accepted requests (0 when none). */
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
  /** bytes, rawBytes: of the accepted requests; sentBytes: of every request. */
  totals: { issued: number; requests: number; ok: number; errors: number; bytes: number; sentBytes: number; rawBytes: number; records: number };
  rates: { requestsPerSec: number; okPerSec: number; recordsPerSec: number; mbPerSec: number; sentMbPerSec: number; rawMbPerSec: number };
  statusCounts: Record<string, number>;
  errorSamples: Record<string, string>;
  /** Latency of the accepted requests, in milliseconds (fixed rate: from when it was due). */
  latencyMs: LatencySummary;
  histogram: HistogramSnapshot;
  /** Latency of the refused and failed requests: never mixed into latencyMs. */
  refusedLatencyMs: LatencySummary;
  /** The refusal share against --max-error-rate, and each refusal with its likely fix. */
  verdict: Verdict;
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
        refusedPerSec: round((s.completed - s.ok) * perSec, 1),
        recordsPerSec: round(s.records * perSec, 1),
        mbPerSec: round((s.bytes * perSec) / 1e6),
        sentMbPerSec: round((s.sentBytes * perSec) / 1e6),
        p50Ms: lat.p50,
        p90Ms: lat.p90,
        p99Ms: lat.p99,
        maxMs: lat.max,
      });
    }
    const issued = this.#done.reduce((n, d) => n + d.issued, 0);
    const samples: Record<string, string> = {};
    for (const d of this.#done) for (const [k, v] of Object.entries(d.samples)) samples[k] ??= v;
    const statusCounts = Object.fromEntries([...t.statuses].sort(([a], [b]) => a.localeCompare(b)));
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
        maxErrorRate: o.maxErrorRate,
      },
      prepare: {
        lanes: this.#ready.reduce((n, r) => n + r.lanes, 0),
        distinctBodies: this.#ready.reduce((n, r) => n + r.bodies, 0),
        bodyPoolBytes: this.#ready.reduce((n, r) => n + r.poolBytes, 0),
        ms: round(Math.max(0, ...this.#ready.map((r) => r.prepareMs)), 1),
      },
      elapsedSecs: round(secs),
      totals: { issued, requests: t.completed, ok: t.ok, errors, bytes: t.bytes, sentBytes: t.sentBytes, rawBytes: t.rawBytes, records: t.records },
      rates: {
        requestsPerSec: round(t.completed / secs, 1),
        okPerSec: round(t.ok / secs, 1),
        recordsPerSec: round(t.records / secs, 1),
        mbPerSec: round(t.bytes / 1e6 / secs),
        sentMbPerSec: round(t.sentBytes / 1e6 / secs),
        rawMbPerSec: round(t.rawBytes / 1e6 / secs),
      },
      statusCounts,
      errorSamples: samples,
      latencyMs: latencySummary(t.hist),
      histogram: t.hist.snapshot(),
      refusedLatencyMs: latencySummary(t.refusedHist),
      verdict: verdictOf(statusCounts, samples, o.maxErrorRate, { target: o.target, tenants: o.tenants, tenantMode: o.tenantMode, protocol: o.protocol }),
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

  /** The human summary printed at the end, designed for `width` (80) columns. */
  static text(r: LoadReportJson, width = 80): string {
    const c = r.config;
    const size = (b: number): string => (b >= 1024 ? `${fmtNum(b / 1024, 1)} KiB` : `${fmtNum(b)} B`);
    // --body-bytes is a target: the bodies are whole OTLP requests around it. Say what was sent.
    const sent = r.totals.requests > 0 ? (r.totals.sentBytes ?? r.totals.bytes) / r.totals.requests : NaN;
    const body = `~${size(c.bodyBytes as number)}${Number.isFinite(sent) ? ` (${size(sent)} sent on average)` : ''}`;
    const proto = c.protocol === 'grpc' ? 'OTLP/gRPC' : `OTLP/HTTP ${String(c.encoding)}`;
    const load =
      c.mode === 'closed-loop'
        ? `closed loop, ${plural(c.connections as number, 'connection')}${c.protocol === 'grpc' ? ` x ${String(c.streams)} streams` : ''}`
        : `fixed rate ${fmtNum(c.rate as number)}/s, up to ${plural(c.connections as number, 'connection')}`;
    const tenants = `${plural(c.tenants as number, 'tenant')}${(c.indexes as number) > 0 ? ` x ${plural(c.indexes as number, 'index', 'indexes')}` : ''}`;
    const perSec = (v: number): string => fmtNum(v, 1);
    const row = (label: string, total: string, rate: string, note = ''): string =>
      `  ${label.padEnd(10)}${total.padStart(14)}${rate.padStart(14)}${note === '' ? '' : `  ${note}`}`;
    const mb = (bytes: number): string => fmtNum(bytes / 1e6, 1);
    const lat = (l: LatencySummary): string =>
      `p50 ${fmtMs(l.p50)}  p90 ${fmtMs(l.p90)}  p99 ${fmtMs(l.p99)}  p99.9 ${fmtMs(l.p999)}  max ${fmtMs(l.max)} ms`;
    const lines = [
      `siglake loadgen: ${String(c.target)}, ${proto}${c.gzip ? ' + gzip' : ''}`,
      `  ${String(c.signal)} bodies ${body}, ${tenants}, ${load}, ${plural(c.threads as number, 'thread')}`,
      `  measured ${fmtNum(r.elapsedSecs, 1)} s${(c.warmupSecs as number) > 0 ? ` after ${fmtNum(c.warmupSecs as number, 1)} s warm-up` : ''}`,
      '',
      row('', 'total', 'per second'),
      row('requests', fmtNum(r.totals.requests), perSec(r.rates.requestsPerSec)),
      row('accepted', fmtNum(r.totals.ok), perSec(r.rates.okPerSec)),
      row('refused', fmtNum(r.totals.errors), perSec(r.totals.errors / r.elapsedSecs), r.totals.requests > 0 ? `${fmtNum((100 * r.totals.errors) / r.totals.requests, 1)} %` : ''),
      row('records', fmtNum(r.totals.records), perSec(r.rates.recordsPerSec), 'accepted'),
      row('MB sent', mb(r.totals.sentBytes ?? r.totals.bytes), fmtNum(r.rates.sentMbPerSec ?? r.rates.mbPerSec, 2), 'on the wire, all requests'),
      row('MB taken', mb(r.totals.bytes), fmtNum(r.rates.mbPerSec, 2), `accepted; ${fmtNum(r.rates.rawMbPerSec, 2)} MB/s unpacked`),
      '',
      `  latency   ${r.latencyMs.count > 0 ? lat(r.latencyMs) : 'no request was accepted'}`,
    ];
    if (r.refusedLatencyMs !== undefined && r.refusedLatencyMs.count > 0) lines.push(`  refusals  ${lat(r.refusedLatencyMs)}`);
    if (r.fixedRate !== null) {
      lines.push(`  rate      target ${perSec(r.fixedRate.targetPerSec)}/s, achieved ${perSec(r.fixedRate.achievedPerSec)}/s`);
      lines.push(`            most due at once ${fmtNum(r.fixedRate.maxBacklog)}, never sent ${fmtNum(r.fixedRate.unsent)}`);
    }
    const statuses = Object.entries(r.statusCounts).sort((a, b) => b[1] - a[1]);
    lines.push(`  status    ${statuses.map(([k, v]) => `${k} x ${fmtNum(v)}`).join(', ') || 'none'}`);
    for (const f of r.verdict?.refusals ?? []) {
      if (f.message !== '') lines.push(`  ${f.status.padEnd(8)}  ${f.message}`);
    }
    return lines.map((l) => fitLine(l, width)).join('\n') + '\n';
  }

  /**
   * The closing words: whether the run passed, and when it did not, a last
   * line naming the most common refusal and its fix. Undefined when nothing
   * was refused.
   */
  static verdictLine(r: LoadReportJson): string | undefined {
    const v = r.verdict;
    const top = v.refusals[0];
    if (top === undefined) return undefined;
    const share = `${fmtNum(v.refusedShare * 100, 1)} % of ${fmtNum(v.requests)} requests refused`;
    const what = `${top.status}${top.reason !== undefined ? ` ${top.reason}` : ''} x ${fmtNum(top.count)}`;
    if (!v.failed) return `siglake loadgen: ${share}, within --max-error-rate ${fmtNum(v.maxErrorRate, 1)} %; most: ${what}`;
    return `siglake loadgen: FAILED: ${share} (--max-error-rate ${fmtNum(v.maxErrorRate, 1)} %)\n  ${what}: ${top.fix}`;
  }
}
