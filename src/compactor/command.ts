// `siglake compact`: the compactor as its own process (contract §10).
//
//   siglake compact --once [--ingester-stopped] [--wal-dir …] [--catalog-url …] [--warehouse …]
//
// --once runs rounds until no sealed segment is left (one round unless the
// backlog exceeds a round's byte budget) and exits; without it the command
// runs a round every --compact-interval-secs until SIGTERM/SIGINT.
// --ingester-stopped says no ingester writes this WAL, so each lane's highest
// segment is sealed too (docs/iceberg.md "When a segment is sealed").
// Every other flag is a setting of `siglake config reference` that the
// compactor uses (the WAL directory, the catalog, the warehouse, the compactor
// and logging settings); a flag of a setting it does not read is refused with
// exit code 2 rather than silently ignored (as on every command). (Environment variables and a shared
// YAML file may hold ingest settings: those are ignored.)
//
// Exit codes: 0 done; 1 a round failed (nothing uncommitted was retired);
// 2 a bad flag or setting, or a catalog that cannot be opened or a warehouse
// that cannot be written (src/compactor/preflight.ts).

import { ConfigError } from '../errors.js';
import { drainRootProblem, onceRootProblem, walRootProblem } from '../wal/layout.js';
import { loadSettings, withSource } from '../config/load.js';
import { createLogger } from '../log.js';
import { CompactorLoop } from './compactor-loop.js';
import { CompactorSetup } from './compactor-setup.js';
import { checkCompactorTargets } from './preflight.js';
import { retentionHook } from '../retention/in-loop.js';

export async function runCompactCommand(argv: string[]): Promise<number> {
  let once = false;
  let stopped = false;
  const rest: string[] = [];
  for (const a of argv) {
    if (a === '--once') once = true;
    else if (a === '--ingester-stopped') stopped = true;
    else rest.push(a);
  }
  let settings;
  try {
    const loaded = loadSettings({ argv: rest, env: process.env, serves: false, command: 'compact' });
    settings = loaded.settings;
    // A tenant's directory given as the root would land its lanes as the default tenant's.
    // --ingester-stopped reports "done" like a drain: a path that is no WAL root is refused, not read as empty.
    // --once says what it landed with its exit status: a path with no WAL is refused, not reported done.
    const badRoot = stopped ? drainRootProblem(settings.walDir) : once ? onceRootProblem(settings.walDir) : walRootProblem(settings.walDir, false);
    if (badRoot !== null) throw new ConfigError(badRoot);
    // The catalog opens and the warehouse takes a write, or the command stops here (issue 19).
    await checkCompactorTargets(settings).catch((e: unknown) => {
      throw e instanceof ConfigError ? new ConfigError(withSource(e, loaded)) : e;
    });
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`siglake: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
  const log = createLogger(settings.logLevel, 'siglake-compactor');
  const afterCommit = crashHook('SIGLAKE_TEST_CRASH_AFTER_COMMITS');
  const beforeCommit = crashHook('SIGLAKE_TEST_CRASH_BEFORE_COMMITS');
  let setup: CompactorSetup;
  try {
    setup = await CompactorSetup.open(settings, stopped ? 'stopped' : 'running', log, {
      ...(afterCommit ? { afterCommit } : {}),
      ...(beforeCommit ? { beforeCommit } : {}),
    });
  } catch (e) {
    process.stderr.write(`siglake: ${(e as Error).message}\n`);
    return 1;
  }
  try {
    if (once) {
      for (;;) {
        const r = await setup.compactor.runRound();
        if (r.failedTables > 0) return 1;
        if (!r.backlog) return 0;
      }
    }
    const loop = new CompactorLoop(setup.compactor, settings.compactIntervalSecs * 1000, log);
    loop.afterRounds = retentionHook(setup, settings, log, () => undefined);
    const stop = () => void loop.stop();
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
    log.info({ walDir: settings.walDir, warehouse: settings.warehousePath, intervalSecs: settings.compactIntervalSecs }, 'compactor running');
    await loop.start();
    return 0;
  } catch (e) {
    log.error({ err: (e as Error).message, code: (e as { code?: string }).code }, 'compaction failed');
    return 1;
  } finally {
    await setup.close();
  }
}

/**
 * Test-only (SIGLAKE_TEST_HOOKS=1): SIGLAKE_TEST_CRASH_AFTER_COMMITS=n kills
 * the process with SIGKILL right after its n-th table commit, before any WAL
 * segment is retired: the crash window exactly-once must survive.
 * SIGLAKE_TEST_CRASH_BEFORE_COMMITS=n kills it mid-commit: the n-th commit's
 * data files, manifests and metadata file are written, the catalog swap is not.
 */
function crashHook(variable: string): (() => void) | undefined {
  if (process.env['SIGLAKE_TEST_HOOKS'] !== '1') return undefined;
  const n = Number(process.env[variable] ?? '0');
  if (!(n > 0)) return undefined;
  let commits = 0;
  return () => {
    if (++commits >= n) process.kill(process.pid, 'SIGKILL');
  };
}
