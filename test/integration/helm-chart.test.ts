// The Helm chart (deploy/helm/siglake), issue 17 item 3: `helm lint` and
// `helm template` (helm built from its Go module at a pinned version by
// test/interop/helm/install.sh) for the default values and the three example
// value files; the rendered manifests validated offline against the pinned
// Kubernetes API types (test/interop/helm/kubecheck); the config file each
// pod reads loaded by Siglake's own settings loader; and the chart's own
// refusals (breaker at or above the memory limit, grace period not above the
// shutdown timeout, SQLite shared by several pods).

import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { commandSettings } from '../../src/config/help.js';
import { loadSettings } from '../../src/config/load.js';
import { SETTINGS, settingNames } from '../../src/config/settings.js';
import { parseTenantsText } from '../../src/tenants/tenants-file.js';
import { REPO, tempDir } from '../helpers/ingester.js';

const CHART = path.join(REPO, 'deploy/helm/siglake');
/** The Kubernetes version the manifests are rendered for and validated against (k8s.io/api in kubecheck's go.mod). */
const KUBE_VERSION = '1.37.0';
const VALUE_FILES = ['', 'examples/single-tenant.yaml', 'examples/claim-routed.yaml', 'examples/trusted-header.yaml'];

let bin = '';

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  spec?: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  stringData?: Record<string, string>;
}

function helm(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(path.join(bin, 'helm'), args, { encoding: 'utf8', cwd: CHART, timeout: 120_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

function template(valueFile: string, set: string[] = []): { status: number | null; stdout: string; stderr: string } {
  return helm(['template', 'sl', '.', '--kube-version', KUBE_VERSION, ...(valueFile ? ['-f', valueFile] : []), ...set.flatMap((s) => ['--set', s])]);
}

function objects(manifest: string): K8sObject[] {
  return YAML.parseAllDocuments(manifest)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
}

function one(objs: K8sObject[], kind: string, name: string): K8sObject {
  const found = objs.filter((o) => o.kind === kind && o.metadata.name === name);
  expect(found, `${kind}/${name}`).toHaveLength(1);
  return found[0]!;
}

/** The value at a dotted key (`retention.logsDays`) of a parsed YAML tree; undefined where any step is missing. */
function valueAt(tree: unknown, key: string): unknown {
  let node = tree;
  for (const part of key.split('.')) {
    if (node === null || typeof node !== 'object') return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

/**
 * The settings `command` reads that the values set (not null) and that the
 * rendered config file lacks or holds with another value. The query server
 * reads the `iceberg` category, which holds the compactor's settings too;
 * it runs no compactor, so `compactor.*` is not its.
 */
function unrendered(command: 'ingest' | 'query', values: unknown, file: unknown): string[] {
  const missing: string[] = [];
  for (const name of commandSettings(command)!) {
    const key = SETTINGS[name].key;
    if (command === 'query' && key.startsWith('compactor.')) continue;
    const want = valueAt(values, key);
    if (want === undefined || want === null) continue;
    if (JSON.stringify(valueAt(file, key)) !== JSON.stringify(want)) missing.push(key);
  }
  return missing;
}

beforeAll(() => {
  // Idempotent: builds helm and kubecheck once into the interop cache.
  const out = execFileSync(path.join(REPO, 'test/interop/helm/install.sh'), { encoding: 'utf8', timeout: 1_500_000 });
  bin = out.trim().split('\n').at(-1)!;
  expect(fs.existsSync(path.join(bin, 'helm'))).toBe(true);
}, 1_600_000);

describe.each(VALUE_FILES)('the chart with %s', (valueFile) => {
  const label = valueFile || 'the default values';
  let objs: K8sObject[];
  let manifest = '';
  let values: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

  beforeAll(() => {
    const r = template(valueFile);
    expect(r.stderr, label).toBe('');
    expect(r.status).toBe(0);
    manifest = r.stdout;
    objs = objects(manifest);
    values = YAML.parse(helm(['show', 'values', '.']).stdout);
    if (valueFile) {
      const merge = (a: Record<string, any>, b: Record<string, any>): Record<string, any> => { // eslint-disable-line @typescript-eslint/no-explicit-any
        const o = { ...a };
        for (const [k, v] of Object.entries(b)) o[k] = v && typeof v === 'object' && !Array.isArray(v) && a[k] && typeof a[k] === 'object' ? merge(a[k], v) : v;
        return o;
      };
      values = merge(values, YAML.parse(fs.readFileSync(path.join(CHART, valueFile), 'utf8')));
    }
  });

  it('passes helm lint --strict', () => {
    const r = helm(['lint', '--strict', '.', '--kube-version', KUBE_VERSION, ...(valueFile ? ['-f', valueFile] : [])]);
    expect(r.stdout + r.stderr).toContain('1 chart(s) linted, 0 chart(s) failed');
    expect(r.status).toBe(0);
  });

  it(`validates against the Kubernetes ${KUBE_VERSION} API types (strict decoding, offline)`, () => {
    const file = path.join(tempDir('siglake-helm-'), 'manifest.yaml');
    fs.writeFileSync(file, manifest);
    const r = spawnSync(path.join(bin, 'kubecheck'), [file], { encoding: 'utf8' });
    expect(r.stdout + r.stderr).not.toContain('FAIL');
    expect(r.status).toBe(0);
    expect(r.stdout.trim().split('\n')).toHaveLength(objs.length);
  });

  it('runs the ingesters as a StatefulSet: WAL volume per pod, probes, grace period above the shutdown timeout, non-root, read-only root', () => {
    const sts = one(objs, 'StatefulSet', 'sl-siglake-ingester');
    expect(sts.spec.replicas).toBe(values['pods'].ingester.replicas);
    const pod = sts.spec.template.spec;
    const c = pod.containers[0];
    expect(c.args).toEqual(['ingest', '--config', '/etc/siglake/ingester.yaml']);
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'otlp-http' });
    expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'otlp-http' });
    const drain = values['compactor'].drainOnShutdown === true ? values['pods'].ingester.drainGraceSeconds : 0;
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(values['server'].shutdownTimeoutSecs + drain);
    expect(pod.securityContext.runAsNonRoot).toBe(true);
    expect(c.securityContext).toMatchObject({ runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
    // The WAL is on the pod's own claim.
    expect(sts.spec.volumeClaimTemplates.map((t: K8sObject) => t.metadata.name)).toEqual(['data']);
    const dataMount = c.volumeMounts.find((m: { name: string }) => m.name === 'data').mountPath as string;
    const env = Object.fromEntries(c.env.filter((e: { value?: string }) => e.value !== undefined).map((e: { name: string; value: string }) => [e.name, e.value]));
    expect(env['SIGLAKE_WAL_DIR']!.startsWith(dataMount + '/')).toBe(true);
    expect(c.env.find((e: { name: string }) => e.name === 'SIGLAKE_CATALOG_URL').valueFrom.secretKeyRef).toBeDefined();
    // The breaker sits below the container's memory limit, and the request covers it.
    const mib = (q: string) => Number(/^(\d+)/.exec(q)![1]) * (q.endsWith('Gi') ? 1024 : q.endsWith('Mi') ? 1 : NaN);
    expect(values['ingester'].memBreaker.limitMib).toBeLessThan(mib(c.resources.limits.memory));
    expect(mib(c.resources.requests.memory)).toBeGreaterThanOrEqual(values['ingester'].memBreaker.limitMib);
  });

  it('renders the values into the config file the ingester reads, which Siglake loads', () => {
    const secret = one(objs, 'Secret', 'sl-siglake-config');
    const text = secret.stringData!['ingester.yaml']!;
    const dir = tempDir('siglake-helm-config-');
    const file = path.join(dir, 'ingester.yaml');
    fs.writeFileSync(file, text);
    // Files the config names are mounted in the pod; here they are stand-ins.
    const sts = one(objs, 'StatefulSet', 'sl-siglake-ingester');
    const c = sts.spec.template.spec.containers[0];
    const parsed = YAML.parse(text);
    const tokenFile = parsed.auth?.bearerTokensFile as string | undefined;
    const env: Record<string, string> = {};
    for (const e of c.env as { name: string; value?: string }[]) if (e.value !== undefined) env[e.name] = e.value;
    if (tokenFile !== undefined) {
      expect(c.volumeMounts.some((m: { mountPath: string }) => tokenFile.startsWith(m.mountPath + '/'))).toBe(true);
      const stand = path.join(dir, 'tokens');
      fs.writeFileSync(stand, 'a-token\n');
      env['SIGLAKE_AUTH_BEARER_TOKENS_FILE'] = stand;
    }
    const loaded = loadSettings({ argv: c.args.slice(1).map((a: string) => (a === '/etc/siglake/ingester.yaml' ? file : a)), env });
    const s = loaded.settings;
    // Every setting `siglake ingest` reads that the values set is in its file.
    expect(unrendered('ingest', values, parsed)).toEqual([]);
    // Values named exactly as the YAML keys reach the process.
    expect(s.maxLanes).toBe(values['ingester'].maxLanes);
    expect(s.queueCapacity).toBe(values['ingester'].backpressure.capacity);
    expect(s.memBreakerLimitMib).toBe(values['ingester'].memBreaker.limitMib);
    expect(s.maxTenants).toBe(values['ingester'].maxTenants);
    expect(s.trustTenantHeader).toBe(values['ingester'].trustTenantHeader);
    expect(s.tenantClaim).toBe(values['ingester'].tenantClaim);
    expect(s.rateLimitPerSec).toBe(values['ingester'].rateLimit.ratePerSec);
    expect(s.redisUrl).toBe(values['redis']?.url);
    expect(s.warehousePath).toBe(values['warehouse'].path);
    expect(s.catalogUrl).toBe(values['catalog'].url);
    expect(s.compactMaxFailingSecs).toBe(values['compactor'].maxFailingSecs);
    // The compactor never takes a pod out of the Service: a shared catalog or S3 outage fails every
    // ingester's rounds at once, and readiness tied to them would leave the Service no endpoint while
    // ingest into the WAL still works. The alerts on siglake_compactor_failing_seconds cover it.
    expect(s.compactMaxFailingSecs).toBe(0);
    expect(s.shutdownTimeoutSecs).toBe(values['server'].shutdownTimeoutSecs);
    expect(loaded.sources.walDir).toBe('env');
    // S3 settings are in the file for the S3 warehouse (issue 17 item 1).
    if (values['warehouse'].s3 !== undefined) expect(parsed.warehouse.s3).toEqual(values['warehouse'].s3);
  });

  it('has the OTLP Service (4317, 4318), the PodDisruptionBudget, and the query Deployment and Service when enabled', () => {
    const svc = one(objs, 'Service', 'sl-siglake-ingester');
    expect(svc.spec.ports.map((p: { port: number }) => p.port)).toEqual([4317, 4318]);
    // /metrics names tenants: on its own port (server.metricsListen), behind a cluster-internal
    // Service that the ServiceMonitor selects; the clients' Service neither has it nor is scraped.
    expect(values['server'].metricsListen).toBe('0.0.0.0:9464');
    expect(svc.metadata.labels?.['siglake.io/metrics']).toBeUndefined();
    const metrics = one(objs, 'Service', 'sl-siglake-ingester-metrics');
    expect(metrics.spec.type).toBe('ClusterIP');
    expect(metrics.spec.ports).toEqual([{ name: 'metrics', port: 9464, targetPort: 'metrics' }]);
    expect(metrics.metadata.labels?.['siglake.io/metrics']).toBe('true');
    const ports = one(objs, 'StatefulSet', 'sl-siglake-ingester').spec.template.spec.containers[0].ports;
    expect(ports).toContainEqual({ name: 'metrics', containerPort: 9464 });
    expect(YAML.parse(one(objs, 'Secret', 'sl-siglake-config').stringData!['ingester.yaml']!).server.metricsListen).toBe('0.0.0.0:9464');
    expect(one(objs, 'PodDisruptionBudget', 'sl-siglake-ingester').spec.maxUnavailable).toBe(1);
    const query = objs.filter((o) => o.kind === 'Deployment');
    if (values['pods'].query.enabled) {
      const dep = one(objs, 'Deployment', 'sl-siglake-query');
      const c = dep.spec.template.spec.containers[0];
      expect(c.args).toEqual(['query', '--config', '/etc/siglake/query.yaml']);
      expect(c.ports).toEqual([{ name: 'query', containerPort: 4380 }]);
      expect(c.readinessProbe.httpGet.path).toBe('/readyz');
      expect(c.securityContext.readOnlyRootFilesystem).toBe(true);
      expect(one(objs, 'Service', 'sl-siglake-query').spec.ports[0].port).toBe(4380);
      const queryText = one(objs, 'Secret', 'sl-siglake-config').stringData!['query.yaml']!;
      const q = YAML.parse(queryText);
      expect(q.query).toEqual(values['query']);
      expect(q.catalog).toEqual(values['catalog']);
      // The query pod's config file loads with Siglake's own loader, every query.* key included.
      const dir = tempDir('siglake-helm-query-');
      const file = path.join(dir, 'query.yaml');
      fs.writeFileSync(file, queryText);
      const env: Record<string, string> = {};
      for (const e of c.env as { name: string; value?: string }[]) if (e.value !== undefined) env[e.name] = e.value;
      if (q.auth?.bearerTokensFile !== undefined) {
        fs.writeFileSync(path.join(dir, 'tokens'), 'a-token\n');
        env['SIGLAKE_AUTH_BEARER_TOKENS_FILE'] = path.join(dir, 'tokens');
      }
      const s = loadSettings({ command: 'query', argv: c.args.slice(1).map((a: string) => (a === '/etc/siglake/query.yaml' ? file : a)), env }).settings;
      const vq = values['query'];
      // Every setting `siglake query` reads that the values set is in its file: retention.*
      // (GET /api/v1/tables reports it) and server.shutdownTimeoutSecs (its drain on SIGTERM).
      expect(unrendered('query', values, q)).toEqual([]);
      expect(s.retentionLogsDays).toBe(values['retention'].logsDays);
      expect(s.retentionTracesDays).toBe(values['retention'].tracesDays);
      expect(s.shutdownTimeoutSecs).toBe(values['server'].shutdownTimeoutSecs);
      // Only the server setting it reads: a YAML file may hold the rest, but the ingester's listeners are not the query server's.
      expect(Object.keys(q.server)).toEqual(['shutdownTimeoutSecs']);
      // Kubernetes waits longer than the query server's own drain before SIGKILL.
      expect(dep.spec.template.spec.terminationGracePeriodSeconds).toBeGreaterThan(s.shutdownTimeoutSecs);
      expect(`${s.queryListen.host}:${s.queryListen.port}`).toBe(vq.listen);
      expect(s.queryTimeoutSecs).toBe(vq.timeoutSecs);
      expect(s.queryMaxRows).toBe(vq.maxRows);
      expect(s.queryMemoryLimitMib).toBe(vq.memoryLimitMib);
      expect(s.queryMaxConcurrentPerTenant).toBe(vq.maxConcurrentPerTenant);
      expect(s.queryAllowedTenants).toEqual(vq.allowedTenants);
      expect(s.queryTenantClaim).toBe(vq.oidc?.tenantClaim);
      expect(s.queryCacheMaxMib).toBe(vq.cacheMaxMib);
      expect(s.warehousePath).toBe(values['warehouse'].path);
      // The cache lies on a writable volume of the pod (the root filesystem is read-only);
      // the image's SIGLAKE_QUERY_CACHE_DIR would win over the file, so the pod sets it to the value.
      expect(env['SIGLAKE_QUERY_CACHE_DIR']).toBe(vq.cacheDir);
      expect(s.queryCacheDir).toBe(vq.cacheDir);
      const mounts = (c.volumeMounts as { name: string; mountPath: string; readOnly?: boolean }[]).filter((m) => m.readOnly !== true);
      const mount = mounts.find((m) => s.queryCacheDir.startsWith(m.mountPath + '/'));
      expect(mount, s.queryCacheDir).toBeDefined();
      const emptyDir = dep.spec.template.spec.volumes.find((v: { name: string }) => v.name === mount!.name).emptyDir;
      expect(emptyDir).toBeDefined();
      // The kubelet evicts a pod whose emptyDir outgrows its sizeLimit: the limit is the cache's bound plus
      // headroom (a quarter, at least 1 GiB) for the files running queries hold past the bound.
      expect(emptyDir.sizeLimit).toBe(`${vq.cacheMaxMib + Math.max(Math.ceil(vq.cacheMaxMib / 4), 1024)}Mi`);
    } else {
      expect(query).toEqual([]);
    }
    expect(objs.filter((o) => o.kind === 'ServiceMonitor')).toHaveLength(values['serviceMonitor'].enabled ? 1 : 0);
  });
});

describe('values.yaml', () => {
  /** Where the chart's defaults differ from the binary's, on purpose. */
  const CHART_DEFAULTS: Record<string, unknown> = {
    'ingester.workers': 1, // a pod's CPU request, not the node's cores
    'ingester.walDir': '/var/lib/siglake/wal', // the pod's volume (as in the image)
    'catalog.url': 'sqlite:/var/lib/siglake/catalog.db',
    'warehouse.path': '/var/lib/siglake/warehouse',
    'ingester.memBreaker.limitMib': 1536, // below the 2Gi container limit
    'query.cacheDir': '/var/lib/siglake/query-cache', // the query pod's emptyDir
    'compactor.maxFailingSecs': 0, // every replica shares the catalog and S3: their outage must not empty the Service
    'server.metricsListen': '0.0.0.0:9464', // /metrics names tenants: not on the port the clients reach
  };
  const CONFIG_SECTIONS = ['server', 'ingester', 'redis', 'catalog', 'warehouse', 'compactor', 'auth', 'log', 'query', 'tenants', 'audit', 'retention'];

  it('names only settings (as their YAML keys), with the binary\'s defaults except where the chart says why', () => {
    const values = YAML.parse(fs.readFileSync(path.join(CHART, 'values.yaml'), 'utf8')) as Record<string, unknown>;
    const byKey = new Map(settingNames().map((n) => [SETTINGS[n].key, SETTINGS[n]]));
    const leaves: [string, unknown][] = [];
    const walk = (node: unknown, key: string): void => {
      if (!byKey.has(key) && node !== null && typeof node === 'object' && !Array.isArray(node)) {
        for (const [k, v] of Object.entries(node)) walk(v, key === '' ? k : `${key}.${k}`);
      } else leaves.push([key, node]);
    };
    for (const section of CONFIG_SECTIONS) if (section in values) walk(values[section], section);
    expect(leaves.length).toBeGreaterThan(25);
    for (const [key, value] of leaves) {
      const def = byKey.get(key);
      expect(def, `${key} is not a setting`).toBeDefined();
      const builtIn = typeof def!.default === 'function' ? undefined : def!.default;
      // A listen address is written `host:port` in YAML: its documented default is that form.
      const isListen = ['server.httpListen', 'server.grpcListen', 'query.listen'].includes(key);
      const want = key in CHART_DEFAULTS ? CHART_DEFAULTS[key] : isListen ? undefined : builtIn;
      if (isListen) expect(def!.defaultDoc).toBe(value);
      else expect(value, key).toEqual(want);
    }
  });
});

describe('every settings section reaches the commands that read it', () => {
  it('tenants, audit and retention values are in the config files (they were dropped without a word)', () => {
    // A file mounted on its own (subPath) counts as mounted too.
    const single = template('', ['tenants.file=/etc/t/tenants.yaml', 'pods.ingester.extraVolumes[0].name=t', 'pods.ingester.extraVolumes[0].configMap.name=x', 'pods.ingester.extraVolumeMounts[0].name=t', 'pods.ingester.extraVolumeMounts[0].mountPath=/etc/t/tenants.yaml', 'pods.ingester.extraVolumeMounts[0].subPath=tenants.yaml']);
    expect(single.stderr).toBe('');
    expect(single.status).toBe(0);
    const mounted = [
      'tenants.file=/etc/tenants/tenants.yaml',
      ...['ingester', 'query'].flatMap((pod) => [
        `pods.${pod}.extraVolumes[0].name=tenants`,
        `pods.${pod}.extraVolumes[0].configMap.name=my-tenants`,
        `pods.${pod}.extraVolumeMounts[0].name=tenants`,
        `pods.${pod}.extraVolumeMounts[0].mountPath=/etc/tenants`,
      ]),
    ];
    const r = template('', [...mounted, 'audit.file=-', 'retention.logsDays=7', 'pods.query.enabled=true', 'catalog.url=postgres://pg/siglake', 'warehouse.path=s3://lake/siglake']);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const secret = one(objects(r.stdout), 'Secret', 'sl-siglake-config');
    const ingest = YAML.parse(secret.stringData!['ingester.yaml']!);
    const query = YAML.parse(secret.stringData!['query.yaml']!);
    expect(ingest.tenants).toEqual({ file: '/etc/tenants/tenants.yaml' });
    expect(ingest.audit).toEqual({ file: '-' });
    expect(ingest.retention.logsDays).toBe(7);
    expect(query.tenants).toEqual({ file: '/etc/tenants/tenants.yaml' });
    expect(query.audit).toEqual({ file: '-' });
    // GET /api/v1/tables of the query server reports the retention the compactor enforces.
    expect(query.retention.logsDays).toBe(7);
    // Every top-level section of the settings is rendered for at least one command.
    const helpers = fs.readFileSync(path.join(CHART, 'templates/_helpers.tpl'), 'utf8');
    const rendered = new Set([...helpers.matchAll(/range \$k := list ([^-]*)-/g)].flatMap((m) => [...m[1]!.matchAll(/"([a-z]+)"/g)].map((x) => x[1]!)));
    const sections = new Set(settingNames().map((n) => SETTINGS[n].key.split('.')[0]!));
    expect([...sections].filter((x) => !rendered.has(x))).toEqual([]);
  });
});

describe('declaredTenants: the chart mounts the tenants file', () => {
  it('renders them into a ConfigMap every pod mounts, sets tenants.file to it, and Siglake reads the file', () => {
    const r = template('', [
      'declaredTenants[0].id=acme',
      'declaredTenants[0].subjects.claims.org_id=acme',
      'declaredTenants[0].rateLimit.requestsPerSec=500',
      'declaredTenants[1].id=globex',
      'declaredTenants[1].subjects.groups[0]=globex-writers',
      'pods.query.enabled=true',
      'catalog.url=postgres://pg/siglake',
      'warehouse.path=s3://lake/siglake',
    ]);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const objs = objects(r.stdout);
    const cm = one(objs, 'ConfigMap', 'sl-siglake-tenants') as K8sObject & { data: Record<string, string> };
    const decls = parseTenantsText(cm.data['tenants.yaml']!, 'tenants.yaml');
    expect(decls.map((d) => d.id)).toEqual(['acme', 'globex']);
    const secret = one(objs, 'Secret', 'sl-siglake-config');
    for (const key of ['ingester.yaml', 'query.yaml']) expect(YAML.parse(secret.stringData![key]!).tenants).toEqual({ file: '/etc/siglake-tenants/tenants.yaml' });
    for (const [kind, name] of [['StatefulSet', 'sl-siglake-ingester'], ['Deployment', 'sl-siglake-query']] as const) {
      const pod = one(objs, kind, name).spec.template.spec;
      expect(pod.volumes).toContainEqual({ name: 'tenants', configMap: { name: 'sl-siglake-tenants' } });
      expect(pod.containers[0].volumeMounts).toContainEqual({ name: 'tenants', mountPath: '/etc/siglake-tenants', readOnly: true });
    }
    // No restart on a change: the ConfigMap is not in the pods' checksum (each pod reloads the file).
    const again = template('', ['declaredTenants[0].id=acme', 'declaredTenants[0].subjects.claims.org_id=other']);
    const first = template('', ['declaredTenants[0].id=acme', 'declaredTenants[0].subjects.claims.org_id=acme']);
    const checksum = (out: string) => one(objects(out), 'StatefulSet', 'sl-siglake-ingester').spec.template.metadata.annotations['checksum/config'];
    expect(checksum(again.stdout)).toBe(checksum(first.stdout));
  });

  it(`validates against the Kubernetes ${KUBE_VERSION} API types with the tenants mounted`, () => {
    const r = template('', ['declaredTenants[0].id=acme', 'declaredTenants[0].subjects.claims.org_id=acme']);
    expect(r.status).toBe(0);
    const file = path.join(tempDir('siglake-helm-'), 'manifest.yaml');
    fs.writeFileSync(file, r.stdout);
    const check = spawnSync(path.join(bin, 'kubecheck'), [file], { encoding: 'utf8' });
    expect(check.stdout + check.stderr).not.toContain('FAIL');
    expect(check.status).toBe(0);
    expect(check.stdout.trim().split('\n')).toHaveLength(objects(r.stdout).length);
  });
});

describe('the query cache volume', () => {
  it('has a sizeLimit of query.cacheMaxMib plus headroom: a quarter, at least 1 GiB', () => {
    const limit = (set: string[]) => {
      const r = template('', ['pods.query.enabled=true', 'catalog.url=postgres://pg/siglake', 'warehouse.path=s3://lake/siglake', ...set]);
      expect(r.stderr).toBe('');
      const pod = one(objects(r.stdout), 'Deployment', 'sl-siglake-query').spec.template.spec;
      return pod.volumes.find((v: { name: string }) => v.name === 'cache').emptyDir.sizeLimit as string;
    };
    expect(limit([])).toBe('12800Mi');
    expect(limit(['query.cacheMaxMib=2048'])).toBe('3072Mi');
    expect(limit(['query.cacheMaxMib=100000'])).toBe('125000Mi');
    // Left out: the binary's 10240 MiB.
    expect(limit(['query.cacheMaxMib=null'])).toBe('12800Mi');
  });
});

describe('serviceAccount: the pods\' identity (IRSA for S3)', () => {
  const QUERY = ['pods.query.enabled=true', 'catalog.url=postgres://pg/siglake', 'warehouse.path=s3://lake/siglake'];
  const pods = (objs: K8sObject[]) => [one(objs, 'StatefulSet', 'sl-siglake-ingester'), one(objs, 'Deployment', 'sl-siglake-query')].map((o) => o.spec.template.spec);

  it('by default: no ServiceAccount created, both pods run as the namespace\'s default one without its API token (Siglake never calls the Kubernetes API)', () => {
    const r = template('', QUERY);
    expect(r.stderr).toBe('');
    const objs = objects(r.stdout);
    expect(objs.filter((o) => o.kind === 'ServiceAccount')).toEqual([]);
    for (const pod of pods(objs)) {
      expect(pod.serviceAccountName).toBe('default');
      expect(pod.automountServiceAccountToken).toBe(false);
    }
  });

  it('create: one ServiceAccount with the annotations (eks.amazonaws.com/role-arn), named on both pods; a name of your own otherwise', () => {
    const arn = 'arn:aws:iam::123456789012:role/siglake';
    const r = template('', [...QUERY, 'serviceAccount.create=true', `serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=${arn}`]);
    expect(r.stderr).toBe('');
    const objs = objects(r.stdout);
    const sa = one(objs, 'ServiceAccount', 'sl-siglake') as K8sObject & { metadata: { annotations: Record<string, string> }; automountServiceAccountToken: boolean };
    expect(sa.metadata.annotations).toEqual({ 'eks.amazonaws.com/role-arn': arn });
    expect(sa.automountServiceAccountToken).toBe(false);
    for (const pod of pods(objs)) expect(pod.serviceAccountName).toBe('sl-siglake');
    const file = path.join(tempDir('siglake-helm-'), 'manifest.yaml');
    fs.writeFileSync(file, r.stdout);
    const check = spawnSync(path.join(bin, 'kubecheck'), [file], { encoding: 'utf8' });
    expect(check.stdout + check.stderr).not.toContain('FAIL');
    expect(check.status).toBe(0);

    const own = objects(template('', [...QUERY, 'serviceAccount.name=lake-writer', 'serviceAccount.automountServiceAccountToken=true']).stdout);
    expect(own.filter((o) => o.kind === 'ServiceAccount')).toEqual([]);
    for (const pod of pods(own)) {
      expect(pod.serviceAccountName).toBe('lake-writer');
      expect(pod.automountServiceAccountToken).toBe(true);
    }
  });

  it('examples/trusted-header.yaml (AWS S3) names its region and creates the IRSA ServiceAccount', () => {
    const r = template('examples/trusted-header.yaml');
    const objs = objects(r.stdout);
    const secret = one(objs, 'Secret', 'sl-siglake-config');
    expect(YAML.parse(secret.stringData!['ingester.yaml']!).warehouse.s3.region).toMatch(/^[a-z]{2}-[a-z]+-\d$/);
    const sa = one(objs, 'ServiceAccount', 'sl-siglake') as K8sObject & { metadata: { annotations: Record<string, string> } };
    expect(sa.metadata.annotations['eks.amazonaws.com/role-arn']).toMatch(/^arn:aws:iam::\d+:role\//);
    expect(one(objs, 'StatefulSet', 'sl-siglake-ingester').spec.template.spec.serviceAccountName).toBe('sl-siglake');
  });
});

describe('server.metricsListen unset in the chart', () => {
  it('/metrics is scraped on the OTLP/HTTP port, and no metrics Service or port is made', () => {
    const r = template('', ['serviceMonitor.enabled=true', 'server.metricsListen=null']);
    expect(r.status, r.stderr).toBe(0);
    const objs = objects(r.stdout);
    expect(objs.filter((o) => o.kind === 'Service' && o.metadata.name === 'sl-siglake-ingester-metrics')).toEqual([]);
    expect(one(objs, 'Service', 'sl-siglake-ingester').metadata.labels?.['siglake.io/metrics']).toBe('true');
    expect((one(objs, 'ServiceMonitor', 'sl-siglake').spec.endpoints as { port: string }[]).map((e) => e.port)).toEqual(['otlp-http', 'query']);
    const c = one(objs, 'StatefulSet', 'sl-siglake-ingester').spec.template.spec.containers[0];
    expect((c.ports as { name: string }[]).map((p) => p.name)).toEqual(['otlp-grpc', 'otlp-http']);
    expect(YAML.parse(one(objs, 'Secret', 'sl-siglake-config').stringData!['ingester.yaml']!).server.metricsListen).toBeUndefined();
  });
});

describe('the Grafana dashboard under the chart\'s ServiceMonitor', () => {
  it('every panel\'s job variable lists the jobs (Service names) that expose its metrics: the query server\'s too', () => {
    const r = template('examples/single-tenant.yaml');
    expect(r.status).toBe(0);
    const objs = objects(r.stdout);
    const sm = one(objs, 'ServiceMonitor', 'sl-siglake');
    // The Prometheus Operator's job label: the Service's name (spec.jobLabel unset).
    expect(sm.spec.jobLabel).toBeUndefined();
    const match = sm.spec.selector.matchLabels as Record<string, string>;
    const scraped = objs.filter((o) => o.kind === 'Service' && Object.entries(match).every(([k, v]) => o.metadata.labels?.[k] === v));
    const ports = new Set((sm.spec.endpoints as { port: string }[]).map((e) => e.port));
    // siglake_query_* come from `siglake query`, every other metric from `siglake ingest`.
    const server = (metric: string) => (metric.startsWith('siglake_query_') ? 'query' : 'metrics');
    const jobsOf = (metric: string) =>
      scraped.filter((svc) => ports.has(server(metric)) && (svc.spec.ports as { name: string }[]).some((p) => p.name === server(metric))).map((svc) => svc.metadata.name);
    expect(jobsOf('siglake_query_requests_total')).toEqual(['sl-siglake-query']);
    expect(jobsOf('siglake_ingest_requests_total')).toEqual(['sl-siglake-ingester-metrics']);

    const dash = JSON.parse(fs.readFileSync(path.join(REPO, 'deploy/grafana/siglake.json'), 'utf8'));
    const vars = new Map<string, string[]>();
    for (const v of dash.templating.list as { name: string; definition?: string; allValue?: string }[]) {
      const m = /^label_values\((\w+)[^,]*, job\)$/.exec(v.definition ?? '');
      if (m) vars.set(v.name, jobsOf(m[1]!));
    }
    const exprs: string[] = [];
    (function collect(node: unknown): void {
      if (Array.isArray(node)) node.forEach(collect);
      else if (node !== null && typeof node === 'object') {
        const o = node as Record<string, unknown>;
        if (Array.isArray(o['targets'])) for (const t of o['targets'] as { expr?: string }[]) if (t.expr) exprs.push(t.expr);
        Object.values(o).forEach(collect);
      }
    })(dash.panels);
    expect(exprs.some((e) => e.includes('siglake_query_'))).toBe(true);
    for (const expr of exprs) {
      for (const sel of expr.matchAll(/(siglake_\w+|nodejs_\w+)\{[^}]*job=~"\$(\w+)"/g)) {
        const [, metric, variable] = sel;
        const listed = vars.get(variable!);
        expect(listed, `${expr}: $${variable} is a label_values(…, job) variable`).toBeDefined();
        expect(jobsOf(metric!).length, metric).toBeGreaterThan(0);
        for (const job of jobsOf(metric!)) expect(listed, `${expr}: $${variable} lists ${job}`).toContain(job);
      }
    }
  });
});

describe('docs/runbooks.md on a full WAL volume', () => {
  it('expands the claims the StatefulSet made (its volumeClaimTemplates cannot change), then recreates it orphaning its pods', () => {
    const sts = one(objects(template('').stdout), 'StatefulSet', 'sl-siglake-ingester');
    // A StatefulSet's claims are <template>-<StatefulSet>-<ordinal>: data-sl-siglake-ingester-0 for release sl.
    const claim = `${sts.spec.volumeClaimTemplates[0].metadata.name}-${sts.metadata.name.replace(/^sl-/, '<release>-')}-`;
    const text = fs.readFileSync(path.join(REPO, 'docs/runbooks.md'), 'utf8');
    const section = text.slice(text.indexOf('Free space without losing acknowledged data'), text.indexOf('## Query 5xx'));
    expect(section).toContain(`kubectl patch pvc ${claim}0`);
    expect(section).toContain('allowVolumeExpansion: true');
    expect(section).toContain(`kubectl delete statefulset ${sts.metadata.name.replace(/^sl-/, '<release>-')} --cascade=orphan`);
    expect(section).toContain('pods.ingester.persistence.size');
    // One way to land a stopped ingester's WAL, as deployment.md, operations.md and iceberg.md say.
    expect(section).toContain('siglake drain --wal-dir');
    for (const doc of ['runbooks.md', 'deployment.md', 'operations.md']) {
      expect(fs.readFileSync(path.join(REPO, 'docs', doc), 'utf8'), doc).not.toContain('compact --once --ingester-stopped');
    }
  });
});

describe('the chart refuses values that cannot work', () => {
  it.each([
    [['ingester.memBreaker.limitMib=2048'], /ingester\.memBreaker\.limitMib \(2048 MiB\) must be below pods\.ingester\.resources\.limits\.memory \(2Gi = 2048 MiB\)/],
    [['ingester.memBreaker.limitMib=0'], /ingester\.memBreaker\.limitMib is 0 \(off\) while pods\.ingester\.resources\.limits\.memory is 2Gi/],
    [['pods.ingester.resources.requests.memory=1Gi'], /requests\.memory \(1Gi\) is below ingester\.memBreaker\.limitMib \(1536 MiB\)/],
    [['pods.ingester.terminationGracePeriodSeconds=25'], /terminationGracePeriodSeconds \(25\) must be above server\.shutdownTimeoutSecs \(25\)/],
    [['pods.query.enabled=true', 'catalog.url=postgres://pg/siglake', 'warehouse.path=s3://lake/siglake', 'pods.query.terminationGracePeriodSeconds=25'], /pods\.query\.terminationGracePeriodSeconds \(25\) must be above server\.shutdownTimeoutSecs \(25\)/],
    // With the drain at SIGTERM the grace covers the graceful stop and the drain (a 15 s loadgen backlog drained in 120 s).
    [['compactor.drainOnShutdown=true', 'pods.ingester.terminationGracePeriodSeconds=100'], /terminationGracePeriodSeconds \(100\) must be above server\.shutdownTimeoutSecs \(25\) \+ pods\.ingester\.drainGraceSeconds \(600\)/],
    [['compactor.drainOnShutdown=true', 'pods.ingester.drainGraceSeconds=120', 'pods.ingester.terminationGracePeriodSeconds=145'], /terminationGracePeriodSeconds \(145\) must be above server\.shutdownTimeoutSecs \(25\) \+ pods\.ingester\.drainGraceSeconds \(120\)/],
    // The shutdown timeout left out is the binary's 25, for the check as for the process.
    [['server.shutdownTimeoutSecs=null', 'pods.ingester.terminationGracePeriodSeconds=20'], /terminationGracePeriodSeconds \(20\) must be above server\.shutdownTimeoutSecs \(25\)/],
    [['pods.ingester.terminationGracePeriodSeconds=0'], /terminationGracePeriodSeconds \(0\) must be above server\.shutdownTimeoutSecs \(25\)/],
    [['pods.ingester.replicas=2'], /catalog\.url is SQLite on one pod's volume/],
    [['pods.query.enabled=true', 'catalog.url=postgres://pg/siglake'], /warehouse\.path is a directory on one pod's volume/],
    [['ingester.tenantClaim=tenant'], /ingester\.tenantClaim needs auth\.oidc\.issuer/],
    [['tenants.file=/etc/tenants/tenants.yaml'], /tenants\.file \/etc\/tenants\/tenants\.yaml is under no mountPath of pods\.ingester\.extraVolumeMounts/],
    [['tenants.file=/etc/t.yaml', 'declaredTenants[0].id=a', 'declaredTenants[0].subjects.claims.o=a'], /set declaredTenants .* or tenants\.file .*, not both/],
    [['audit.file=/var/log/siglake/audit.jsonl'], /audit\.file \/var\/log\/siglake\/audit\.jsonl is on the ingester pods' read-only root file system/],
    [
      [
        'audit.file=/audit/a.jsonl',
        'pods.ingester.extraVolumes[0].name=a',
        'pods.ingester.extraVolumes[0].emptyDir.medium=Memory',
        'pods.ingester.extraVolumeMounts[0].name=a',
        'pods.ingester.extraVolumeMounts[0].mountPath=/audit',
        'declaredTenants[0].id=a',
        'declaredTenants[0].subjects.claims.o=a',
        'pods.query.enabled=true',
        'catalog.url=postgres://pg/siglake',
        'warehouse.path=s3://lake/siglake',
      ],
      /audit\.file \/audit\/a\.jsonl is on the query pods' read-only root file system/,
    ],
    // Without a tenants file too: the query server opens the audit file for its index changes
    // (it used to start without opening it, and now would exit 2 on the read-only root).
    [
      [
        'audit.file=/audit/a.jsonl',
        'pods.ingester.extraVolumes[0].name=a',
        'pods.ingester.extraVolumes[0].emptyDir.medium=Memory',
        'pods.ingester.extraVolumeMounts[0].name=a',
        'pods.ingester.extraVolumeMounts[0].mountPath=/audit',
        'pods.query.enabled=true',
        'catalog.url=postgres://pg/siglake',
        'warehouse.path=s3://lake/siglake',
      ],
      /audit\.file \/audit\/a\.jsonl is on the query pods' read-only root file system/,
    ],
  ])('--set %s', (set, message) => {
    const r = template('', set);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(message);
  });

  it('compactor.drainOnShutdown: the default grace period covers the graceful stop and the drain', () => {
    const grace = (set: string[]) => {
      const r = template('', set);
      expect(r.stderr).toBe('');
      expect(r.status).toBe(0);
      const objs = objects(r.stdout);
      return { grace: one(objs, 'StatefulSet', 'sl-siglake-ingester').spec.template.spec.terminationGracePeriodSeconds as number, ingester: YAML.parse(one(objs, 'Secret', 'sl-siglake-config').stringData!['ingester.yaml']!) };
    };
    expect(grace([]).grace).toBe(25 + 15);
    const on = grace(['compactor.drainOnShutdown=true']);
    expect(on.ingester.compactor.drainOnShutdown).toBe(true);
    expect(on.grace).toBe(25 + 600 + 15);
    expect(grace(['compactor.drainOnShutdown=true', 'pods.ingester.drainGraceSeconds=120', 'server.shutdownTimeoutSecs=10']).grace).toBe(10 + 120 + 15);
    expect(grace(['compactor.drainOnShutdown=true', 'pods.ingester.terminationGracePeriodSeconds=626']).grace).toBe(626);
    // drainGraceSeconds counts only with the drain on.
    expect(grace(['pods.ingester.drainGraceSeconds=120']).grace).toBe(25 + 15);
  });

  it('the shutdown timeout left out (null) is 25 for the grace period, as for the process: the pod is not killed before it', () => {
    const r = template('', ['server.shutdownTimeoutSecs=null']);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const objs = objects(r.stdout);
    const grace = one(objs, 'StatefulSet', 'sl-siglake-ingester').spec.template.spec.terminationGracePeriodSeconds as number;
    const file = path.join(tempDir('siglake-helm-null-'), 'ingester.yaml');
    fs.writeFileSync(file, one(objs, 'Secret', 'sl-siglake-config').stringData!['ingester.yaml']!);
    const s = loadSettings({ argv: ['--config', file], env: {} }).settings;
    expect(s.shutdownTimeoutSecs).toBe(25);
    expect(grace).toBe(25 + 15);
  });

  it('a grace period above the shutdown timeout, and a breaker just below the limit, are accepted', () => {
    const r = template('', ['pods.ingester.terminationGracePeriodSeconds=26', 'ingester.memBreaker.limitMib=2047']);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(one(objects(r.stdout), 'StatefulSet', 'sl-siglake-ingester').spec.template.spec.terminationGracePeriodSeconds).toBe(26);
  });
});
