// Parsers for setting values. Each takes the raw value as it came from a flag
// or env var (always a string) or from YAML (any scalar or a list) and returns
// the typed value, or throws a ValueError whose message says what is wrong.
// The loader adds which setting and which source.

export class ValueError extends Error {
  readonly code = 'SIGLAKE_CONFIG_VALUE';
}

export type Parser<T> = (raw: unknown) => T;

export interface ListenAddress {
  host: string;
  port: number;
}

/**
 * A number read from a YAML file, with the text it was written as. A number
 * setting takes the number (`0x1F` is 31, as YAML says); a string setting
 * takes the text as written, not the number's shortest form (`010` stays
 * `010`, `1.10` stays `1.10`: a token, a path or a catalog name read as a
 * number would otherwise change silently).
 */
export class YamlNumber {
  constructor(
    readonly value: number,
    readonly source: string,
  ) {}
}

/** The number a YAML number stands for; any other value as it is. */
function numeric(raw: unknown): unknown {
  return raw instanceof YamlNumber ? raw.value : raw;
}

function describe(raw: unknown): string {
  if (raw instanceof YamlNumber) return raw.source;
  if (typeof raw === 'string') return JSON.stringify(raw);
  if (raw === null) return 'null';
  if (Array.isArray(raw)) return 'a list';
  if (typeof raw === 'object') return 'a map';
  return String(raw);
}

export function integer(opts: { min?: number; max?: number } = {}): Parser<number> {
  const min = opts.min ?? 0;
  const max = opts.max ?? Number.MAX_SAFE_INTEGER;
  return (raw) => {
    let n: number;
    const v = numeric(raw);
    if (typeof v === 'number') n = v;
    else if (typeof raw === 'string' && /^-?\d+$/.test(raw.trim())) n = Number(raw.trim());
    else throw new ValueError(`must be an integer, got ${describe(raw)}`);
    if (!Number.isSafeInteger(n)) throw new ValueError(`must be an integer, got ${describe(raw)}`);
    if (n < min) throw new ValueError(min === 0 ? `must not be negative, got ${n}` : `must be at least ${min}, got ${n}`);
    if (n > max) throw new ValueError(`must be at most ${max}, got ${n}`);
    return n;
  };
}

export function number(opts: { min?: number; max?: number } = {}): Parser<number> {
  const min = opts.min ?? 0;
  const max = opts.max ?? Number.MAX_VALUE;
  return (raw) => {
    let n: number;
    const v = numeric(raw);
    if (typeof v === 'number') n = v;
    else if (typeof raw === 'string' && /^-?(\d+\.?\d*|\.\d+)$/.test(raw.trim())) n = Number(raw.trim());
    else throw new ValueError(`must be a number, got ${describe(raw)}`);
    if (!Number.isFinite(n)) throw new ValueError(`must be a finite number, got ${describe(raw)}`);
    if (n < min) throw new ValueError(min === 0 ? `must not be negative, got ${n}` : `must be at least ${min}, got ${n}`);
    if (n > max) throw new ValueError(`must be at most ${max}, got ${n}`);
    return n;
  };
}

export const boolean: Parser<boolean> = (raw) => {
  if (typeof raw === 'boolean') return raw;
  if (typeof raw === 'string') {
    const s = raw.trim().toLowerCase();
    if (s === 'true' || s === '1' || s === 'yes') return true;
    if (s === 'false' || s === '0' || s === 'no') return false;
  }
  throw new ValueError(`must be true or false, got ${describe(raw)}`);
};

export function string(opts: { nonEmpty?: boolean } = {}): Parser<string> {
  return (raw) => {
    if (raw instanceof YamlNumber) raw = raw.source;
    else if (typeof raw === 'number') raw = String(raw);
    if (typeof raw !== 'string') throw new ValueError(`must be a string, got ${describe(raw)}`);
    if (opts.nonEmpty && raw.trim() === '') throw new ValueError('must not be empty');
    return raw;
  };
}

export function oneOf<T extends string>(values: readonly T[]): Parser<T> {
  return (raw) => {
    if (typeof raw === 'string' && (values as readonly string[]).includes(raw)) return raw as T;
    throw new ValueError(`must be one of ${values.join(', ')}, got ${describe(raw)}`);
  };
}

/** A comma list on flags and env vars, a YAML list (or comma string) in files. Empty items are dropped. */
export function list(item: Parser<string> = string()): Parser<string[]> {
  return (raw) => {
    let parts: unknown[];
    if (Array.isArray(raw)) parts = raw;
    else if (typeof raw === 'string') parts = raw.split(',').map((s) => s.trim()).filter((s) => s !== '');
    else throw new ValueError(`must be a list, got ${describe(raw)}`);
    return parts.map((p, i) => {
      try {
        return item(p);
      } catch (e) {
        throw new ValueError(`item ${i + 1}: ${(e as Error).message}`);
      }
    });
  };
}

/** `host:port`, `:port` (all interfaces) or `[v6]:port`. Port 0 asks the OS for a free port. */
export const listenAddress: Parser<ListenAddress> = (raw) => {
  if (typeof raw !== 'string') throw new ValueError(`must be host:port, got ${describe(raw)}`);
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\s]*)):(\d{1,5})$/.exec(raw.trim());
  if (!m) throw new ValueError(`must be host:port, got ${describe(raw)}`);
  const port = Number(m[3]);
  if (port > 65535) throw new ValueError(`port must be 0-65535, got ${port}`);
  const host = m[1] ?? (m[2] === '' ? '0.0.0.0' : m[2]!);
  return { host, port };
};

export function url(protocols: readonly string[]): Parser<string> {
  return (raw) => {
    if (typeof raw !== 'string') throw new ValueError(`must be a URL, got ${describe(raw)}`);
    let u: URL;
    try {
      u = new URL(raw);
    } catch {
      throw new ValueError('must be a URL');
    }
    if (!protocols.includes(u.protocol)) {
      throw new ValueError(`must be a ${protocols.map((p) => p.replace(/:$/, '')).join(' or ')} URL`);
    }
    return raw;
  };
}
