// The help formatters: human units for defaults, word wrap, first sentence,
// and the command → categories mapping covering every category.

import { describe, expect, it } from 'vitest';
import { COMMANDS, commandHelp, commandSettings, firstSentence, humanBytes, humanDefault, wrap } from '../../src/config/help.js';
import { loadSettings } from '../../src/config/load.js';
import { SETTINGS, settingNames } from '../../src/config/settings.js';

describe('help formatters', () => {
  it('shows bytes in binary units when exact', () => {
    expect(humanBytes(16 * 1024 * 1024)).toBe('16 MiB');
    expect(humanBytes(64 * 1024 * 1024)).toBe('64 MiB');
    expect(humanBytes(1024)).toBe('1 KiB');
    expect(humanBytes(1500)).toBe('1,500 B');
    expect(humanBytes(3 * 1024 ** 3)).toBe('3 GiB');
  });

  it('shows defaults with the unit of the flag', () => {
    expect(humanDefault('maxRequestBytes')).toBe('16 MiB');
    expect(humanDefault('requestTimeoutSecs')).toBe('30 s');
    expect(humanDefault('walFsyncIntervalMs')).toBe('100 ms');
    expect(humanDefault('allowUwsFallback')).toBe('off');
    expect(humanDefault('compactorEnabled')).toBe('on');
    expect(humanDefault('oidcTokenCacheSize')).toBe('10,000');
    expect(humanDefault('memBreakerLimitMib')).toBe('0 (off)');
    // A KiB setting showed a bare "1,024"; a computed burst "ratePerSec" (it is rounded up, at least 1).
    expect(humanDefault('walDirectRoundKib')).toBe('1 MiB');
    expect(humanDefault('rateLimitBurst')).toBe('ratePerSec rounded up, at least 1');
    const help = commandHelp('ingest', 120)!;
    expect(help).toMatch(/^  --wal-direct-round-kib KIB  default 1 MiB /m);
    expect(help).toMatch(/^  --rate-limit-burst N  /m);
    expect(help).toMatch(/^  --warehouse-s3-endpoint URL  /m);
  });

  it('wraps on words within the width, indented', () => {
    const lines = wrap('one two three four five six seven eight nine ten eleven twelve', 26, 4);
    for (const l of lines) expect(l.length).toBeLessThanOrEqual(26);
    expect(lines.every((l) => l.startsWith('    '))).toBe(true);
    expect(lines.join(' ').replace(/\s+/g, ' ').trim()).toBe('one two three four five six seven eight nine ten eleven twelve');
  });

  it('cuts a doc at its first sentence, not inside backticks', () => {
    expect(firstSentence('Log level. Telemetry never appears.')).toBe('Log level.');
    expect(firstSentence('Uses `a. b` here. More.')).toBe('Uses `a. b` here.');
    expect(firstSentence('No full stop')).toBe('No full stop');
  });

  it('every settings category is in some command help, and every help fits its width', () => {
    const shown = new Set<string>();
    for (const name of Object.keys(COMMANDS)) {
      for (const width of [40, 80, 120]) {
        const text = commandHelp(name, width)!;
        for (const l of text.split('\n')) expect([...l].length).toBeLessThanOrEqual(width);
      }
      const text = commandHelp(name, 80)!;
      for (const n of settingNames()) if (text.includes(`${SETTINGS[n].flag} `)) shown.add(SETTINGS[n].category);
    }
    expect([...shown].sort()).toEqual([...new Set(settingNames().map((n) => SETTINGS[n].category))].sort());
    expect(commandHelp('nope')).toBeUndefined();
  });
});

describe('the flags a command takes', () => {
  it('its help lists exactly the settings the loader lets its command line set', () => {
    for (const name of Object.keys(COMMANDS)) {
      const text = commandHelp(name, 120)!;
      const listed = settingNames().filter((n) => new RegExp(`^  ${SETTINGS[n].flag}( |$)`, 'm').test(text));
      expect(listed, name).toEqual([...commandSettings(name)!]);
    }
  });

  it('a flag the command does not read is refused; the same setting from the env or a file is not', () => {
    const argv = ['--workers', '2'];
    expect(() => loadSettings({ argv, env: {}, command: 'query' })).toThrow(
      'flag --workers is not a setting of siglake query (it reads no such value; `siglake query --help` lists its flags)',
    );
    expect(loadSettings({ argv, env: {}, command: 'ingest' }).settings.workers).toBe(2);
    const q = loadSettings({ argv: [], env: { SIGLAKE_WORKERS: '3' }, command: 'query' });
    expect(q.settings.workers).toBe(3);
    // The query server reads the tenants file (declared tenants) and the shutdown timeout; its help says so.
    expect(commandSettings('query')!.has('tenantsFile')).toBe(true);
    expect(commandSettings('query')!.has('shutdownTimeoutSecs')).toBe(true);
    // ...and the request timeout (a stalled body is answered 408), which it refused as a flag.
    expect(commandSettings('query')!.has('requestTimeoutSecs')).toBe(true);
    // compact and drain read the WAL root, not the ingester's WAL tuning.
    for (const c of ['compact', 'drain']) {
      expect(commandSettings(c)!.has('walDir'), c).toBe(true);
      expect(commandSettings(c)!.has('walFsync'), c).toBe(false);
    }
  });

  it('SIGLAKE_LOG_FORMAT takes json or pretty; anything else is refused, not ignored', () => {
    expect(() => loadSettings({ argv: [], env: { SIGLAKE_LOG_FORMAT: 'xml' } })).toThrow(
      'invalid env SIGLAKE_LOG_FORMAT: "xml" is neither json nor pretty',
    );
    for (const f of ['json', 'pretty']) expect(loadSettings({ argv: [], env: { SIGLAKE_LOG_FORMAT: f } }).settings.logLevel).toBe('info');
  });
});
