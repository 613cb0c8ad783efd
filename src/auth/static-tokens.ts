// Static bearer tokens (`auth.bearerTokens`, `--auth-bearer-tokens`,
// `--auth-bearer-tokens-file`).
//
// Comparison in time that does not depend on the token's contents: the
// presented token is hashed to a fixed-length SHA-256 digest, and that digest
// is compared with the digest of every configured token, all of them, with no
// early exit, by OR-ing the XOR of eight 32-bit words and turning the result
// into 0/1 with arithmetic, never a branch on the data. Comparing digests also
// makes the comparison harmless even if it leaked timing: an attacker learns
// about digest bytes, which cannot be steered toward a token (preimage
// resistance). The time depends only on the presented token's length (the
// hash) and on how many tokens are configured, neither of them secret.
// Configured tokens are kept only as digests.
//
// This does the same as crypto.timingSafeEqual over each digest, about four
// times faster on this path (one hash to a string instead of to a Buffer, and
// no native call per configured token): see perf/auth-cache.bench.ts.

import * as crypto from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ConfigError } from '../errors.js';

/** A presented token longer than this is refused without hashing it. */
export const MAX_STATIC_TOKEN_LENGTH = 8192;

/**
 * Read a token file: one token per line; blank lines and lines starting with
 * `#` (after leading whitespace) are ignored; surrounding whitespace is
 * trimmed. An unreadable file is a ConfigError naming the path. No token text
 * ever appears in an error.
 */
export function loadTokenFile(path: string): string[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code ?? 'read failed';
    throw ConfigError.ofSetting('auth.bearerTokensFile', `cannot read ${path} (${why})`);
  }
  const tokens: string[] = [];
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (line === '' || line.startsWith('#')) continue;
    if (!isUsableToken(line)) {
      throw ConfigError.ofSetting('auth.bearerTokensFile', `${path} line ${i + 1} holds a token with whitespace or control characters`,
      );
    }
    tokens.push(line);
  }
  return tokens;
}

/** A token a client can send as `Bearer <token>`: non-empty, no whitespace or control characters. */
/** SHA-256 of `t` as a 32-character latin1 string (crypto.hash needs Node ≥ 20.12). */
const sha256: (t: string) => string =
  typeof crypto.hash === 'function'
    ? (t) => crypto.hash('sha256', t, 'binary')
    : (t) => crypto.createHash('sha256').update(t).digest('binary');

/** Write the 32-byte digest string `d` as eight int32 words at `out[at..at+8)`. */
function toWords(d: string, out: Int32Array, at: number): void {
  for (let w = 0; w < 8; w++) {
    const i = w * 4;
    out[at + w] = (d.charCodeAt(i) << 24) | (d.charCodeAt(i + 1) << 16) | (d.charCodeAt(i + 2) << 8) | d.charCodeAt(i + 3);
  }
}

function isUsableToken(t: string): boolean {
  if (t.length === 0 || t.length > MAX_STATIC_TOKEN_LENGTH) return false;
  for (let i = 0; i < t.length; i++) {
    const c = t.charCodeAt(i);
    if (c <= 0x20 || c === 0x7f) return false;
  }
  return true;
}

export class StaticTokenAuth {
  /** Eight int32 words per configured token's digest, back to back. */
  readonly #digests: Int32Array;
  readonly #count: number;
  /** The presented token's digest words; reused by every call. */
  readonly #presented = new Int32Array(8);

  /**
   * @param tokens the accepted tokens (duplicates are folded). At least one is
   *   required; each must be non-empty and free of whitespace and control
   *   characters, else a ConfigError that names the position, not the token.
   */
  constructor(tokens: readonly string[]) {
    if (tokens.length === 0) throw ConfigError.ofSetting('auth.bearerTokens', 'the list of static tokens is empty');
    const seen = new Set<string>();
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i];
      if (typeof t !== 'string' || !isUsableToken(t)) {
        throw ConfigError.ofSetting('auth.bearerTokens', `entry ${i + 1} is empty, too long or holds whitespace or control characters`,
        );
      }
      seen.add(sha256(t));
    }
    this.#count = seen.size;
    this.#digests = new Int32Array(8 * seen.size);
    let at = 0;
    for (const d of seen) {
      toWords(d, this.#digests, at);
      at += 8;
    }
  }

  /** How many distinct tokens are configured. */
  get size(): number {
    return this.#count;
  }

  /** True when `token` is one of the configured tokens. Constant time in the token contents. */
  verify(token: string): boolean {
    if (token.length === 0 || token.length > MAX_STATIC_TOKEN_LENGTH) return false;
    const p = this.#presented;
    toWords(sha256(token), p, 0);
    const d = this.#digests;
    const n = this.#count;
    let match = 0;
    for (let j = 0; j < n; j++) {
      const o = j * 8;
      const diff =
        (p[0] ^ d[o]) |
        (p[1] ^ d[o + 1]) |
        (p[2] ^ d[o + 2]) |
        (p[3] ^ d[o + 3]) |
        (p[4] ^ d[o + 4]) |
        (p[5] ^ d[o + 5]) |
        (p[6] ^ d[o + 6]) |
        (p[7] ^ d[o + 7]);
      // 1 when diff is 0, else 0, without a branch.
      match |= ((diff | -diff) >>> 31) ^ 1;
    }
    return match === 1;
  }
}
