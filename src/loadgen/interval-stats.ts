// What one client thread saw in one interval of the run: completions by
// status, what the successful ones carried, and their latencies. Threads post
// one of these per interval; the coordinator adds them up by interval index.

import { LatencyHistogram, type HistogramSnapshot } from './latency-histogram.js';

export interface IntervalMessage {
  type: 'interval';
  thread: number;
  /** floor((completion time − start) / intervalMs); negative indexes are not sent. */
  index: number;
  completed: number;
  ok: number;
  /** Bytes on the wire of successful requests. */
  bytes: number;
  /** Their size before compression. */
  rawBytes: number;
  records: number;
  statuses: Record<string, number>;
  hist: HistogramSnapshot;
}

export class IntervalStats {
  #completed = 0;
  #ok = 0;
  #bytes = 0;
  #rawBytes = 0;
  #records = 0;
  readonly #statuses = new Map<string, number>();
  readonly #hist = new LatencyHistogram();

  /** Requests that got an answer (or failed) in the interval. */
  get completed(): number {
    return this.#completed;
  }

  get ok(): number {
    return this.#ok;
  }

  /** Bytes on the wire of the successful requests. */
  get bytes(): number {
    return this.#bytes;
  }

  get rawBytes(): number {
    return this.#rawBytes;
  }

  get records(): number {
    return this.#records;
  }

  /** Completions by status key. */
  get statuses(): ReadonlyMap<string, number> {
    return this.#statuses;
  }

  get hist(): LatencyHistogram {
    return this.#hist;
  }

  /** One finished request: `status` is "200", "OK", "503", "UNAVAILABLE", "error:ECONNRESET", "timeout"… */
  record(status: string, ok: boolean, micros: number, bytes: number, rawBytes: number, records: number): void {
    this.#completed++;
    this.#statuses.set(status, (this.#statuses.get(status) ?? 0) + 1);
    this.#hist.record(micros);
    if (ok) {
      this.#ok++;
      this.#bytes += bytes;
      this.#rawBytes += rawBytes;
      this.#records += records;
    }
  }

  add(m: IntervalMessage): void {
    this.#completed += m.completed;
    this.#ok += m.ok;
    this.#bytes += m.bytes;
    this.#rawBytes += m.rawBytes;
    this.#records += m.records;
    for (const [k, v] of Object.entries(m.statuses)) this.#statuses.set(k, (this.#statuses.get(k) ?? 0) + v);
    this.#hist.add(m.hist);
  }

  message(thread: number, index: number): IntervalMessage {
    return {
      type: 'interval',
      thread,
      index,
      completed: this.#completed,
      ok: this.#ok,
      bytes: this.#bytes,
      rawBytes: this.#rawBytes,
      records: this.#records,
      statuses: Object.fromEntries(this.#statuses),
      hist: this.#hist.snapshot(),
    };
  }

  reset(): void {
    this.#completed = 0;
    this.#ok = 0;
    this.#bytes = 0;
    this.#rawBytes = 0;
    this.#records = 0;
    this.#statuses.clear();
    this.#hist.reset();
  }
}
