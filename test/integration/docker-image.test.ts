// The Dockerfile, checked without a Docker engine (issues 17 and 19).
//
// 1. Its runtime layout: `siglake ingest` runs as an unprivileged user (the
//    image runs as a non-root user) in a root-owned working directory (the
//    image's /app) with exactly the environment the Dockerfile's ENV lines
//    give, parsed here so the test cannot drift from the image. The image's
//    VOLUME is a directory owned by that user (as the image chowns it); the
//    only rewrite is that directory's path. A record sent must land in
//    Iceberg, read back by an independent reader (icebird), and `siglake
//    query` started the same way must be ready and return it.
// 2. The start-up check: the old image (only SIGLAKE_WAL_DIR set) and a
//    warehouse the user cannot write stop start-up with exit 2 and one line
//    naming the setting and its source.
// 3. Its build: every file it COPYs exists, every npm script its RUN lines
//    call exists, and the ENTRYPOINT's program is what `npm run build` makes.

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SETTINGS } from '../../src/config/settings.js';
import { SqlCatalog } from '../../src/iceberg/sql-catalog.js';
import { execForm, imageEnv, imageVolumes, parseDockerfile } from '../helpers/dockerfile.js';
import { post } from '../helpers/http.js';
import { icebirdRows, installFileFetch } from '../helpers/iceberg.js';
import { CLI, followIngester, REPO, tempDir, type RunningIngester } from '../helpers/ingester.js';
import { jsonBytes, logsJson } from '../helpers/otlp-bodies.js';
import { followQuery, postSql, type RunningQuery } from '../helpers/query.js';
import { untilValue } from '../helpers/wait.js';

/** `nobody`: an unprivileged user with no other rights here. */
const UID = 65534;
const GID = 65534;
const AS_USER = ['--reuid', String(UID), '--regid', String(GID), '--clear-groups', '--'];
/** Not settings of the image: free ports, one worker, fast rounds for the test. */
const TEST_FLAGS = ['--http-listen', '127.0.0.1:0', '--grpc-listen', '127.0.0.1:0', '--workers', '1'];

interface Layout {
  /** Root-owned, mode 755: the image's WORKDIR. */
  workdir: string;
  /** Owned by the user: the image's VOLUME. */
  volume: string;
  /** The image's ENV with its VOLUME path moved to `volume`, plus PATH. */
  env: Record<string, string>;
}

function imageLayout(overrides: Record<string, string | undefined> = {}): Layout {
  const [imageVolume] = imageVolumes();
  const root = tempDir('siglake-image-');
  fs.chmodSync(root, 0o755);
  const workdir = path.join(root, 'app');
  const volume = path.join(root, 'volume');
  fs.mkdirSync(workdir, { mode: 0o755 });
  fs.mkdirSync(volume, { mode: 0o755 });
  fs.chownSync(volume, UID, GID);
  const env: Record<string, string> = { PATH: process.env['PATH'] ?? '/usr/bin:/bin' };
  for (const [k, v] of Object.entries({ ...imageEnv(), ...overrides })) {
    if (v !== undefined) env[k] = v.split(imageVolume!).join(volume);
  }
  return { workdir, volume, env };
}

/** The image's ENTRYPOINT (node dist/cli.js, run from WORKDIR) as a command here. */
function entrypoint(): string[] {
  const final = parseDockerfile().at(-1)!;
  expect(execForm(final, 'ENTRYPOINT')).toEqual(['node', 'dist/cli.js']);
  return [process.execPath, CLI];
}

async function startAsUser(layout: Layout, args: string[]): Promise<RunningIngester> {
  const child = spawn('setpriv', [...AS_USER, ...entrypoint(), ...args], {
    cwd: layout.workdir,
    env: layout.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return followIngester(child, layout.volume, 'ready', 30_000);
}

/** `siglake query` as the user, on a free port instead of the image's 4380 (query.listen's default). */
async function startQueryAsUser(layout: Layout): Promise<RunningQuery> {
  const child = spawn('setpriv', [...AS_USER, ...entrypoint(), 'query', '--query-listen', '127.0.0.1:0'], {
    cwd: layout.workdir,
    env: layout.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return followQuery(child, 30_000);
}

function runAsUser(layout: Layout, args: string[]): { status: number | null; stderr: string } {
  const r = spawnSync('setpriv', [...AS_USER, ...entrypoint(), ...args], { cwd: layout.workdir, env: layout.env, encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, stderr: r.stderr };
}

/** The rows of main.logs in the layout's catalog, by icebird; [] while the table does not exist. */
async function landedBodies(layout: Layout): Promise<string[]> {
  const url = layout.env['SIGLAKE_CATALOG_URL']!;
  const catalog = SqlCatalog.open(url, 'siglake');
  try {
    const loc = await catalog.metadataLocation('main', 'logs');
    if (loc === null) return [];
    return (await icebirdRows(loc)).map((r) => r['body'] as string);
  } finally {
    await catalog.close();
  }
}

describe('the image runtime (Dockerfile ENV, non-root user, root-owned WORKDIR), without Docker', () => {
  let restoreFetch: () => void;
  const running: RunningIngester[] = [];
  const queries: RunningQuery[] = [];
  beforeAll(() => {
    restoreFetch = installFileFetch();
  });
  afterAll(async () => {
    for (const r of running) await r.kill9();
    for (const q of queries) await q.stop(5_000);
    restoreFetch();
  });

  it('puts the WAL, the catalog and the warehouse on the volume', () => {
    const env = imageEnv();
    const volumes = imageVolumes();
    expect(volumes).toEqual(['/var/lib/siglake']);
    const onVolume = (p: string) => volumes.some((v) => p.startsWith(`${v}/`));
    expect(onVolume(env['SIGLAKE_WAL_DIR']!)).toBe(true);
    expect(env['SIGLAKE_CATALOG_URL']).toMatch(/^sqlite:\//);
    expect(onVolume(env['SIGLAKE_CATALOG_URL']!.slice('sqlite:'.length))).toBe(true);
    expect(onVolume(env['SIGLAKE_WAREHOUSE']!)).toBe(true);
    // `siglake query`'s file cache (used with an s3:// warehouse) is on the volume too, not in the read-only WORKDIR.
    expect(onVolume(env['SIGLAKE_QUERY_CACHE_DIR']!)).toBe(true);
    // The runtime stage runs as a non-root user.
    const final = parseDockerfile().at(-1)!;
    expect(final.instructions.filter((i) => i.op === 'USER').map((i) => i.args)).toEqual(['siglake']);
  });

  it('`siglake ingest` as the unprivileged user lands an acknowledged record in Iceberg, and stays ready', async () => {
    const layout = imageLayout();
    const ing = await startAsUser(layout, ['ingest', ...TEST_FLAGS, '--compact-interval-secs', '1', '--wal-segment-max-age-secs', '1']);
    running.push(ing);
    const r = await post(ing.url, '/v1/logs', jsonBytes(logsJson(['landed-from-the-image-layout'])), { contentType: 'application/json' });
    expect(r.status).toBe(200);
    const bodies = await untilValue('the record in main.logs', async () => {
      const b = await landedBodies(layout);
      return b.length > 0 ? b : undefined;
    });
    expect(bodies).toEqual(['landed-from-the-image-layout']);
    const m = await ing.metrics();
    expect(m.get('siglake_compactor_round_errors_total')).toBe(0);
    expect(m.get('siglake_compactor_not_ready')).toBe(0);
    expect((await fetch(`${ing.url}/readyz`)).status).toBe(200);
    // Everything it wrote is on the volume, owned by the user; nothing in the working directory.
    expect(fs.readdirSync(layout.workdir)).toEqual([]);
    for (const name of fs.readdirSync(layout.volume)) expect(fs.statSync(path.join(layout.volume, name)).uid).toBe(UID);
    expect(await ing.stop()).toBe(0);

    // `siglake query` with exactly the image's environment, as the same user, reads it back.
    expect(SETTINGS.queryListen.default).toEqual({ host: '0.0.0.0', port: 4380 });
    const q = await startQueryAsUser(layout);
    queries.push(q);
    expect((await fetch(`${q.url}/readyz`)).status).toBe(200);
    const a = await postSql(q.url, 'SELECT body FROM logs');
    expect(a.status, a.text).toBe(200);
    expect(a.body['rows']).toEqual([['landed-from-the-image-layout']]);
    expect(fs.readdirSync(layout.workdir)).toEqual([]);
    expect(await q.stop()).toBe(0);
  });

  it('`siglake compact --once` as the unprivileged user lands what an ingester without a compactor wrote', async () => {
    const layout = imageLayout();
    const ing = await startAsUser(layout, ['ingest', ...TEST_FLAGS, '--compactor=false']);
    running.push(ing);
    const r = await post(ing.url, '/v1/logs', jsonBytes(logsJson(['landed-by-siglake-compact'])), { contentType: 'application/json' });
    expect(r.status).toBe(200);
    expect(await ing.stop()).toBe(0);
    const c = runAsUser(layout, ['compact', '--once', '--ingester-stopped']);
    expect(c.stderr).toBe('');
    expect(c.status).toBe(0);
    expect(await landedBodies(layout)).toEqual(['landed-by-siglake-compact']);
  });

  it('the old image (only SIGLAKE_WAL_DIR set) stops at start-up with exit 2 naming the setting, instead of failing every round', () => {
    const layout = imageLayout({ SIGLAKE_CATALOG_URL: undefined, SIGLAKE_WAREHOUSE: undefined });
    const r = runAsUser(layout, ['ingest', ...TEST_FLAGS]);
    expect(r.status).toBe(2);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    // The warehouse is checked first; both defaults point under the root-owned working directory.
    expect(lines[0]).toMatch(/^siglake: invalid warehouse\.path \(default of warehouse\.path\): cannot write to the warehouse file:\/\/.*EACCES/);
    // With the warehouse on the volume, the catalog default is the next refusal.
    const layout2 = imageLayout({ SIGLAKE_CATALOG_URL: undefined });
    const r2 = runAsUser(layout2, ['ingest', ...TEST_FLAGS]);
    expect(r2.status).toBe(2);
    expect(r2.stderr).toMatch(/^siglake: invalid catalog\.url \(default of catalog\.url\): cannot open or create the Iceberg catalog: .*EACCES/);
    // A refused start leaves nothing behind: not even the warehouse it checked.
    expect(fs.readdirSync(layout2.volume)).toEqual([]);
    expect(fs.readdirSync(layout.workdir)).toEqual([]);
  });

  it('a warehouse the user cannot write stops start-up with exit 2 naming warehouse.path and its env var, for ingest and compact', () => {
    const layout = imageLayout();
    layout.env['SIGLAKE_WAREHOUSE'] = path.join(layout.workdir, 'warehouse');
    const r = runAsUser(layout, ['ingest', ...TEST_FLAGS]);
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^siglake: invalid warehouse\.path \(env SIGLAKE_WAREHOUSE\): cannot write to the warehouse file:\/\/.*EACCES/);
    // compact --once on a WAL root (a path that is none is refused first: wal-root.test.ts).
    fs.mkdirSync(layout.env['SIGLAKE_WAL_DIR']!, { recursive: true });
    fs.writeFileSync(path.join(layout.env['SIGLAKE_WAL_DIR']!, '.siglake-wal-root'), 'siglake WAL root\n');
    const c = runAsUser(layout, ['compact', '--once']);
    expect(c.status).toBe(2);
    expect(c.stderr).toMatch(/^siglake: invalid warehouse\.path \(env SIGLAKE_WAREHOUSE\): /);
  });

  it('with the compactor off, an unwritable warehouse does not stop `siglake ingest`', async () => {
    const layout = imageLayout();
    layout.env['SIGLAKE_WAREHOUSE'] = path.join(layout.workdir, 'warehouse');
    const ing = await startAsUser(layout, ['ingest', ...TEST_FLAGS, '--compactor=false']);
    running.push(ing);
    expect((await fetch(`${ing.url}/readyz`)).status).toBe(200);
    expect(await ing.stop()).toBe(0);
  });
});

describe('the Dockerfile build, without Docker', () => {
  const stages = parseDockerfile();
  const pkg = JSON.parse(fs.readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { scripts: Record<string, string> };

  it('has a build stage and a runtime stage on the same Node base', () => {
    expect(stages.map((s) => s.name)).toEqual(['build', undefined]);
    expect(stages[0]!.from).toBe(stages[1]!.from);
    expect(stages[1]!.from).toMatch(/^node:20-/);
  });

  it('every file it COPYs from the build context exists, and every file it COPYs from the build stage is one that stage made', () => {
    const build = stages[0]!;
    const buildWorkdir = build.instructions.find((i) => i.op === 'WORKDIR')!.args;
    const made = new Set<string>();
    for (const ins of build.instructions) {
      if (ins.op !== 'COPY') continue;
      const parts = ins.args.split(' ').filter((p) => !p.startsWith('--'));
      for (const src of parts.slice(0, -1)) {
        expect(fs.existsSync(path.join(REPO, src)), `COPY ${src}`).toBe(true);
        made.add(path.posix.join(buildWorkdir, src));
      }
    }
    // What the build stage's RUN lines make: node_modules (npm ci), dist and the native addon (npm run build).
    made.add(path.posix.join(buildWorkdir, 'node_modules'));
    made.add(path.posix.join(buildWorkdir, 'dist'));
    made.add(path.posix.join(buildWorkdir, 'native/build/Release/siglake_native.node'));
    const fromBuild = stages[1]!.instructions.filter((i) => i.op === 'COPY');
    expect(fromBuild.length).toBeGreaterThan(0);
    for (const ins of fromBuild) {
      expect(ins.args).toMatch(/--from=build\b/);
      const parts = ins.args.split(' ').filter((p) => !p.startsWith('--'));
      for (const src of parts.slice(0, -1)) {
        expect(made.has(src), `COPY --from=build ${src}`).toBe(true);
        // Here the build stage's WORKDIR is the repository.
        expect(fs.existsSync(path.join(REPO, path.posix.relative(buildWorkdir, src))), src).toBe(true);
      }
    }
    // The ENTRYPOINT's program is what `npm run build` wrote.
    expect(fs.existsSync(path.join(REPO, execForm(stages[1]!, 'ENTRYPOINT')[1]!))).toBe(true);
  });

  it('every npm command its RUN lines call exists', () => {
    const runs = stages.flatMap((s) => s.instructions.filter((i) => i.op === 'RUN').map((i) => i.args));
    const npm = runs.flatMap((r) => r.split('&&').map((c) => c.trim())).filter((c) => c.startsWith('npm '));
    expect(npm.length).toBeGreaterThan(0);
    for (const cmd of npm) {
      const [, sub, arg] = cmd.split(' ');
      if (sub === 'run') expect(pkg.scripts[arg!], cmd).toBeDefined();
      else if (sub === 'ci') expect(fs.existsSync(path.join(REPO, 'package-lock.json'))).toBe(true);
      else expect(['prune'], cmd).toContain(sub);
    }
  });

  it('after `npm prune --omit=dev` the runtime stage still has every package dist/ imports', () => {
    const pkgFull = JSON.parse(fs.readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    const runtime = new Set(Object.keys(pkgFull.dependencies));
    const files = fs.readdirSync(path.join(REPO, 'dist'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.js'));
    const imported = new Set<string>();
    for (const f of files) {
      const js = fs.readFileSync(path.join(REPO, 'dist', f), 'utf8');
      for (const m of js.matchAll(/(?:from |import\(|require\()'([^'.][^']*)'/g)) {
        const spec = m[1]!;
        if (spec.startsWith('node:')) continue;
        imported.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
      }
    }
    expect(imported.size).toBeGreaterThan(10);
    for (const name of imported) expect(runtime.has(name), `${name} is imported by dist/ but is not in dependencies`).toBe(true);
  });

  it('its CMD is a siglake command, and the other commands the image runs are in the CLI', () => {
    expect(execForm(stages[1]!, 'CMD')).toEqual(['ingest']);
    const help = spawnSync(process.execPath, [CLI, 'help'], { encoding: 'utf8' });
    expect(help.status).toBe(0);
    for (const cmd of ['ingest', 'compact', 'query']) expect(help.stdout).toMatch(new RegExp(`^  ${cmd}\\b`, 'm'));
    const exposed = stages[1]!.instructions.filter((i) => i.op === 'EXPOSE').flatMap((i) => i.args.split(' '));
    // OTLP/gRPC, OTLP/HTTP and the query server's query.listen (query-contract §2).
    expect(exposed).toEqual(['4317', '4318', '4380']);
  });
});
