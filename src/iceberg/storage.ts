// What the Iceberg writer needs from a warehouse: write a whole object
// durably, stream a large one, read one back, delete one. Locations are full
// URIs (`file:///…` here; `s3://bucket/…` for an S3-compatible store later),
// because Iceberg metadata stores every path as a URI that other engines open.

import { IcebergError } from './iceberg-error.js';

const NAME_RE = /^[A-Za-z0-9_.=-]+$/;

/** Whether `s` may be one segment of a warehouse location: letters, digits, _ . = -, and neither `.` nor `..`. */
export function isPlainSegment(s: string): boolean {
  return NAME_RE.test(s) && s !== '.' && s !== '..';
}

/** `rootUri/seg/…` for {@link ObjectStorage.locationOf}; a segment that is not plain is SIGLAKE_ICEBERG_ARGUMENT. */
export function locationUnder(rootUri: string, segments: readonly string[]): string {
  for (const s of segments) {
    if (!isPlainSegment(s)) throw new IcebergError('SIGLAKE_ICEBERG_ARGUMENT', `bad warehouse path segment ${JSON.stringify(s)}`);
  }
  return `${rootUri}/${segments.join('/')}`;
}

export interface ObjectSink {
  /** Appends bytes; they may be buffered until close(). */
  write(bytes: Uint8Array): Promise<void>;
  /** Makes the object durable and visible at its location; returns its size in bytes. */
  close(): Promise<number>;
  /** Drops what was written; nothing appears at the location. */
  abort(): Promise<void>;
}

export interface ObjectStorage {
  /** The URI of the warehouse root, without a trailing slash. */
  readonly rootUri: string;
  /** A location under the root from path segments (each a plain name). */
  locationOf(...segments: string[]): string;
  /** Writes an object that must not exist yet, atomically and durably. */
  putNew(location: string, bytes: Uint8Array): Promise<void>;
  /** Starts streaming an object that must not exist yet. */
  openSink(location: string): Promise<ObjectSink>;
  get(location: string): Promise<Uint8Array>;
  /** Deletes an object; a missing one is not an error. */
  delete(location: string): Promise<void>;
}

/**
 * Whether a failed read says the object is not there (a local ENOENT, S3's
 * 404 / NoSuchKey), through the `cause` chain the storages wrap errors in.
 * Anything else (a 503, EIO, a timeout) says nothing about the object.
 */
export function isNotFound(e: unknown): boolean {
  let c: unknown = e;
  for (let depth = 0; depth < 8 && c !== null && typeof c === 'object'; depth++) {
    const x = c as { code?: unknown; name?: unknown; $metadata?: { httpStatusCode?: number }; cause?: unknown };
    if (x.code === 'ENOENT' || x.name === 'NoSuchKey' || x.name === 'NotFound' || x.$metadata?.httpStatusCode === 404) return true;
    c = x.cause;
  }
  return false;
}
