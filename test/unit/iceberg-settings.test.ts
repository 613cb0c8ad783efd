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

  it('take an s3:// warehouse with its endpoint, region and path style, and no credentials', () => {
    const s = load(['--warehouse', 's3://lake-bucket/prod/siglake/', '--warehouse-s3-endpoint', 'http://seaweedfs:8333', '--warehouse-s3-force-path-style'], {
      SIGLAKE_WAREHOUSE_S3_REGION: 'eu-west-1',
    });
    expect(s).toMatchObject({
      warehousePath: 's3://lake-bucket/prod/siglake/',
      warehouseS3Endpoint: 'http://seaweedfs:8333',
      warehouseS3Region: 'eu-west-1',
      warehouseS3ForcePathStyle: true,
    });
    expect(SETTINGS.warehouseS3Endpoint.key).toBe('warehouse.s3.endpoint');
    expect(SETTINGS.warehouseS3Region.key).toBe('warehouse.s3.region');
    expect(SETTINGS.warehouseS3ForcePathStyle.key).toBe('warehouse.s3.forcePathStyle');
    expect(load([]).warehouseS3ForcePathStyle).toBe(false);
    // Credentials are the AWS chain's business: no setting holds a key.
    expect(Object.values(SETTINGS).filter((d) => /s3/i.test(d.key)).map((d) => d.key).sort()).toEqual([
      'warehouse.s3.endpoint',
      'warehouse.s3.forcePathStyle',
      'warehouse.s3.region',
    ]);
  });

  it('refuse a bad object-store URI and S3 settings without an s3:// warehouse, naming the setting', () => {
    const refusal = (argv: string[]): string => {
      try {
        load(argv);
      } catch (e) {
        expect(e).toBeInstanceOf(ConfigError);
        return (e as Error).message;
      }
      throw new Error(`accepted ${argv.join(' ')}`);
    };
    expect(refusal(['--warehouse', 'gs://bucket/x'])).toMatch(/^invalid warehouse\.path \(flag --warehouse\): must be a local directory or s3:/);
    expect(refusal(['--warehouse', 's3://'])).toMatch(/^invalid warehouse\.path .*s3:\/\/<bucket>/);
    expect(refusal(['--warehouse', 's3://Bad_Bucket/x'])).toMatch(/^invalid warehouse\.path .*not a valid S3 bucket name/);
    expect(refusal(['--warehouse', 's3://bucket/a/../b'])).toMatch(/^invalid warehouse\.path .*bad prefix segment/);
    expect(refusal(['--warehouse-s3-endpoint', 'http://s3:8333'])).toMatch(/^invalid warehouse\.s3\.endpoint \(flag --warehouse-s3-endpoint\): needs an s3:\/\/ warehouse\.path/);
    expect(refusal(['--warehouse-s3-region', 'us-east-1'])).toMatch(/^invalid warehouse\.s3\.region .*needs an s3:\/\/ warehouse\.path/);
    expect(refusal(['--warehouse', 's3://bkt/x', '--warehouse-s3-endpoint', 'ftp://s3'])).toMatch(/^invalid warehouse\.s3\.endpoint .*http or https URL/);
  });
});
