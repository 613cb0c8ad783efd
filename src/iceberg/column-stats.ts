// Per-field metrics of one data file, as Iceberg manifests carry them so that
// engines can prune files without opening them: value counts and null counts
// for every field id (map keys and values included), and lower/upper bounds
// for top-level primitive columns in Iceberg's single-value binary form
// (spec Appendix D): int 4 bytes LE, long and timestamptz 8 bytes LE, string
// UTF-8. String bounds are truncated to 16 code points like Iceberg Java's
// default `truncate(16)` metrics mode: the lower bound is a prefix, the upper
// bound a prefix with its last code point incremented.

import type { TableSchema } from './table-schema.js';

const TRUNCATE = 16;

type Bound = bigint | number | string | boolean;

class FieldStats {
  values = 0;
  nulls = 0;
  min: Bound | null = null;
  max: Bound | null = null;
}

export interface FieldMetrics {
  readonly valueCounts: Map<number, bigint>;
  readonly nullValueCounts: Map<number, bigint>;
  readonly lowerBounds: Map<number, Uint8Array>;
  readonly upperBounds: Map<number, Uint8Array>;
}

export class ColumnStats {
  readonly #schema: TableSchema;
  readonly #fields = new Map<number, FieldStats>();

  constructor(schema: TableSchema) {
    this.#schema = schema;
    for (const c of schema.columns) {
      this.#fields.set(c.id, new FieldStats());
      if (c.type === 'map') {
        this.#fields.set(c.keyId!, new FieldStats());
        this.#fields.set(c.valueId!, new FieldStats());
      }
    }
  }

  /** Accounts for column `index` of a batch (values as the batch holds them). */
  observe(index: number, values: readonly unknown[]): void {
    const c = this.#schema.columns[index]!;
    const f = this.#fields.get(c.id)!;
    f.values += values.length;
    if (c.type === 'map') {
      const k = this.#fields.get(c.keyId!)!;
      const v = this.#fields.get(c.valueId!)!;
      for (const m of values as ([string, string | null][] | null)[]) {
        if (m === null) {
          f.nulls++;
          continue;
        }
        k.values += m.length;
        v.values += m.length;
        for (const e of m) if (e[1] === null) v.nulls++;
      }
      return;
    }
    let min = f.min;
    let max = f.max;
    if (c.type === 'string') {
      for (const x of values as (string | null)[]) {
        if (x === null) {
          f.nulls++;
          continue;
        }
        // min <= max: a new minimum is never a new maximum.
        if (min === null) min = max = x;
        else if (compareCodePoints(x, min as string) < 0) min = x;
        else if (compareCodePoints(x, max as string) > 0) max = x;
      }
    } else {
      for (const x of values as (bigint | number | boolean | null)[]) {
        if (x === null) {
          f.nulls++;
          continue;
        }
        if (min === null) min = max = x;
        else if (below(x, min as bigint | number | boolean)) min = x;
        else if (below(max as bigint | number | boolean, x)) max = x;
      }
    }
    f.min = min;
    f.max = max;
  }

  metrics(): FieldMetrics {
    const out: FieldMetrics = {
      valueCounts: new Map(),
      nullValueCounts: new Map(),
      lowerBounds: new Map(),
      upperBounds: new Map(),
    };
    for (const [id, f] of this.#fields) {
      out.valueCounts.set(id, BigInt(f.values));
      out.nullValueCounts.set(id, BigInt(f.nulls));
      const c = this.#schema.column(id);
      if (c === undefined || f.min === null || f.max === null) continue;
      const lower = encodeBound(c.type, f.min, 'lower');
      const upper = encodeBound(c.type, f.max, 'upper');
      if (lower !== null) out.lowerBounds.set(id, lower);
      if (upper !== null) out.upperBounds.set(id, upper);
    }
    return out;
  }
}

/** Iceberg's single-value serialization of a bound; null when no valid bound exists. */
export function encodeBound(type: string, v: Bound, side: 'lower' | 'upper'): Uint8Array | null {
  switch (type) {
    case 'int': {
      const b = Buffer.alloc(4);
      b.writeInt32LE(v as number, 0);
      return b;
    }
    case 'long':
    case 'timestamptz': {
      const b = Buffer.alloc(8);
      b.writeBigInt64LE(BigInt(v), 0);
      return b;
    }
    case 'double': {
      const b = Buffer.alloc(8);
      b.writeDoubleLE(v as number, 0);
      return b;
    }
    case 'boolean':
      return Uint8Array.of((v as unknown as boolean) ? 1 : 0);
    case 'string': {
      const s = side === 'lower' ? truncateLower(v as string) : truncateUpper(v as string);
      return s === null ? null : Buffer.from(s, 'utf8');
    }
    default:
      return null;
  }
}

/** Compares strings by Unicode code point (the order of their UTF-8 bytes), not by UTF-16 unit. */
export function compareCodePoints(a: string, b: string): number {
  if (a === b) return 0; // most often the same string: a row group repeats its resource's values
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    // Surrogates (code points ≥ U+10000) sort after U+E000–U+FFFF.
    if (x >= 0xd800) x = x < 0xe000 ? x + 0x2000 : x - 0x800;
    if (y >= 0xd800) y = y < 0xe000 ? y + 0x2000 : y - 0x800;
    return x - y;
  }
  return a.length - b.length;
}

/**
 * The first `n` code points of `s`, and one more when there is one: enough to
 * tell whether it is longer. (Array.from of the whole value passed V8's
 * longest array for a value of about 134 million characters, and the table
 * holding it failed every round.)
 */
function headCodePoints(s: string, n: number): string[] {
  const out: string[] = [];
  for (const cp of s) {
    out.push(cp);
    if (out.length > n) break;
  }
  return out;
}

function truncateLower(s: string): string {
  const cps = headCodePoints(s, TRUNCATE);
  return cps.length <= TRUNCATE ? s : cps.slice(0, TRUNCATE).join('');
}

function truncateUpper(s: string): string | null {
  const cps = headCodePoints(s, TRUNCATE);
  if (cps.length <= TRUNCATE) return s;
  const head = cps.slice(0, TRUNCATE);
  for (let i = head.length - 1; i >= 0; i--) {
    let cp = head[i]!.codePointAt(0)! + 1;
    if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xe000;
    if (cp <= 0x10ffff) return head.slice(0, i).join('') + String.fromCodePoint(cp);
  }
  return null;
}

/** a < b in Iceberg's order of values, where −0.0 precedes +0.0 (a bound must hold for both). */
function below(a: bigint | number | boolean, b: bigint | number | boolean): boolean {
  return a < b || (a === 0 && b === 0 && Object.is(a, -0) && Object.is(b, 0));
}
