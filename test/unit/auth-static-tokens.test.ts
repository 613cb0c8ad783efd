// StaticTokenAuth and loadTokenFile.

import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadTokenFile, MAX_STATIC_TOKEN_LENGTH, StaticTokenAuth } from '../../src/auth/static-tokens.js';
import { ConfigError } from '../../src/errors.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'siglake-tokens-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('loadTokenFile', () => {
  it('reads one token per line, skipping blanks and # comments, trimming, CRLF or LF', () => {
    const p = join(dir, 'tokens');
    writeFileSync(p, '# ingest tokens\n\nalpha-1\r\n   beta-2   \n\t# indented comment\n\ngamma-3');
    expect(loadTokenFile(p)).toEqual(['alpha-1', 'beta-2', 'gamma-3']);
  });

  it('an empty or comment-only file gives no tokens', () => {
    const p = join(dir, 'empty');
    writeFileSync(p, '# nothing yet\n\n');
    expect(loadTokenFile(p)).toEqual([]);
  });

  it('names the path of a missing or unreadable file', () => {
    const missing = join(dir, 'missing');
    expect(() => loadTokenFile(missing)).toThrow(ConfigError);
    expect(() => loadTokenFile(missing)).toThrow(missing);
    expect(() => loadTokenFile(dir)).toThrow(dir); // a directory is not readable as a file
    if (process.getuid?.() !== 0) {
      const locked = join(dir, 'locked');
      writeFileSync(locked, 'tok-1\n');
      chmodSync(locked, 0o000);
      expect(() => loadTokenFile(locked)).toThrow(/locked.*EACCES/);
    }
  });

  it('refuses a line with inner whitespace, naming the line and not the token', () => {
    const p = join(dir, 'spaced');
    writeFileSync(p, 'ok-token\nsecret part-two\n');
    let caught: unknown;
    try {
      loadTokenFile(p);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    expect((caught as Error).message).toContain('line 2');
    expect((caught as Error).message).not.toContain('secret');
    expect((caught as Error).message).not.toContain('part-two');
  });
});

describe('StaticTokenAuth', () => {
  it('accepts exactly the configured tokens', () => {
    const s = new StaticTokenAuth(['alpha-1', 'beta-2']);
    expect(s.verify('alpha-1')).toBe(true);
    expect(s.verify('beta-2')).toBe(true);
    for (const bad of ['alpha-', 'alpha-11', 'ALPHA-1', 'beta-2 ', '', 'gamma-3', 'x'.repeat(MAX_STATIC_TOKEN_LENGTH + 1)]) {
      expect(s.verify(bad)).toBe(false);
    }
  });

  it('folds duplicates and refuses an empty list or unusable entries without echoing them', () => {
    expect(new StaticTokenAuth(['a-1', 'a-1', 'b-2']).size).toBe(2);
    expect(() => new StaticTokenAuth([])).toThrow(ConfigError);
    for (const bad of ['', 'has space', 'tab\there', 'nl\nx']) {
      let caught: unknown;
      try {
        new StaticTokenAuth(['good-1', bad]);
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(ConfigError);
      expect((caught as Error).message).toContain('entry 2');
      if (bad.length > 0) expect((caught as Error).message).not.toContain(bad);
    }
  });

  it('compares every configured token: a match in any position is found', () => {
    const tokens = Array.from({ length: 50 }, (_, i) => `token-${i}-${'z'.repeat(i)}`);
    const s = new StaticTokenAuth(tokens);
    for (const t of tokens) expect(s.verify(t)).toBe(true);
    expect(s.verify('token-50')).toBe(false);
  });

  it('agrees with a plain set lookup on random tokens', () => {
    const configured = Array.from({ length: 64 }, () => randomBytes(24).toString('base64url'));
    const s = new StaticTokenAuth(configured);
    const set = new Set(configured);
    const probes = [...configured, ...Array.from({ length: 500 }, () => randomBytes(24).toString('base64url'))];
    for (const t of probes) expect(s.verify(t)).toBe(set.has(t));
  });
});
