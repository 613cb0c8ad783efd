// The Iceberg settings of contract §10: names, defaults, and the catalog URL rule.

import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../src/config/load.js';
import { SETTINGS, envName } from '../../src/config/settings.js';
import { ConfigError } from '../../src/errors.js';

const load = (argv: string[], env: Record<string, string> = {}) => loadSettings({ argv, env }).settings;

describe('Iceberg settings (contract §10)', () => {
  it('have the contract names and defaults', () => {
    const rows = [
      ['catalogUrl', 'catalog.url', '--catalog-url', 'sqlite:./data/catalog.db'],
      ['catalogName', 'catalog.name', '--catalog-name', 'siglake'],
      ['warehousePath', 'warehouse.path', '--warehouse', './data/warehouse'],
      ['compactorEnabled', 'compactor.enabled', '--compactor', true],
      ['compactIntervalSecs', 'compactor.intervalSecs', '--compact-interval-secs', 30],
      ['walSegmentMaxAgeSecs', 'ingester.wal.segmentMaxAgeSecs', '--wal-segment-max-age-secs', 60],
    ] as const;
    const s = load([]);
    for (const [name, key, flag, def] of rows) {
      expect(SETTINGS[name].key).toBe(key);
      expect(SETTINGS[name].flag).toBe(flag);
      expect(s[name]).toBe(def);
    }
    expect(envName('--catalog-url')).toBe('SIGLAKE_CATALOG_URL');
  });

  it('take flags, env vars and booleans', () => {
    const s = load(['--catalog-url', 'postgres://u:p@db:5432/cat', '--compactor=false', '--compact-interval-secs', '5'], {
      SIGLAKE_WAREHOUSE: '/lake',
      SIGLAKE_CATALOG_NAME: 'prod',
    });
    expect(s).toMatchObject({ catalogUrl: 'postgres://u:p@db:5432/cat', compactorEnabled: false, compactIntervalSecs: 5, warehousePath: '/lake', catalogName: 'prod' });
    expect(load(['--catalog-url', 'postgresql://db/cat']).catalogUrl).toBe('postgresql://db/cat');
    expect(load(['--catalog-url', 'sqlite:/var/lib/siglake/catalog.db']).catalogUrl).toBe('sqlite:/var/lib/siglake/catalog.db');
  });

  it('refuse a catalog URL of another kind, naming the setting, and never print the URL', () => {
    for (const bad of ['mysql://db/cat', 'sqlite:', 'catalog.db', 'http://x']) {
      let err: unknown;
      try {
        load(['--catalog-url', bad]);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as Error).message).toMatch(/^invalid catalog\.url \(flag --catalog-url\): /);
    }
    expect(SETTINGS.catalogUrl.secret).toBe(true);
    expect(() => load(['--compact-interval-secs', '0'])).toThrow(ConfigError);
  });
});
