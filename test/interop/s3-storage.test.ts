// S3Storage (src/iceberg/s3-storage.ts) and ObjectCache against a real
// SeaweedFS S3 server: whole and multipart writes read back byte for byte,
// an existing object is never overwritten, an aborted or refused upload
// leaves nothing (no object, no pending multipart upload), locations outside
// the warehouse are refused, bad credentials fail at open, and the file cache
// serves S3 objects as local files within its budget.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { HeadObjectCommand, ListMultipartUploadsCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ObjectCache } from '../../src/iceberg/object-cache.js';
import { MIN_PART_BYTES, S3Storage, type S3StorageOptions } from '../../src/iceberg/s3-storage.js';
import { SeaweedFs } from '../helpers/seaweedfs.js';

const BUCKET = 'siglake-storage';

describe('S3Storage on SeaweedFS', () => {
  let sw: SeaweedFs;
  let storage: S3Storage;
  const savedEnv = { ...process.env };
  let opts: S3StorageOptions;

  beforeAll(async () => {
    sw = await SeaweedFs.start();
    await sw.createBucket(BUCKET);
    Object.assign(process.env, sw.env);
    opts = { uri: `s3://${BUCKET}/lake/`, endpoint: sw.endpoint, region: sw.region, forcePathStyle: true, partBytes: MIN_PART_BYTES };
    storage = await S3Storage.open(opts);
  });
  afterAll(async () => {
    storage?.close();
    process.env = savedEnv;
    await sw?.stop();
  });

  const pendingUploads = async () => (await sw.client.send(new ListMultipartUploadsCommand({ Bucket: BUCKET }))).Uploads ?? [];

  it('names locations as s3:// URIs under the prefix and refuses others', () => {
    expect(storage.rootUri).toBe(`s3://${BUCKET}/lake`);
    expect(storage.locationOf('tenant_acme', 'logs')).toBe(`s3://${BUCKET}/lake/tenant_acme/logs`);
    expect(() => storage.locationOf('..')).toThrow(/bad warehouse path segment/);
    for (const bad of [`s3://${BUCKET}/other/x`, `s3://another-bucket/lake/x`, `s3://${BUCKET}/lake/../x`, 'file:///etc/passwd']) {
      expect(() => storage.keyOf(bad)).toThrow(expect.objectContaining({ code: 'SIGLAKE_ICEBERG_ARGUMENT' }));
    }
  });

  it('writes a new object, reads it back, refuses to overwrite it, deletes it', async () => {
    // SeaweedFS honours If-None-Match: *, so the refusal is the store's own.
    expect(storage.conditionalWrites).toBe(true);
    const loc = storage.locationOf('ns', 't', 'metadata', '00000-a.metadata.json');
    await storage.putNew(loc, Buffer.from('{"v":1}'));
    expect(Buffer.from(await storage.get(loc)).toString()).toBe('{"v":1}');
    expect(await sw.keys(BUCKET, 'lake/ns/')).toEqual(['lake/ns/t/metadata/00000-a.metadata.json']);
    await expect(storage.putNew(loc, Buffer.from('{"v":2}'))).rejects.toMatchObject({ code: 'SIGLAKE_ICEBERG_STORAGE' });
    expect(Buffer.from(await storage.get(loc)).toString()).toBe('{"v":1}');
    await storage.delete(loc);
    await storage.delete(loc); // a missing object is not an error
    await expect(storage.get(loc)).rejects.toMatchObject({ code: 'SIGLAKE_ICEBERG_STORAGE' });
    expect(await storage.size(loc)).toBeNull();
  });

  it('streams a large object through a multipart upload', async () => {
    const loc = storage.locationOf('ns', 't', 'data', 'big.parquet');
    const sink = await storage.openSink(loc);
    const chunks: Buffer[] = [];
    for (let i = 0; i < 12; i++) {
      const c = Buffer.alloc(1024 * 1024, i);
      c.writeUInt32BE(i * 7919, 0);
      chunks.push(c);
      await sink.write(c);
    }
    // Nothing is visible before close.
    expect(await storage.size(loc)).toBeNull();
    expect(await sink.close()).toBe(12 * 1024 * 1024);
    const back = Buffer.from(await storage.get(loc));
    expect(back.equals(Buffer.concat(chunks))).toBe(true);
    // Three parts (5 + 5 + 2 MiB): the multipart ETag says how many.
    const head = await sw.client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'lake/ns/t/data/big.parquet' }));
    expect(head.ContentLength).toBe(12 * 1024 * 1024);
    expect(head.ETag).toMatch(/-3"?$/);
    expect(await pendingUploads()).toEqual([]);
    // A second sink to the same location is refused at completion, the first object intact.
    const again = await storage.openSink(loc);
    await expect((async () => {
      for (let i = 0; i < 6; i++) await again.write(Buffer.alloc(1024 * 1024, 0xee));
      await again.close();
    })()).rejects.toMatchObject({ code: 'SIGLAKE_ICEBERG_STORAGE' });
    expect(Buffer.from(await storage.get(loc)).equals(back)).toBe(true);
    expect(await pendingUploads()).toEqual([]);
  });

  it('leaves nothing behind when a sink is aborted, small or mid-multipart', async () => {
    const small = storage.locationOf('ns', 't', 'data', 'small-aborted.parquet');
    const s1 = await storage.openSink(small);
    await s1.write(Buffer.from('abc'));
    await s1.abort();
    const big = storage.locationOf('ns', 't', 'data', 'big-aborted.parquet');
    const s2 = await storage.openSink(big);
    for (let i = 0; i < 7; i++) await s2.write(Buffer.alloc(1024 * 1024, 1));
    await s2.abort();
    expect(await storage.size(small)).toBeNull();
    expect(await storage.size(big)).toBeNull();
    expect(await pendingUploads()).toEqual([]);
  });

  it('fails at open, saying so, with credentials the store refuses', async () => {
    const good = process.env['AWS_SECRET_ACCESS_KEY'];
    process.env['AWS_SECRET_ACCESS_KEY'] = 'not-the-secret';
    try {
      await expect(S3Storage.open({ ...opts, maxAttempts: 1 })).rejects.toMatchObject({
        code: 'SIGLAKE_ICEBERG_STORAGE',
        message: expect.stringMatching(/^probe \(put, get, delete\) s3:\/\/siglake-storage\/lake\/\.siglake\/probe-.* failed \(.*HTTP 403/),
      });
    } finally {
      process.env['AWS_SECRET_ACCESS_KEY'] = good;
    }
    await expect(S3Storage.open({ ...opts, uri: 's3://no-such-bucket-here/x', maxAttempts: 1 })).rejects.toMatchObject({ code: 'SIGLAKE_ICEBERG_STORAGE' });
  });

  it('fails a request to a store that stops answering instead of hanging, and works again once it answers', async () => {
    const loc = storage.locationOf('ns', 't', 'metadata', 'hang.json');
    await storage.putNew(loc, Buffer.from('x'));
    const impatient = await S3Storage.open({ ...opts, idleTimeoutMs: 1500, maxAttempts: 2 });
    try {
      sw.pause();
      try {
        await expect(impatient.get(loc)).rejects.toMatchObject({ code: 'SIGLAKE_ICEBERG_STORAGE' });
      } finally {
        sw.resume();
      }
      expect(Buffer.from(await impatient.get(loc)).toString()).toBe('x');
    } finally {
      impatient.close();
    }
  });

  it('serves S3 objects to readers as local files within the cache budget', async () => {
    const locs: string[] = [];
    for (let i = 0; i < 4; i++) {
      const loc = storage.locationOf('ns', 'cached', 'data', `f${i}.parquet`);
      await storage.putNew(loc, Buffer.alloc(300_000, i + 1));
      locs.push(loc);
    }
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'siglake-s3-cache-'));
    try {
      const cache = await ObjectCache.open({ storage, dir, maxBytes: 700_000 });
      const lease = await cache.acquire(locs.slice(0, 2));
      for (const [loc, file] of lease.paths) expect(fs.readFileSync(file).equals(Buffer.from(await storage.get(loc)))).toBe(true);
      await lease.release();
      await (await cache.acquire(locs.slice(2))).release();
      expect(cache.stats).toMatchObject({ misses: 4, evictions: 2, files: 2, bytes: 600_000 });
      expect(fs.readdirSync(dir)).toHaveLength(2);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
