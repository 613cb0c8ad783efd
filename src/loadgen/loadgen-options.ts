// The flags of `siglake loadgen`, in one table (name, default, help) from which
// both the parser and the usage text derive, and the validated options object
// the coordinator and the client threads share (it is structured-cloneable).

import os from 'node:os';
import { parseArgs } from 'node:util';
import { wrap } from '../config/help.js';
import { ConfigError } from '../errors.js';

export type Protocol = 'http' | 'grpc';
export type SignalMix = 'logs' | 'traces' | 'mixed';
export type BodyEncoding = 'protobuf' | 'json';
/** How a request names its tenant. */
export type TenantMode = 'none' | 'header' | 'jwt';

export interface JwtOptions {
  keyFile: string;
  claim: string;
  issuer: string | undefined;
  audience: string | undefined;
  kid: string | undefined;
  alg: string | undefined;
  ttlSecs: number;
}

export interface LoadgenOptions {
  protocol: Protocol;
  /** http: base URL (`http://host:port`); grpc: `host:port`. */
  target: string;
  signal: SignalMix;
  encoding: BodyEncoding;
  gzip: boolean;
  bodyBytes: number;
  logBodyBytes: number | undefined;
  /** Distinct bodies per (tenant, index) pool. */
  bodies: number;
  /** Cap on the bytes of all distinct bodies one client thread holds. */
  poolBytes: number;
  tenants: number;
  tenantPrefix: string;
  tenantMode: TenantMode;
  jwt: JwtOptions | undefined;
  bearerToken: string | undefined;
  indexes: number;
  indexPrefix: string;
  /** Fixed rate in requests/s over all threads; undefined means closed loop. */
  rate: number | undefined;
  connections: number;
  /** Concurrent gRPC calls per connection (HTTP/1.1 is always 1). */
  streams: number;
  durationSecs: number;
  /** Stop after this many requests in all (over all threads); undefined means by duration only. */
  requests: number | undefined;
  warmupSecs: number;
  threads: number;
  timeoutMs: number;
  intervalMs: number;
  seed: number;
  headers: [string, string][];
  out: string | undefined;
  chart: string | undefined;
  progress: 'auto' | 'on' | 'off';
  quiet: boolean;
  /** Percent of requests refused or failed above which the run fails (exit 1). */
  maxErrorRate: number;
}

interface FlagRow {
  name: string;
  type: 'string' | 'boolean';
  multiple?: boolean;
  default?: string;
  help: string;
  /** Heading printed before this flag in the help (the first flag of a group). */
  group?: string;
}

const FLAGS: readonly FlagRow[] = [
  { name: 'protocol', group: 'Target and bodies', type: 'string', default: 'http', help: 'http (OTLP/HTTP) or grpc (OTLP/gRPC)' },
  { name: 'target', type: 'string', help: 'http: base URL (default http://127.0.0.1:4318); grpc: host:port (default 127.0.0.1:4317)' },
  { name: 'signal', type: 'string', default: 'logs', help: 'logs, traces or mixed (alternating)' },
  { name: 'encoding', type: 'string', default: 'protobuf', help: 'HTTP body encoding: protobuf or json' },
  { name: 'gzip', type: 'boolean', help: 'gzip bodies (Content-Encoding: gzip; grpc-encoding gzip over gRPC)' },
  { name: 'body-bytes', type: 'string', default: '1024', help: 'approximate protobuf size of one request' },
  { name: 'log-body-bytes', type: 'string', help: 'average log record body length (default 160)' },
  { name: 'bodies', type: 'string', default: '8', help: 'distinct bodies per (tenant, index) pool' },
  { name: 'pool-mib', type: 'string', default: '16', help: 'cap on distinct body bytes per client thread (pools are shared round-robin past it)' },
  { name: 'tenants', group: 'Tenants, tokens and indexes', type: 'string', default: '1', help: 'tenants, visited round-robin' },
  { name: 'tenant-prefix', type: 'string', default: 'tenant-', help: 'tenant names are <prefix><n>' },
  { name: 'tenant-header', type: 'boolean', help: 'send X-Scope-OrgID even with one tenant (always sent with more, unless --jwt-key)' },
  { name: 'jwt-key', type: 'string', help: 'private key file (PEM or JWK JSON): sign one JWT per tenant instead of X-Scope-OrgID' },
  { name: 'tenant-claim', type: 'string', default: 'tenant', help: 'JWT claim that names the tenant' },
  { name: 'jwt-issuer', type: 'string', help: 'JWT iss' },
  { name: 'jwt-audience', type: 'string', help: 'JWT aud' },
  { name: 'jwt-kid', type: 'string', help: 'JWT header kid (default: the JWK kid, if any)' },
  { name: 'jwt-alg', type: 'string', help: 'JWS algorithm (default from the key: RS256, ES256/384/512, EdDSA)' },
  { name: 'jwt-ttl-secs', type: 'string', default: '3600', help: 'JWT lifetime' },
  { name: 'bearer', type: 'string', help: 'static bearer token for every request (not with --jwt-key)' },
  { name: 'indexes', type: 'string', default: '0', help: 'managed indexes per tenant (x-siglake-index <prefix><n>); 0: default table' },
  { name: 'index-prefix', type: 'string', default: 'idx-', help: 'index names are <prefix><n>' },
  { name: 'rate', group: 'Load', type: 'string', help: 'fixed rate, requests/s over all threads (open loop, latency from the intended send time)' },
  { name: 'connections', type: 'string', default: '32', help: 'connections over all threads (closed loop: requests in flight)' },
  { name: 'streams', type: 'string', default: '1', help: 'gRPC: concurrent calls per connection' },
  { name: 'duration', type: 'string', default: '10', help: 'seconds (suffix s or m accepted)' },
  { name: 'requests', type: 'string', help: 'stop after this many requests in all' },
  { name: 'warmup', type: 'string', default: '0', help: 'seconds sent first and left out of the report' },
  { name: 'threads', type: 'string', help: 'client worker threads (default: half the cores, at least 1, at most 4)' },
  { name: 'timeout-ms', type: 'string', default: '30000', help: 'per-request timeout; also caps the wait for requests still in flight when --duration ends (3 s)' },
  { name: 'interval-ms', type: 'string', default: '1000', help: 'timeline resolution of the report and chart' },
  { name: 'seed', type: 'string', default: '1', help: 'fixture generator seed' },
  { name: 'header', type: 'string', multiple: true, help: 'extra header/metadata "name: value" (repeatable)' },
  { name: 'out', group: 'Report and verdict', type: 'string', help: 'write the report as JSON here' },
  { name: 'chart', type: 'string', help: 'write a self-contained HTML chart (throughput and latency over time) here' },
  { name: 'progress', type: 'boolean', help: 'force the live progress line (default: when stdout is a TTY)' },
  { name: 'no-progress', type: 'boolean', help: 'never print the progress line' },
  { name: 'quiet', type: 'boolean', help: 'print no text report (the JSON and chart are still written)' },
  { name: 'max-error-rate', type: 'string', default: '1%', help: 'fail the run (exit 1) when more than this share of the requests was refused or failed; 100% never fails on refusals' },
  { name: 'help', type: 'boolean', help: 'print this help (also -h)' },
];

/** The help text, fitted to `width` columns: flag and default on one line, the help indented below. */
export function loadgenUsage(width = 80): string {
  const w = Math.max(40, Math.min(width, 120));
  const lines = ['usage: siglake loadgen [options]', '', ...wrap('Sends realistic OTLP logs/traces and reports throughput and latency. A run stops at --duration whatever the target does: nothing more is sent, and a request still unanswered 3 s later (at most --timeout-ms) is counted as a timeout. Exits 1 when more than --max-error-rate of the requests were refused or failed, or when none was answered (the last line names the target and the error: ECONNREFUSED, a timeout), 2 on a bad flag.', w, 0)];
  for (const f of FLAGS) {
    if (f.group !== undefined) lines.push('', `${f.group}:`);
    const head = `  --${f.name}${f.type === 'string' ? ' V' : ''}`;
    const def = f.default !== undefined ? `default ${f.default}` : '';
    lines.push(def !== '' && head.length + 2 + def.length <= w ? `${head}  ${def}` : head);
    lines.push(...wrap(f.help, w, 6));
  }
  return lines.join('\n') + '\n';
}

function int(name: string, raw: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(`--${name}: must be a whole number, got ${JSON.stringify(raw)}`);
  const n = Number(raw.trim());
  if (n < min || n > max) throw new ConfigError(`--${name}: must be between ${min} and ${max}, got ${n}`);
  return n;
}

function num(name: string, raw: string, min: number): number {
  // Decimal only: Number() would read 0x10 as 16 and 1e3 as 1000.
  const n = /^\d+(\.\d*)?$|^\.\d+$/.test(raw.trim()) ? Number(raw.trim()) : NaN;
  if (!Number.isFinite(n) || n < min) throw new ConfigError(`--${name}: must be a decimal number ≥ ${min}, got ${JSON.stringify(raw)}`);
  return n;
}

/** Node's timers hold at most 2^31 − 1 ms; a longer one fires after 1 ms (TimeoutOverflowWarning). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** "1", "1%" or "0.5 %": a percentage between 0 and 100. */
function percent(name: string, raw: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*%?$/.exec(raw.trim());
  const v = m === null ? NaN : Number(m[1]);
  if (!(v >= 0 && v <= 100)) throw new ConfigError(`--${name}: must be a percentage from 0 to 100, like 1 or 1%, got ${JSON.stringify(raw)}`);
  return v;
}

function seconds(name: string, raw: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(raw.trim());
  if (m === null) throw new ConfigError(`--${name}: must be a duration like 10, 10s, 500ms or 2m, got ${JSON.stringify(raw)}`);
  const v = Number(m[1]);
  return m[2] === 'ms' ? v / 1000 : m[2] === 'm' ? v * 60 : v;
}

function oneOf<T extends string>(name: string, raw: string, values: readonly T[]): T {
  if (!(values as readonly string[]).includes(raw)) throw new ConfigError(`--${name}: must be one of ${values.join(', ')}, got ${JSON.stringify(raw)}`);
  return raw as T;
}

/** Parses argv; returns 'help' for --help. Throws ConfigError naming the flag on a bad value. */
export function parseLoadgenArgs(argv: string[]): LoadgenOptions | 'help' {
  const options: Record<string, { type: 'string' | 'boolean'; multiple?: boolean; short?: string }> = {};
  for (const f of FLAGS) options[f.name] = f.multiple ? { type: f.type, multiple: true } : { type: f.type };
  options['help'] = { type: 'boolean', short: 'h' };
  let values: Record<string, string | boolean | string[] | undefined>;
  try {
    values = parseArgs({ args: argv, options, strict: true, allowPositionals: false }).values as typeof values;
  } catch (e) {
    throw new ConfigError((e as Error).message);
  }
  if (values['help'] === true) return 'help';
  const str = (name: string): string | undefined => {
    const v = values[name];
    if (typeof v === 'string') return v;
    return FLAGS.find((f) => f.name === name)?.default;
  };
  const has = (name: string): boolean => values[name] !== undefined;

  const protocol = oneOf('protocol', str('protocol')!, ['http', 'grpc'] as const);
  const target = str('target') ?? (protocol === 'http' ? 'http://127.0.0.1:4318' : '127.0.0.1:4317');
  if (protocol === 'http') {
    let u: URL;
    try {
      u = new URL(target);
    } catch {
      throw new ConfigError(`--target: not a URL: ${JSON.stringify(target)} (want http://host:port)`);
    }
    if (u.protocol !== 'http:') throw new ConfigError(`--target: only http:// is supported, got ${u.protocol}`);
  } else if (!/^[^\s/]+:\d+$/.test(target)) {
    throw new ConfigError(`--target: want host:port for gRPC, got ${JSON.stringify(target)}`);
  }
  const encoding = oneOf('encoding', str('encoding')!, ['protobuf', 'json'] as const);
  if (protocol === 'grpc' && encoding === 'json') throw new ConfigError('--encoding: gRPC carries protobuf only');

  const tenants = int('tenants', str('tenants')!, 1, 10_000_000);
  let jwt: JwtOptions | undefined;
  if (has('jwt-key')) {
    jwt = {
      keyFile: str('jwt-key')!,
      claim: str('tenant-claim')!,
      issuer: str('jwt-issuer'),
      audience: str('jwt-audience'),
      kid: str('jwt-kid'),
      alg: str('jwt-alg'),
      ttlSecs: int('jwt-ttl-secs', str('jwt-ttl-secs')!, 1),
    };
    if (jwt.claim === '') throw new ConfigError('--tenant-claim: must not be empty');
  } else {
    for (const f of ['jwt-issuer', 'jwt-audience', 'jwt-kid', 'jwt-alg']) {
      if (has(f)) throw new ConfigError(`--${f}: needs --jwt-key`);
    }
  }
  const bearerToken = str('bearer');
  if (bearerToken !== undefined && jwt !== undefined) throw new ConfigError('--bearer: not with --jwt-key (the JWT is the bearer token)');
  const tenantMode: TenantMode = jwt !== undefined ? 'jwt' : tenants > 1 || values['tenant-header'] === true ? 'header' : 'none';

  const rate = has('rate') ? num('rate', str('rate')!, 0.001) : undefined;
  const connections = int('connections', str('connections')!, 1, 100_000);
  const defaultThreads = Math.min(4, Math.max(1, Math.floor(os.availableParallelism() / 2)));
  const threads = has('threads') ? int('threads', str('threads')!, 1, 64) : Math.min(defaultThreads, connections);
  if (connections < threads) throw new ConfigError(`--connections: at least one per thread (${threads} threads), got ${connections}`);
  const streams = int('streams', str('streams')!, 1, 10_000);
  if (protocol === 'http' && streams !== 1) throw new ConfigError('--streams: HTTP/1.1 carries one request at a time per connection; use --connections');

  const headers: [string, string][] = [];
  for (const h of (values['header'] as string[] | undefined) ?? []) {
    const colon = h.indexOf(':');
    if (colon <= 0) throw new ConfigError(`--header: want "name: value", got ${JSON.stringify(h)}`);
    headers.push([h.slice(0, colon).trim().toLowerCase(), h.slice(colon + 1).trim()]);
  }
  if (values['progress'] === true && values['no-progress'] === true) throw new ConfigError('--progress and --no-progress: pick one');

  const durationSecs = seconds('duration', str('duration')!);
  const requests = has('requests') ? int('requests', str('requests')!, 1) : undefined;
  if (durationSecs <= 0 && requests === undefined) throw new ConfigError('--duration: must be above 0 unless --requests is given');
  // The warm-up is cut at an interval's end: one that ends inside an interval would count part of
  // it as measured (or drop part of the measured time), and every rate would be off by that share.
  const warmupSecs = seconds('warmup', str('warmup')!);
  // The run's end is one timer: a longer run would end at once.
  if ((warmupSecs + durationSecs) * 1000 > MAX_TIMER_MS) {
    throw new ConfigError(`--duration: with --warmup at most ${Math.floor(MAX_TIMER_MS / 1000)} s (24.8 days), got ${warmupSecs + durationSecs} s`);
  }
  const intervalMs = int('interval-ms', str('interval-ms')!, 10, 86_400_000);
  if (Math.round(warmupSecs * 1000) % intervalMs !== 0) {
    throw new ConfigError(`--warmup: must be a whole number of --interval-ms (${intervalMs} ms), got ${warmupSecs} s`);
  }

  return {
    protocol,
    target,
    signal: oneOf('signal', str('signal')!, ['logs', 'traces', 'mixed'] as const),
    encoding,
    gzip: values['gzip'] === true,
    bodyBytes: int('body-bytes', str('body-bytes')!, 64, 1 << 30),
    logBodyBytes: has('log-body-bytes') ? int('log-body-bytes', str('log-body-bytes')!, 1) : undefined,
    bodies: int('bodies', str('bodies')!, 1, 100_000),
    poolBytes: num('pool-mib', str('pool-mib')!, 0) * 1024 * 1024,
    tenants,
    tenantPrefix: str('tenant-prefix')!,
    tenantMode,
    jwt,
    bearerToken,
    indexes: int('indexes', str('indexes')!, 0, 1_000_000),
    indexPrefix: str('index-prefix')!,
    rate,
    connections,
    streams,
    durationSecs,
    requests,
    warmupSecs,
    threads,
    timeoutMs: int('timeout-ms', str('timeout-ms')!, 1),
    intervalMs,
    seed: int('seed', str('seed')!, 0, 2 ** 32 - 1),
    headers,
    out: str('out'),
    chart: str('chart'),
    progress: values['progress'] === true ? 'on' : values['no-progress'] === true ? 'off' : 'auto',
    quiet: values['quiet'] === true,
    maxErrorRate: percent('max-error-rate', str('max-error-rate')!),
  };
}
