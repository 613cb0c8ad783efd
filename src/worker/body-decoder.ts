// Turns a request body as it arrived (protobuf or OTLP/JSON, maybe gzipped)
// into the canonical protobuf the WAL stores, validating it fully first.
// Throws BodyError (400/413/415) for anything that is not a valid export
// request; nothing of such a body ever reaches a WAL file.

import { FLAG_GZIP, FLAG_JSON, signalOfFlags } from '../shard/frames.js';
import { gunzipCapped } from '../otlp/gzip.js';
import { otlpJsonToProtobuf } from '../otlp/json-decoder.js';
import { validateExportRequest } from '../otlp/wire-validator.js';

export class BodyDecoder {
  /** The canonical payload of the last decode(). */
  payload: Uint8Array = new Uint8Array(0);
  readonly #maxBytes: number;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  /** Decodes `body`; returns the record count and leaves the payload in `this.payload`. */
  decode(flags: number, body: Uint8Array): number {
    const signal = signalOfFlags(flags);
    let bytes = body;
    if ((flags & FLAG_GZIP) !== 0) bytes = gunzipCapped(bytes, this.#maxBytes);
    if ((flags & FLAG_JSON) !== 0) {
      const r = otlpJsonToProtobuf(signal, bytes);
      this.payload = r.payload;
      return r.records;
    }
    const records = validateExportRequest(signal, bytes);
    this.payload = bytes;
    return records;
  }
}
