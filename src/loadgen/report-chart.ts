// A self-contained HTML page (inline SVG, no script, no external asset) of a
// loadgen report: throughput and errors over time, latency percentiles over
// time, and the latency distribution (value at each percentile).

import { LatencyHistogram } from './latency-histogram.js';
import type { LoadReportJson } from './load-report.js';

export interface ChartSeries {
  name: string;
  color: string;
  points: [number, number][];
}

export interface ChartOptions {
  title: string;
  xLabel: string;
  yLabel: string;
  /** x as "percentile" on a log scale of 1/(1-p) (HdrHistogram style). */
  percentileX?: boolean;
  /** Shade x below this value (the warm-up). */
  shadeBelow?: number;
  width?: number;
  height?: number;
}

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

function niceMax(v: number): number {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

/** 1, 2 or 5 times a power of ten, at least `v`. */
function niceStep(v: number): number {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

const fmt = (v: number): string => (v >= 1e6 ? `${(v / 1e6).toFixed(v >= 1e7 ? 0 : 1)}M` : v >= 1e4 ? `${(v / 1e3).toFixed(0)}k` : v >= 1000 ? `${(v / 1e3).toFixed(1)}k` : Number(v.toPrecision(3)).toString());

export class ReportChart {
  /** One SVG line chart. */
  static svg(series: ChartSeries[], o: ChartOptions): string {
    const W = o.width ?? 860;
    const H = o.height ?? 280;
    const L = 64;
    const R = 150;
    const T = 30;
    const B = 44;
    const pw = W - L - R;
    const ph = H - T - B;
    // Percentiles on HdrHistogram's axis: 90 % is 1, 99 % is 2, 99.9 % is 3...
    const tx = (x: number): number => (o.percentileX ? -Math.log10(1 - Math.min(x / 100, 0.9999999)) : x);
    const all = series.flatMap((s) => s.points);
    const xs = all.map(([x]) => tx(x));
    const xMin = o.percentileX ? 0 : Math.min(0, ...xs);
    const xMax = Math.max(xMin + 1e-9, ...xs);
    const yMax = niceMax(Math.max(0, ...all.map(([, y]) => y)));
    const px = (x: number): number => L + ((tx(x) - xMin) / (xMax - xMin)) * pw;
    const py = (y: number): number => T + ph - (y / yMax) * ph;
    const out: string[] = [];
    out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`);
    out.push(`<text x="${L}" y="18" font-size="14" font-weight="bold">${esc(o.title)}</text>`);
    if (o.shadeBelow !== undefined && o.shadeBelow > xMin) {
      out.push(`<rect x="${L}" y="${T}" width="${Math.max(0, px(o.shadeBelow) - L).toFixed(1)}" height="${ph}" fill="#eee"/>`);
      out.push(`<text x="${L + 4}" y="${T + 12}" fill="#888">warm-up</text>`);
    }
    for (let i = 0; i <= 5; i++) {
      const y = (yMax * i) / 5;
      out.push(`<line x1="${L}" x2="${L + pw}" y1="${py(y).toFixed(1)}" y2="${py(y).toFixed(1)}" stroke="#ddd"/>`);
      out.push(`<text x="${L - 6}" y="${(py(y) + 4).toFixed(1)}" text-anchor="end">${fmt(y)}</text>`);
    }
    const step = niceStep((xMax - xMin) / 6);
    const xTicks = o.percentileX
      ? [0, 90, 99, 99.9, 99.99, 99.999].filter((p) => tx(p) <= xMax + 1e-9)
      : Array.from({ length: Math.floor((xMax - xMin) / step + 1e-9) + 1 }, (_, i) => xMin + i * step);
    for (const x of xTicks) {
      const X = px(x).toFixed(1);
      out.push(`<line x1="${X}" x2="${X}" y1="${T}" y2="${T + ph}" stroke="#f0f0f0"/>`);
      out.push(`<text x="${X}" y="${T + ph + 14}" text-anchor="middle">${o.percentileX ? `${x}%` : fmt(x)}</text>`);
    }
    out.push(`<rect x="${L}" y="${T}" width="${pw}" height="${ph}" fill="none" stroke="#999"/>`);
    out.push(`<text x="${L + pw / 2}" y="${H - 8}" text-anchor="middle">${esc(o.xLabel)}</text>`);
    out.push(`<text transform="translate(14 ${T + ph / 2}) rotate(-90)" text-anchor="middle">${esc(o.yLabel)}</text>`);
    series.forEach((s, i) => {
      if (s.points.length > 0) {
        const d = s.points.map(([x, y], j) => `${j === 0 ? 'M' : 'L'}${px(x).toFixed(1)},${py(y).toFixed(1)}`).join('');
        out.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="1.6"/>`);
      }
      const ly = T + 10 + i * 16;
      out.push(`<line x1="${L + pw + 12}" x2="${L + pw + 30}" y1="${ly}" y2="${ly}" stroke="${s.color}" stroke-width="2"/>`);
      out.push(`<text x="${L + pw + 34}" y="${ly + 4}">${esc(s.name)}</text>`);
    });
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
    const throughput = ReportChart.svg(
      [
        { name: 'requests/s', color: '#1f77b4', points: tl.map((p) => [at(p), p.requestsPerSec]) },
        { name: 'ok/s', color: '#2ca02c', points: tl.map((p) => [at(p), p.okPerSec]) },
        { name: 'errors/s', color: '#d62728', points: tl.map((p) => [at(p), p.requestsPerSec - p.okPerSec]) },
      ],
      { title: 'Throughput', xLabel: 'seconds', yLabel: 'requests/s', shadeBelow: warmup },
    );
    const latency = ReportChart.svg(
      [
        { name: 'p50', color: '#2ca02c', points: tl.filter((p) => p.requests > 0).map((p) => [at(p), p.p50Ms]) },
        { name: 'p90', color: '#1f77b4', points: tl.filter((p) => p.requests > 0).map((p) => [at(p), p.p90Ms]) },
        { name: 'p99', color: '#ff7f0e', points: tl.filter((p) => p.requests > 0).map((p) => [at(p), p.p99Ms]) },
        { name: 'max', color: '#d62728', points: tl.filter((p) => p.requests > 0).map((p) => [at(p), p.maxMs]) },
      ],
      { title: 'Latency over time', xLabel: 'seconds', yLabel: 'ms', shadeBelow: warmup },
    );
    const h = LatencyHistogram.from(r.histogram);
    const pcts = [0, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 99.999].filter((p) => h.count > 0 && (p < 99.9 || h.count >= 1000) && (p < 99.99 || h.count >= 10000));
    const dist = ReportChart.svg([{ name: 'latency', color: '#9467bd', points: pcts.map((p) => [p, h.percentile(p) / 1000]) }], {
      title: 'Latency by percentile',
      xLabel: 'percentile',
      yLabel: 'ms',
      percentileX: true,
    });
    const row = (k: string, v: string): string => `<tr><th>${esc(k)}</th><td>${esc(v)}</td></tr>`;
    const c = r.config;
    const rows = [
      row('target', `${String(c.protocol)} ${String(c.target)}`),
      row('load', c.mode === 'closed-loop' ? `closed loop, ${String(c.connections)} connections` : `fixed rate ${String(c.rate)}/s`),
      row('bodies', `${String(c.signal)}, ~${String(c.bodyBytes)} bytes, ${String(c.encoding)}${c.gzip ? ' + gzip' : ''}`),
      row('tenants', `${String(c.tenants)} (${String(c.tenantMode)})${(c.indexes as number) > 0 ? `, ${String(c.indexes)} indexes` : ''}`),
      row('requests/s', `${r.rates.requestsPerSec} (ok ${r.rates.okPerSec})`),
      row('records/s', String(r.rates.recordsPerSec)),
      row('MB/s', String(r.rates.mbPerSec)),
      row('status', Object.entries(r.statusCounts).map(([k, v]) => `${k}: ${v}`).join(', ')),
      row('latency ms', `p50 ${r.latencyMs.p50} · p90 ${r.latencyMs.p90} · p99 ${r.latencyMs.p99} · p99.9 ${r.latencyMs.p999} · max ${r.latencyMs.max}`),
    ].join('');
    return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>siglake loadgen ${esc(r.startedAt)}</title>
<style>body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin-bottom:16px}th{text-align:left;padding:2px 12px 2px 0;color:#555;font-weight:normal}td{padding:2px 0}svg{display:block;margin:12px 0}</style>
</head><body>
<h2>siglake loadgen — ${esc(r.startedAt)}, ${r.elapsedSecs} s</h2>
<table>${rows}</table>
${throughput}
${latency}
${dist}
</body></html>
`;
  }
}
