// Bytes of request bodies in flight: being received, or received and queued
// for a writer (contract §6). Bounded by --ingest-max-inflight-mib: a request
// that would pass the bound is refused 503 + Retry-After before its body is
// read. The memory breaker samples RSS once a period and sees a body only once
// its bytes have arrived; a request is therefore also refused (as the breaker
// would) when the last RSS sample plus every byte in flight, this body's
// declared length included, reaches the breaker's limit. That counts bytes
// already received twice, on purpose: a body in flight costs more than its
// size (a receive buffer, then a copy for the writer), so the limit holds
// while uploads are in progress.

import { IngestError } from '../errors.js';

export interface InflightBreaker {
  /** RSS bytes at the last sample (0 when off or unreadable). */
  sampledRssBytes(): number;
  /** The limit in bytes; 0 when the breaker is off. */
  limitBytes(): number;
}

export class InflightBytes {
  #bytes = 0;
  readonly #full: IngestError;
  readonly #breakerOpen = new IngestError(
    'SIGLAKE_MEM_BREAKER',
    'memory breaker open: bodies in flight would take the ingester past its memory limit; retry later',
  );

  constructor(
    readonly maxBytes: number,
    readonly breaker: InflightBreaker | undefined,
    readonly onRefused: (e: IngestError) => void = () => {},
  ) {
    this.#full = new IngestError(
      'SIGLAKE_INFLIGHT_FULL',
      `request bodies in flight hold ${Math.round(maxBytes / 1048576)} MiB (--ingest-max-inflight-mib): retry later`,
    );
  }

  get bytes(): number {
    return this.#bytes;
  }

  /** Takes `n` more bytes, or returns the refusal (taking nothing). */
  reserve(n: number): IngestError | undefined {
    const next = this.#bytes + n;
    if (n > 0 && next > this.maxBytes && this.#bytes > 0) {
      this.onRefused(this.#full);
      return this.#full;
    }
    const b = this.breaker;
    if (b !== undefined && n > 0) {
      const limit = b.limitBytes();
      if (limit > 0 && b.sampledRssBytes() + next >= limit) {
        this.onRefused(this.#breakerOpen);
        return this.#breakerOpen;
      }
    }
    this.#bytes = next;
    return undefined;
  }

  /** Takes `n` bytes whatever the bound (a body already in memory). */
  force(n: number): void {
    this.#bytes += n;
  }

  release(n: number): void {
    this.#bytes -= n;
    if (this.#bytes < 0) this.#bytes = 0;
  }
}
