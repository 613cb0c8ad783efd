// What one client thread saw in one interval of the run: completions by
// status, the bytes sent, what the successful ones carried, and latencies of
// the successful and of the refused requests, apart. Threads post
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
  /** Bytes on the wire of every request, refused ones included. */
  sentBytes: number;
  /** Their size before compression. */
  rawBytes: number;
  records: number;
  statuses: Record<string, number>;
  /** Latencies of the successful requests. */
  hist: HistogramSnapshot;
  /** Latencies of the refused and failed ones, kept apart: a fast 403 is not ingest latency. */
  refusedHist: HistogramSnapshot;
}

export class IntervalStats {
  #completed = 0;
  #ok = 0;
  #bytes = 0;
  #sentBytes = 0;
  #rawBytes = 0;
  #records = 0;
  readonly #statuses = new Map<string, number>();
  readonly #hist = new LatencyHistogram();
  readonly #refusedHist = new LatencyHistogram();

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

  /** Bytes on the wire of every request. */
  get sentBytes(): number {
    return this.#sentBytes;
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

  /** Latencies of the successful requests. */
  get hist(): LatencyHistogram {
    return this.#hist;
  }

  /** Latencies of the refused and failed requests. */
  get refusedHist(): LatencyHistogram {
    return this.#refusedHist;
  }

  /** One finished request: `status` is "200", "OK", "503", "UNAVAILABLE", "error:ECONNRESET", "timeout"… */
  record(status: string, ok: boolean, micros: number, bytes: number, rawBytes: number, records: number): void {
    this.#completed++;
    this.#statuses.set(status, (this.#statuses.get(status) ?? 0) + 1);
    this.#sentBytes += bytes;
    if (ok) {
      this.#hist.record(micros);
      this.#ok++;
      this.#bytes += bytes;
      this.#rawBytes += rawBytes;
      this.#records += records;
    } else {
      this.#refusedHist.record(micros);
    }
  }

  add(m: IntervalMessage): void {
    this.#completed += m.completed;
    this.#ok += m.ok;
    this.#bytes += m.bytes;
    this.#sentBytes += m.sentBytes;
    this.#rawBytes += m.rawBytes;
    this.#records += m.records;
    for (const [k, v] of Object.entries(m.statuses)) this.#statuses.set(k, (this.#statuses.get(k) ?? 0) + v);
    this.#hist.add(m.hist);
    this.#refusedHist.add(m.refusedHist);
  }

  /** Adds another interval's stats to these. */
  addStats(o: IntervalStats): void {
    this.add(o.message(0, 0));
  }

  message(thread: number, index: number): IntervalMessage {
    return {
      type: 'interval',
      thread,
      index,
      completed: this.#completed,
      ok: this.#ok,
      bytes: this.#bytes,
      sentBytes: this.#sentBytes,
      rawBytes: this.#rawBytes,
      records: this.#records,
      statuses: Object.fromEntries(this.#statuses),
      hist: this.#hist.snapshot(),
      refusedHist: this.#refusedHist.snapshot(),
    };
  }

  reset(): void {
    this.#completed = 0;
    this.#ok = 0;
    this.#bytes = 0;
    this.#sentBytes = 0;
    this.#rawBytes = 0;
    this.#records = 0;
    this.#statuses.clear();
    this.#hist.reset();
    this.#refusedHist.reset();
  }
}
