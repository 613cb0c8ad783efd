#!/usr/bin/env node
// siglake: one executable, several subcommands (contract §1).

import { ConfigError } from './errors.js';

// fdatasyncs of many lanes run in parallel on libuv's pool; its default of 4
// threads would serialise them. Set before anything touches the pool.
process.env['UV_THREADPOOL_SIZE'] ??= '16';

const USAGE = `usage: siglake <command> [options]

commands:
  ingest [flags]          run the ingester (OTLP/HTTP + OTLP/gRPC)
  loadgen [flags]         send realistic OTLP load; report throughput and latency
  compact [--once] [--ingester-stopped] [flags]
                          land sealed WAL segments in the Iceberg tables
  drain [flags]           land every WAL record in the Iceberg tables before the WAL volume goes (ingester stopped)
  wal verify DIR          check WAL segments; exit 1 on damage recovery would not repair
  wal dump DIR            print one JSON line per WAL record
  config reference        print the configuration reference (Markdown)
  query [flags]           run the query server: tenant-routed SQL over the Iceberg tables
  index create|update --file F | list | show NAME | delete NAME [--tenant T]
                          manage a tenant's indexes in the catalog (docs/indexes.md)
  retention [--once]      drop data past each table's retention, expire snapshots (docs/iceberg.md)
  migrate [--all-namespaces] [--dry-run]
                          bring table schemas to the current version (docs/iceberg.md)

\`siglake <command> --help\` lists a command's flags; \`siglake --version\` its version.
Settings: docs/configuration.md.
`;

/** `siglake <command> --help`: generated from the settings table (src/config/help.ts). */
async function printHelp(command: string): Promise<void> {
  const { commandHelp, terminalWidth } = await import('./config/help.js');
  process.stdout.write(commandHelp(command, terminalWidth()) ?? USAGE);
}

async function version(): Promise<string> {
  const { readFileSync } = await import('node:fs');
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

function fail(message: string, code: number): never {
  process.stderr.write(`siglake: ${message}\n`);
  process.exit(code);
}

async function ingest(argv: string[]): Promise<void> {
  const { loadSettings, withSource } = await import('./config/load.js');
  const { createLogger } = await import('./log.js');
  const { Ingester } = await import('./ingest/server.js');
  let loaded;
  try {
    loaded = loadSettings({ argv, env: process.env, command: 'ingest' });
  } catch (e) {
    if (e instanceof ConfigError) fail(e.message, 2);
    throw e;
  }
  // Listen hosts that are names resolve before anything is made (src/config/listen-hosts.ts).
  const { resolveListenHosts } = await import('./config/listen-hosts.js');
  let settings;
  try {
    settings = await resolveListenHosts(loaded.settings, ['httpListen', 'grpcListen', 'metricsListen']);
  } catch (e) {
    if (e instanceof ConfigError) fail(withSource(e, loaded), 2);
    throw e;
  }
  const log = createLogger(settings.logLevel);
  let ingester;
  try {
    ingester = new Ingester({ settings, log, testHooks: process.env['SIGLAKE_TEST_HOOKS'] === '1' });
  } catch (e) {
    if (e instanceof ConfigError) fail(withSource(e, loaded), 2);
    if ((e as { code?: string }).code?.startsWith('SIGLAKE_')) fail((e as Error).message, 2);
    throw e;
  }
  if (settings.compactorEnabled) {
    // After the settings the Ingester checks itself, so a refused start leaves nothing on disk.
    // A compactor that can never land anything must stop start-up, not leave the process ready (issue 19).
    const { checkCompactorTargets } = await import('./compactor/preflight.js');
    try {
      await checkCompactorTargets(settings);
    } catch (e) {
      if (e instanceof ConfigError) fail(withSource(e, loaded), 2);
      throw e;
    }
  }
  let signals = 0;
  const onSignal = (sig: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      log.warn({ signal: sig }, 'second signal: exiting at once');
      process.exit(1);
    }
    log.info({ signal: sig }, 'stopping: draining queues');
    ingester.stop().then(
      async (unanswered) => {
        log.info({ unanswered }, 'stopped');
        if (settings.drainOnShutdown) {
          // Scale-down: land everything before the volume goes (docs/operations.md).
          const { drainWal, reportDrain } = await import('./compactor/drain.js');
          const ok = await drainWal(settings, log).then(
            (r) => reportDrain(r, log),
            (err: unknown) => {
              log.error({ err: (err as Error).message, code: (err as { code?: string }).code }, 'drain failed');
              return false;
            },
          );
          process.exit(ok ? 0 : 1);
        }
        process.exit(0);
      },
      (err: unknown) => {
        log.error({ err: (err as Error).message }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  // SIGHUP reloads the tenants file and reopens the audit file (their own handlers); with neither
  // set it is a no-op, never Node's default of exiting (a logrotate postrotate or a closed terminal).
  process.on('SIGHUP', () => log.debug('SIGHUP: reloads tenants.file and reopens audit.file when they are set'));
  try {
    await ingester.start();
  } catch (e) {
    if (e instanceof ConfigError) fail(withSource(e, loaded), 2);
    fail((e as Error).message, 1);
  }
  log.info({ http: ingester.httpPort, grpc: ingester.grpcPort, workers: settings.workers, walDir: settings.walDir, fsync: settings.walFsync }, 'ready');
}

async function wal(argv: string[]): Promise<void> {
  const [sub, dir, ...rest] = argv;
  if ((sub !== 'verify' && sub !== 'dump') || dir === undefined || rest.length > 0) fail(`usage: siglake wal verify|dump DIR (see siglake wal --help)`, 2);
  const { StdoutLines, ClosedOutput } = await import('./stdout-lines.js');
  const stdout = new StdoutLines();
  const out = (line: string) => stdout.line(line);
  const wal = await import('./wal/commands.js');
  try {
    if (sub === 'verify') {
      process.exitCode = await wal.walVerify(dir, out);
    } else {
      const { describeRequest } = await import('./otlp/summary.js');
      const { RecordType } = await import('./wal/format.js');
      process.exitCode = await wal.walDump(
        dir,
        out,
        (type, payload) => describeRequest(type === RecordType.TRACES ? 'traces' : 'logs', payload),
        (line) => process.stderr.write(`siglake wal dump: ${line}\n`),
      );
    }
    stdout.flush();
  } catch (e) {
    // The reader went away (`siglake wal dump DIR | head`): stop quietly, as cat does.
    if (e instanceof ClosedOutput) {
      process.exitCode = 0;
      return;
    }
    throw e;
  }
}

async function config(argv: string[]): Promise<void> {
  if (argv[0] !== 'reference' || argv.length > 1) fail('usage: siglake config reference (see siglake config --help)', 2);
  const { configReference } = await import('./config/reference.js');
  process.stdout.write(configReference());
}

async function main(argv: string[]): Promise<void> {
  const [cmd, ...rest] = argv;
  if (cmd !== undefined && cmd !== 'loadgen' && (rest.includes('--help') || rest.includes('-h'))) {
    const { COMMANDS } = await import('./config/help.js');
    if (COMMANDS[cmd] !== undefined) return printHelp(cmd);
  }
  switch (cmd) {
    case 'ingest':
      return ingest(rest);
    case 'wal':
      return wal(rest);
    case 'compact': {
      const { runCompactCommand } = await import('./compactor/command.js');
      process.exitCode = await runCompactCommand(rest);
      return;
    }
    case 'drain': {
      const { runDrainCommand } = await import('./compactor/drain.js');
      process.exitCode = await runDrainCommand(rest);
      return;
    }
    case 'config':
      return config(rest);
    case 'query': {
      const { runQueryCommand } = await import('./query/command.js');
      // Exit once stopped: the engine's native threads must not keep the process alive.
      process.exit(await runQueryCommand(rest));
    }
    case 'migrate': {
      const { runMigrateCommand } = await import('./migrate/command.js');
      process.exitCode = await runMigrateCommand(rest);
      return;
    }
    case 'retention': {
      const { runRetentionCommand } = await import('./retention/command.js');
      process.exitCode = await runRetentionCommand(rest);
      return;
    }
    case 'index': {
      const { runIndexCommand } = await import('./indexes/command.js');
      process.exitCode = await runIndexCommand(rest);
      return;
    }
    case 'loadgen': {
      const { runLoadgen } = await import('./loadgen/command.js');
      process.exitCode = await runLoadgen(rest);
      return;
    }
    case '--help':
    case '-h':
    case 'help':
      if (rest[0] !== undefined) {
        const { COMMANDS } = await import('./config/help.js');
        if (COMMANDS[rest[0]] !== undefined) return printHelp(rest[0]);
        if (rest[0] === 'loadgen') return main(['loadgen', '--help']);
      }
      process.stdout.write(USAGE);
      return;
    case '--version':
    case '-V':
    case 'version':
      process.stdout.write(`siglake ${await version()}\n`);
      return;
    default:
      process.stderr.write(USAGE);
      process.exit(2);
  }
}

main(process.argv.slice(2)).catch((e: unknown) => {
  process.stderr.write(`siglake: ${(e as Error).stack ?? String(e)}\n`);
  process.exit(1);
});
