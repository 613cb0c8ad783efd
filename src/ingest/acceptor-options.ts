// What both acceptors (uWS HTTP and grpc-js) are built from.

import type { InflightBytes } from '../limits/inflight-bytes.js';
import type { Logger } from '../log.js';
import type { IngestMetrics } from '../metrics/ingest-metrics.js';
import type { Admission } from './admission.js';
import type { Dispatcher } from '../shard/dispatcher.js';
import type { UnsupportedSignalCounter } from './unsupported-signals.js';

export interface AcceptorOptions {
  host: string;
  port: number;
  maxRequestBytes: number;
  /** A request's body (a gRPC call's message) must arrive whole within this. */
  requestTimeoutSecs: number;
  admission: Admission;
  dispatcher: Dispatcher;
  metrics: IngestMetrics;
  log: Logger;
  isDraining(): boolean;
  /** Bytes of bodies being received or queued, bounded (--ingest-max-inflight-mib). */
  inflight: InflightBytes;
  /** Counts requests for a signal Siglake does not store (metrics, profiles), refused before admission. */
  unsupported: UnsupportedSignalCounter;
}
