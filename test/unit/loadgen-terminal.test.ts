// The loadgen's terminal and page formatting: the progress line and the final
// report fit 80 columns, rates and totals are labelled, decimals are fixed,
// the verdict names the most common refusal and its fix, chart ticks are nice
// steps, and the page never draws a refusal's latency as ingest latency.

import { describe, expect, it } from 'vitest';
import { IntervalStats } from '../../src/loadgen/interval-stats.js';
import { LoadReport } from '../../src/loadgen/load-report.js';
import { parseLoadgenArgs, type LoadgenOptions } from '../../src/loadgen/loadgen-options.js';
import { progressText } from '../../src/loadgen/progress-line.js';
import { fixFor, reasonOf, verdictOf } from '../../src/loadgen/refusal-hints.js';
import { fmtAxis, logTicks, niceTicks, ReportChart } from '../../src/loadgen/report-chart.js';
import { fitParts, fmtMs, fmtNum, plural } from '../../src/loadgen/text-format.js';

function opts(argv: string[]): LoadgenOptions {
  const o = parseLoadgenArgs(argv);
  if (o === 'help') throw new Error('unexpected help');
  return o;
}

function stats(ok: number, refused: Record<string, number>, micros = 1500): IntervalStats {
  const s = new IntervalStats();
  for (let i = 0; i < ok; i++) s.record('200', true, micros, 1024, 2048, 6);
  for (const [k, n] of Object.entries(refused)) for (let i = 0; i < n; i++) s.record(k, false, 300, 1024, 2048, 6);
  return s;
}

describe('text formatting', () => {
  it('numbers carry thousands separators and fixed decimals', () => {
    expect(fmtNum(143956)).toBe('143,956');
    expect(fmtNum(14395.64, 1)).toBe('14,395.6');
    expect(fmtMs(0.38)).toBe('0.38');
    expect(fmtMs(12)).toBe('12.00');
    expect(plural(1, 'tenant')).toBe('1 tenant');
    expect(plural(3, 'tenant')).toBe('3 tenants');
    expect(plural(2, 'index', 'indexes')).toBe('2 indexes');
  });

  it('leaves optional parts out, last first, until the line fits', () => {
    const parts = [{ text: 'aaaa' }, { text: 'bbbb', optional: true }, { text: 'cccc' }, { text: 'dddd', optional: true }];
    expect(fitParts(parts, 30)).toBe('aaaa  bbbb  cccc  dddd');
    expect(fitParts(parts, 16)).toBe('aaaa  bbbb  cccc');
    expect(fitParts(parts, 12)).toBe('aaaa  cccc');
  });
});

describe('progress line', () => {
  it('fits 80 columns with large figures and many statuses, labels rates and totals, shows n/N s', () => {
    const total = stats(0, { '403': 143_956, '503': 12_345, 'error:ECONNRESET': 7, timeout: 3 });
    const line = progressText({ elapsedSecs: 4, totalSecs: 15, warmup: false, last: stats(12_000, { '503': 345 }), total, requests: undefined }, 80);
    expect([...line].length).toBeLessThanOrEqual(80);
    expect(line).toMatch(/^\s+4\/15 s\s/);
    expect(line).toMatch(/12,345 req\/s \(345 refused\)/);
    expect(line).toContain('| total 0 ok');
    expect(line).toContain('156,311 refused');
    const wide = progressText({ elapsedSecs: 4, totalSecs: 15, warmup: false, last: stats(100, {}), total: stats(400, {}), requests: 1000 }, 120);
    expect(wide).toMatch(/MB\/s {2}p99 1\.50 ms {2}\| total 400 ok of 1,000$/);
  });

  it('says warm-up during the warm-up and n s without a duration', () => {
    const line = progressText({ elapsedSecs: 1, totalSecs: undefined, warmup: true, last: undefined, total: new IntervalStats(), requests: 500 }, 80);
    expect(line).toMatch(/^\s+1 s warm-up\s+0 req\/s/);
  });
});

describe('verdict and fixes', () => {
  const run = { target: 'http://127.0.0.1:4318', tenants: 10_000, tenantMode: 'header', protocol: 'http' };

  it('fails past --max-error-rate and names the most common refusal with its fix', () => {
    const v = verdictOf({ '200': 10, '403': 143_956, '503': 5 }, { '403': 'tenant denied (header_not_trusted): X-Scope-OrgID names a tenant', '503': 'lane queue full' }, 1, run);
    expect(v.failed).toBe(true);
    expect(v.refusals[0]).toMatchObject({ status: '403', count: 143_956, reason: 'header_not_trusted', fix: 'start the ingester with --trust-tenant-header' });
    expect(verdictOf({ '200': 1000, '503': 10 }, {}, 1, run).failed).toBe(false);
    expect(verdictOf({ '200': 1000, '503': 11 }, {}, 1, run).failed).toBe(true);
    expect(verdictOf({ '200': 10 }, {}, 1, run).refusals).toEqual([]);
  });

  it('reads the reason label in a message and maps statuses to fixes', () => {
    expect(reasonOf('tenant denied (not_allowed): acme')).toBe('not_allowed');
    expect(reasonOf('lane queue full')).toBeUndefined();
    expect(fixFor('error:ECONNREFUSED', undefined, '', run)).toContain('nothing listens at http://127.0.0.1:4318');
    expect(fixFor('401', undefined, 'bad token', run)).toContain('--bearer');
    expect(fixFor('429', undefined, '', run)).toContain('--rate');
    expect(fixFor('413', undefined, '', run)).toContain('--body-bytes');
  });

  it('the report text fits 80 columns and ends with the verdict line', () => {
    const o = opts(['--duration', '10', '--tenants', '10000', '--connections', '64']);
    const r = new LoadReport(o, 0);
    const s = stats(0, { '403': 2000 });
    r.addInterval(s.message(0, 0));
    r.addDone({ type: 'done', thread: 0, issued: 2000, maxBacklog: 0, unsent: 0, samples: { '403': 'tenant denied (header_not_trusted): X-Scope-OrgID names a tenant other than default and this ingester does not route by it' } });
    r.finish(10_000);
    const j = r.toJSON();
    const text = LoadReport.text(j, 80);
    for (const line of text.split('\n')) expect([...line].length).toBeLessThanOrEqual(80);
    expect(text).toContain('10,000 tenants');
    expect(text).not.toContain('tenant(s)');
    expect(text).toMatch(/\n\s+total\s+per second\n/);
    const v = LoadReport.verdictLine(j)!;
    const last = v.split('\n').pop()!;
    expect(last).toBe('  403 header_not_trusted x 2,000: start the ingester with --trust-tenant-header');
    expect(j.totals.sentBytes).toBe(2000 * 1024);
    expect(j.totals.bytes).toBe(0);
  });
});

describe('charts', () => {
  it('ticks are 1, 2, 5 steps and log ticks cover the range', () => {
    expect(niceTicks(14_395)).toEqual([0, 5000, 10_000, 15_000]);
    expect(niceTicks(0.58)).toEqual([0, 0.2, 0.4, 0.6]);
    expect(niceTicks(100)).toEqual([0, 20, 40, 60, 80, 100]);
    expect(logTicks(0.38, 12.5)).toEqual([0.2, 0.5, 1, 2, 5, 10, 20]);
    expect(fmtAxis(12_000)).toBe('12,000');
    expect(fmtAxis(2_500_000)).toBe('2.5M');
  });

  it('draws responsive SVG, and a run of only refusals has no ingest latency chart', () => {
    const o = opts(['--duration', '2', '--tenants', '3']);
    const r = new LoadReport(o, 0);
    r.addInterval(stats(0, { '403': 1500 }).message(0, 0));
    r.addInterval(stats(0, { '403': 1500 }).message(0, 1));
    r.addDone({ type: 'done', thread: 0, issued: 3000, maxBacklog: 0, unsent: 0, samples: { '403': 'tenant denied (header_not_trusted): no' } });
    r.finish(2000);
    const html = ReportChart.html(r.toJSON());
    expect(html).not.toMatch(/<svg[^>]* width="/);
    expect(html).toMatch(/<svg class="chart"[^>]* viewBox="0 0 \d+ \d+"/);
    expect(html).not.toContain('Latency of accepted requests');
    expect(html).not.toContain('Latency by percentile');
    expect(html).toContain('<h3 id="refusals">Refusals</h3>');
    expect(html).toContain('<td class="n">3,000</td>');
    expect(html).toContain('start the ingester with --trust-tenant-header');
    expect(html).toContain('refused/s');
    expect(html).toContain('>accepted/s</text>');
    expect(html).not.toContain('>ok/s</text>');
  });
});
