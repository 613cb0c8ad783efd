// Content-Encoding: gzip. The decompressed size counts against the request
// size limit (contract §3), so inflation stops as soon as it passes the cap:
// a gzip bomb costs at most about `maxBytes` of memory and the time to inflate
// that much, never its full size.

import { constants, gunzipSync } from 'node:zlib';
import { BodyError } from '../errors.js';

interface ZlibFailure {
  code?: unknown;
  message?: unknown;
}

/**
 * Inflate a gzip body (one or more members) of at most `maxBytes` decompressed
 * bytes. Throws BodyError SIGLAKE_BODY_TOO_LARGE (413) past the cap and
 * SIGLAKE_BAD_BODY (400) for anything that is not complete, valid gzip
 * (including an empty body and trailing garbage).
 */
export function gunzipCapped(body: Uint8Array, maxBytes: number): Uint8Array {
  let out: Uint8Array;
  try {
    out = gunzipSync(body, {
      maxOutputLength: Math.max(1, maxBytes),
      chunkSize: chunkSizeFor(body.length, maxBytes),
    });
  } catch (err) {
    const e = err as ZlibFailure;
    if (e.code === 'ERR_BUFFER_TOO_LARGE') {
      throw tooLarge(maxBytes);
    }
    if (typeof e.code === 'string' && e.code.startsWith('Z_')) {
      // zlib's messages ("incorrect header check", "unexpected end of file") name no content.
      throw new BodyError('SIGLAKE_BAD_BODY', `invalid gzip body: ${String(e.message)} (${e.code})`);
    }
    throw err;
  }
  // zlib's cap is at least 1 byte; a cap of 0 is enforced here.
  if (out.length > maxBytes) throw tooLarge(maxBytes);
  return out;
}

/**
 * Output chunk size: about 4x the compressed size (OTLP protobuf inflates 3-10x),
 * between 16 KiB and 1 MiB, and never above the cap. Fewer, larger chunks are
 * faster for big bodies; small bodies keep small chunks (an output that fits
 * one chunk is returned as a view of it, so a huge chunk would pin memory).
 */
function chunkSizeFor(compressed: number, maxBytes: number): number {
  let size = constants.Z_DEFAULT_CHUNK;
  while (size < compressed * 4 && size < 1 << 20) size *= 2;
  return Math.max(constants.Z_MIN_CHUNK, Math.min(size, maxBytes + 1));
}

function tooLarge(maxBytes: number): BodyError {
  return new BodyError('SIGLAKE_BODY_TOO_LARGE', `gzip body inflates past the ${maxBytes}-byte request limit`);
}
