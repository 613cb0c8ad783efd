// JSON with 64-bit integers kept whole. Iceberg metadata carries snapshot ids
// that other engines draw from the full signed 64-bit range; JSON.parse would
// round them. parse() returns integers outside ±(2^53 − 1) as bigint, and
// stringify() writes bigints as plain JSON numbers, so a metadata file another
// writer made survives a read-modify-write unchanged.

import { IcebergError } from './iceberg-error.js';

export type JsonValue = null | boolean | number | bigint | string | JsonValue[] | { [key: string]: JsonValue };

export class LosslessJson {
  readonly #text: string;
  #pos = 0;

  private constructor(text: string) {
    this.#text = text;
  }

  static parse(text: string): JsonValue {
    const p = new LosslessJson(text);
    p.#ws();
    const v = p.#value();
    p.#ws();
    if (p.#pos !== text.length) p.#fail('trailing characters');
    return v;
  }

  static stringify(value: JsonValue): string {
    if (value === null) return 'null';
    switch (typeof value) {
      case 'bigint':
        return value.toString();
      case 'number':
        if (!Number.isFinite(value)) throw new IcebergError('SIGLAKE_ICEBERG_METADATA', `cannot write ${value} in JSON`);
        return JSON.stringify(value);
      case 'boolean':
      case 'string':
        return JSON.stringify(value);
      default:
        break;
    }
    if (Array.isArray(value)) return `[${value.map((v) => LosslessJson.stringify(v)).join(',')}]`;
    const parts: string[] = [];
    for (const [k, v] of Object.entries(value)) {
      if (v === undefined) continue;
      parts.push(`${JSON.stringify(k)}:${LosslessJson.stringify(v)}`);
    }
    return `{${parts.join(',')}}`;
  }

  #fail(why: string): never {
    throw new IcebergError('SIGLAKE_ICEBERG_METADATA', `bad JSON at offset ${this.#pos}: ${why}`);
  }

  #ws(): void {
    const t = this.#text;
    while (this.#pos < t.length) {
      const c = t.charCodeAt(this.#pos);
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
      this.#pos++;
    }
  }

  #value(): JsonValue {
    const t = this.#text;
    const c = t[this.#pos];
    if (c === '{') return this.#object();
    if (c === '[') return this.#array();
    if (c === '"') return this.#string();
    if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) return this.#number();
    for (const [word, v] of [['true', true], ['false', false], ['null', null]] as const) {
      if (t.startsWith(word, this.#pos)) {
        this.#pos += word.length;
        return v;
      }
    }
    return this.#fail('unexpected character');
  }

  #object(): JsonValue {
    const out: { [key: string]: JsonValue } = {};
    this.#pos++;
    this.#ws();
    if (this.#text[this.#pos] === '}') {
      this.#pos++;
      return out;
    }
    for (;;) {
      this.#ws();
      if (this.#text[this.#pos] !== '"') this.#fail('expected a key');
      const k = this.#string();
      this.#ws();
      if (this.#text[this.#pos] !== ':') this.#fail("expected ':'");
      this.#pos++;
      this.#ws();
      out[k] = this.#value();
      this.#ws();
      const d = this.#text[this.#pos++];
      if (d === '}') return out;
      if (d !== ',') this.#fail("expected ',' or '}'");
    }
  }

  #array(): JsonValue {
    const out: JsonValue[] = [];
    this.#pos++;
    this.#ws();
    if (this.#text[this.#pos] === ']') {
      this.#pos++;
      return out;
    }
    for (;;) {
      this.#ws();
      out.push(this.#value());
      this.#ws();
      const d = this.#text[this.#pos++];
      if (d === ']') return out;
      if (d !== ',') this.#fail("expected ',' or ']'");
    }
  }

  #string(): string {
    const t = this.#text;
    const start = this.#pos;
    this.#pos++;
    let simple = true;
    for (;;) {
      const c = t.charCodeAt(this.#pos);
      if (Number.isNaN(c)) this.#fail('unterminated string');
      if (c === 0x22) break;
      if (c === 0x5c) {
        simple = false;
        this.#pos += 2;
        continue;
      }
      this.#pos++;
    }
    this.#pos++;
    const raw = t.slice(start, this.#pos);
    if (simple) return raw.slice(1, -1);
    try {
      return JSON.parse(raw) as string;
    } catch {
      return this.#fail('bad string escape');
    }
  }

  #number(): number | bigint {
    const t = this.#text;
    const start = this.#pos;
    let integer = true;
    while (this.#pos < t.length) {
      const c = t[this.#pos]!;
      if ((c >= '0' && c <= '9') || c === '-') this.#pos++;
      else if (c === '.' || c === 'e' || c === 'E' || c === '+') {
        integer = false;
        this.#pos++;
      } else break;
    }
    const raw = t.slice(start, this.#pos);
    const n = Number(raw);
    if (Number.isNaN(n)) this.#fail('bad number');
    if (integer && !Number.isSafeInteger(n)) return BigInt(raw);
    return n;
  }
}
