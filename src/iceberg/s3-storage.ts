// The S3-compatible warehouse: objects under `s3://<bucket>/<prefix>/`, read
// and written with @aws-sdk/client-s3 (AWS S3, SeaweedFS, MinIO, Ceph RGW, …).
//
// Credentials come only from the SDK's default provider chain (environment
// variables, shared config/credentials profile, web identity token, container
// and instance metadata); nothing secret is ever in Siglake's settings.
//
// An object that must not exist yet is written with `If-None-Match: *` when
// the store honours it (S3 since 2024, and most compatible stores): a 412
// refuses an overwrite. Whether the store honours it is probed once, at open:
// a conditional PUT of a probe object twice must fail the second time. A store
// that rejects or ignores the header gets a HEAD before the write instead (a
// race window, harmless here: every name Siglake writes carries a random UUID,
// and a commit's atomicity is the catalog's compare-and-set, not the store's).
//
// Large objects (data files) stream through a multipart upload: parts of
// `partBytes` are uploaded as they fill, one at a time, so a sink holds at
// most two parts in memory; a small object is one PUT. Every request is
// retried by the SDK's standard strategy (exponential backoff with jitter on
// throttling, 5xx and network errors), up to `maxAttempts`; a connection
// idle for `idleTimeoutMs` counts as a network error.

import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { IcebergError } from './iceberg-error.js';
import { parseS3Uri, type S3Location } from './s3-uri.js';
import { isPlainSegment, locationUnder, type ObjectSink, type ObjectStorage } from './storage.js';

export { parseS3Uri };

/** S3's smallest part (every part but the last). */
export const MIN_PART_BYTES = 5 * 1024 * 1024;
const DEFAULT_PART_BYTES = 8 * 1024 * 1024;
const DEFAULT_MAX_ATTEMPTS = 8;

export interface S3StorageOptions {
  /** `s3://bucket[/prefix]`: the warehouse root. */
  readonly uri: string;
  /** An S3-compatible endpoint (`http://127.0.0.1:8333`); unset: AWS S3 for the region. */
  readonly endpoint?: string | undefined;
  /** Unset: the SDK's chain (AWS_REGION, the profile's region). */
  readonly region?: string | undefined;
  /** Path-style requests (`endpoint/bucket/key`), as most self-hosted stores need. */
  readonly forcePathStyle?: boolean | undefined;
  /** Multipart part size; at least 5 MiB. Default 8 MiB. */
  readonly partBytes?: number | undefined;
  /** SDK attempts per request (retries with backoff). Default 8. */
  readonly maxAttempts?: number | undefined;
  /**
   * A request whose connection sees no byte for this long fails (and is
   * retried): a store that hangs must not hang the compactor. Default 30 s.
   */
  readonly idleTimeoutMs?: number | undefined;
}

type Conditional = 'unknown' | 'supported' | 'unsupported';

export class S3Storage implements ObjectStorage {
  readonly rootUri: string;
  readonly bucket: string;
  readonly prefix: string;
  readonly client: S3Client;
  readonly partBytes: number;
  #conditional: Conditional = 'unknown';

  constructor(opts: S3StorageOptions) {
    let loc: S3Location;
    try {
      loc = parseS3Uri(opts.uri);
    } catch (e) {
      throw new IcebergError('SIGLAKE_ICEBERG_ARGUMENT', `warehouse ${opts.uri}: ${(e as Error).message}`);
    }
    this.bucket = loc.bucket;
    this.prefix = loc.prefix;
    this.rootUri = `s3://${loc.bucket}${loc.prefix === '' ? '' : `/${loc.prefix}`}`;
    this.partBytes = Math.max(MIN_PART_BYTES, opts.partBytes ?? DEFAULT_PART_BYTES);
    const config: S3ClientConfig = {
      maxAttempts: opts.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
      retryMode: 'standard',
      forcePathStyle: opts.forcePathStyle ?? false,
      // Checksums only where an operation requires them: many S3-compatible
      // stores refuse the SDK's default CRC trailers on streaming uploads.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      // The SDK's defaults wait forever on a connection that stops answering.
      requestHandler: { connectionTimeout: 10_000, socketTimeout: opts.idleTimeoutMs ?? 30_000 },
    };
    if (opts.endpoint !== undefined) config.endpoint = opts.endpoint;
    if (opts.region !== undefined) config.region = opts.region;
    this.client = new S3Client(config);
  }

  /**
   * Opens the warehouse: checks that the bucket can be written, read and
   * deleted from with the credentials at hand, and finds out whether the store
   * honours `If-None-Match: *`. Throws SIGLAKE_ICEBERG_STORAGE saying which
   * step failed.
   */
  static async open(opts: S3StorageOptions): Promise<S3Storage> {
    const s = new S3Storage(opts);
    await s.probe();
    return s;
  }

  /** Whether writes of new objects are conditional on the store (known after open()). */
  get conditionalWrites(): boolean {
    return this.#conditional === 'supported';
  }

  async probe(): Promise<void> {
    const key = this.#key(`.siglake/probe-${randomUUID()}`);
    const body = Buffer.from('siglake warehouse probe\n');
    try {
      try {
        await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, IfNoneMatch: '*' }));
      } catch (e) {
        if (!conditionalRefused(e)) throw e;
        this.#conditional = 'unsupported';
        await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body }));
      }
      const got = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      await got.Body?.transformToByteArray();
      if (this.#conditional === 'unknown') {
        try {
          await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, IfNoneMatch: '*' }));
          this.#conditional = 'unsupported'; // the header was ignored
        } catch (e) {
          if (isPreconditionFailed(e)) this.#conditional = 'supported';
          else if (conditionalRefused(e)) this.#conditional = 'unsupported';
          else throw e;
        }
      }
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
    } catch (e) {
      throw s3Error('probe (put, get, delete)', `s3://${this.bucket}/${key}`, e);
    }
  }

  locationOf(...segments: string[]): string {
    return locationUnder(this.rootUri, segments);
  }

  /** The object key behind a location; refuses anything outside the root. */
  keyOf(location: string): string {
    if (!location.startsWith(this.rootUri + '/')) {
      throw new IcebergError('SIGLAKE_ICEBERG_ARGUMENT', `location outside the warehouse: ${location}`);
    }
    const rel = location.slice(this.rootUri.length + 1);
    for (const seg of rel.split('/')) {
      if (!isPlainSegment(seg)) {
        throw new IcebergError('SIGLAKE_ICEBERG_ARGUMENT', `bad warehouse location ${location}`);
      }
    }
    return this.#key(rel);
  }

  async putNew(location: string, bytes: Uint8Array): Promise<void> {
    const key = this.keyOf(location);
    await this.#putNewKey(key, bytes, location);
  }

  async openSink(location: string): Promise<ObjectSink> {
    return new S3Sink(this, this.keyOf(location), location);
  }

  async get(location: string): Promise<Uint8Array> {
    const key = this.keyOf(location);
    try {
      const r = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      if (r.Body === undefined) throw new Error('empty response body');
      return await r.Body.transformToByteArray();
    } catch (e) {
      throw s3Error('read', location, e);
    }
  }

  /** Streams an object into a new local file; returns its size (ObjectCache uses it). */
  async downloadTo(location: string, path: string): Promise<number> {
    const key = this.keyOf(location);
    try {
      const r = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      if (r.Body === undefined) throw new Error('empty response body');
      const out = createWriteStream(path, { flags: 'wx' });
      await pipeline(r.Body as Readable, out);
      return out.bytesWritten;
    } catch (e) {
      throw s3Error('download', location, e);
    }
  }

  /** Bytes [start, end] (inclusive) of an object. */
  async getRange(location: string, start: number, end: number): Promise<Uint8Array> {
    const key = this.keyOf(location);
    try {
      const r = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key, Range: `bytes=${start}-${end}` }));
      if (r.Body === undefined) throw new Error('empty response body');
      return await r.Body.transformToByteArray();
    } catch (e) {
      throw s3Error('read', location, e);
    }
  }

  /** An object's size, or null when it does not exist. */
  async size(location: string): Promise<number | null> {
    const key = this.keyOf(location);
    try {
      const h = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return h.ContentLength ?? 0;
    } catch (e) {
      if (isNotFound(e)) return null;
      throw s3Error('head', location, e);
    }
  }

  async delete(location: string): Promise<void> {
    const key = this.keyOf(location);
    try {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
    } catch (e) {
      if (isNotFound(e)) return;
      throw s3Error('delete', location, e);
    }
  }

  /** Releases the SDK's sockets. */
  close(): void {
    this.client.destroy();
  }

  #key(rel: string): string {
    return this.prefix === '' ? rel : `${this.prefix}/${rel}`;
  }

  async #putNewKey(key: string, bytes: Uint8Array, location: string): Promise<void> {
    try {
      if (this.#conditional === 'supported') {
        await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: bytes, ContentLength: bytes.length, IfNoneMatch: '*' }));
        return;
      }
      await this.assertAbsent(key, location);
      await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: bytes, ContentLength: bytes.length }));
    } catch (e) {
      // A retried PUT whose first attempt landed sees its own object: same ETag (the MD5 of a single PUT).
      if (isPreconditionFailed(e) && (await this.#etag(key)) === md5Hex(bytes)) return;
      if (e instanceof IcebergError) throw e;
      throw s3Error('write', location, e);
    }
  }

  /** For stores without conditional writes: refuse when the key exists. */
  async assertAbsent(key: string, location: string): Promise<void> {
    if (this.#conditional === 'supported') return;
    if ((await this.#etag(key)) !== null) throw new IcebergError('SIGLAKE_ICEBERG_STORAGE', `write ${location} failed: the object exists`);
  }

  async #etag(key: string): Promise<string | null> {
    try {
      const h = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return (h.ETag ?? '').replace(/"/g, '');
    } catch (e) {
      if (isNotFound(e)) return null;
      throw e;
    }
  }

  /** @internal for S3Sink */
  get conditionalState(): Conditional {
    return this.#conditional;
  }

  /** @internal for S3Sink: a small object in one PUT. */
  putSmall(key: string, bytes: Uint8Array, location: string): Promise<void> {
    return this.#putNewKey(key, bytes, location);
  }

  /** @internal for S3Sink */
  etagOf(key: string): Promise<string | null> {
    return this.#etag(key);
  }
}

class S3Sink implements ObjectSink {
  readonly #s: S3Storage;
  readonly #key: string;
  readonly #location: string;
  #chunks: Uint8Array[] = [];
  #buffered = 0;
  #size = 0;
  #uploadId: string | null = null;
  readonly #parts: { PartNumber: number; ETag: string }[] = [];
  readonly #partMd5s: Buffer[] = [];
  /** The part upload in flight (at most one). */
  #inflight: Promise<void> | null = null;
  #failed: unknown = null;
  #done = false;

  constructor(s: S3Storage, key: string, location: string) {
    this.#s = s;
    this.#key = key;
    this.#location = location;
  }

  async write(bytes: Uint8Array): Promise<void> {
    if (this.#done) throw new IcebergError('SIGLAKE_ICEBERG_STORAGE', `${this.#location}: sink already closed`);
    if (this.#failed !== null) throw s3Error('upload part of', this.#location, this.#failed);
    // Copy: the caller may reuse its buffer once write() resolves.
    this.#chunks.push(Uint8Array.from(bytes));
    this.#buffered += bytes.length;
    this.#size += bytes.length;
    if (this.#buffered >= this.#s.partBytes) await this.#flushPart();
  }

  async close(): Promise<number> {
    if (this.#done) throw new IcebergError('SIGLAKE_ICEBERG_STORAGE', `${this.#location}: sink already closed`);
    this.#done = true;
    try {
      if (this.#uploadId === null) {
        await this.#s.putSmall(this.#key, this.#take(), this.#location);
        return this.#size;
      }
      if (this.#buffered > 0) await this.#flushPart();
      await this.#inflight;
      if (this.#failed !== null) throw this.#failed;
      await this.#complete();
      return this.#size;
    } catch (e) {
      await this.#abortUpload();
      if (e instanceof IcebergError) throw e;
      throw s3Error('write', this.#location, e);
    }
  }

  async abort(): Promise<void> {
    if (this.#done) return;
    this.#done = true;
    this.#chunks = [];
    await this.#inflight?.catch(() => undefined);
    await this.#abortUpload();
  }

  #take(): Buffer {
    const b = Buffer.concat(this.#chunks);
    this.#chunks = [];
    this.#buffered = 0;
    return b;
  }

  /** Starts uploading what is buffered as the next part, after the previous one is done. */
  async #flushPart(): Promise<void> {
    await this.#inflight;
    if (this.#failed !== null) throw s3Error('upload part of', this.#location, this.#failed);
    const { client, bucket } = this.#s;
    if (this.#uploadId === null) {
      await this.#s.assertAbsent(this.#key, this.#location);
      try {
        const r = await client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: this.#key }));
        if (r.UploadId === undefined) throw new Error('no UploadId in the response');
        this.#uploadId = r.UploadId;
      } catch (e) {
        throw s3Error('start multipart upload of', this.#location, e);
      }
    }
    const body = this.#take();
    const partNumber = this.#partMd5s.length + 1;
    this.#partMd5s.push(createHash('md5').update(body).digest());
    const uploadId = this.#uploadId;
    this.#inflight = client
      .send(new UploadPartCommand({ Bucket: bucket, Key: this.#key, UploadId: uploadId, PartNumber: partNumber, Body: body, ContentLength: body.length }))
      .then(
        (r) => {
          this.#parts.push({ PartNumber: partNumber, ETag: r.ETag ?? '' });
        },
        (e: unknown) => {
          this.#failed = e;
        },
      );
  }

  async #complete(): Promise<void> {
    const { client, bucket } = this.#s;
    const conditional = this.#s.conditionalState === 'supported';
    if (!conditional) await this.#s.assertAbsent(this.#key, this.#location);
    this.#parts.sort((a, b) => a.PartNumber - b.PartNumber);
    try {
      await client.send(
        new CompleteMultipartUploadCommand({
          Bucket: bucket,
          Key: this.#key,
          UploadId: this.#uploadId!,
          MultipartUpload: { Parts: this.#parts },
          ...(conditional ? { IfNoneMatch: '*' } : {}),
        }),
      );
    } catch (e) {
      // A retried completion whose first attempt landed: the object's ETag is the multipart one of our parts.
      if (isPreconditionFailed(e)) {
        const mine = `${createHash('md5').update(Buffer.concat(this.#partMd5s)).digest('hex')}-${this.#partMd5s.length}`;
        if ((await this.#s.etagOf(this.#key)) === mine) {
          this.#uploadId = null;
          return;
        }
      }
      throw e;
    }
    this.#uploadId = null;
  }

  async #abortUpload(): Promise<void> {
    const id = this.#uploadId;
    if (id === null) return;
    this.#uploadId = null;
    await this.#s.client.send(new AbortMultipartUploadCommand({ Bucket: this.#s.bucket, Key: this.#key, UploadId: id })).catch(() => undefined);
  }
}

function statusOf(e: unknown): number | undefined {
  return (e as { $metadata?: { httpStatusCode?: number } } | null)?.$metadata?.httpStatusCode;
}

function isPreconditionFailed(e: unknown): boolean {
  return statusOf(e) === 412 || (e as { name?: string } | null)?.name === 'PreconditionFailed';
}

function isNotFound(e: unknown): boolean {
  const name = (e as { name?: string } | null)?.name;
  return statusOf(e) === 404 || name === 'NotFound' || name === 'NoSuchKey';
}

/** The store says it does not implement the conditional header (as opposed to an ordinary failure). */
function conditionalRefused(e: unknown): boolean {
  const name = (e as { name?: string } | null)?.name ?? '';
  const status = statusOf(e);
  return status === 501 || name === 'NotImplemented' || (status === 400 && /NotImplemented|InvalidArgument|InvalidRequest/.test(name));
}

function md5Hex(bytes: Uint8Array): string {
  return createHash('md5').update(bytes).digest('hex');
}

function s3Error(op: string, location: string, cause: unknown): IcebergError {
  if (cause instanceof IcebergError) return cause;
  const name = (cause as { name?: string } | null)?.name;
  const status = statusOf(cause);
  const why = [name, status === undefined ? undefined : `HTTP ${status}`].filter((x) => x !== undefined).join(', ');
  return new IcebergError('SIGLAKE_ICEBERG_STORAGE', `${op} ${location} failed${why === '' ? '' : ` (${why})`}: ${(cause as Error)?.message ?? String(cause)}`, {
    cause,
  });
}
