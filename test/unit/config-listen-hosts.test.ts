// Listen hosts that are names: resolved once at start (src/config/listen-hosts.ts).
// The resolver is the system's (dns.lookup) in the integration tests; here it
// is a given list, to show which address of several each listener gets.

import { describe, expect, it } from 'vitest';
import { resolveListenHosts } from '../../src/config/listen-hosts.js';
import { loadSettings } from '../../src/config/load.js';
import { ConfigError } from '../../src/errors.js';

const settings = (argv: string[]) => loadSettings({ argv, env: {} }).settings;

describe('resolveListenHosts', () => {
  it('a name that resolves to several addresses: every listener gets the first one the resolver returns', async () => {
    const asked: string[] = [];
    const s = await resolveListenHosts(settings(['--http-listen', 'otlp.example:4318', '--grpc-listen', 'otlp.example:4317']), ['httpListen', 'grpcListen'], async (host) => {
      asked.push(host);
      return [
        { address: '2001:db8::7', family: 6 },
        { address: '192.0.2.7', family: 4 },
      ];
    });
    expect(s.httpListen).toEqual({ host: '2001:db8::7', port: 4318 });
    expect(s.grpcListen).toEqual({ host: '2001:db8::7', port: 4317 });
    expect(asked).toEqual(['otlp.example', 'otlp.example']);
  });

  it('IP literals, localhost and unset listeners are passed on as written, never resolved', async () => {
    const s0 = settings(['--http-listen', '127.0.0.1:4318', '--grpc-listen', 'localhost:4317', '--query-listen', '[::1]:4380']);
    const s = await resolveListenHosts(s0, ['httpListen', 'grpcListen', 'metricsListen', 'queryListen'], async (host) => {
      throw new Error(`resolved ${host}`);
    });
    expect(s.httpListen).toEqual({ host: '127.0.0.1', port: 4318 });
    expect(s.grpcListen).toEqual({ host: 'localhost', port: 4317 });
    expect(s.queryListen).toEqual({ host: '::1', port: 4380 });
    expect(s.metricsListen).toBeUndefined();
  });

  it('a name that does not resolve: a ConfigError naming the setting, the host and the code', async () => {
    const notFound = Object.assign(new Error('getaddrinfo ENOTFOUND nosuch.example'), { code: 'ENOTFOUND' });
    const e = await resolveListenHosts(settings(['--metrics-listen', 'nosuch.example:9464']), ['metricsListen'], async () => {
      throw notFound;
    }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as ConfigError).settingKey).toBe('server.metricsListen');
    expect((e as ConfigError).message).toBe('server.metricsListen: host nosuch.example does not resolve (ENOTFOUND)');
    const none = await resolveListenHosts(settings(['--query-listen', 'empty.example:0']), ['queryListen'], async () => []).catch((x: unknown) => x);
    expect((none as ConfigError).message).toBe('query.listen: host empty.example does not resolve (no address)');
  });

  it('a name that resolves to the address and port of another listener is refused, naming both (regression: unresolved-name-listener-clash)', async () => {
    const at = async (host: string) => (host === 'otlp.example' || host === 'alias.example' ? [{ address: '127.0.0.1', family: 4 }] : [{ address: '192.0.2.9', family: 4 }]);
    const clash = await resolveListenHosts(settings(['--http-listen', '127.0.0.1:4318', '--grpc-listen', 'otlp.example:4318']), ['httpListen', 'grpcListen', 'metricsListen'], at).catch((x: unknown) => x);
    expect(clash).toBeInstanceOf(ConfigError);
    expect((clash as ConfigError).settingKey).toBe('server.grpcListen');
    expect((clash as ConfigError).message).toBe('server.grpcListen: server.grpcListen otlp.example (127.0.0.1) and server.httpListen 127.0.0.1 take the same port 4318; each listener needs a port of its own');
    // Two names, one address; and a wildcard beside a name.
    const two = await resolveListenHosts(settings(['--http-listen', 'otlp.example:4318', '--metrics-listen', 'alias.example:4318', '--grpc-listen', '127.0.0.1:4317']), ['httpListen', 'grpcListen', 'metricsListen'], at).catch((x: unknown) => x);
    expect((two as ConfigError).settingKey).toBe('server.metricsListen');
    const wild = await resolveListenHosts(settings(['--http-listen', '0.0.0.0:4318', '--grpc-listen', 'other.example:4318']), ['httpListen', 'grpcListen'], at).catch((x: unknown) => x);
    expect((wild as ConfigError).message).toMatch(/^server\.grpcListen: server\.grpcListen other\.example \(192\.0\.2\.9\) and server\.httpListen 0\.0\.0\.0 take the same port 4318: .*every IPv4 address/);
    // Other ports, or names on other addresses: accepted.
    const ok = await resolveListenHosts(settings(['--http-listen', 'otlp.example:4318', '--grpc-listen', 'other.example:4318']), ['httpListen', 'grpcListen'], at);
    expect(ok.grpcListen).toEqual({ host: '192.0.2.9', port: 4318 });
  });
});
