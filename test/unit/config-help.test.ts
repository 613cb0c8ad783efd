// The help formatters: human units for defaults, word wrap, first sentence,
// and the command → categories mapping covering every category.

import { describe, expect, it } from 'vitest';
import { COMMANDS, commandHelp, firstSentence, humanBytes, humanDefault, wrap } from '../../src/config/help.js';
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
