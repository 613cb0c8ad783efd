// The side-by-side bench's report, rebuilt from a saved full run
// (test/fixtures/bench-run-2026-11-29.json, a copy of the run of that day,
// whose figures the assertions name; and the tracked latest.json, whichever
// run it holds) without running the bench: the goal
// table has a verdict column with partial verdicts, the charts are grouped by
// body size with p99 on a log axis and P4's 5 ms line, P4's loadgen runs are
// charted, the rows are an HTML table; rendered by headless Chromium. A
// partial run's files never replace the tracked latest.*.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO, tempDir } from '../helpers/ingester.js';

const dir = tempDir('siglake-bench-report-');
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const RUN = path.join(REPO, 'native-bench', 'run.mjs');
const LATEST = path.join(REPO, 'native-bench', 'results', 'latest.json');
/** A full run kept as the fixture: its P3 runs disagree, so one verdict says how many met. */
const SAVED = path.join(REPO, 'test', 'fixtures', 'bench-run-2026-11-29.json');

describe('native-bench report from a saved run', () => {
  it('prints the goals with verdicts that say which part is met and by how much', () => {
    const before = fs.readFileSync(SAVED, 'utf8');
    const r = spawnSync(process.execPath, [RUN, '--render', SAVED], { encoding: 'utf8', timeout: 60_000 });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^P4 {2}latency at half of P1 best rate\n {4}measured .*\n {4}goal {6}p99 ≤ 5 ms, fsync included\n {4}verdict {3}p99 short \(428\.03 ms vs 5\.00 ms, 1 % of the goal\); rate met$/m);
    expect(r.stdout).toMatch(/^ {4}verdict {3}rate short \(25\.0 % vs 80\.0 %, 31 % of the goal\); RSS met; fds met$/m);
    expect(r.stdout).toMatch(/^ {4}verdict {3}short \(69\.0 % vs 70\.0 %, 99 % of the goal\) \(on the median; 1 of 3 runs met\)$/m);
    expect(r.stdout).toMatch(/^P7 .*\n.*\n.*\n {4}verdict {3}met$/m);
    expect(fs.readFileSync(SAVED, 'utf8')).toBe(before);
  });

  it('renders the tracked latest.json too: a verdict for every goal, P1 to P7', () => {
    const r = spawnSync(process.execPath, [RUN, '--render', LATEST], { encoding: 'utf8', timeout: 60_000 });
    expect(r.status).toBe(0);
    for (const id of ['P1', 'P2', 'P3', 'P4', 'P5', 'P6', 'P7']) expect(r.stdout).toMatch(new RegExp(`^${id} .*\\n {4}measured .*\\n {4}goal .*\\n {4}verdict {3}\\S`, 'm'));
    // P5 also says the ratio in CPU per request, one tenant's over the 10,000 tenants' row's.
    const rows = (JSON.parse(fs.readFileSync(LATEST, 'utf8')) as { rows: { id: string; cpuAllUs?: number }[] }).rows;
    const one = rows.find((x) => x.id === 'siglake-http-batch-1k')!.cpuAllUs!;
    const many = rows.find((x) => x.id === 'siglake-http-batch-1k-10k')!.cpuAllUs!;
    const byCpu = ((one / many) * 100).toFixed(1);
    expect(r.stdout).toMatch(new RegExp(`^P5 .*\\n {4}measured .* of one tenant; .*; by CPU per request ${byCpu.replace('.', '\\.')} % \\(one tenant ${one.toFixed(1).replace('.', '\\.')} µs, 10,000 tenants ${many.toFixed(1).replace('.', '\\.')} µs\\)$`, 'm'));
  });

  it('leaves the CPU ratio out of P5 for a run that did not measure CPU per request', () => {
    const r = spawnSync(process.execPath, [RUN, '--render', SAVED], { encoding: 'utf8', timeout: 60_000 });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^ {4}measured {2}25\.0 % of one tenant; RSS 231 MiB; 543 fds \(--wal-max-open-files 512\)$/m);
  });

  it('the HTML page, rendered by Chromium: grouped charts, log p99 with the 5 ms line, P4 runs, legend, verdict column, row table', () => {
    const out = path.join(dir, 'bench.html');
    const r = spawnSync(process.execPath, [RUN, '--render', SAVED, '--out', out], { encoding: 'utf8', timeout: 60_000 });
    expect(r.status).toBe(0);
    const dom = spawnSync('chromium', ['--headless', '--no-sandbox', '--disable-gpu', '--dump-dom', `file://${out}`], { encoding: 'utf8', timeout: 60_000 });
    expect(dom.status).toBe(0);
    const html = dom.stdout;
    expect(html).toContain('<th>verdict</th>');
    expect(html).toMatch(/<b>partial<\/b>: p99 short \(428\.03 ms vs 5\.00 ms/);
    expect(html).toMatch(/<b>partial<\/b>: rate short \(25\.0 % vs 80\.0 %, 31 % of the goal\); RSS met; fds met/);
    for (const h of ['1 KiB bodies', '256 KiB bodies', 'Disk: write + fdatasync', 'P4: fixed-rate loadgen runs, p99 latency (log axis)', 'All rows']) expect(html).toContain(`<h3>${h}</h3>`);
    // Three charts per group (req/s, MB/s, p99) and P4's.
    expect(html.match(/<svg class="chart"/g)).toHaveLength(10);
    expect(html.match(/p99 latency, ms \(log axis\)/g)!.length).toBeGreaterThanOrEqual(3);
    expect(html.match(/>P4: 5 ms</g)).toHaveLength(2);
    expect(html).toContain('>P4 goal 5 ms<');
    expect(html).toMatch(/siglake at ½ \(30,934\/s\)/);
    expect(html).toMatch(/class="legend"><span><i style="background:#7f7f7f"><\/i>uWS discard \(HTTP ceiling\)/);
    // Every measured row but the micro-benchmarks is a row of the HTML table.
    const rows = (JSON.parse(fs.readFileSync(SAVED, 'utf8')) as { rows: { kind: string }[] }).rows.filter((x) => x.kind !== 'micro').length;
    const table = html.slice(html.indexOf('<h3>All rows</h3>'));
    expect(table.match(/<tr>/g)).toHaveLength(rows + 1);
    expect(html).not.toMatch(/<pre>/);
  });

  it('a partial run writes partial-* and latest-partial.*, which git ignores, never latest.*', () => {
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', `import { resultFiles } from ${JSON.stringify(path.join(REPO, 'native-bench', 'report.mjs'))}; console.log(JSON.stringify([resultFiles('S', true), resultFiles('S', false)]));`], { encoding: 'utf8' });
    expect(r.status).toBe(0);
    const [partial, full] = JSON.parse(r.stdout) as Record<string, string>[];
    expect(partial).toEqual({ json: 'partial-S.json', html: 'partial-S.html', latestJson: 'latest-partial.json', latestHtml: 'latest-partial.html' });
    expect(full).toEqual({ json: 'bench-S.json', html: 'bench-S.html', latestJson: 'latest.json', latestHtml: 'latest.html' });
    const ignored = spawnSync('git', ['check-ignore', 'native-bench/results/latest-partial.json', 'native-bench/results/partial-S.html'], { cwd: REPO, encoding: 'utf8' });
    expect(ignored.stdout.trim().split('\n')).toEqual(['native-bench/results/latest-partial.json', 'native-bench/results/partial-S.html']);
  });
});
