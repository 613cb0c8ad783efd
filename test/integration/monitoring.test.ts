// Monitoring (issue 17 item 4): the Prometheus rules and the Grafana
// dashboard name only metrics a running Siglake exposes (checked against the
// /metrics of a real `siglake ingest` and, for `siglake_query_*`, of a real
// `siglake query`), `promtool check metrics` passes clean on both /metrics,
// `promtool test rules` passes (the tests pin the time from
// each fault to its alert), every alert has such a test, and every alert's
// runbook_url points at a heading of docs/runbooks.md.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post } from '../helpers/http.js';
import { REPO, startIngester, tempDir, type RunningIngester } from '../helpers/ingester.js';
import { jsonBytes, logsJson } from '../helpers/otlp-bodies.js';
import { icebergFlags, postSql, startQuery, type RunningQuery } from '../helpers/query.js';

const PROM = path.join(REPO, 'deploy/prometheus');
const RULES = path.join(PROM, 'siglake-rules.yaml');
const RULE_TESTS = path.join(PROM, 'siglake-rules.test.yaml');
const DASHBOARD = path.join(REPO, 'deploy/grafana/siglake.json');
const RUNBOOKS = path.join(REPO, 'docs/runbooks.md');

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  annotations?: Record<string, string>;
}

const rules: Rule[] = (YAML.parse(fs.readFileSync(RULES, 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);
const alerts = rules.filter((r) => r.alert !== undefined);
const dashboardExprs: string[] = [];
(function collect(node: unknown): void {
  if (Array.isArray(node)) node.forEach(collect);
  else if (node !== null && typeof node === 'object') {
    const o = node as Record<string, unknown>;
    if (Array.isArray(o['targets'])) for (const t of o['targets'] as { expr?: string }[]) if (t.expr) dashboardExprs.push(t.expr);
    if (typeof o['definition'] === 'string') dashboardExprs.push(o['definition'] as string);
    Object.values(o).forEach(collect);
  }
})(JSON.parse(fs.readFileSync(DASHBOARD, 'utf8')));

/** Metric names in a PromQL expression (recording-rule names contain ':' and are not metrics). */
function metricNames(expr: string): string[] {
  return [...expr.matchAll(/(?<![:\w])((?:siglake|nodejs|process)_[A-Za-z0-9_]+)/g)].map((m) => m[1]!);
}

/** `metric{label="value", …}` selectors with literal equality matchers. */
function selectors(expr: string): { metric: string; label: string; value: string }[] {
  const out: { metric: string; label: string; value: string }[] = [];
  for (const m of expr.matchAll(/(?<![:\w])((?:siglake|nodejs|process)_[A-Za-z0-9_]+)\{([^}]*)\}/g)) {
    for (const l of m[2]!.matchAll(/(\w+)\s*=\s*"([^"]*)"/g)) out.push({ metric: m[1]!, label: l[1]!, value: l[2]! });
  }
  return out;
}

function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '') // GitHub keeps letters, digits, - and _
    .replace(/\s/g, '-');
}

/** Series names on a /metrics text (histograms' _bucket/_sum/_count included) → their label sets. */
function seriesOf(text: string): Map<string, Record<string, string>[]> {
  const series = new Map<string, Record<string, string>[]>();
  for (const line of text.split('\n')) {
    const m = /^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})? /.exec(line);
    if (m === null) continue;
    const labels = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1]!, l[2]!]));
    series.set(m[1]!, [...(series.get(m[1]!) ?? []), labels]);
  }
  return series;
}

/** The query server's metrics are scraped from `siglake query`, every other one from `siglake ingest`. */
const isQueryMetric = (name: string) => name.startsWith('siglake_query_');

describe('monitoring against a live siglake ingest and siglake query', () => {
  let ing: RunningIngester;
  let q: RunningQuery;
  const queryDir = tempDir('siglake-monitoring-query-');
  let ingestText = '';
  let queryText = '';
  let ingestSeries = new Map<string, Record<string, string>[]>();
  let querySeries = new Map<string, Record<string, string>[]>();
  const seriesFor = (name: string) => (isQueryMetric(name) ? querySeries : ingestSeries);

  beforeAll(async () => {
    ing = await startIngester();
    expect((await post(ing.url, '/v1/logs', jsonBytes(logsJson(['one'])), { contentType: 'application/json' })).status).toBe(200);
    ingestText = await (await fetch(`${ing.url}/metrics`)).text();
    ingestSeries = seriesOf(ingestText);
    q = await startQuery(queryDir, icebergFlags(queryDir));
    // One answered query, so the request counter has moved as well as its zero series.
    expect((await postSql(q.url, 'SELECT 1 AS one')).status).toBe(200);
    queryText = await (await fetch(`${q.url}/metrics`)).text();
    querySeries = seriesOf(queryText);
  });
  afterAll(async () => {
    await ing?.stop();
    await q?.stop();
    fs.rmSync(queryDir, { recursive: true, force: true });
  });

  it.each([
    ['siglake ingest', () => ingestText],
    ['siglake query', () => queryText],
  ])('`promtool check metrics` passes clean on the /metrics of %s', (_name, text) => {
    expect(text()).not.toBe('');
    const r = spawnSync('promtool', ['check', 'metrics'], { input: text(), encoding: 'utf8' });
    expect(r.stdout + r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it('every metric the rules and the dashboard name is on the /metrics of the server that exposes it', () => {
    const named = new Set([...rules.map((r) => r.expr), ...dashboardExprs].flatMap(metricNames));
    expect(named.size).toBeGreaterThan(20);
    expect([...named].filter(isQueryMetric).sort()).toEqual(['siglake_query_requests_total', 'siglake_query_tenant_denied_total']);
    const missing = [...named].filter((n) => !seriesFor(n).has(n));
    expect(missing).toEqual([]);
    expect(querySeries.get('siglake_query_requests_total')?.some((l) => l['endpoint'] === 'sql' && l['status'] === '200')).toBe(true);
    expect(/^siglake_query_requests_total\{endpoint="sql",status="200"\} 1$/m.test(queryText)).toBe(true);
  });

  it('every label value the rules and the dashboard select on exists at zero from start-up', () => {
    for (const expr of [...rules.map((r) => r.expr), ...dashboardExprs]) {
      for (const s of selectors(expr)) {
        // Status values appear as they happen (contract §8); job and instance come from the scrape.
        if (['job', 'instance', 'status', 'le'].includes(s.label)) continue;
        expect(seriesFor(s.metric).get(s.metric)?.some((l) => l[s.label] === s.value), `${s.metric}{${s.label}="${s.value}"}`).toBe(true);
      }
    }
    // The denial reasons the query alert groups by exist at zero.
    const reasons = (querySeries.get('siglake_query_tenant_denied_total') ?? []).map((l) => l['reason']);
    expect(reasons.length).toBeGreaterThan(0);
  });
});

describe('the rule file', () => {
  it('passes `promtool check rules`', () => {
    const r = spawnSync('promtool', ['check', 'rules', RULES], { encoding: 'utf8' });
    expect(r.stdout).toContain('SUCCESS');
    expect(r.status).toBe(0);
  });

  it('passes `promtool test rules` (the time from each fault to its alert)', () => {
    const r = spawnSync('promtool', ['test', 'rules', RULE_TESTS], { encoding: 'utf8', cwd: PROM });
    expect(r.stdout + r.stderr).toContain('SUCCESS');
    expect(r.status).toBe(0);
  });

  it('every alert has a rule test that sees it absent, then firing', () => {
    const tests = (YAML.parse(fs.readFileSync(RULE_TESTS, 'utf8')) as { tests: { alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[] }[] }).tests;
    for (const a of alerts) {
      const checks = tests.flatMap((t) => t.alert_rule_test ?? []).filter((c) => c.alertname === a.alert);
      expect(checks.some((c) => c.exp_alerts.length === 0), `${a.alert} absent`).toBe(true);
      expect(checks.some((c) => c.exp_alerts.length > 0), `${a.alert} firing`).toBe(true);
    }
  });

  it('every alert links a runbook heading of docs/runbooks.md', () => {
    const anchors = new Set(
      fs
        .readFileSync(RUNBOOKS, 'utf8')
        .split('\n')
        .filter((l) => /^#{1,4} /.test(l))
        .map((l) => slug(l.replace(/^#+ /, ''))),
    );
    for (const a of alerts) {
      const url = a.annotations?.['runbook_url'] ?? '';
      const m = /\/docs\/runbooks\.md#([\w-]+)$/.exec(url);
      expect(m, `${a.alert}: ${url}`).not.toBeNull();
      expect(anchors.has(m![1]!), `${a.alert}: #${m![1]} is not a heading of docs/runbooks.md`).toBe(true);
    }
  });
});
