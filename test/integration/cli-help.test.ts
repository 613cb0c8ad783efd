// `siglake <command> --help`, `-h` and `--version` as a person meets them in a
// terminal: run on a pseudo-terminal of a set width, they exit 0, fit the
// width, and list the flags the command takes (from the settings table) with
// defaults in human units and their env vars.

import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SETTINGS, envName, settingNames } from '../../src/config/settings.js';
import { CLI } from '../helpers/ingester.js';
import { runInPty } from '../helpers/pty.js';

const siglake = (args: string[], cols = 80) => runInPty([process.execPath, CLI, ...args], { cols });

const widest = (text: string): number => Math.max(...text.split('\n').map((l) => [...l].length));

describe('siglake --help on a terminal', () => {
  it('ingest --help lists every setting but the query server\'s, grouped, with human defaults and env vars, in 80 columns', async () => {
    const r = await siglake(['ingest', '--help']);
    expect(r.code).toBe(0);
    expect(r.output).toMatch(/^usage: siglake ingest \[flags\]/);
    expect(r.output).not.toMatch(/unknown flag/);
    expect(widest(r.output)).toBeLessThanOrEqual(80);
    for (const n of settingNames()) {
      if (SETTINGS[n].category === 'query') {
        expect(r.output).not.toContain(SETTINGS[n].flag + ' ');
        continue;
      }
      // A long flag's default wraps onto the next line: the flag ends at a space or a line end.
      expect(r.output).toMatch(new RegExp(`${SETTINGS[n].flag}[ \\n]`));
      expect(r.output).toContain(envName(SETTINGS[n].flag));
    }
    expect(r.output).toMatch(/--max-request-bytes BYTES\s+default 16 MiB · SIGLAKE_MAX_REQUEST_BYTES/);
    expect(r.output).toMatch(/--wal-segment-bytes BYTES\s+default 64 MiB/);
    expect(r.output).toMatch(/\nServer:\n[\s\S]*\nWrite-ahead log:\n[\s\S]*\nAuthentication:\n/);
    expect(r.output).not.toContain('16777216');
  });

  it('-h is the same help, and a narrow terminal gets a narrow one', async () => {
    const long = await siglake(['ingest', '--help']);
    const short = await siglake(['ingest', '-h']);
    expect(short.code).toBe(0);
    expect(short.output).toBe(long.output);
    const narrow = await siglake(['ingest', '--help'], 50);
    expect(narrow.code).toBe(0);
    expect(widest(narrow.output)).toBeLessThanOrEqual(50);
    expect(narrow.output).toContain('--max-request-bytes');
  });

  it('query --help lists the query server\'s flags and authentication, not the ingest listeners', async () => {
    const r = await siglake(['query', '--help']);
    expect(r.code).toBe(0);
    expect(r.output).toMatch(/^usage: siglake query \[flags\]/);
    expect(widest(r.output)).toBeLessThanOrEqual(80);
    expect(r.output).toMatch(/--query-listen HOST:PORT\s+default 0\.0\.0\.0:4380 · SIGLAKE_QUERY_LISTEN/);
    expect(r.output).toContain('--oidc-issuer ');
    expect(r.output).not.toContain('--http-listen ');
    expect(r.output).not.toContain('--wal-fsync ');
  });

  it('compact --help lists the flags compact reads and its own, not the listeners', async () => {
    const r = await siglake(['compact', '--help']);
    expect(r.code).toBe(0);
    for (const f of ['--once', '--ingester-stopped', '--wal-dir', '--catalog-url', '--warehouse', '--compact-max-round-bytes', '--log-level']) expect(r.output).toContain(f);
    expect(r.output).not.toContain('--http-listen');
    expect(widest(r.output)).toBeLessThanOrEqual(80);
  });

  it.each([['wal'], ['config'], ['loadgen'], ['drain'], ['retention'], ['migrate'], ['index']])('%s --help exits 0 and fits 80 columns', async (cmd) => {
    const r = await siglake([cmd, '--help']);
    expect(r.code).toBe(0);
    expect(r.output).toMatch(new RegExp(`^usage: siglake ${cmd}`));
    expect(widest(r.output)).toBeLessThanOrEqual(80);
  });

  it('every command the usage names answers --help (drain, retention, migrate and index used to refuse it, exit 2)', async () => {
    const usage = (await siglake(['--help'])).output;
    const commands = [...usage.matchAll(/^ {2}([a-z]+) /gm)].map((m) => m[1]!);
    expect(commands).toEqual(expect.arrayContaining(['ingest', 'compact', 'drain', 'query', 'index', 'retention', 'migrate']));
    for (const cmd of new Set(commands)) {
      const r = await siglake([cmd, '--help']);
      expect(r.code, cmd).toBe(0);
      expect(r.output, cmd).toMatch(new RegExp(`^usage: siglake ${cmd}`));
    }
  });

  it('wal dump DIR -h and help <command> also answer help', async () => {
    const a = await siglake(['wal', 'dump', '/nonexistent', '-h']);
    expect(a.code).toBe(0);
    expect(a.output).toMatch(/^usage: siglake wal verify DIR/);
    const b = await siglake(['help', 'compact']);
    expect(b.code).toBe(0);
    expect(b.output).toMatch(/^usage: siglake compact/);
  });

  it('--version prints the package version', async () => {
    const pkg = JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    const r = await siglake(['--version']);
    expect(r.code).toBe(0);
    expect(r.output).toBe(`siglake ${pkg.version}\n`);
  });

  it('config reference points at the docs, not at a contract users do not have', async () => {
    const r = await siglake(['config', 'reference']);
    expect(r.code).toBe(0);
    expect(r.output).not.toMatch(/contract §/);
    expect(r.output).toContain('docs/wal-format.md');
  });
});
