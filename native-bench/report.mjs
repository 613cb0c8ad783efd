// The report of native-bench/run.mjs, apart from the measuring so that it can
// be rebuilt from a saved results JSON (`node native-bench/run.mjs --render
// results/latest.json --out page.html`): the ratio columns, the P1-P7 goal
// rows with a verdict that says which part of a goal is met and by how much,
// the text table, and the HTML page (goal table, charts grouped by body size,
// p99 on a log axis with P4's 5 ms line, P4's loadgen runs, a legend, and the
// rows as an HTML table).
//
// An entry is one row of the run: the row's definition (id, kind, proto,
// size, label, mode, tenants) merged with its measured figures, as results
// JSON `rows` holds them.

/** --wal-max-open-files of the 10,000-tenant rows (P5). */
export const FD_SETTING = 512;
/** P4's bound on p99, ms. */
export const P4_P99_MS = 5;

export const fmt = (v, d = 0) => (Number.isFinite(v) ? v.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d }) : '-');
const pctOf = (a, b) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? a / b : NaN);
const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** Adds vsCeiling, vsBaseline and vsDisk to each siglake entry. */
export function ratios(entries) {
  const get = (id) => entries.find((e) => e.id === id);
  for (const r of entries) {
    if (r.kind !== 'siglake') continue;
    const ceiling = r.proto === 'grpc' ? get(`grpc-discard-${r.size}`) : get(`ceiling-${r.size}`);
    const baseline = r.proto === 'http' ? get(`baseline-${r.size}`) : undefined;
    r.vsCeiling = pctOf(r.rps, ceiling?.rps);
    r.vsBaseline = pctOf(r.rps, baseline?.rps);
    r.vsDisk = pctOf(r.mbps, get(`disk-${r.size}`)?.mbps);
  }
}

/**
 * One part of a goal: its name, whether the measured value meets the bound,
 * and how far off it is (the measured value as a share of the bound).
 */
function part(name, value, bound, higherIsBetter, show) {
  if (!Number.isFinite(value)) return { name, ok: undefined, text: `${name} not measured` };
  const ok = higherIsBetter ? value >= bound : value <= bound;
  const by = higherIsBetter ? value / bound : bound / value;
  const margin = ok ? '' : ` (${show(value)} vs ${show(bound)}${Number.isFinite(by) && by > 0 ? `, ${fmt(by * 100, 0)} % of the goal` : ''})`;
  return { name, ok, text: `${name} ${ok ? 'met' : 'short'}${margin}` };
}

/** The verdict of a goal from its parts: "met", "short", or which parts are met and which short. */
function verdictOf(parts, runsNote) {
  const known = parts.filter((p) => p.ok !== undefined);
  if (known.length === 0) return { met: 'n/a', verdict: 'not measured' };
  const allOk = known.every((p) => p.ok);
  const noneOk = known.every((p) => !p.ok);
  const met = known.length < parts.length ? 'partial' : allOk ? 'met' : noneOk ? 'short' : 'partial';
  if (met === 'met') return { met, verdict: runsNote ? `met${runsNote}` : 'met' };
  const verdict = parts.length === 1 ? `${known[0].ok ? 'met' : 'short'}${known[0].ok ? '' : known[0].text.slice(known[0].text.indexOf('short') + 5)}` : parts.map((p) => p.text).join('; ');
  return { met, verdict: runsNote ? `${verdict}${runsNote}` : verdict };
}

/** "on the median: 2 of 3 runs met" when the runs disagree. */
function runsNote(runs, meets) {
  if (!Array.isArray(runs) || runs.length < 2) return '';
  const n = runs.filter(meets).length;
  if (n === 0 || n === runs.length) return '';
  return ` (on the median; ${n} of ${runs.length} runs met)`;
}

/** The P1-P7 rows: id, workload, measured, goal, met ('met' | 'short' | 'partial' | 'n/a') and the verdict in words. */
export function goalRows(entries, goals, meta = {}) {
  const g = (id) => entries.find((e) => e.id === id);
  const conns = meta.connections ?? 64;
  const rows = [];
  const add = (id, workload, measured, goal, parts, note = '') => rows.push({ id, workload, measured, goal, ...verdictOf(parts, note) });
  const s1 = g('siglake-http-batch-1k');
  const pct = (v) => `${fmt(v * 100, 1)} %`;
  const x = (v) => `${fmt(v, 2)}x`;
  if (goals.includes('p1')) {
    const c = pctOf(s1?.rps, g('ceiling-1k')?.rps);
    const b = pctOf(s1?.rps, g('baseline-1k')?.rps);
    const note = runsNote(s1?.runs, (rps) => pctOf(rps, g('ceiling-1k')?.rps) >= 0.5 && pctOf(rps, g('baseline-1k')?.rps) >= 3);
    add('P1', 'OTLP/HTTP 1 KiB, 64 conns, batch', `${pct(c)} of ceiling, ${x(b)} baseline`, '≥ 50 % of ceiling and ≥ 3x baseline', [part('ceiling share', c, 0.5, true, pct), part('vs baseline', b, 3, true, x)], note);
  }
  if (goals.includes('p2')) {
    const d = pctOf(g('siglake-http-batch-256k')?.mbps, g('disk-256k')?.mbps);
    add('P2', 'same, 256 KiB bodies', `${pct(d)} of disk ceiling MB/s`, '≥ 70 % of disk ceiling', [part('disk share', d, 0.7, true, pct)]);
  }
  if (goals.includes('p3')) {
    const s3 = g('siglake-grpc-batch-1k');
    const c = pctOf(s3?.rps, g('grpc-discard-1k')?.rps);
    add('P3', 'OTLP/gRPC 1 KiB, 64x10 streams, batch', `${pct(c)} of grpc-js discard`, '≥ 70 % of grpc-js discard', [part('grpc-js share', c, 0.7, true, pct)], runsNote(s3?.runs, (rps) => pctOf(rps, g('grpc-discard-1k')?.rps) >= 0.7));
  }
  if (goals.includes('p4')) {
    const p = s1?.p4;
    const at = (fraction, target) => p?.curve?.find((c) => c.fraction === fraction && c.target === target);
    const q = at(0.25, 'siglake');
    const floor = at(0.5, 'uws-discard');
    const more = [q ? `; p99 ${fmt(q.p99, 2)} ms at a quarter (${fmt(q.rate)}/s)` : '', floor ? `; the generator alone against uWS discard at half: p99 ${fmt(floor.p99, 2)} ms` : ''].join('');
    const ms = (v) => `${fmt(v, 2)} ms`;
    add(
      'P4',
      'latency at half of P1 best rate',
      p ? `p99 ${fmt(p.p99, 2)} ms at ${fmt(p.achieved)}/s (target ${fmt(p.rate)}/s)${more}` : '-',
      `p99 ≤ ${P4_P99_MS} ms, fsync included`,
      p ? [part('p99', p.p99, P4_P99_MS, false, ms), part('rate', pctOf(p.achieved, p.rate), 0.95, true, pct)] : [part('p99', NaN)],
    );
  }
  if (goals.includes('p5')) {
    const m = g('siglake-http-batch-1k-10k');
    const r = pctOf(m?.rps, s1?.rps);
    const fdBound = FD_SETTING + conns + 64;
    // Beside the bar (requests/s), the same ratio in CPU per request: both rows are
    // CPU-bound on a small machine, and CPU per request moves far less between runs.
    const byCpu = pctOf(s1?.cpuAllUs, m?.cpuAllUs);
    const cpuRatio = Number.isFinite(byCpu) ? `; by CPU per request ${pct(byCpu)} (one tenant ${fmt(s1.cpuAllUs, 1)} µs, 10,000 tenants ${fmt(m.cpuAllUs, 1)} µs)` : '';
    add(
      'P5',
      '10,000 tenants round-robin, one lane each',
      m ? `${pct(r)} of one tenant; RSS ${fmt(m.rssMiB)} MiB; ${fmt(m.fds)} fds (--wal-max-open-files ${FD_SETTING})${cpuRatio}` : '-',
      `≥ 80 %; RSS ≤ 512 MiB; fds ≤ ${fdBound}`,
      [part('rate', r, 0.8, true, pct), part('RSS', m?.rssMiB, 512, false, (v) => `${fmt(v)} MiB`), part('fds', m?.fds, fdBound, false, (v) => fmt(v))],
    );
  }
  const micro = g('micro')?.micro;
  const probe = (id) => micro?.probes.find((p) => p.id === id);
  if (goals.includes('p6')) {
    const a = probe('admission');
    const j = probe('jwt-cache-hit');
    const ns = (v) => `${fmt(v)} ns`;
    add(
      'P6',
      'admission per request; JWT verify on a cache hit',
      a && j ? `${fmt(a.nsPerOp, 0)} ns (${fmt(a.allocBytesPerOp ?? NaN, 2)} B/op allocated); ${fmt(j.nsPerOp, 0)} ns` : '-',
      '≤ 1 µs, no steady-state allocation; ≤ 2 µs',
      [part('admission', a?.nsPerOp, 1000, false, ns), part('allocation', (a?.allocBytesPerOp ?? 0) < 1 ? 0 : a?.allocBytesPerOp, 0.99, false, (v) => `${fmt(v, 2)} B/op`), part('JWT cache hit', j?.nsPerOp, 2000, false, ns)],
    );
  }
  if (goals.includes('p7')) {
    const w = probe('wal-append');
    const c = probe('crc32c');
    const gb = (v) => `${fmt(v / 1000, 2)} GB/s`;
    add('P7', 'WAL append in a worker, no fsync; CRC-32C', w && c ? `${gb(w.mbPerSec)}; ${gb(c.mbPerSec)}` : '-', '≥ 1 GB/s; ≥ 5 GB/s', [part('WAL append', w?.mbPerSec, 1000, true, gb), part('CRC-32C', c?.mbPerSec, 5000, true, gb)]);
  }
  return rows;
}

const HEAD = ['row', 'req/s', 'MB/s', 'records/s', 'p50 ms', 'p99 ms', 'RSS MiB', 'errors', 'vs ceiling', 'vs baseline', 'CPU µs/req main/all'];

function tableRows(entries) {
  return entries
    .filter((r) => r.kind !== 'micro')
    .map((r) => [
      r.id,
      fmt(r.rps),
      fmt(r.mbps, 1),
      fmt(r.recordsPerSec),
      fmt(r.p50, 2),
      fmt(r.p99, 2),
      fmt(r.rssMiB),
      fmt(r.errors),
      Number.isFinite(r.vsCeiling) ? `${fmt(r.vsCeiling * 100, 1)} %` : Number.isFinite(r.vsDisk) && r.size === '256k' ? `${fmt(r.vsDisk * 100, 1)} % disk` : '',
      Number.isFinite(r.vsBaseline) ? `${fmt(r.vsBaseline, 2)}x` : '',
      Number.isFinite(r.cpuMainUs) ? `${fmt(r.cpuMainUs, 1)} / ${fmt(r.cpuAllUs, 1)}` : '',
    ]);
}

/** The rows as a text table (labels under the table, so the lines stay short). */
export function table(entries) {
  return render([HEAD, ...tableRows(entries)]) + entries.filter((r) => r.kind !== 'micro').map((r) => `  ${r.id}: ${r.label}`).join('\n') + '\n';
}

export function render(rows) {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)));
  return rows.map((r, k) => r.map((c, i) => (i === 0 || k === 0 ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i]))).join('  ')).join('\n') + '\n';
}

/** The goal rows as text: one block per goal, the verdict on its own line. */
export function goalTable(gr) {
  return gr.map((g) => [`${g.id}  ${g.workload}`, `    measured  ${g.measured}`, `    goal      ${g.goal}`, `    verdict   ${g.verdict}`].join('\n')).join('\n') + '\n';
}

const COLORS = { ceiling: '#7f7f7f', 'grpc-ceiling': '#b0b0b0', 'h2-reference': '#bcbd22', baseline: '#d62728', siglake: '#1f77b4', disk: '#8c564b', loadgen: '#9467bd' };
const KIND_NAMES = { ceiling: 'uWS discard (HTTP ceiling)', 'grpc-ceiling': 'grpc-js discard (gRPC ceiling)', 'h2-reference': 'bare node:http2 (reference)', baseline: 'node:http + fdatasync (baseline)', siglake: 'siglake', disk: 'write + fdatasync (disk ceiling)' };

/** Horizontal bars, one per item; `log` puts the axis on a log scale; `line` draws a labelled bound. */
function bars(title, items, unit, { log = false, line, right = 150 } = {}) {
  const shown = items.filter((i) => Number.isFinite(i.v) && i.v > 0);
  if (shown.length === 0) return '';
  const W = 900;
  const L = 260;
  const R = right;
  const T = 30;
  const rowH = 22;
  const H = T + shown.length * rowH + 26;
  const pw = W - L - R;
  const max = Math.max(...shown.map((i) => i.v), line?.v ?? 0);
  const min = Math.min(...shown.map((i) => i.v), line?.v ?? Infinity);
  const lo = log ? 10 ** Math.floor(Math.log10(min)) : 0;
  const hi = log ? 10 ** Math.ceil(Math.log10(max)) : max;
  const X = (v) => L + (log ? (Math.log10(v) - Math.log10(lo)) / Math.max(1e-9, Math.log10(hi) - Math.log10(lo)) : v / Math.max(1e-9, hi)) * pw;
  const out = [`<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(title)}" font-family="sans-serif" font-size="13"><text x="0" y="18" font-size="15" font-weight="bold">${esc(title)}</text>`];
  if (log) {
    for (let p = lo; p <= hi * 1.0001; p *= 10) {
      out.push(`<line x1="${X(p).toFixed(1)}" x2="${X(p).toFixed(1)}" y1="${T - 4}" y2="${H - 22}" stroke="#eee"/><text x="${X(p).toFixed(1)}" y="${H - 8}" text-anchor="middle" fill="#666">${esc(fmt(p, p < 1 ? 2 : 0))}</text>`);
    }
  }
  shown.forEach((it, i) => {
    const y = T + i * rowH;
    const w = Math.max(1, X(it.v) - L);
    out.push(`<text x="${L - 8}" y="${y + 14}" text-anchor="end">${esc(it.label)}</text><rect x="${L}" y="${y}" width="${w.toFixed(1)}" height="16" fill="${it.color}"><title>${esc(`${it.label}: ${fmt(it.v, it.v < 10 ? 2 : 0)} ${unit}`)}</title></rect><text x="${(L + w + 5).toFixed(1)}" y="${y + 13}">${esc(`${fmt(it.v, it.v < 10 ? 2 : 0)} ${unit}${it.note ? ` ${it.note}` : ''}`)}</text>`);
  });
  if (line !== undefined) {
    const lx = X(line.v).toFixed(1);
    out.push(`<line x1="${lx}" x2="${lx}" y1="${T - 6}" y2="${H - 22}" stroke="#d62728" stroke-width="2" stroke-dasharray="5 3"/><text x="${lx}" y="${T - 9}" text-anchor="middle" fill="#d62728" font-weight="bold">${esc(line.label)}</text>`);
  }
  out.push('</svg>');
  return out.join('');
}

const GROUPS = [
  { title: '1 KiB bodies', pick: (r) => r.size === '1k' && r.kind !== 'disk' && r.kind !== 'micro' },
  { title: '256 KiB bodies', pick: (r) => r.size === '256k' && r.kind !== 'disk' },
  { title: 'Disk: write + fdatasync', pick: (r) => r.kind === 'disk' },
];

function legend(entries) {
  const kinds = [...new Set(entries.filter((r) => COLORS[r.kind]).map((r) => r.kind))];
  return `<p class="legend">${kinds.map((k) => `<span><i style="background:${COLORS[k]}"></i>${esc(KIND_NAMES[k] ?? k)}</span>`).join('')}</p>`;
}

function p4Chart(entries) {
  const p = entries.find((e) => e.id === 'siglake-http-batch-1k')?.p4;
  if (!p?.curve?.length) return '';
  const items = p.curve.map((c) => ({
    label: `${c.target === 'siglake' ? 'siglake' : 'uWS floor'} at ${c.fraction === 0.5 ? '½' : c.fraction === 0.25 ? '¼' : c.fraction} (${fmt(c.rate)}/s)`,
    v: c.p99,
    color: c.target === 'siglake' ? COLORS.siglake : COLORS.ceiling,
    note: `(p50 ${fmt(c.p50, 2)}, p99.9 ${fmt(c.p999, 2)})`,
  }));
  return `<h3>P4: fixed-rate loadgen runs, p99 latency (log axis)</h3>${bars('p99 of siglake loadgen --rate, ms', items, 'ms', { log: true, right: 290, line: { v: P4_P99_MS, label: `P4 goal ${P4_P99_MS} ms` } })}
<p>"uWS floor": the same loadgen against the uWS discard server, the latency of the generator itself on this machine. ½ and ¼: of P1's best rate.</p>`;
}

const VERDICT_COLORS = { met: '#1d7a1d', short: '#b22222', partial: '#b8860b', 'n/a': '#888' };

/** The HTML page. `partial`: the goals a run with --only measured. */
export function chart(entries, goals, meta, failures = {}) {
  const gr = goalRows(entries, goals, meta);
  const goalTableHtml = `<table class="grid"><tr><th>goal</th><th>workload</th><th>measured</th><th>target</th><th>verdict</th></tr>${gr
    .map((g) => `<tr><td>${g.id}</td><td>${esc(g.workload)}</td><td>${esc(g.measured)}</td><td>${esc(g.goal)}</td><td class="verdict" style="color:${VERDICT_COLORS[g.met] ?? '#888'}"><b>${esc(g.met)}</b>${g.verdict !== g.met ? `: ${esc(g.verdict)}` : ''}</td></tr>`)
    .join('')}</table>`;
  const item = (r, v) => ({ label: r.id, v, color: COLORS[r.kind] ?? '#999' });
  const groups = GROUPS.map((grp) => {
    const rows = entries.filter(grp.pick);
    if (rows.length === 0) return '';
    const disk = grp.title.startsWith('Disk');
    return `<h3>${esc(grp.title)}</h3>
${bars(disk ? 'writes + fdatasync per second' : 'requests per second', rows.map((r) => item(r, r.rps)), '/s')}
${bars('MB/s', rows.map((r) => item(r, r.mbps)), 'MB/s')}
${bars('p99 latency, ms (log axis)', rows.map((r) => item(r, r.p99)), 'ms', { log: true, ...(disk ? {} : { line: { v: P4_P99_MS, label: `P4: ${P4_P99_MS} ms` } }) })}`;
  }).join('\n');
  const th = HEAD.map((h, i) => `<th${i > 0 ? ' class="n"' : ''}>${esc(h)}</th>`).join('');
  const rowsHtml = tableRows(entries)
    .map((cells, k) => {
      const r = entries.filter((e) => e.kind !== 'micro')[k];
      return `<tr><td title="${esc(r.label)}"><i class="sw" style="background:${COLORS[r.kind] ?? '#999'}"></i>${esc(cells[0])}<br><small>${esc(r.label)}</small></td>${cells
        .slice(1)
        .map((c) => `<td class="n">${esc(c)}</td>`)
        .join('')}</tr>`;
    })
    .join('');
  const failed = Object.entries(failures);
  const partialNote = meta.partial ? `<p class="partial">Partial run (<code>--only ${esc(meta.only ?? '')}</code>): only the goals and rows it measured are shown.</p>` : '';
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>siglake native-bench ${esc(meta.startedAt)}</title>
<style>body{font-family:sans-serif;margin:16px auto;padding:0 16px;max-width:1100px;color:#222;line-height:1.35}table{border-collapse:collapse;margin:8px 0 16px}td,th{padding:3px 10px 3px 0;text-align:left;vertical-align:top}table.grid td,table.grid th{border-bottom:1px solid #eee}.n{text-align:right;white-space:nowrap}svg.chart{display:block;width:100%;min-width:640px;height:auto;margin:10px 0}.scroll{overflow-x:auto}table.grid{display:block;overflow-x:auto}.legend span{margin-right:18px;white-space:nowrap}.legend i,.sw{display:inline-block;width:12px;height:12px;margin-right:6px;vertical-align:-1px}.partial{background:#fff4d6;padding:6px 10px}small{color:#666}</style></head><body>
<h2>siglake native-bench — ${esc(meta.startedAt)}</h2><p>${esc(`${meta.host}; node ${meta.node ?? ''}; ${meta.secs} s x ${meta.runs} runs per row (medians), ${meta.connections} connections`)}</p>
${partialNote}
<h3>Goals</h3>
${goalTableHtml}
${failed.length > 0 ? `<p><b>Rows that failed:</b> ${failed.map(([k, v]) => `${esc(k)}: ${esc(v)}`).join('; ')}</p>` : ''}
${legend(entries)}
<div class="scroll">${groups}
${p4Chart(entries)}</div>
<h3>All rows</h3>
<table class="grid"><tr>${th}</tr>${rowsHtml}</table>
</body></html>
`;
}

/** Where a run's results go: a full run replaces latest.*, a partial one (--only) never does. */
export function resultFiles(stamp, partial) {
  return partial
    ? { json: `partial-${stamp}.json`, html: `partial-${stamp}.html`, latestJson: 'latest-partial.json', latestHtml: 'latest-partial.html' }
    : { json: `bench-${stamp}.json`, html: `bench-${stamp}.html`, latestJson: 'latest.json', latestHtml: 'latest.html' };
}
