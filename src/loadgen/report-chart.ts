// A self-contained HTML page (inline SVG, no script, no external asset) of a
// loadgen report: the verdict, a summary table, accepted and refused requests
// per second, MB/s and records/s, the accepted requests' latency over time
// and by percentile, and a refusal section (status mix, first message per
// status, likely fix). A refused request's latency is never drawn as ingest
// latency. The charts scale with the page (viewBox, width 100 %).

import { LatencyHistogram } from './latency-histogram.js';
import type { LoadReportJson } from './load-report.js';

export interface ChartSeries {
  name: string;
  color: string;
  points: [number, number][];
  /** Draw a dot and its value at each point (the percentile chart's marks). */
  labelled?: boolean;
}

export interface ChartOptions {
  title: string;
  xLabel: string;
  yLabel: string;
  /** x as "percentile" on a log scale of 1/(1-p) (HdrHistogram style). */
  percentileX?: boolean;
  /** y on a log scale (latencies spanning orders of magnitude). */
  logY?: boolean;
  /** Shade x below this value (the warm-up). */
  shadeBelow?: number;
  /** The x axis reaches at least this far (the end of the run). */
  xEnd?: number;
  width?: number;
  height?: number;
}

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** 1, 2 or 5 times a power of ten, at least `v`. */
export function niceStep(v: number): number {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v * (1 - 1e-9)) return m * p;
  return 10 * p;
}

/** Ticks from 0 by a nice step up to the first tick at or above `max`, about `n` of them. */
export function niceTicks(max: number, n = 5): number[] {
  const step = niceStep((max > 0 ? max : 1) / n);
  const top = Math.max(step, Math.ceil(max / step - 1e-9) * step);
  const ticks: number[] = [];
  for (let i = 0; i * step <= top + step * 1e-9; i++) ticks.push(Number((i * step).toPrecision(12)));
  return ticks;
}

/** Ticks of a log axis: 1, 2, 5 × powers of ten, from the last at or below `min` to the first at or above `max`. */
export function logTicks(min: number, max: number): number[] {
  const lo = Math.max(min, 1e-6);
  const hi = Math.max(max, lo);
  const out: number[] = [];
  for (let e = Math.floor(Math.log10(lo)); out.length === 0 || out[out.length - 1]! < hi * (1 - 1e-9); e++) {
    for (const m of [1, 2, 5]) {
      const v = Number((m * 10 ** e).toPrecision(6));
      if (out.length > 0 && out[out.length - 1]! >= hi * (1 - 1e-9)) break;
      if (v <= lo * (1 + 1e-9)) out.length = 0;
      out.push(v);
    }
  }
  if (out.length === 1) out.push(Number((out[0]! * 2).toPrecision(6)));
  return out;
}

/** 12345 → "12,345"; 0.5 → "0.5"; 2500000 → "2.5M". */
export function fmtAxis(v: number): string {
  if (Math.abs(v) >= 1e6) return `${Number((v / 1e6).toFixed(v % 1e6 === 0 ? 0 : 1)).toLocaleString('en-US')}M`;
  return v.toLocaleString('en-US', { maximumFractionDigits: Math.abs(v) < 1 ? 3 : Math.abs(v) < 10 ? 2 : Math.abs(v) < 100 ? 1 : 0 });
}

/** Numbers in tables: thousands separators, `d` decimals. */
const num = (v: number | undefined, d = 0): string =>
  v === undefined || !Number.isFinite(v) ? '-' : v.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d });

export class ReportChart {
  /** One SVG line chart, drawn in a viewBox so that it scales with the page. */
  static svg(series: ChartSeries[], o: ChartOptions): string {
    const W = o.width ?? 800;
    const H = o.height ?? 300;
    const L = 70;
    const R = 20;
    const T = 52;
    const B = 44;
    const pw = W - L - R;
    const ph = H - T - B;
    const drawn = series.filter((s) => s.points.length > 0);
    // Percentiles on HdrHistogram's axis: 90 % is 1, 99 % is 2, 99.9 % is 3...
    const tx = (x: number): number => (o.percentileX ? -Math.log10(1 - Math.min(x / 100, 0.9999999)) : x);
    const all = drawn.flatMap((s) => s.points);
    const xs = all.map(([x]) => tx(x));
    const xMin = o.percentileX ? 0 : Math.min(0, ...xs);
    const xTicks = o.percentileX
      ? // Each percentile tick up to the first at or past the last point.
        [0, 90, 99, 99.9, 99.99, 99.999].filter((_, i, a) => i === 0 || tx(a[i - 1]!) < Math.max(...xs, 1) - 1e-9)
      : niceTicks(Math.max(...xs, o.xEnd ?? 0, 1e-9) - xMin, 6).map((t) => t + xMin);
    const xMax = Math.max(o.percentileX ? tx(xTicks[xTicks.length - 1]!) : xTicks[xTicks.length - 1]!, xMin + 1e-9, ...xs);
    const ys = all.map(([, y]) => y);
    const yTicks = o.logY ? logTicks(Math.max(1e-3, Math.min(...ys.filter((y) => y > 0), Infinity)), Math.max(...ys, 1e-3)) : niceTicks(Math.max(0, ...ys));
    const yLo = o.logY ? Math.log10(yTicks[0]!) : 0;
    const yHi = o.logY ? Math.log10(yTicks[yTicks.length - 1]!) : yTicks[yTicks.length - 1]!;
    const ty = (y: number): number => (o.logY ? Math.log10(Math.max(y, yTicks[0]!)) : y);
    const px = (x: number): number => L + ((tx(x) - xMin) / (xMax - xMin)) * pw;
    const py = (y: number): number => T + ph - ((ty(y) - yLo) / Math.max(1e-12, yHi - yLo)) * ph;
    const out: string[] = [];
    out.push(`<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(o.title)}" font-family="sans-serif" font-size="13">`);
    out.push(`<text x="${L}" y="20" font-size="16" font-weight="bold">${esc(o.title)}</text>`);
    // Legend: one row under the title.
    let lx = L;
    for (const s of drawn) {
      out.push(`<line x1="${lx}" x2="${lx + 22}" y1="38" y2="38" stroke="${s.color}" stroke-width="3"/><text x="${lx + 27}" y="42">${esc(s.name)}</text>`);
      lx += 40 + s.name.length * 7.5;
    }
    if (o.shadeBelow !== undefined && o.shadeBelow > xMin) {
      out.push(`<rect x="${L}" y="${T}" width="${Math.max(0, Math.min(pw, px(o.shadeBelow) - L)).toFixed(1)}" height="${ph}" fill="#eee"/>`);
      out.push(`<text x="${L + 4}" y="${T + 14}" fill="#777">warm-up</text>`);
    }
    for (const y of yTicks) {
      const Y = py(y).toFixed(1);
      out.push(`<line x1="${L}" x2="${L + pw}" y1="${Y}" y2="${Y}" stroke="#ddd"/><text x="${L - 6}" y="${(py(y) + 4).toFixed(1)}" text-anchor="end">${fmtAxis(y)}</text>`);
    }
    for (const x of xTicks) {
      const X = px(x).toFixed(1);
      out.push(`<line x1="${X}" x2="${X}" y1="${T}" y2="${T + ph}" stroke="#f0f0f0"/><text x="${X}" y="${T + ph + 16}" text-anchor="middle">${o.percentileX ? `${x}%` : fmtAxis(x)}</text>`);
    }
    out.push(`<rect x="${L}" y="${T}" width="${pw}" height="${ph}" fill="none" stroke="#999"/>`);
    out.push(`<text x="${L + pw / 2}" y="${H - 6}" text-anchor="middle">${esc(o.xLabel)}</text>`);
    out.push(`<text transform="translate(16 ${T + ph / 2}) rotate(-90)" text-anchor="middle">${esc(o.yLabel)}</text>`);
    for (const s of drawn) {
      const d = s.points.map(([x, y], j) => `${j === 0 ? 'M' : 'L'}${px(x).toFixed(1)},${py(y).toFixed(1)}`).join('');
      out.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"/>`);
      if (s.labelled) {
        for (const [x, y] of s.points) {
          const X = px(x);
          const Y = py(y);
          out.push(`<circle cx="${X.toFixed(1)}" cy="${Y.toFixed(1)}" r="4" fill="${s.color}"/>`);
          out.push(`<text x="${(X - 6).toFixed(1)}" y="${(Y - 8).toFixed(1)}" text-anchor="end" font-weight="bold">p${x} ${esc(fmtAxis(y))} ms</text>`);
        }
      }
    }
    out.push('</svg>');
    return out.join('');
  }

  /** The HTML page of a report. */
  static html(r: LoadReportJson): string {
    // Intervals that start after sending stopped hold only the last answers: left out of the charts.
    const sendEnd = (r.config.warmupSecs as number) + (r.config.durationSecs as number);
    const tl = (r.config.durationSecs as number) > 0 ? r.timeline.filter((p) => p.t < sendEnd) : r.timeline;
    const mid = (r.config.intervalMs as number) / 2000;
    const at = (t: { t: number }): number => t.t + mid;
    const warmup = r.config.warmupSecs as number;
    const xEnd = (r.config.durationSecs as number) > 0 ? sendEnd : undefined;
    const anyRefused = r.totals.errors > 0;
    const charts: string[] = [];
    charts.push(
      ReportChart.svg(
        [
          { name: 'accepted/s', color: '#2ca02c', points: tl.map((p) => [at(p), p.okPerSec]) },
          ...(anyRefused ? [{ name: 'refused/s', color: '#d62728', points: tl.map((p): [number, number] => [at(p), p.refusedPerSec ?? p.requestsPerSec - p.okPerSec]) }] : []),
        ],
        { title: 'Requests per second', xLabel: 'seconds', yLabel: 'requests/s', shadeBelow: warmup, ...(xEnd !== undefined ? { xEnd } : {}) },
      ),
    );
    charts.push(
      ReportChart.svg(
        anyRefused
          ? [
              { name: 'sent (all requests)', color: '#1f77b4', points: tl.map((p) => [at(p), p.sentMbPerSec ?? p.mbPerSec]) },
              { name: 'accepted', color: '#2ca02c', points: tl.map((p) => [at(p), p.mbPerSec]) },
            ]
          : [{ name: 'MB/s', color: '#1f77b4', points: tl.map((p) => [at(p), p.mbPerSec]) }],
        { title: 'MB/s on the wire', xLabel: 'seconds', yLabel: 'MB/s', shadeBelow: warmup, ...(xEnd !== undefined ? { xEnd } : {}) },
      ),
    );
    charts.push(
      ReportChart.svg([{ name: 'records/s', color: '#8c564b', points: tl.map((p) => [at(p), p.recordsPerSec ?? 0]) }], {
        title: 'Records per second (accepted)',
        xLabel: 'seconds',
        yLabel: 'records/s',
        shadeBelow: warmup,
        ...(xEnd !== undefined ? { xEnd } : {}),
      }),
    );
    const accepted = tl.filter((p) => p.ok > 0);
    if (accepted.length > 0) {
      charts.push(
        ReportChart.svg(
          [
            { name: 'p50', color: '#2ca02c', points: accepted.map((p) => [at(p), p.p50Ms]) },
            { name: 'p90', color: '#1f77b4', points: accepted.map((p) => [at(p), p.p90Ms]) },
            { name: 'p99', color: '#ff7f0e', points: accepted.map((p) => [at(p), p.p99Ms]) },
            { name: 'max', color: '#d62728', points: accepted.map((p) => [at(p), p.maxMs]) },
          ],
          { title: 'Latency of accepted requests over time', xLabel: 'seconds', yLabel: 'ms', shadeBelow: warmup, ...(xEnd !== undefined ? { xEnd } : {}) },
        ),
      );
    }
    const h = LatencyHistogram.from(r.histogram);
    if (h.count > 0) {
      const marks = [50, 90, 99, 99.9].filter((p) => p <= 99 || h.count >= 1000);
      const curve = [0, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 99.999].filter((p) => (p < 99.9 || h.count >= 1000) && (p < 99.99 || h.count >= 10000));
      charts.push(
        ReportChart.svg(
          [
            { name: 'accepted requests', color: '#9467bd', points: curve.map((p) => [p, h.percentile(p) / 1000]) },
            { name: 'p50 · p90 · p99 · p99.9', color: '#333', points: marks.map((p) => [p, h.percentile(p) / 1000]), labelled: true },
          ],
          { title: 'Latency by percentile (accepted requests)', xLabel: 'percentile', yLabel: 'ms (log scale)', percentileX: true, logY: true },
        ),
      );
    }
    const row = (k: string, v: string): string => `<tr><th>${esc(k)}</th><td>${esc(v)}</td></tr>`;
    const c = r.config;
    const lat = (l: { p50: number; p90: number; p99: number; p999: number; max: number }): string =>
      `p50 ${num(l.p50, 2)} · p90 ${num(l.p90, 2)} · p99 ${num(l.p99, 2)} · p99.9 ${num(l.p999, 2)} · max ${num(l.max, 2)}`;
    const rows = [
      row('target', `${String(c.protocol)} ${String(c.target)}`),
      row('load', c.mode === 'closed-loop' ? `closed loop, ${num(c.connections as number)} connections` : `fixed rate ${num(c.rate as number)}/s, up to ${num(c.connections as number)} connections`),
      row('bodies', `${String(c.signal)}, ~${num(c.bodyBytes as number)} bytes, ${String(c.encoding)}${c.gzip ? ' + gzip' : ''}`),
      row('tenants', `${num(c.tenants as number)} (${String(c.tenantMode)})${(c.indexes as number) > 0 ? `, ${num(c.indexes as number)} indexes` : ''}`),
      row('requests', `${num(r.totals.requests)}: ${num(r.totals.ok)} accepted, ${num(r.totals.errors)} refused or failed`),
      row('requests/s', `${num(r.rates.requestsPerSec, 1)} (accepted ${num(r.rates.okPerSec, 1)})`),
      row('records/s', num(r.rates.recordsPerSec, 1)),
      row('MB/s', `${num(r.rates.sentMbPerSec ?? r.rates.mbPerSec, 2)} sent, ${num(r.rates.mbPerSec, 2)} accepted`),
      row('latency ms (accepted)', r.latencyMs.count > 0 ? lat(r.latencyMs) : 'no request was accepted'),
    ].join('');
    const v = r.verdict;
    const banner =
      v === undefined
        ? ''
        : v.failed
          ? `<p class="verdict failed">FAILED: ${num(v.refusedShare * 100, 1)} % of ${num(v.requests)} requests refused or failed, over --max-error-rate ${num(v.maxErrorRate, 1)} %.${v.refusals[0] !== undefined ? ` Most: ${esc(v.refusals[0].status)}${v.refusals[0].reason !== undefined ? ` ${esc(v.refusals[0].reason)}` : ''}: ${esc(v.refusals[0].fix)}.` : ''}</p>`
          : `<p class="verdict passed">Passed: ${num(v.refusedShare * 100, 1)} % of ${num(v.requests)} requests refused or failed (at most ${num(v.maxErrorRate, 1)} % allowed).</p>`;
    let refusals = '';
    if (v !== undefined && v.refusals.length > 0) {
      const refusedLat = r.refusedLatencyMs !== undefined && r.refusedLatencyMs.count > 0 ? `<p>Refused requests were answered in ${lat(r.refusedLatencyMs)} ms; they are left out of the latency charts, which show ingest latency.</p>` : '';
      refusals = `<h3 id="refusals">Refusals</h3>
<table class="grid"><tr><th>status</th><th class="n">count</th><th class="n">share</th><th>first message</th><th>likely fix</th></tr>${v.refusals
        .map((f) => `<tr><td>${esc(f.status)}</td><td class="n">${num(f.count)}</td><td class="n">${num(f.share * 100, 1)} %</td><td>${esc(f.message)}</td><td>${esc(f.fix)}</td></tr>`)
        .join('')}</table>
${refusedLat}`;
    }
    return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>siglake loadgen ${esc(r.startedAt)}</title>
<style>body{font-family:sans-serif;margin:16px auto;padding:0 16px;max-width:1000px;color:#222;line-height:1.4}table{border-collapse:collapse;margin-bottom:16px}th{text-align:left;padding:2px 12px 2px 0;color:#555;font-weight:normal;vertical-align:top}td{padding:2px 8px 2px 0;vertical-align:top}table.grid td,table.grid th{border-bottom:1px solid #eee}.n{text-align:right;white-space:nowrap}svg.chart{display:block;width:100%;min-width:560px;height:auto;margin:16px 0}.scroll{overflow-x:auto}table.grid{display:block;overflow-x:auto}.verdict{padding:8px 12px;border-radius:4px}.failed{background:#fde2e1;color:#8a1c1c}.passed{background:#e3f4e1;color:#1d5e1a}</style>
</head><body>
<h2>siglake loadgen — ${esc(r.startedAt)}, ${num(r.elapsedSecs, 1)} s</h2>
${banner}
<table>${rows}</table>
${refusals}
${charts.map((c) => `<div class="scroll">${c}</div>`).join('\n')}
</body></html>
`;
  }
}
