// The frames the acceptor sends a worker over its request ring, encoded and
// decoded only here. Every frame's payload starts with an 8-byte prefix so a
// body stays 8-byte aligned:
//
//   byte 0     kind (FrameKind)
//   byte 1     flags (DATA only): bit 0-1 signal (1 logs, 2 traces), bit 2 JSON, bit 3 gzip,
//              bit 4 budget exhausted (validate the body, then refuse it: write nothing)
//   bytes 2-3  reserved, 0
//   bytes 4-7  lane id (u32 LE)
//   bytes 8-   body (DATA), or a UTF-8 JSON LaneSpec (LANE_OPEN), or nothing
//
// The ring frame's tag carries the request id of a DATA frame (0 otherwise).

import { LaneKey } from './lane-key.js';

export const FRAME_PREFIX_BYTES = 8;

export const FrameKind = {
  /** An admitted request's body, for the lane named in the prefix. */
  DATA: 1,
  /** A lane the worker has not been told about yet: its LaneSpec as JSON. */
  LANE_OPEN: 2,
  /** A provisional lane that was released: forget it. */
  LANE_FORGET: 3,
  /** Everything before this frame was sent: seal, close and end the task. */
  SHUTDOWN: 4,
} as const;

export const Signal = { LOGS: 1, TRACES: 2 } as const;
export type SignalCode = (typeof Signal)[keyof typeof Signal];

export const FLAG_SIGNAL_MASK = 0b11;
export const FLAG_JSON = 0b100;
export const FLAG_GZIP = 0b1000;
/**
 * Admission found a budget exhausted (ingest-contract.md §4 step 12), which
 * only refuses a valid body (step 11 comes first): the worker decodes the
 * body as always and answers its decode refusal, or else
 * SIGLAKE_BUDGET_EXHAUSTED without staging a byte; the acceptor sends the
 * 429 with the Retry-After admission computed.
 */
export const FLAG_BUDGET_EXHAUSTED = 0b10000;

/** The signal a DATA frame's flags name. */
export function signalOfFlags(flags: number): 'logs' | 'traces' {
  return (flags & FLAG_SIGNAL_MASK) === Signal.TRACES ? 'traces' : 'logs';
}

/** What a worker needs to know about a lane: its id on the wire, and its key. */
export interface LaneSpec {
  id: number;
  tenant: string;
  /** A managed index name, or undefined for the signal's default table. */
  index: string | undefined;
  /** The default table when index is undefined. */
  signal: 'logs' | 'traces';
}

/** The LaneKey a LaneSpec names. */
export function keyOfSpec(spec: LaneSpec): LaneKey {
  return LaneKey.of(spec.tenant, spec.signal, spec.index);
}

/** Writes a frame's prefix at `off` of `bytes`. */
export function writeFramePrefix(bytes: Uint8Array, off: number, kind: number, flags: number, laneId: number): void {
  bytes[off] = kind;
  bytes[off + 1] = flags;
  bytes[off + 2] = 0;
  bytes[off + 3] = 0;
  bytes[off + 4] = laneId & 0xff;
  bytes[off + 5] = (laneId >>> 8) & 0xff;
  bytes[off + 6] = (laneId >>> 16) & 0xff;
  bytes[off + 7] = (laneId >>> 24) & 0xff;
}

/** A whole frame in a buffer of its own (for a backlog while the ring is full). */
export function encodeFrame(kind: number, flags: number, laneId: number, payload: Uint8Array): Uint8Array {
  const frame = new Uint8Array(FRAME_PREFIX_BYTES + payload.length);
  writeFramePrefix(frame, 0, kind, flags, laneId);
  frame.set(payload, FRAME_PREFIX_BYTES);
  return frame;
}

/** The kind of the frame at `off`. */
export function frameKind(bytes: Uint8Array, off: number): number {
  return bytes[off]!;
}

/** The flags of the frame at `off`. */
export function frameFlags(bytes: Uint8Array, off: number): number {
  return bytes[off + 1]!;
}

/** The lane id of the frame at `off`. */
export function frameLaneId(bytes: Uint8Array, off: number): number {
  return (bytes[off + 4]! | (bytes[off + 5]! << 8) | (bytes[off + 6]! << 16) | (bytes[off + 7]! << 24)) >>> 0;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The payload of a LANE_OPEN frame. */
export function encodeLaneSpec(spec: LaneSpec): Uint8Array {
  return encoder.encode(JSON.stringify({ id: spec.id, tenant: spec.tenant, index: spec.index, signal: spec.signal }));
}

/** The LaneSpec of a LANE_OPEN frame whose payload is `payload`. */
export function decodeLaneSpec(payload: Uint8Array): LaneSpec {
  return JSON.parse(decoder.decode(payload)) as LaneSpec;
}
