// `s3://bucket/prefix` URIs, without the SDK (the settings parser uses it).

import { isPlainSegment } from './storage.js';

const BUCKET_RE = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

export interface S3Location {
  readonly bucket: string;
  /** The key prefix without leading or trailing slashes ('' for the bucket root). */
  readonly prefix: string;
}

/** Splits `s3://bucket/prefix`; throws a plain Error saying why (the settings parser words it). */
export function parseS3Uri(uri: string): S3Location {
  const m = /^s3:\/\/([^/]+)(?:\/(.*))?$/.exec(uri);
  if (m === null) throw new Error('must be s3://<bucket>[/<prefix>]');
  const bucket = m[1]!;
  if (!BUCKET_RE.test(bucket) || bucket.includes('..')) throw new Error(`${JSON.stringify(bucket)} is not a valid S3 bucket name`);
  const prefix = (m[2] ?? '').replace(/^\/+|\/+$/g, '');
  for (const seg of prefix === '' ? [] : prefix.split('/')) {
    if (!isPlainSegment(seg)) throw new Error(`bad prefix segment ${JSON.stringify(seg)} (letters, digits, _ . = -)`);
  }
  return { bucket, prefix };
}
