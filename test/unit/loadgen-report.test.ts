// The loadgen's flags, its report arithmetic (warm-up left out, gaps in the
// timeline filled, rates over the measured time) and the chart page.

import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { IntervalStats } from '../../src/loadgen/interval-stats.js';
import { LoadReport } from '../../src/loadgen/load-report.js';
import { parseLoadgenArgs, type LoadgenOptions } from '../../src/loadgen/loadgen-options.js';
import { ReportChart } from '../../src/loadgen/report-chart.js';

function opts(argv: string[]): LoadgenOptions {
  const o = parseLoadgenArgs(argv);
  if (o === 'help') throw new Error('unexpected help');
  return o;
}

describe('loadgen flags', () => {
  it('has usable defaults', () => {
    const o = opts([]);
    expect(o.protocol).toBe('http');
    expect(o.target).toBe('http://127.0.0.1:4318');
    expect(o.tenantMode).toBe('none');
    expect(o.rate).toBeUndefined();
    expect(o.durationSecs).toBe(10);
    expect(o.threads).toBeGreaterThanOrEqual(1);
    expect(opts(['--protocol', 'grpc']).target).toBe('127.0.0.1:4317');
  });

  it('derives the tenant mode: header for several tenants, jwt with a key', () => {
    expect(opts(['--tenants', '3']).tenantMode).toBe('header');
    expect(opts(['--tenant-header']).tenantMode).toBe('header');
    const j = opts(['--tenants', '3', '--jwt-key', 'k.pem', '--tenant-claim', 'org', '--jwt-issuer', 'https://i']);
    expect(j.tenantMode).toBe('jwt');
    expect(j.jwt).toMatchObject({ keyFile: 'k.pem', claim: 'org', issuer: 'https://i', ttlSecs: 3600 });
  });

  it('reads durations with units and repeatable headers', () => {
    expect(opts(['--duration', '500ms']).durationSecs).toBe(0.5);
    expect(opts(['--duration', '2m']).durationSecs).toBe(120);
    expect(opts(['--header', 'X-A: 1', '--header', 'x-b:two']).headers).toEqual([
      ['x-a', '1'],
      ['x-b', 'two'],
    ]);
  });

  it.each([
    [['--protocol', 'smtp'], /--protocol/],
    [['--streams', '4'], /--streams/],
    [['--protocol', 'grpc', '--encoding', 'json'], /--encoding/],
    [['--jwt-issuer', 'x'], /--jwt-issuer: needs --jwt-key/],
    [['--jwt-key', 'k', '--bearer', 't'], /--bearer/],
    [['--connections', '1', '--threads', '2'], /--connections/],
    [['--rate', '0'], /--rate/],
    [['--duration', 'soon'], /--duration/],
    [['--target', 'https://x:1'], /--target/],
    [['--bogus'], /bogus/],
    // A warm-up ending inside an interval counted part of it as measured (1.4 s: rates ~20 % high).
    [['--warmup', '1.4'], /--warmup: must be a whole number of --interval-ms \(1000 ms\)/],
    [['--warmup', '1', '--interval-ms', '300'], /--warmup: must be a whole number of --interval-ms \(300 ms\)/],
    // Number() read hex and exponents: --rate 0x10 ran at 16/s, --pool-mib 1e3 took 1000 MiB.
    [['--rate', '0x10'], /--rate: must be a decimal number/],
    [['--rate', '1e3'], /--rate: must be a decimal number/],
    [['--pool-mib', '0b11'], /--pool-mib: must be a decimal number/],
    // Past Node's 2^31 − 1 ms timer limit the run's end timer fired after 1 ms: a 40000m run measured 0 s.
    [['--duration', '40000m'], /--duration: with --warmup at most 2147483 s/],
    [['--duration', '2147483', '--warmup', '1'], /--duration: with --warmup at most 2147483 s/],
    [['--interval-ms', '3000000000'], /--interval-ms: must be between 10 and 86400000/],
  ])('refuses %j naming the flag', (argv, msg) => {
    expect(() => parseLoadgenArgs(argv)).toThrow(ConfigError);
    expect(() => parseLoadgenArgs(argv)).toThrow(msg);
  });

  it('answers --help', () => {
    expect(parseLoadgenArgs(['--help'])).toBe('help');
    expect(parseLoadgenArgs(['-h'])).toBe('help');
  });
});

function interval(index: number, n: number, micros: number, status = '200'): ReturnType<IntervalStats['message']> {
  const s = new IntervalStats();
  for (let i = 0; i < n; i++) s.record(status, status === '200', micros, 1000, 2000, 3);
  return s.message(0, index);
}

describe('LoadReport', () => {
  it('leaves the warm-up out of totals, fills timeline gaps, and divides by the measured time', () => {
    const o = opts(['--duration', '3', '--warmup', '1', '--interval-ms', '500']);
    const r = new LoadReport(o, 1_000_000);
    r.addReady({ type: 'ready', thread: 0, lanes: 1, bodies: 8, poolBytes: 8000, prepareMs: 12 });
    r.addInterval(interval(0, 10, 100)); // warm-up
    r.addInterval(interval(1, 10, 100)); // warm-up
    r.addInterval(interval(2, 100, 2000));
    r.addInterval(interval(4, 50, 4000, '503'));
    r.addInterval(interval(7, 150, 1000));
    r.addDone({ type: 'done', thread: 0, issued: 320, maxBacklog: 0, unsent: 0, samples: { '503': 'lane queue full' } });
    r.finish(1_000_000 + 4000 + 30);
    const j = r.toJSON();
    expect(j.elapsedSecs).toBe(3);
    // Bytes sent count every request; bytes (accepted) only the successful ones.
    expect(j.totals).toEqual({ issued: 320, requests: 300, ok: 250, errors: 50, bytes: 250_000, sentBytes: 300_000, rawBytes: 500_000, records: 750 });
    expect(j.rates.requestsPerSec).toBe(100);
    expect(j.rates.recordsPerSec).toBe(250);
    expect(j.statusCounts).toEqual({ '200': 250, '503': 50 });
    expect(j.errorSamples).toEqual({ '503': 'lane queue full' });
    expect(j.timeline.map((p) => [p.t, p.warmup, p.requests])).toEqual([
      [0, true, 10],
      [0.5, true, 10],
      [1, false, 100],
      [1.5, false, 0],
      [2, false, 50],
      [2.5, false, 0],
      [3, false, 0],
      [3.5, false, 150],
    ]);
    expect(j.timeline[2].requestsPerSec).toBe(200);
    // Ingest latency is the accepted requests' only: 150 at 1 ms, 100 at 2 ms; the 50 refusals at 4 ms apart.
    expect(j.latencyMs.count).toBe(250);
    expect(j.latencyMs.p50).toBeCloseTo(1, 2);
    expect(j.latencyMs.p90).toBeCloseTo(2, 1);
    expect(j.latencyMs.max).toBe(2);
    expect(j.refusedLatencyMs.count).toBe(50);
    expect(j.refusedLatencyMs.p50).toBeCloseTo(4, 1);
    expect(j.verdict).toMatchObject({ requests: 300, refused: 50, failed: true, maxErrorRate: 1 });
    expect(j.verdict.refusals[0]).toMatchObject({ status: '503', count: 50, message: 'lane queue full' });
    expect(j.fixedRate).toBeNull();
    expect(j.prepare).toEqual({ lanes: 1, distinctBodies: 8, bodyPoolBytes: 8000, ms: 12 });
    const text = LoadReport.text(j);
    expect(text).toMatch(/\n  requests\s+300\s+100\.0\n/);
    expect(text).toMatch(/\n  503\s+lane queue full\n/);
    for (const line of text.split('\n')) expect([...line].length).toBeLessThanOrEqual(80);
  });

  it('renders a self-contained chart page: rates, MB/s, records/s, latency over time and by percentile', () => {
    const o = opts(['--duration', '2', '--rate', '100']);
    const r = new LoadReport(o, 0);
    r.addInterval(interval(0, 100, 1500));
    r.addInterval(interval(1, 100, 2500));
    r.addDone({ type: 'done', thread: 0, issued: 200, maxBacklog: 3, unsent: 1, samples: {} });
    r.finish(2000);
    const j = r.toJSON();
    expect(j.fixedRate).toEqual({ targetPerSec: 100, achievedPerSec: 100, maxBacklog: 3, unsent: 1 });
    const html = ReportChart.html(j);
    expect(html.match(/<svg /g)).toHaveLength(5);
    expect(html).not.toMatch(/<script|<link|src=/);
    expect(html).toContain('Latency by percentile');
    // Two intervals → a line of two points per throughput series.
    expect(html).toMatch(/<path d="M[\d.]+,[\d.]+L[\d.]+,[\d.]+"/);
  });
});
