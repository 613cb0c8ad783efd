// One line per record of an export request, for `siglake wal dump`: a log
// record's body (a string body as it is, any other AnyValue as compact JSON) or
// a span's name. Offline only: it allocates freely.

import { validateExportRequest } from './wire-validator.js';
import { WireType, type Signal } from './schema.js';

interface RawField {
  no: number;
  wt: number;
  /** Value bytes: the varint itself, the 4/8 fixed bytes, or a length-delimited value's content. */
  start: number;
  end: number;
}

/**
 * Describe each log record (logs) or span (traces) of `payload`, in order.
 * The payload is validated first, so a malformed one throws BodyError.
 * Where a singular field occurs more than once, the last occurrence is shown.
 */
export function describeRequest(signal: Signal, payload: Uint8Array): string[] {
  validateExportRequest(signal, payload);
  const lines: string[] = [];
  // Request → Resource{Logs,Spans} (1) → Scope{Logs,Spans} (2) → record (2).
  for (const resource of fieldsOf(payload, 0, payload.length)) {
    if (resource.no !== 1) continue;
    for (const scope of fieldsOf(payload, resource.start, resource.end)) {
      if (scope.no !== 2) continue;
      for (const record of fieldsOf(payload, scope.start, scope.end)) {
        if (record.no !== 2) continue;
        lines.push(signal === 'logs' ? logBody(payload, record) : spanName(payload, record));
      }
    }
  }
  return lines;
}

function logBody(bytes: Uint8Array, record: RawField): string {
  const body = last(fieldsOf(bytes, record.start, record.end), 5, WireType.LEN);
  if (!body) return '';
  const value = anyValueField(bytes, body);
  if (!value) return '';
  if (value.no === 1) return text(bytes, value.start, value.end);
  return anyValueJson(bytes, body);
}

function spanName(bytes: Uint8Array, span: RawField): string {
  const name = last(fieldsOf(bytes, span.start, span.end), 5, WireType.LEN);
  return name ? text(bytes, name.start, name.end) : '';
}

/** The AnyValue's set member (fields 1-7 form its oneof; the last one wins). */
function anyValueField(bytes: Uint8Array, any: RawField): RawField | undefined {
  let found: RawField | undefined;
  for (const f of fieldsOf(bytes, any.start, any.end)) if (f.no >= 1 && f.no <= 7) found = f;
  return found;
}

/** Compact JSON of an AnyValue: null when empty; 64-bit ints exact; bytes as base64; NaN/±Infinity as strings. */
function anyValueJson(bytes: Uint8Array, any: RawField): string {
  const v = anyValueField(bytes, any);
  if (!v) return 'null';
  switch (v.no) {
    case 1:
      return JSON.stringify(text(bytes, v.start, v.end));
    case 2:
      return varint(bytes, v.start) !== 0n ? 'true' : 'false';
    case 3:
      return BigInt.asIntN(64, varint(bytes, v.start)).toString();
    case 4: {
      const d = new DataView(bytes.buffer, bytes.byteOffset + v.start, 8).getFloat64(0, true);
      return Number.isFinite(d) ? JSON.stringify(d) : JSON.stringify(String(d));
    }
    case 5: {
      const items: string[] = [];
      for (const f of fieldsOf(bytes, v.start, v.end)) {
        if (f.no === 1 && f.wt === WireType.LEN) items.push(anyValueJson(bytes, f));
      }
      return `[${items.join(',')}]`;
    }
    case 6: {
      const entries: string[] = [];
      for (const kv of fieldsOf(bytes, v.start, v.end)) {
        if (kv.no !== 1 || kv.wt !== WireType.LEN) continue;
        const kvFields = fieldsOf(bytes, kv.start, kv.end);
        const key = last(kvFields, 1, WireType.LEN);
        const value = last(kvFields, 2, WireType.LEN);
        const keyText = key ? text(bytes, key.start, key.end) : '';
        entries.push(`${JSON.stringify(keyText)}:${value ? anyValueJson(bytes, value) : 'null'}`);
      }
      return `{${entries.join(',')}}`;
    }
    default:
      return JSON.stringify(view(bytes, v.start, v.end).toString('base64'));
  }
}

function view(bytes: Uint8Array, start: number, end: number): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset + start, end - start);
}

/** A string field's text (the validator has checked that it is UTF-8). */
function text(bytes: Uint8Array, start: number, end: number): string {
  return view(bytes, start, end).toString('utf8');
}

function last(fields: RawField[], no: number, wt: number): RawField | undefined {
  let found: RawField | undefined;
  for (const f of fields) if (f.no === no && f.wt === wt) found = f;
  return found;
}

function varint(bytes: Uint8Array, pos: number): bigint {
  let v = 0n;
  let shift = 0n;
  for (;;) {
    const b = bytes[pos++];
    v |= BigInt(b & 0x7f) << shift;
    if (b < 0x80) return v;
    shift += 7n;
  }
}

/** The fields of one message of an already validated payload. */
function fieldsOf(bytes: Uint8Array, start: number, end: number): RawField[] {
  const out: RawField[] = [];
  let pos = start;
  while (pos < end) {
    let tag = 0;
    let mul = 1;
    for (;;) {
      const b = bytes[pos++];
      tag += (b & 0x7f) * mul;
      if (b < 0x80) break;
      mul *= 128;
    }
    const no = Math.floor(tag / 8);
    const wt = tag % 8;
    let vStart = pos;
    if (wt === WireType.VARINT) {
      while (bytes[pos++] >= 0x80);
    } else if (wt === WireType.I64) {
      pos += 8;
    } else if (wt === WireType.I32) {
      pos += 4;
    } else {
      let len = 0;
      mul = 1;
      for (;;) {
        const b = bytes[pos++];
        len += (b & 0x7f) * mul;
        if (b < 0x80) break;
        mul *= 128;
      }
      vStart = pos;
      pos += len;
    }
    out.push({ no, wt, start: vStart, end: pos });
  }
  return out;
}
