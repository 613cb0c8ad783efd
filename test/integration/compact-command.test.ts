// Every command takes the settings it reads and refuses, with exit code 2, a
// flag of a setting it does not read, instead of ignoring it (`siglake query
// --workers 2` used to run as if the flag were not there; only compact refused).

import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runCli, tempDir } from '../helpers/ingester.js';

describe('siglake compact flags', () => {
  it('refuses an ingest-only flag (exit 2, naming it) and creates nothing', () => {
    const dir = tempDir();
    for (const flag of [['--http-listen', '127.0.0.1:0'], ['--workers', '2'], ['--rate-limit-per-sec', '5'], ['--wal-fsync', 'never']]) {
      const r = runCli(['compact', '--once', '--wal-dir', `${dir}/wal`, '--catalog-url', `sqlite:${dir}/catalog.db`, '--warehouse', `${dir}/wh`, ...flag]);
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toContain(`flag ${flag[0]} is not a setting of siglake compact`);
    }
    expect(fs.existsSync(`${dir}/catalog.db`), 'a refused run opens no catalog').toBe(false);
    // The same run without the ingest flag works on a WAL root (--once refuses a path that is none,
    // as drain does: wal-root.test.ts).
    fs.mkdirSync(`${dir}/wal`);
    fs.writeFileSync(`${dir}/wal/.siglake-wal-root`, 'siglake WAL root\n');
    expect(runCli(['compact', '--once', '--wal-dir', `${dir}/wal`, '--catalog-url', `sqlite:${dir}/catalog.db`, '--warehouse', `${dir}/wh`, '--log-level', 'warn']).status).toBe(0);
  });
});

describe('every command refuses a flag it does not read', () => {
  it('exit 2, naming the flag and the command, before anything is created', () => {
    const dir = tempDir();
    const at = ['--catalog-url', `sqlite:${dir}/catalog.db`, '--warehouse', `${dir}/wh`];
    const cases: [string[], string][] = [
      [['query', ...at, '--workers', '2'], 'flag --workers is not a setting of siglake query'],
      [['query', ...at, '--wal-dir', `${dir}/wal`], 'flag --wal-dir is not a setting of siglake query'],
      [['retention', '--once', ...at, '--wal-dir', `${dir}/wal`], 'flag --wal-dir is not a setting of siglake retention'],
      [['migrate', ...at, '--http-listen', '127.0.0.1:0'], 'flag --http-listen is not a setting of siglake migrate'],
      [['index', 'list', ...at, '--query-listen', '127.0.0.1:0'], 'flag --query-listen is not a setting of siglake index'],
      [['drain', '--wal-dir', `${dir}/wal`, ...at, '--wal-fsync', 'never'], 'flag --wal-fsync is not a setting of siglake drain'],
      [['ingest', '--wal-dir', `${dir}/wal`, ...at, '--query-listen', '127.0.0.1:0'], 'flag --query-listen is not a setting of siglake ingest'],
    ];
    for (const [args, message] of cases) {
      const r = runCli(args);
      expect(r.status, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toContain(message);
    }
    expect(fs.readdirSync(dir), 'a refused command creates nothing').toEqual([]);
  });

  it('SIGLAKE_LOG_FORMAT other than json or pretty stops a command with exit 2', () => {
    const dir = tempDir();
    const r = runCli(['ingest', '--wal-dir', `${dir}/wal`, '--catalog-url', `sqlite:${dir}/catalog.db`, '--warehouse', `${dir}/wh`], {
      env: { SIGLAKE_LOG_FORMAT: 'JSON' },
    });
    expect(r.status, r.stderr).toBe(2);
    expect(r.stderr).toContain('invalid env SIGLAKE_LOG_FORMAT: "JSON" is neither json nor pretty');
    expect(fs.readdirSync(dir)).toEqual([]);
  });
});
