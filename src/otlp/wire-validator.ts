// The protobuf wire validator the writer workers run on every request body:
// validateExportRequest(signal, bytes) returns the number of log records or
// spans of a well-formed ExportLogsServiceRequest / ExportTraceServiceRequest
// and throws BodyError SIGLAKE_BAD_BODY for anything else.
//
// It is two walks. The fast walk below accepts a well-formed body outright and
// gives up (returns -1) at the first thing it does not handle or does not
// like; the exact walk (wire-validator-exact.ts, the rules are listed there)
// then walks the body again from the start and either accepts it or throws
// the refusal naming the field and offset. So what is accepted, what is
// refused and every refusal's message are the exact walk's; the fast walk
// only has to be sound: it never accepts a body the exact walk refuses, and
// when it accepts, its count is the exact walk's (test/unit/
// otlp-wire-validator.test.ts and otlp-wire-walks.test.ts check both walks
// against each other and against the fuzz suite's independent oracle).
//
// What makes the fast walk faster (perf/otlp-validate.bench.ts, "walks"):
// - one table lookup per field: ACTIONS[msg << 8 | tag] for every tag below
//   256 says what to do (skip a varint / fixed64 / fixed32 / length-delimited
//   value, check a string, check an id length, enter a message), with the
//   wire-type check and field number 0 folded in (those give up);
// - no error text on the path: every failure is `return -1`;
// - UTF-8 is checked per run of strings, not per string: consecutive string
//   fields whose bytes in between (tags, lengths, message headers) are all
//   ASCII are checked by one isUtf8 call over the whole run. That is exact:
//   an ASCII byte is a whole character in UTF-8 and never part of another, so
//   a run with ASCII between its strings is valid UTF-8 exactly when each
//   string is. A run is then scanned for plain ASCII in JS, four bytes at a
//   time over the body's aligned words (a run with other bytes, or a long
//   one, goes to isUtf8, whose fixed cost is ~120 ns a call), so a body of
//   many short attribute strings costs neither a call per string nor a byte
//   loop;
// - the stack of enclosing messages is one preallocated Int32Array (the walk
//   is synchronous, so one is enough for all calls of a thread).
// Rare encodings it gives up on, leaving them to the exact walk: tags of 3 or
// more bytes (field numbers from 2048), lengths of 5 or more bytes.
//
// The fast walk also exists in C (native/otlp-walk.c, src/native/otlp-walk.ts),
// with the same table, rules and give-ups: --otlp-walk picks it (`native`),
// this file's (`js`), or the native one when it loads (`auto`, the default).
// useOtlpWalk() sets it for the thread; until then `auto` holds.

import { isUtf8 } from 'node:buffer';
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
  WireType,
  type Signal,
} from './schema.js';
import { unknownSignal, validateExportRequestExact } from './wire-validator-exact.js';
import { loadNativeWalk, type NativeWalk } from '../native/otlp-walk.js';

export { unknownSignal, validateExportRequestExact } from './wire-validator-exact.js';

/**
 * Check that `bytes` is a well-formed export request of `signal` and return how
 * many log records (logs) or spans (traces) it holds. An empty body is a valid
 * empty request. Throws BodyError SIGLAKE_BAD_BODY naming the field and offset.
 */
export function validateExportRequest(signal: Signal, bytes: Uint8Array): number {
  const msg = ROOT_MSG[signal];
  if (msg === undefined) throw unknownSignal(signal);
  const n = nativeWalk !== null ? nativeWalk.walk(msg, bytes) : fastWalk(msg, bytes);
  return n >= 0 ? n : validateExportRequestExact(signal, bytes);
}

/** --otlp-walk: which fast walk runs in front of the exact one. */
export type OtlpWalk = 'auto' | 'native' | 'js';

/** The walk validateExportRequest runs: `native` (the addon) or `js`, and why the addon is not used. */
export interface OtlpWalkChoice {
  walk: 'native' | 'js';
  /** Set when `auto` or `native` was asked for and the addon did not load. */
  failure?: string;
}

/**
 * Chooses this thread's fast walk. `native` and `auto` load the addon (once
 * per thread); when it does not load, the JS walk is used and `failure` says
 * why (the caller refuses to start for `native`).
 */
export function useOtlpWalk(mode: OtlpWalk): OtlpWalkChoice {
  if (mode === 'js') {
    nativeWalk = null;
    return { walk: 'js' };
  }
  if (nativeLoad === undefined) {
    const r = loadNativeWalk({ actions: ACTIONS, anyValue: ANY_VALUE, maxAnyDepth: MAX_ANY_DEPTH, stackCap: STACK.length, layout: WALK_LAYOUT });
    nativeLoad = r.walk !== null ? r.walk : r.failure;
  }
  if (typeof nativeLoad === 'string') {
    nativeWalk = null;
    return { walk: 'js', failure: nativeLoad };
  }
  nativeWalk = nativeLoad;
  return { walk: 'native' };
}

// ---- the action table ----------------------------------------------------------

// An action: bits 0-3 the op; OP_ID: bits 4-8 the id length; OP_MSG: bit 9
// counts a record, bit 10 the child is an AnyValue, bits 16+ the child message.
const OP_GIVE_UP = 0;
const OP_VARINT = 1;
const OP_I64 = 2;
const OP_I32 = 3;
const OP_SKIP = 4;
const OP_STRING = 5;
const OP_ID = 6;
const OP_MSG = 7;
const ACT_ID_SHIFT = 4;
const ACT_COUNTS = 1 << 9;
const ACT_ANY = 1 << 10;
const ACT_MSG_SHIFT = 16;
/** The op codes and action bits, in the order native/otlp-walk.c checks them. */
const WALK_LAYOUT = Int32Array.from([OP_GIVE_UP, OP_VARINT, OP_I64, OP_I32, OP_SKIP, OP_STRING, OP_ID, OP_MSG, ACT_ID_SHIFT, ACT_COUNTS, ACT_ANY, ACT_MSG_SHIFT]);

/** What an unknown field of each wire type does: skipped, or given up on (groups, 6, 7). */
const UNKNOWN_ACTION: Int32Array = Int32Array.from([OP_VARINT, OP_I64, OP_SKIP, OP_GIVE_UP, OP_GIVE_UP, OP_I32, OP_GIVE_UP, OP_GIVE_UP]);

/** ACTIONS[msg << 8 | tag] for each message and each tag value below 256 (field numbers 0-31); exported for the tests, and handed to the native walk (native/otlp-walk.c). */
export const ACTIONS: Int32Array = (() => {
  const maxField = MSG_MAX_FIELD.reduce((a, b) => Math.max(a, b), 0);
  if (maxField > 31) throw new Error(`wire-validator: field ${maxField} does not fit the 256-tag action table`);
  const table = new Int32Array(MESSAGES.length << 8);
  for (let m = 0; m < MESSAGES.length; m++) {
    for (let tag = 0; tag < 256; tag++) {
      const fieldNo = tag >>> 3;
      const wt = tag & 7;
      const code = fieldNo === 0 ? -1 : fieldNo <= MSG_MAX_FIELD[m] ? FIELD_CODES[MSG_BASE[m] + fieldNo] : 0;
      let act: number;
      if (code === -1) act = OP_GIVE_UP;
      else if (code === 0) act = UNKNOWN_ACTION[wt];
      else if ((code & CODE_WIRE_MASK) !== wt) act = OP_GIVE_UP;
      else if (wt !== WireType.LEN) act = UNKNOWN_ACTION[wt];
      else {
        const kind = (code >>> CODE_KIND_SHIFT) & CODE_KIND_MASK;
        if (kind === Kind.MESSAGE) {
          const child = code >>> CODE_MSG_SHIFT;
          act = OP_MSG | (child << ACT_MSG_SHIFT) | ((code & CODE_COUNTS) !== 0 ? ACT_COUNTS : 0) | (child === Msg.AnyValue ? ACT_ANY : 0);
        } else if (kind === Kind.STRING) {
          act = OP_STRING;
        } else {
          const idLen = (code >>> CODE_ID_SHIFT) & CODE_ID_MASK;
          act = idLen === 0 ? OP_SKIP : OP_ID | (idLen << ACT_ID_SHIFT);
        }
      }
      table[(m << 8) | tag] = act;
    }
  }
  return table;
})();

// Module-local copies of imported constants used in the loop (a module runner
// such as vite's, which perf/run-ts.mjs uses, turns imports into property loads).
const ANY_VALUE: number = Msg.AnyValue;
const MAX_ANY_DEPTH: number = MAX_ANY_VALUE_DEPTH;

/** [end, msg] pairs of the enclosing messages; deep enough for any body the exact walk accepts. */
const STACK = new Int32Array(2 * (16 + 3 * (MAX_ANY_VALUE_DEPTH + 1)));

const utf8 = isUtf8;

/** The addon's walk when this thread uses it. */
let nativeWalk: NativeWalk | null = null;
/** The addon once loaded, or why it did not load; undefined: not tried yet. */
let nativeLoad: NativeWalk | string | undefined;

/** Runs longer than this are scanned for plain ASCII a word at a time (shorter ones byte by byte). */
const WORD_SCAN_MIN = 16;
const NO_WORDS: Int32Array = new Int32Array(0);
/** Runs longer than this go to isUtf8 directly: its ~120 ns a call costs less than scanning them in JS. */
const NATIVE_SCAN_MIN = 384;
const HIGH_BITS = 0x80808080 | 0;
/** Two strings join one UTF-8 run when at most this many (ASCII) bytes lie between them. */
const RUN_GAP_MAX = 24;

// ---- the fast walk ---------------------------------------------------------------

/** The record count of a body the walk accepts, or -1 when it gives up (the exact walk decides). */
export function fastWalk(rootMsg: number, bytes: Uint8Array): number {
  const actions = ACTIONS;
  const stack = STACK;
  const stackCap = stack.length;
  let sp = 0;
  let msg = rootMsg;
  let end = bytes.length;
  let pos = 0;
  let count = 0;
  let anyDepth = 0;
  // The pending UTF-8 run [runStart, runEnd); runStart < 0: none.
  let runStart = -1;
  let runEnd = 0;
  // The body's aligned 4-byte words, for the ASCII scan of runs (made at the first long run).
  let words: Int32Array = NO_WORDS;

  for (;;) {
    if (pos >= end) {
      if (sp === 0) break;
      if (msg === ANY_VALUE) anyDepth--;
      msg = stack[--sp];
      end = stack[--sp];
      continue;
    }

    // Tag: one or two bytes.
    let tag = bytes[pos++];
    if (tag > 0x7f) {
      if (pos >= end) return -1;
      const b = bytes[pos++];
      if (b > 0x7f) return -1;
      tag = (tag & 0x7f) | (b << 7);
    }
    const act = tag < 256 ? actions[(msg << 8) | tag] : UNKNOWN_ACTION[tag & 7];
    const op = act & 15;

    if (op === OP_VARINT) {
      // At most 10 bytes, the 10th at most 1 (the value fits 64 bits).
      for (let n = 1; ; n++) {
        if (pos >= end) return -1;
        const b = bytes[pos++];
        if (b < 0x80) {
          if (n === 10 && b > 1) return -1;
          break;
        }
        if (n === 10) return -1;
      }
      continue;
    }
    if (op === OP_I64) {
      if (end - pos < 8) return -1;
      pos += 8;
      continue;
    }
    if (op === OP_I32) {
      if (end - pos < 4) return -1;
      pos += 4;
      continue;
    }
    if (op === OP_GIVE_UP) return -1;

    // Length-delimited: a length of up to 4 bytes (below 2^28).
    if (pos >= end) return -1;
    let len = bytes[pos++];
    if (len > 0x7f) {
      if (pos >= end) return -1;
      let b = bytes[pos++];
      len = (len & 0x7f) | ((b & 0x7f) << 7);
      if (b > 0x7f) {
        if (pos >= end) return -1;
        b = bytes[pos++];
        len |= (b & 0x7f) << 14;
        if (b > 0x7f) {
          if (pos >= end) return -1;
          b = bytes[pos++];
          if (b > 0x7f) return -1;
          len |= b << 21;
        }
      }
    }
    if (len > end - pos) return -1;

    if (op === OP_MSG) {
      if ((act & ACT_ANY) !== 0 && ++anyDepth > MAX_ANY_DEPTH) return -1;
      if (sp >= stackCap) return -1;
      if ((act & ACT_COUNTS) !== 0) count++;
      stack[sp++] = end;
      stack[sp++] = msg;
      msg = act >>> ACT_MSG_SHIFT;
      end = pos + len;
      continue;
    }
    if (op === OP_STRING) {
      if (len !== 0) {
        if (runStart < 0) {
          runStart = pos;
        } else {
          // Join the run when everything since its end is ASCII (never empty: a tag and a length lie between).
          let g = runEnd;
          if (pos - g <= RUN_GAP_MAX && g < pos) while (g < pos && bytes[g] < 0x80) g++;
          if (g !== pos) {
            if (runEnd - runStart > WORD_SCAN_MIN && words === NO_WORDS) words = wordsOf(bytes);
            if (!utf8Run(bytes, words, runStart, runEnd)) return -1;
            runStart = pos;
          }
        }
        runEnd = pos + len;
      }
    } else if (op === OP_ID) {
      if (len !== 0 && len !== ((act >>> ACT_ID_SHIFT) & 31)) return -1;
    }
    pos += len;
  }
  if (runStart >= 0) {
    if (runEnd - runStart > WORD_SCAN_MIN && words === NO_WORDS) words = wordsOf(bytes);
    if (!utf8Run(bytes, words, runStart, runEnd)) return -1;
  }
  return count;
}

/** The whole aligned 4-byte words of `bytes`' memory: word k is bytes (4k - byteOffset % 4 ...) of the buffer's word grid. */
function wordsOf(bytes: Uint8Array): Int32Array {
  const first = (bytes.byteOffset + 3) >>> 2;
  const last = (bytes.byteOffset + bytes.length) >>> 2;
  return last > first ? new Int32Array(bytes.buffer, first << 2, last - first) : NO_WORDS;
}

/**
 * Is bytes[start, end) valid UTF-8? Plain ASCII is settled in JS, four bytes at
 * a time over the aligned words where `words` covers them; anything else, and
 * what JS cannot settle cheaply, by isUtf8.
 */
function utf8Run(bytes: Uint8Array, words: Int32Array, start: number, end: number): boolean {
  let i = start;
  if (end - start > NATIVE_SCAN_MIN) return utf8(new Uint8Array(bytes.buffer, bytes.byteOffset + start, end - start));
  if (words !== NO_WORDS) {
    // Byte by byte up to a word boundary of the buffer, then word by word.
    const off = bytes.byteOffset;
    const base = ((off + 3) >>> 2) << 2;
    while (i < end && ((off + i) & 3) !== 0) {
      if (bytes[i] > 0x7f) return utf8(new Uint8Array(bytes.buffer, off + start, end - start));
      i++;
    }
    let w = (off + i - base) >>> 2;
    const wEnd = w + ((end - i) >>> 2);
    if (wEnd <= words.length) {
      for (; w < wEnd; w++) {
        if ((words[w] & HIGH_BITS) !== 0) return utf8(new Uint8Array(bytes.buffer, off + start, end - start));
      }
      i = base + (w << 2) - off;
    }
  }
  while (i < end && bytes[i] < 0x80) i++;
  if (i === end) return true;
  return utf8(new Uint8Array(bytes.buffer, bytes.byteOffset + start, end - start));
}

// `auto` until the thread chooses (every constant the loader reads is set by now).
useOtlpWalk('auto');
