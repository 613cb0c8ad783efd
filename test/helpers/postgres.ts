// A real PostgreSQL server for catalog tests: Debian's `postgresql` binaries,
// a fresh cluster in a temp directory owned by the `postgres` user (initdb
// refuses to run as root), on a free port, trust auth on 127.0.0.1 only.
// stop() shuts it down and removes the directory; call it in afterAll.

import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './free-port.js';

export interface PostgresServer {
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
}

function binDir(): string {
  const base = '/usr/lib/postgresql';
  const versions = fs.existsSync(base) ? fs.readdirSync(base).filter((v) => fs.existsSync(path.join(base, v, 'bin', 'initdb'))) : [];
  if (versions.length === 0) throw new Error('PostgreSQL is not installed (apt-get install -y postgresql): no /usr/lib/postgresql/*/bin/initdb');
  versions.sort((a, b) => Number(b) - Number(a));
  return path.join(base, versions[0]!, 'bin');
}

/** Runs a PostgreSQL binary as the postgres user (runuser when root, directly otherwise). */
function asPostgres(bin: string, args: string[]): void {
  const isRoot = process.getuid?.() === 0;
  const [cmd, argv] = isRoot ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
  const r = spawnSync(cmd, argv, { encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) throw new Error(`${path.basename(bin)} failed (${r.status}): ${r.stderr || r.stdout}`);
}

export async function startPostgres(): Promise<PostgresServer> {
  const bin = binDir();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'siglake-pg-'));
  const data = path.join(dir, 'data');
  if (process.getuid?.() === 0) execFileSync('chown', ['-R', 'postgres:postgres', dir]);
  fs.chmodSync(dir, 0o755);
  asPostgres(path.join(bin, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  const port = await freePort();
  asPostgres(path.join(bin, 'pg_ctl'), [
    '-D',
    data,
    '-l',
    path.join(dir, 'server.log'),
    '-w',
    '-t',
    '60',
    '-o',
    `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50`,
    'start',
  ]);
  let stopped = false;
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    async stop() {
      if (stopped) return;
      stopped = true;
      try {
        asPostgres(path.join(bin, 'pg_ctl'), ['-D', data, '-m', 'fast', '-w', 'stop']);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
