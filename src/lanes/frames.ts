// The frames the acceptor sends a worker over its request ring. Every frame's
// payload starts with an 8-byte prefix so a body stays 8-byte aligned:
//
//   byte 0     kind (below)
//   byte 1     flags (DATA only): bit 0-1 signal (1 logs, 2 traces), bit 2 JSON, bit 3 gzip
//   bytes 2-3  reserved, 0
//   bytes 4-7  lane id (u32 LE)
//   bytes 8-   body (DATA), or a UTF-8 JSON LaneSpec (LANE_OPEN)
//
// The ring frame's tag carries the request id of a DATA frame (0 otherwise).

export const FRAME_PREFIX_BYTES = 8;

export const FrameKind = {
  DATA: 1,
  LANE_OPEN: 2,
  LANE_FORGET: 3,
  SHUTDOWN: 4,
  SEAL_ALL: 5,
} as const;

export const Signal = { LOGS: 1, TRACES: 2 } as const;
export type SignalCode = (typeof Signal)[keyof typeof Signal];

export const FLAG_SIGNAL_MASK = 0b11;
export const FLAG_JSON = 0b100;
export const FLAG_GZIP = 0b1000;

/** What a worker needs to know about a lane: enough to find its directory. */
export interface LaneSpec {
  id: number;
  tenant: string;
  /** A managed index name, or undefined for the signal's default table. */
  index: string | undefined;
  /** The default table when index is undefined. */
  signal: 'logs' | 'traces';
}

/** Shard of a lane: FNV-1a of its key, so a restarted worker finds its lanes on disk without being told. */
export function shardOf(tenant: string, table: string, workers: number): number {
  let h = 0x811c9dc5;
  const key = `${tenant}/${table}`;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % workers;
}

/** The table part of a lane key: `logs`, `traces` or `i:<index>` (so an index named `logs` is its own lane). */
export function tableKey(spec: Pick<LaneSpec, 'index' | 'signal'>): string {
  return spec.index === undefined ? spec.signal : `i:${spec.index}`;
}
