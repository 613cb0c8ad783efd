// The bounded local file cache of warehouse objects (src/iceberg/object-cache.ts),
// over a real FileStorage warehouse with copying on (S3 is in
// test/interop/s3-storage.test.ts): bytes equal the object's, the budget holds
// once nothing is pinned, pinned files survive eviction, one download per
// location, and a restart reuses what is on disk.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FileStorage } from '../../src/iceberg/file-storage.js';
import { ObjectCache } from '../../src/iceberg/object-cache.js';

const dirs: string[] = [];
function tmp(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'siglake-cache-'));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

async function warehouseWith(n: number, size: number): Promise<{ storage: FileStorage; locations: string[] }> {
  const storage = new FileStorage(path.join(tmp(), 'warehouse'));
  const locations: string[] = [];
  for (let i = 0; i < n; i++) {
    const loc = storage.locationOf('ns', 't', 'data', `f${i}.parquet`);
    await storage.putNew(loc, Buffer.alloc(size, i + 1));
    locations.push(loc);
  }
  return { storage, locations };
}

const cachedFiles = (dir: string) => fs.readdirSync(dir).sort();

describe('ObjectCache', () => {
  it('gives local copies with the same bytes, keeping the extension', async () => {
    const { storage, locations } = await warehouseWith(2, 1000);
    const dir = tmp();
    const cache = await ObjectCache.open({ storage, dir, maxBytes: 10_000, copyLocal: true });
    const lease = await cache.acquire(locations);
    for (const loc of locations) {
      const p = lease.paths.get(loc)!;
      expect(path.dirname(p)).toBe(dir);
      expect(p.endsWith('.parquet')).toBe(true);
      expect(fs.readFileSync(p)).toEqual(Buffer.from(await storage.get(loc)));
    }
    await lease.release();
    expect(cache.stats).toMatchObject({ misses: 2, hits: 0, files: 2, bytes: 2000 });
    const again = await cache.acquire([locations[0]!]);
    await again.release();
    expect(cache.stats).toMatchObject({ misses: 2, hits: 1 });
  });

  it('evicts least recently used files past maxBytes, never a pinned one', async () => {
    const { storage, locations } = await warehouseWith(5, 1000);
    const dir = tmp();
    const cache = await ObjectCache.open({ storage, dir, maxBytes: 2500, copyLocal: true });
    const pinned = await cache.acquire([locations[0]!]);
    for (const loc of locations.slice(1)) await (await cache.acquire([loc])).release();
    // f0 is pinned; of the rest only the newest fit beside it.
    expect(cache.stats.bytes).toBeLessThanOrEqual(2500);
    expect(fs.existsSync(pinned.paths.get(locations[0]!)!)).toBe(true);
    expect(cachedFiles(dir)).toHaveLength(2);
    // A reader that needs more than the budget gets it while it holds the lease.
    const big = await cache.acquire(locations);
    expect([...big.paths.values()].every((p) => fs.existsSync(p))).toBe(true);
    expect(cache.stats.bytes).toBe(5000);
    await big.release();
    await pinned.release();
    expect(cache.stats.bytes).toBeLessThanOrEqual(2500);
    expect(cachedFiles(dir).length).toBe(cache.stats.files);
  });

  it('readers releasing at once leave at most maxBytes, and the count agrees with the disk', async () => {
    // Each release runs an eviction; run concurrently, two took out the same entry and
    // subtracted its size twice: the cache believed itself under maxBytes at 2 to 4 times it.
    const { storage, locations } = await warehouseWith(200, 1000);
    const dir = tmp();
    const cache = await ObjectCache.open({ storage, dir, maxBytes: 10_000, copyLocal: true });
    const onDisk = () => fs.readdirSync(dir).reduce((n, f) => n + fs.statSync(path.join(dir, f)).size, 0);
    for (let round = 0; round < 5; round++) {
      const leases = await Promise.all(locations.slice(round * 40, round * 40 + 40).map((l) => cache.acquire([l])));
      await Promise.all(leases.map((l) => l.release()));
      expect(onDisk()).toBeLessThanOrEqual(10_000);
      expect(cache.stats.bytes).toBe(onDisk());
      expect(cache.stats.files).toBe(fs.readdirSync(dir).length);
    }
  });

  it('downloads a location once for concurrent readers', async () => {
    const { storage, locations } = await warehouseWith(1, 50_000);
    const cache = await ObjectCache.open({ storage, dir: tmp(), maxBytes: 1_000_000, copyLocal: true });
    const leases = await Promise.all(Array.from({ length: 8 }, () => cache.acquire(locations)));
    expect(cache.stats.misses).toBe(1);
    expect(new Set(leases.map((l) => l.paths.get(locations[0]!))).size).toBe(1);
    for (const l of leases) await l.release();
  });

  it('reuses the files a previous life left and drops half-written ones', async () => {
    const { storage, locations } = await warehouseWith(3, 1000);
    const dir = tmp();
    const first = await ObjectCache.open({ storage, dir, maxBytes: 10_000, copyLocal: true });
    await (await first.acquire(locations)).release();
    fs.writeFileSync(path.join(dir, 'deadbeef.parquet.1234.part'), 'half');
    const second = await ObjectCache.open({ storage, dir, maxBytes: 10_000, copyLocal: true });
    expect(second.stats).toMatchObject({ files: 3, bytes: 3000 });
    expect(cachedFiles(dir).some((n) => n.endsWith('.part'))).toBe(false);
    await (await second.acquire(locations)).release();
    expect(second.stats).toMatchObject({ hits: 3, misses: 0 });
  });

  it('serves local warehouse files in place unless told to copy, and fails clearly on a missing object', async () => {
    const { storage, locations } = await warehouseWith(1, 10);
    const dir = tmp();
    const cache = await ObjectCache.open({ storage, dir, maxBytes: 100 });
    const lease = await cache.acquire(locations);
    expect(lease.paths.get(locations[0]!)).toBe(storage.pathOf(locations[0]!));
    expect(cachedFiles(dir)).toEqual([]);
    const copying = await ObjectCache.open({ storage, dir, maxBytes: 100, copyLocal: true });
    await expect(copying.acquire([storage.locationOf('ns', 't', 'data', 'missing.parquet')])).rejects.toMatchObject({ code: 'SIGLAKE_ICEBERG_STORAGE' });
    expect(cachedFiles(dir)).toEqual([]);
  });
});
