#!/usr/bin/env node
// siglake: one executable, several subcommands (contract §1).

import { ConfigError } from './errors.js';

// fdatasyncs of many lanes run in parallel on libuv's pool; its default of 4
// threads would serialise them. Set before anything touches the pool.
process.env['UV_THREADPOOL_SIZE'] ??= '16';

const USAGE = `usage: siglake <command> [options]

commands:
  ingest [flags]          run the ingester (OTLP/HTTP + OTLP/gRPC); see \`siglake config reference\`
  loadgen [flags]         send realistic OTLP load and report throughput and latency; see \`siglake loadgen --help\`
  compact [--once] [--ingester-stopped] [flags]
                          land sealed WAL segments in the Iceberg tables (docs/iceberg.md)
  wal verify DIR          check WAL segments; exit 1 on corruption recovery would not repair
  wal dump DIR            print one JSON line per WAL record
  config reference        print the configuration reference (Markdown)
  index create|update --file F | list | show NAME | delete NAME [--tenant T]
                          manage a tenant's indexes in the catalog (docs/indexes.md)
  retention [--once]      drop data past each table's retention, expire snapshots (docs/iceberg.md)
  migrate [--all-namespaces] [--dry-run]
                          bring table schemas to the current version (docs/iceberg.md)
`;

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
    loaded = loadSettings({ argv, env: process.env });
  } catch (e) {
    if (e instanceof ConfigError) fail(e.message, 2);
    throw e;
  }
  const settings = loaded.settings;
  const log = createLogger(settings.logLevel);
  let ingester;
  try {
    ingester = new Ingester({ settings, log, testHooks: process.env['SIGLAKE_TEST_HOOKS'] === '1' });
  } catch (e) {
    if (e instanceof ConfigError) fail(withSource(e.message, loaded), 2);
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
      if (e instanceof ConfigError) fail(withSource(e.message, loaded), 2);
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
      (unanswered) => {
        log.info({ unanswered }, 'stopped');
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
  try {
    await ingester.start();
  } catch (e) {
    fail((e as Error).message, 1);
  }
  log.info({ http: ingester.httpPort, grpc: ingester.grpcPort, workers: settings.workers, walDir: settings.walDir, fsync: settings.walFsync }, 'ready');
}

async function wal(argv: string[]): Promise<void> {
  const [sub, dir, ...rest] = argv;
  if ((sub !== 'verify' && sub !== 'dump') || dir === undefined || rest.length > 0) fail(`usage: siglake wal verify|dump DIR`, 2);
  const out = (line: string) => process.stdout.write(line + '\n');
  const wal = await import('./wal/commands.js');
  if (sub === 'verify') {
    process.exitCode = await wal.walVerify(dir, out);
    return;
  }
  const { describeRequest } = await import('./otlp/summary.js');
  const { RecordType } = await import('./wal/format.js');
  process.exitCode = await wal.walDump(dir, out, (type, payload) =>
    describeRequest(type === RecordType.TRACES ? 'traces' : 'logs', payload),
  );
}

async function config(argv: string[]): Promise<void> {
  if (argv[0] !== 'reference' || argv.length > 1) fail('usage: siglake config reference', 2);
  const { configReference } = await import('./config/reference.js');
  process.stdout.write(configReference());
}

async function main(argv: string[]): Promise<void> {
  const [cmd, ...rest] = argv;
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
    case 'config':
      return config(rest);
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
      process.stdout.write(USAGE);
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
