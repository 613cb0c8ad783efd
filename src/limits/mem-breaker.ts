// The memory circuit breaker (contract §4 step 1, §9): one coarse, unref'd timer
// samples VmRSS from /proc/self/status (plus the compactor process's, when
// the compactor runs as one) every `sampleSecs`; while RSS is at or
// above `limitMib` the breaker is open and every ingest request is shed. The state
// lives in a BreakerFlag on a SharedArrayBuffer, so any thread reads it with one
// atomic load. Where the status file is missing or unreadable (a host without
// /proc) the breaker never trips.

import { closeSync, openSync, readSync } from 'node:fs';
import { BreakerFlag } from './breaker-flag.js';
import { LimitsError } from './limits-error.js';

export interface MemBreakerOptions {
  /** RSS in MiB at or above which the breaker opens; 0 turns it off. */
  limitMib: number;
  /** Sampling period in seconds (> 0). */
  sampleSecs: number;
  /** The status file to read VmRSS from; tests inject their own. Default /proc/self/status. */
  statusPath?: string;
  /**
   * Another process whose RSS counts too (the compactor process of
   * compactor.placement process, process-idle), while it runs.
   */
  alsoPid?: () => number | undefined;
}

const VMRSS = 'VmRSS:';

function checkLimit(limitMib: number): number {
  if (typeof limitMib !== 'number' || !Number.isFinite(limitMib) || limitMib < 0) {
    throw new LimitsError('SIGLAKE_LIMITS_BAD_PARAM', `limitMib must be a finite number ≥ 0, got ${String(limitMib)}`, 'limitMib');
  }
  return limitMib;
}

export class MemBreaker {
  readonly #flag = new BreakerFlag();
  readonly #statusPath: string;
  readonly #alsoPid: (() => number | undefined) | undefined;
  readonly #periodMs: number;
  #limitKiB = 0;
  /** Reused read buffer: a sample allocates nothing but the file descriptor. */
  #buf = Buffer.alloc(4096);
  #timer: NodeJS.Timeout | undefined = undefined;
  /** RSS at the last sample, in KiB (0 when unreadable). */
  #sampledKiB = 0;

  constructor(options: MemBreakerOptions) {
    const { sampleSecs } = options;
    if (typeof sampleSecs !== 'number' || !Number.isFinite(sampleSecs) || sampleSecs <= 0 || sampleSecs > 3600) {
      throw new LimitsError('SIGLAKE_LIMITS_BAD_PARAM', `sampleSecs must be a number in (0, 3600], got ${String(sampleSecs)}`, 'sampleSecs');
    }
    this.#periodMs = Math.max(1, Math.round(sampleSecs * 1000));
    this.#statusPath = options.statusPath ?? '/proc/self/status';
    this.#alsoPid = options.alsoPid;
    this.setLimitMib(options.limitMib);
  }

  /** The flag's buffer: `new BreakerFlag(buffer).isOpen()` in another thread. */
  get buffer(): SharedArrayBuffer {
    return this.#flag.buffer;
  }

  get enabled(): boolean {
    return this.#limitKiB > 0;
  }

  /** Shed every request while true. One atomic load. */
  isOpen(): boolean {
    return this.#flag.isOpen();
  }

  /**
   * Resident set size in bytes for siglake_process_rss_bytes: VmRSS read now from
   * the status file, or process.memoryUsage.rss() where that is unreadable.
   */
  rssBytes(): number {
    const kib = this.#readRssKiB();
    return kib >= 0 ? kib * 1024 : process.memoryUsage.rss();
  }

  /** Change the limit (0 turns the breaker off and closes it) and sample at once. */
  setLimitMib(limitMib: number): void {
    this.#limitKiB = Math.ceil(checkLimit(limitMib) * 1024);
    if (this.#limitKiB === 0) {
      if (this.#timer !== undefined) clearInterval(this.#timer);
      this.#timer = undefined;
      this.#flag.publish(false, 0);
      return;
    }
    this.sample();
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => this.sample(), this.#periodMs);
      this.#timer.unref();
    }
  }

  /** RSS of the other process (alsoPid) in bytes; 0 when there is none or it is unreadable. */
  alsoRssBytes(): number {
    const pid = this.#alsoPid?.();
    if (pid === undefined) return 0;
    return Math.max(0, this.#readRssKiB(`/proc/${pid}/status`)) * 1024;
  }

  /** Read RSS once (this process's and alsoPid's) and publish open/closed; the timer calls this every sampleSecs. */
  sample(): void {
    let kib = this.#readRssKiB();
    if (kib >= 0) kib += this.alsoRssBytes() / 1024;
    this.#sampledKiB = kib < 0 ? 0 : kib;
    if (kib < 0) {
      this.#flag.publish(false, 0); // unreadable: never trips
      return;
    }
    this.#flag.publish(this.#limitKiB > 0 && kib >= this.#limitKiB, kib);
  }

  /** RSS bytes at the last sample (0 before one, or where RSS is unreadable). */
  sampledRssBytes(): number {
    return this.#sampledKiB * 1024;
  }

  /** The limit in bytes; 0 while the breaker is off. */
  limitBytes(): number {
    return this.#limitKiB * 1024;
  }

  /** Stop sampling; the breaker stays as last published. */
  close(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** VmRSS in KiB, or -1 when the file is missing, unreadable or has no VmRSS line. */
  #readRssKiB(statusPath = this.#statusPath): number {
    let fd: number;
    try {
      fd = openSync(statusPath, 'r');
    } catch {
      return -1;
    }
    try {
      for (;;) {
        let len = 0;
        for (;;) {
          const n = readSync(fd, this.#buf, len, this.#buf.length - len, len);
          if (n === 0) break;
          len += n;
          if (len === this.#buf.length) break;
        }
        const kib = MemBreaker.#parseVmRss(this.#buf, len);
        if (kib >= 0 || len < this.#buf.length) return kib;
        this.#buf = Buffer.alloc(this.#buf.length * 2); // a status file larger than the buffer: grow once and re-read
      }
    } catch {
      return -1;
    } finally {
      closeSync(fd);
    }
  }

  /** The number after `VmRSS:` (kB), or -1. */
  static #parseVmRss(buf: Buffer, len: number): number {
    const at = buf.indexOf(VMRSS, 0, 'latin1');
    if (at < 0 || at >= len) return -1;
    let i = at + VMRSS.length;
    while (i < len && (buf[i] === 0x20 || buf[i] === 0x09)) i++;
    let value = 0;
    let digits = 0;
    while (i < len && buf[i] >= 0x30 && buf[i] <= 0x39 && digits < 10) {
      value = value * 10 + (buf[i] - 0x30);
      i++;
      digits++;
    }
    return digits === 0 || value > 0x7fffffff ? -1 : value;
  }
}
