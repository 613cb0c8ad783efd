// Loading settings from the four layers, later wins: built-in defaults < YAML
// file (--config FILE) < environment variables < command-line flags.
// Any bad value stops start-up with a ConfigError naming the setting, its
// source and what is wrong (the CLI turns it into exit code 2).

import fs from 'node:fs';
import { isIP } from 'node:net';
import nodePath from 'node:path';
import YAML from 'yaml';
import { ConfigError } from '../errors.js';
import { ValueError, YamlNumber, type ListenAddress } from './parsers.js';
import { commandSettings } from './help.js';
import { SETTINGS, envName, settingNames, type SettingDef, type SettingName, type Settings } from './settings.js';

export type Source = 'default' | 'file' | 'env' | 'flag';

export interface LoadedSettings {
  settings: Settings;
  sources: Readonly<Record<SettingName, Source>>;
  /** The YAML file read, when there was one. */
  configFile?: string;
}

export interface LoadInput {
  argv: readonly string[];
  env: Readonly<Record<string, string | undefined>>;
  /**
   * The command serves requests (ingest, query; the default): the auth files
   * it will read must be readable. An offline command (drain, compact,
   * migrate, retention, index) never reads them, and may be given the
   * serving pods' config file where they are not mounted (a drain Job).
   */
  serves?: boolean;
  /**
   * The command (`ingest`, `query`, …): a flag of a setting it does not read
   * is refused, not silently ignored (src/config/help.ts lists what each reads).
   * Env vars and the YAML file may hold any setting: the fleet shares them.
   */
  command?: string;
}

/** Env vars that are not settings but are read by the CLI itself. */
const NON_SETTING_ENV = new Set(['SIGLAKE_CONFIG', 'SIGLAKE_LOG_FORMAT']);

const byFlag = new Map<string, SettingName>(settingNames().map((n) => [SETTINGS[n].flag, n]));
const byKey = new Map<string, SettingName>(settingNames().map((n) => [SETTINGS[n].key, n]));

function where(name: SettingName, source: Source, file?: string): string {
  const d = SETTINGS[name];
  switch (source) {
    case 'flag':
      return `flag ${d.flag}`;
    case 'env':
      return `env ${envName(d.flag)}`;
    case 'file':
      return `file ${file ?? ''} key ${d.key}`;
    default:
      return `default of ${d.key}`;
  }
}

function parseOne(name: SettingName, raw: unknown, source: Source, file?: string): unknown {
  const d = SETTINGS[name] as SettingDef<unknown>;
  try {
    return d.parse(raw);
  } catch (e) {
    if (e instanceof ValueError) {
      // A secret's value is never echoed, whatever its type (`auth.bearerTokens: 123456` in a file).
      const why = d.secret ? e.message.replace(/,? got [^]*$/, '') : e.message;
      throw new ConfigError(`invalid ${d.key} (${where(name, source, file)}): ${why}`);
    }
    throw e;
  }
}

/** Splits argv into `--config` and setting flags. Booleans take `--flag` or `--flag=true|false`. */
function parseArgv(argv: readonly string[]): { configFile?: string; values: Map<SettingName, string> } {
  const values = new Map<SettingName, string>();
  let configFile: string | undefined;
  // The setting whose value the last word was: a word after a secret's value is not echoed.
  let after: SettingName | undefined;
  /** The next word as a flag's value; a word that is itself a flag is not taken (a forgotten value). */
  const nextValue = (flag: string, what: string): string => {
    const next = argv[i + 1];
    if (next === undefined) throw new ConfigError(`flag ${flag} needs ${what}`);
    if (next.startsWith('--')) {
      throw new ConfigError(`flag ${flag} needs ${what}, got the flag ${next.split('=')[0]} (write ${flag}=VALUE for a value that starts with --)`);
    }
    i++;
    return next;
  };
  let i = 0;
  for (; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--')) {
      if (after !== undefined && SETTINGS[after].secret) {
        throw new ConfigError(`unexpected argument after the value of ${SETTINGS[after].flag} (not shown: the setting is secret)${Array.isArray(SETTINGS[after].default) ? '; a list is one comma-separated word' : ''}`);
      }
      throw new ConfigError(`unexpected argument ${JSON.stringify(arg)}`);
    }
    after = undefined;
    const eq = arg.indexOf('=');
    const flag = eq === -1 ? arg : arg.slice(0, eq);
    let value: string | undefined = eq === -1 ? undefined : arg.slice(eq + 1);
    if (flag === '--config') {
      if (value === undefined) value = nextValue('--config', 'a file');
      configFile = value;
      continue;
    }
    const name = byFlag.get(flag);
    if (name === undefined) {
      const near = nearestFlag(flag);
      throw new ConfigError(`unknown flag ${flag}${near !== undefined ? ` (did you mean ${near}?)` : ''}; \`--help\` lists the flags`);
    }
    const isBool = typeof SETTINGS[name].default === 'boolean';
    if (value === undefined) {
      if (isBool) value = 'true';
      else value = nextValue(flag, 'a value');
    }
    values.set(name, value);
    after = name;
  }
  return configFile === undefined ? { values } : { configFile, values };
}

/** Edit distance between two short strings (flags). */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length]!;
}

/** The setting flag a mistyped one most likely meant (within 3 edits), if any. */
function nearestFlag(flag: string): string | undefined {
  let best: string | undefined;
  let bestD = 4;
  for (const f of byFlag.keys()) {
    const d = distance(flag, f);
    if (d < bestD) {
      bestD = d;
      best = f;
    }
  }
  return best;
}

/** Every key path that has settings below it (`server`, `ingester.rateLimit`, …). */
const SECTIONS: ReadonlySet<string> = new Set(
  [...byKey.keys()].flatMap((k) => {
    const parts = k.split('.');
    return parts.slice(1).map((_, i) => parts.slice(0, i + 1).join('.'));
  }),
);

function flatten(obj: unknown, prefix: string, out: Map<string, unknown>, file: string): void {
  if (obj === null || obj === undefined) return;
  if (typeof obj !== 'object' || Array.isArray(obj) || obj instanceof YamlNumber) {
    throw new ConfigError(`invalid file ${file}: ${prefix === '' ? 'the top level' : prefix} must be a map`);
  }
  for (const [k, v] of Object.entries(obj as Record<string, unknown>)) {
    const path = prefix === '' ? k : `${prefix}.${k}`;
    if (byKey.has(path)) {
      // `ingester.workers: 2` beside `ingester: {workers: 3}`: one key given twice, refused as YAML
      // refuses a mapping's duplicate key, not settled by which comes last.
      if (out.has(path)) throw new ConfigError(`invalid file ${file}: key ${path} is given twice`);
      out.set(path, v);
    }
    // A map only where settings lie below: `foo: {bar: {}}` is an unknown key, even empty. A section
    // left empty (`server:` alone) holds nothing; one that is not a map says so.
    else if (SECTIONS.has(path)) flatten(v, path, out, file);
    else throw new ConfigError(`invalid file ${file}: unknown key ${path} (see \`siglake config reference\`)`);
  }
}

function readYaml(file: string, from: string): Map<string, unknown> {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new ConfigError(`cannot read config file ${file} (${from}): ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  let doc: unknown;
  try {
    const parsed = YAML.parseDocument(text);
    const bad = parsed.errors[0];
    if (bad !== undefined) throw bad;
    // A number keeps the text it was written as, for the string settings (YamlNumber).
    YAML.visit(parsed, {
      Scalar(key, node) {
        if (key !== 'key' && typeof node.value === 'number' && node.source !== undefined) node.value = new YamlNumber(node.value, node.source);
      },
    });
    doc = parsed.toJS();
  } catch (e) {
    throw new ConfigError(`invalid file ${file}: not YAML (${(e as Error).message.split('\n')[0]})`);
  }
  const out = new Map<string, unknown>();
  flatten(doc, '', out, file);
  return out;
}

export function loadSettings(input: LoadInput): LoadedSettings {
  const { configFile: flagConfig, values: flagValues } = parseArgv(input.argv);
  const logFormat = input.env['SIGLAKE_LOG_FORMAT'];
  if (logFormat !== undefined && logFormat !== 'json' && logFormat !== 'pretty') {
    throw new ConfigError(`invalid env SIGLAKE_LOG_FORMAT: ${JSON.stringify(logFormat)} is neither json nor pretty (unset, logs are JSON unless stdout is a terminal)`);
  }
  const reads = input.command === undefined ? undefined : commandSettings(input.command);
  if (reads !== undefined) {
    const unread = [...flagValues.keys()].find((n) => !reads.has(n));
    if (unread !== undefined) {
      throw new ConfigError(
        `flag ${SETTINGS[unread].flag} is not a setting of siglake ${input.command} (it reads no such value; \`siglake ${input.command} --help\` lists its flags)`,
      );
    }
  }
  const configFile = flagConfig ?? input.env['SIGLAKE_CONFIG'];
  const from = flagConfig !== undefined ? 'flag --config' : 'env SIGLAKE_CONFIG';
  if (configFile === '') throw new ConfigError(`${from} is empty: name a YAML file, or leave it unset`);
  const fileValues = configFile !== undefined ? readYaml(configFile, from) : new Map<string, unknown>();

  const out: Record<string, unknown> = {};
  const sources = {} as Record<SettingName, Source>;
  const computed: SettingName[] = [];

  for (const name of settingNames()) {
    const d = SETTINGS[name];
    const env = input.env[envName(d.flag)];
    if (flagValues.has(name)) {
      out[name] = parseOne(name, flagValues.get(name), 'flag');
      sources[name] = 'flag';
    } else if (env !== undefined && !NON_SETTING_ENV.has(envName(d.flag))) {
      out[name] = parseOne(name, env, 'env');
      sources[name] = 'env';
    } else if (fileValues.has(d.key)) {
      out[name] = parseOne(name, fileValues.get(d.key), 'file', configFile);
      sources[name] = 'file';
    } else {
      sources[name] = 'default';
      if (typeof d.default === 'function') computed.push(name);
      else out[name] = d.default;
    }
  }
  for (const name of computed) {
    const fn = SETTINGS[name].default as (s: Readonly<Record<string, unknown>>) => unknown;
    out[name] = fn(out);
  }
  const settings = out as Settings;
  validateTogether(settings, sources, configFile, input.serves ?? true);
  return configFile === undefined ? { settings, sources } : { settings, sources, configFile };
}

/**
 * For a `siglake` command: the settings from `argv` and the environment; when
 * they are invalid, the one `siglake: …` line on stderr and undefined (the
 * command then exits 2). Any other error is thrown.
 */
export function loadCommandSettings(argv: string[], o: { command: string; serves?: boolean }): LoadedSettings | undefined {
  try {
    return loadSettings({ argv, env: process.env, serves: o.serves ?? false, command: o.command });
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`siglake: ${e.message}\n`);
      return undefined;
    }
    throw e;
  }
}

/**
 * A ConfigError raised after loading by a component that checks a setting's
 * value further (a JWKS file's keys, a tenant list) names the setting's key
 * (ConfigError.ofSetting); this adds where the value came from, in the same
 * form as the loader's own refusals. Other errors keep their message.
 */
export function withSource(err: ConfigError, loaded: LoadedSettings): string {
  const name = err.settingKey === undefined ? undefined : byKey.get(err.settingKey);
  if (name === undefined) return err.message;
  return `invalid ${err.settingKey} (${where(name, loaded.sources[name], loaded.configFile)}): ${err.detail}`;
}

/** Rules that involve more than one setting. */
function validateTogether(s: Settings, sources: Record<SettingName, Source>, file: string | undefined, serves: boolean): void {
  const at = (n: SettingName) => where(n, sources[n], file);
  if (s.tenantClaim !== undefined && s.oidcIssuer === undefined) {
    throw new ConfigError(`invalid ingester.tenantClaim (${at('tenantClaim')}): needs OIDC (set auth.oidc.issuer)`);
  }
  // Two listeners of one process on one port: the second bind fails with EADDRINUSE only after the
  // WAL, the catalog and the warehouse were made. A wildcard host takes the port on every address.
  const clash = (a: 'httpListen' | 'grpcListen' | 'metricsListen', b: 'httpListen' | 'grpcListen', why: string): void => {
    const overlap = listenersOverlap(s[a]!, s[b]);
    if (overlap === undefined) return;
    const same = overlap === 'same' ? `the same address as ${SETTINGS[b].key} (${at(b)})` : `an address that overlaps ${SETTINGS[b].key} (${at(b)}): ${overlap}`;
    throw new ConfigError(`invalid ${SETTINGS[a].key} (${at(a)}): ${same}; ${why}`);
  };
  clash('grpcListen', 'httpListen', 'OTLP/HTTP and OTLP/gRPC need a port each');
  if (s.metricsListen !== undefined) {
    clash('metricsListen', 'httpListen', '/metrics needs a port of its own');
    clash('metricsListen', 'grpcListen', '/metrics needs a port of its own');
  }
  if (!s.warehousePath.startsWith('s3://')) {
    // Iceberg files inside the WAL root read as lanes to recovery and verify, and WAL lanes inside a
    // warehouse as a table's files to another engine's orphan clean-up.
    const wal = nodePath.resolve(s.walDir);
    const wh = nodePath.resolve(s.warehousePath.replace(/^file:\/\//, ''));
    const inside = (a: string, b: string) => a === b || a.startsWith(b.endsWith(nodePath.sep) ? b : b + nodePath.sep);
    if (inside(wal, wh) || inside(wh, wal)) {
      throw new ConfigError(`invalid warehouse.path (${at('warehousePath')}): ${s.warehousePath} overlaps ingester.walDir (${at('walDir')}) ${s.walDir}; give each its own directory`);
    }
  }
  // The query server's pairs, named with their source (its own checks, without one, stay behind these).
  if (s.queryTenantClaim !== undefined && s.oidcIssuer === undefined) {
    throw new ConfigError(`invalid query.oidc.tenantClaim (${at('queryTenantClaim')}): needs OIDC (set auth.oidc.issuer)`);
  }
  if (s.queryShardToken !== undefined && s.queryShardTokenFile !== undefined) {
    // Which one a node presents would be a silent choice, and both sides must agree.
    throw new ConfigError(`invalid query.shardTokenFile (${at('queryShardTokenFile')}): query.shardToken is set too (${at('queryShardToken')}); set one of them`);
  }
  if (s.queryAllowedTenants.length > 0 && s.queryTenantClaim === undefined) {
    throw new ConfigError(`invalid query.allowedTenants (${at('queryAllowedTenants')}): needs query.oidc.tenantClaim (without a claim every query reads main)`);
  }
  if (s.oidcIssuer === undefined) {
    for (const n of ['oidcAudience', 'oidcJwksFile'] as const) {
      if (s[n] !== undefined) throw new ConfigError(`invalid ${SETTINGS[n].key} (${at(n)}): needs auth.oidc.issuer`);
    }
    if (sources.oidcJwksUrl !== 'default') {
      throw new ConfigError(`invalid auth.oidc.jwksUrl (${at('oidcJwksUrl')}): needs auth.oidc.issuer`);
    }
  }
  if (serves && s.oidcJwksFile !== undefined) {
    try {
      fs.accessSync(s.oidcJwksFile, fs.constants.R_OK);
    } catch {
      throw new ConfigError(`invalid auth.oidc.jwksFile (${at('oidcJwksFile')}): cannot read ${s.oidcJwksFile}`);
    }
  }
  if (serves && s.authBearerTokensFile !== undefined) {
    try {
      fs.accessSync(s.authBearerTokensFile, fs.constants.R_OK);
    } catch {
      throw new ConfigError(
        `invalid auth.bearerTokensFile (${at('authBearerTokensFile')}): cannot read ${s.authBearerTokensFile}`,
      );
    }
  }
  if (!s.warehousePath.startsWith('s3://')) {
    for (const n of ['warehouseS3Endpoint', 'warehouseS3Region'] as const) {
      if (s[n] !== undefined) throw new ConfigError(`invalid ${SETTINGS[n].key} (${at(n)}): needs an s3:// warehouse.path`);
    }
  }
  if (s.oidcAlgorithms.length === 0) {
    throw new ConfigError(`invalid auth.oidc.algorithms (${at('oidcAlgorithms')}): must name at least one algorithm`);
  }
  if (s.rateLimitPerSec > 0 && s.rateLimitBurst / s.rateLimitPerSec > 1000) {
    throw new ConfigError(
      `invalid ingester.rateLimit.burst (${at('rateLimitBurst')}): burst / ratePerSec must be at most 1000 s, got ${(
        s.rateLimitBurst / s.rateLimitPerSec
      ).toFixed(1)} s`,
    );
  }
  if (s.rateLimitPerSec === 0 && s.rateLimitGlobalPerSec > 0) {
    throw new ConfigError(
      `invalid ingester.rateLimit.globalRatePerSec (${at('rateLimitGlobalPerSec')}): needs ingester.rateLimit.ratePerSec > 0 (the rate limiter is off while it is 0)`,
    );
  }
  if (s.rateLimitGlobalPerSec > 0 && s.rateLimitGlobalBurst / s.rateLimitGlobalPerSec > 1000) {
    throw new ConfigError(
      `invalid ingester.rateLimit.globalBurst (${at('rateLimitGlobalBurst')}): globalBurst / globalRatePerSec must be at most 1000 s, got ${(
        s.rateLimitGlobalBurst / s.rateLimitGlobalPerSec
      ).toFixed(1)} s`,
    );
  }
}

/** `host:port` as written in a flag (`[v6]:port` for IPv6). */
function showAddress(a: ListenAddress): string {
  return `${a.host.includes(':') ? `[${a.host}]` : a.host}:${a.port}`;
}

/**
 * Whether two listen addresses would take the same port: `same` (one address),
 * a sentence saying how they overlap, or undefined. Port 0 never clashes (the
 * OS picks a free one). `::` takes the port on every IPv6 and IPv4 address
 * (Node and uWebSockets.js bind it dual-stack), `0.0.0.0` on every IPv4 one;
 * `localhost` may resolve to 127.0.0.1 or ::1. Other host names are compared
 * as written: what they resolve to is not known here.
 */
export function listenersOverlap(a: ListenAddress, b: ListenAddress): 'same' | string | undefined {
  if (a.port === 0 || a.port !== b.port) return undefined;
  const ha = canonicalHost(a.host);
  const hb = canonicalHost(b.host);
  if (ha === hb) return 'same';
  const kind = (h: string): 'any' | 'any4' | 'v4' | 'v6' | 'localhost' | 'name' =>
    h === '::' ? 'any' : h === '0.0.0.0' ? 'any4' : h === 'localhost' ? 'localhost' : isIP(h) === 4 ? 'v4' : isIP(h) === 6 ? 'v6' : 'name';
  const ka = kind(ha);
  const kb = kind(hb);
  const both = `${showAddress(a)} and ${showAddress(b)}`;
  for (const [k, other, wild] of [[ka, kb, a], [kb, ka, b]] as const) {
    if (k === 'any') return `${both} (${showAddress(wild)} takes port ${a.port} on every address)`;
    if (k === 'any4' && (other === 'v4' || other === 'localhost')) return `${both} (${showAddress(wild)} takes port ${a.port} on every IPv4 address)`;
  }
  const loopback = (h: string) => h === '::1' || h === '127.0.0.1';
  if ((ka === 'localhost' && loopback(hb)) || (kb === 'localhost' && loopback(ha))) return `${both} (localhost is a loopback address)`;
  return undefined;
}

/** A host as one address is written once: lower case, IPv6 compressed, an IPv4-mapped IPv6 address as IPv4. */
function canonicalHost(host: string): string {
  const h = host.toLowerCase();
  if (isIP(h) !== 6) return h;
  let v6: string;
  try {
    v6 = new URL(`http://[${h}]/`).hostname.slice(1, -1);
  } catch {
    return h;
  }
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(v6);
  if (mapped === null) return v6 === '::0' ? '::' : v6;
  const hi = parseInt(mapped[1]!, 16);
  const lo = parseInt(mapped[2]!, 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}
