// The exact protobuf wire walker for ExportLogsServiceRequest and
// ExportTraceServiceRequest: it checks that a body is well-formed against the
// schema in schema.ts and counts the log records or spans, without decoding
// anything into objects, and names the first thing wrong with a body that is
// not. It is the definition of what the ingester accepts and the source of
// every refusal message: wire-validator.ts runs a faster walk first and comes
// here only for a body that walk does not accept outright.
//
// Rules (a body that breaks one is a 400):
// - every varint ends within 10 bytes (a tag within 5) and fits 64 bits (32 for a tag);
// - every length-delimited value and fixed-size value ends inside its enclosing message;
// - field number 0, group wire types (3, 4) and wire types 6, 7 are refused, known or not;
// - a known field has exactly the wire type the schema gives it (no repeated scalar
//   field is reachable from these roots, so packed encoding never applies);
// - unknown fields with a valid wire type are skipped (proto3), after the checks above;
// - every string field is valid UTF-8;
// - trace ids are 0 or 16 bytes, span ids and parent span ids 0 or 8;
// - AnyValue nests at most MAX_ANY_VALUE_DEPTH levels.
//
// The walk is a loop over an explicit stack (one small array per call), so no body
// can drive it into deep recursion. Per field it allocates nothing, except the
// view handed to isUtf8 for a string that is long or not plain ASCII.

import { isUtf8 } from 'node:buffer';
import { BodyError } from '../errors.js';
import {
  CODE_COUNTS,
  CODE_ID_MASK,
  CODE_ID_SHIFT,
  CODE_KIND_MASK,
  CODE_KIND_SHIFT,
  CODE_MSG_SHIFT,
  CODE_WIRE_MASK,
  FIELD_CODES,
  Kind,
  MAX_ANY_VALUE_DEPTH,
  MESSAGES,
  MSG_BASE,
  MSG_MAX_FIELD,
  Msg,
  ROOT_MSG,
  WIRE_TYPE_NAMES,
  fieldOf,
  type MsgId,
  type Signal,
} from './schema.js';

/** Strings up to this length are checked for plain ASCII in JS before calling isUtf8. */
const ASCII_SCAN_MAX = 48;

const ANY_VALUE: number = Msg.AnyValue;
const KIND_STRING: number = Kind.STRING;
const KIND_BYTES: number = Kind.BYTES;
const KIND_MESSAGE: number = Kind.MESSAGE;

/**
 * Check that `bytes` is a well-formed export request of `signal` and return how
 * many log records (logs) or spans (traces) it holds. An empty body is a valid
 * empty request. Throws BodyError SIGLAKE_BAD_BODY naming the field and offset.
 */
export function validateExportRequestExact(signal: Signal, bytes: Uint8Array): number {
  const codes = FIELD_CODES;
  const base = MSG_BASE;
  const maxField = MSG_MAX_FIELD;
  // Frames of the enclosing messages: [end, msg] pairs.
  const stack: number[] = [];
  let sp = 0;
  let msg: number = ROOT_MSG[signal];
  if (msg === undefined) throw unknownSignal(signal);
  let end = bytes.length;
  let pos = 0;
  let count = 0;
  let anyDepth = 0;

  for (;;) {
    if (pos >= end) {
      if (sp === 0) return count;
      if (msg === ANY_VALUE) anyDepth--;
      msg = stack[--sp];
      end = stack[--sp];
      continue;
    }

    // Tag: a varint of at most 5 bytes below 2^32.
    const tagPos = pos;
    let tag = bytes[pos++];
    if (tag > 0x7f) {
      tag &= 0x7f;
      for (let shift = 7; ; shift += 7) {
        if (pos >= end) fail(`truncated tag at offset ${tagPos} in ${nameOf(msg)}`);
        const b = bytes[pos++];
        if (shift === 28) {
          if (b > 0x0f) fail(`tag varint too long at offset ${tagPos} in ${nameOf(msg)}`);
          tag += b * 0x10000000;
          break;
        }
        tag |= (b & 0x7f) << shift;
        if (b < 0x80) break;
      }
    }
    const fieldNo = tag >>> 3;
    const wt = tag & 7;
    if (fieldNo === 0) fail(`field number 0 at offset ${tagPos} in ${nameOf(msg)}`);
    const code = fieldNo <= maxField[msg] ? codes[base[msg] + fieldNo] : 0;
    if (code !== 0 && (code & CODE_WIRE_MASK) !== wt) {
      fail(
        `${label(msg, fieldNo)} has wire type ${wt} (${WIRE_TYPE_NAMES[wt]}) at offset ${tagPos}, ` +
          `expected ${code & CODE_WIRE_MASK} (${WIRE_TYPE_NAMES[code & CODE_WIRE_MASK]})`,
      );
    }

    if (wt === 0) {
      for (let n = 1; ; n++) {
        if (pos >= end) fail(`truncated varint in ${label(msg, fieldNo)} at offset ${tagPos}`);
        const b = bytes[pos++];
        if (b < 0x80) {
          if (n === 10 && b > 1) fail(`varint overflows 64 bits in ${label(msg, fieldNo)} at offset ${tagPos}`);
          break;
        }
        if (n === 10) fail(`varint longer than 10 bytes in ${label(msg, fieldNo)} at offset ${tagPos}`);
      }
    } else if (wt === 2) {
      if (pos >= end) fail(`truncated length in ${label(msg, fieldNo)} at offset ${tagPos}`);
      let len = bytes[pos++];
      if (len > 0x7f) {
        len &= 0x7f;
        let mul = 0x80;
        for (let n = 2; ; n++) {
          if (pos >= end) fail(`truncated length in ${label(msg, fieldNo)} at offset ${tagPos}`);
          const b = bytes[pos++];
          len += (b & 0x7f) * mul;
          if (b < 0x80) {
            if (n === 10 && b > 1) fail(`length varint overflows 64 bits in ${label(msg, fieldNo)} at offset ${tagPos}`);
            break;
          }
          if (n === 10) fail(`length varint longer than 10 bytes in ${label(msg, fieldNo)} at offset ${tagPos}`);
          mul *= 0x80;
        }
      }
      if (len > end - pos) {
        fail(
          `${label(msg, fieldNo)} at offset ${tagPos} declares ${len} bytes, ` +
            `past the end of the enclosing ${nameOf(msg)} (${end - pos} bytes left)`,
        );
      }
      if (code !== 0) {
        const kind = (code >>> CODE_KIND_SHIFT) & CODE_KIND_MASK;
        if (kind === KIND_MESSAGE) {
          const child = code >>> CODE_MSG_SHIFT;
          if (child === ANY_VALUE && ++anyDepth > MAX_ANY_VALUE_DEPTH) {
            fail(`AnyValue nested deeper than ${MAX_ANY_VALUE_DEPTH} levels at offset ${tagPos}`);
          }
          if ((code & CODE_COUNTS) !== 0) count++;
          stack[sp++] = end;
          stack[sp++] = msg;
          msg = child;
          end = pos + len;
          continue;
        }
        if (kind === KIND_STRING) {
          if (!utf8Ok(bytes, pos, pos + len)) fail(`invalid UTF-8 in ${label(msg, fieldNo)} at offset ${tagPos}`);
        } else if (kind === KIND_BYTES) {
          const idLen = (code >>> CODE_ID_SHIFT) & CODE_ID_MASK;
          if (idLen !== 0 && len !== 0 && len !== idLen) {
            fail(`${label(msg, fieldNo)} at offset ${tagPos} is ${len} bytes, must be 0 or ${idLen}`);
          }
        }
      }
      pos += len;
    } else if (wt === 1) {
      if (end - pos < 8) fail(`truncated fixed64 in ${label(msg, fieldNo)} at offset ${tagPos}`);
      pos += 8;
    } else if (wt === 5) {
      if (end - pos < 4) fail(`truncated fixed32 in ${label(msg, fieldNo)} at offset ${tagPos}`);
      pos += 4;
    } else {
      fail(`${label(msg, fieldNo)} has ${wt === 3 || wt === 4 ? 'group' : 'invalid'} wire type ${wt} at offset ${tagPos}`);
    }
  }
}

function utf8Ok(bytes: Uint8Array, start: number, end: number): boolean {
  if (end - start <= ASCII_SCAN_MAX) {
    while (start < end && bytes[start] < 0x80) start++;
    if (start === end) return true;
  }
  return isUtf8(new Uint8Array(bytes.buffer, bytes.byteOffset + start, end - start));
}

function nameOf(msg: number): string {
  return MESSAGES[msg].name;
}

/** `LogRecord.trace_id (field 9)`, or `field 99 of LogRecord` for an unknown field. */
function label(msg: number, fieldNo: number): string {
  const f = fieldOf(msg as MsgId, fieldNo);
  return f ? `${MESSAGES[msg].name}.${f.name} (field ${fieldNo})` : `field ${fieldNo} of ${MESSAGES[msg].name}`;
}

export function unknownSignal(signal: unknown): TypeError {
  return Object.assign(new TypeError(`unknown OTLP signal ${JSON.stringify(signal)}: expected 'logs' or 'traces'`), {
    code: 'ERR_INVALID_ARG_VALUE',
  });
}

function fail(message: string): never {
  throw new BodyError('SIGLAKE_BAD_BODY', `invalid protobuf: ${message}`);
}
