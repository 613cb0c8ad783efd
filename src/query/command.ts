// `siglake query`: the query server as its own process (contract query §1).
// Exit codes: 0 stopped cleanly; 1 could not start; 2 a bad flag or setting
// (query.allowedTenants without query.oidc.tenantClaim among them; a
// query.listen host that does not resolve).

import { resolveListenHosts } from '../config/listen-hosts.js';
import { loadCommandSettings, withSource } from '../config/load.js';
import { ConfigError } from '../errors.js';
import { createLogger } from '../log.js';
import { QueryServer } from './query-server.js';

export async function runQueryCommand(argv: string[]): Promise<number> {
  const loaded = loadCommandSettings(argv, { command: 'query', serves: true });
  if (loaded === undefined) return 2;
  let s;
  try {
    // A listen host that is a name resolves before anything is made (src/config/listen-hosts.ts).
    s = await resolveListenHosts(loaded.settings, ['queryListen']);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    process.stderr.write(`siglake: ${withSource(e, loaded)}\n`);
    return 2;
  }
  const log = createLogger(s.logLevel, 'siglake-query');
  let server: QueryServer;
  try {
    server = new QueryServer({ settings: s, log });
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`siglake: ${withSource(e, loaded)}\n`);
      return 2;
    }
    if ((e as { code?: string }).code?.startsWith('SIGLAKE_')) {
      process.stderr.write(`siglake: ${(e as Error).message}\n`);
      return 2;
    }
    throw e;
  }
  try {
    await server.start();
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`siglake: ${withSource(e, loaded)}\n`);
      return 2;
    }
    process.stderr.write(`siglake: ${(e as Error).message}\n`);
    return 1;
  }
  return new Promise<number>((resolve) => {
    let signals = 0;
    const onSignal = (signal: NodeJS.Signals) => {
      signals++;
      if (signals > 1) {
        log.warn({ signal }, 'second signal: exiting at once');
        process.exit(1);
      }
      log.info({ signal }, 'stopping: letting running queries finish');
      server.stop().then(
        (interrupted) => {
          log.info({ interrupted }, 'stopped');
          resolve(0);
        },
        (err: unknown) => {
          log.error({ err: (err as Error).message }, 'shutdown failed');
          resolve(1);
        },
      );
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    // As on ingest: SIGHUP reloads tenants.file and reopens audit.file when set, else does nothing.
    process.on('SIGHUP', () => log.debug('SIGHUP: reloads tenants.file and reopens audit.file when they are set'));
    // Only now: a signal that comes once the lines are out must find its handler (with none, SIGHUP
    // and SIGTERM take their default action and end the process at once).
    log.info({ port: server.port, role: server.role }, 'listening');
    log.info({ port: server.port }, 'ready');
  });
}
