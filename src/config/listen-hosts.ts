// Listen hosts that are names (server.httpListen, server.grpcListen,
// server.metricsListen, query.listen): resolved once at start, before anything
// is made. A name that does not resolve was no settings refusal: start-up made
// the WAL, the catalog and the warehouse, then failed `cannot listen on …`
// with exit 1 and no reason. It is refused now (exit 2, the setting, the host
// and the resolver's reason) with nothing made.
//
// A name that resolves to several addresses: every listener binds the first
// one the system resolver returns (dns.lookup, getaddrinfo's order: what Node's
// own listen(port, name) binds), never the others; the name is replaced by
// that address here, so that uWebSockets.js (OTLP/HTTP) and Node's servers
// (OTLP/gRPC, /metrics, the query server) bind the same one. IP literals and
// `localhost` are not resolved (passed on as written). The settings' check that
// two listeners do not take one port compared names as written; it is run
// again on the addresses, so that a name resolving to another listener's
// address and port is refused here too, not by the second bind (EADDRINUSE,
// exit 1, after the WAL was made).

import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { ConfigError } from '../errors.js';
import { listenersOverlap } from './load.js';
import type { ListenAddress } from './parsers.js';
import { SETTINGS, type Settings } from './settings.js';

export type ListenSetting = 'httpListen' | 'grpcListen' | 'metricsListen' | 'queryListen';

type Lookup = (host: string) => Promise<readonly { address: string; family: number }[]>;

const systemLookup: Lookup = (host) => lookup(host, { all: true });

/** Whether `host` is passed to the listener as written: an IP literal or localhost. */
export function listenHostIsLiteral(host: string): boolean {
  return isIP(host) !== 0 || host.toLowerCase() === 'localhost';
}

/**
 * `settings` with each named listen host that is a name replaced by its first
 * address; a ConfigError naming the setting (exit 2) when one does not
 * resolve. `resolve` is the system resolver unless given.
 */
export async function resolveListenHosts(settings: Settings, names: readonly ListenSetting[], resolve: Lookup = systemLookup): Promise<Settings> {
  const resolved: Partial<Record<ListenSetting, ListenAddress>> = {};
  for (const name of names) {
    const a: ListenAddress | undefined = settings[name];
    if (a === undefined || listenHostIsLiteral(a.host)) continue;
    let addrs: readonly { address: string }[];
    try {
      addrs = await resolve(a.host);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code ?? (e as Error).message;
      throw ConfigError.ofSetting(SETTINGS[name].key, `host ${a.host} does not resolve (${code})`);
    }
    if (addrs.length === 0) throw ConfigError.ofSetting(SETTINGS[name].key, `host ${a.host} does not resolve (no address)`);
    resolved[name] = { host: addrs[0]!.address, port: a.port };
  }
  const out: Settings = { ...settings, ...resolved };
  for (const [i, a] of names.entries()) {
    for (const b of names.slice(0, i)) {
      if (resolved[a] === undefined && resolved[b] === undefined) continue; // compared as written at load
      const x = out[a];
      const y = out[b];
      if (x === undefined || y === undefined) continue;
      const overlap = listenersOverlap(x, y);
      if (overlap === undefined) continue;
      const shown = (n: ListenSetting) => `${SETTINGS[n].key} ${settings[n]!.host}${resolved[n] === undefined ? '' : ` (${resolved[n].host})`}`;
      throw ConfigError.ofSetting(SETTINGS[a].key, `${shown(a)} and ${shown(b)} take the same port ${x.port}${overlap === 'same' ? '' : `: ${overlap}`}; each listener needs a port of its own`);
    }
  }
  return out;
}
