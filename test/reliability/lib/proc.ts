// What a process holds, read from /proc: resident memory (its child
// processes' included) and open file descriptors (its own), sampled over
// time (the "bounded memory" and "flat" bars).

import fs from 'node:fs';

/**
 * VmRSS of `pid` and of its child processes (the compactor runs as one by
 * default: compactor.placement process-idle) in bytes; 0 once it is gone.
 */
export function rssBytes(pid: number): number {
  let total = ownRssBytes(pid);
  for (const child of childPids(pid)) total += ownRssBytes(child);
  return total;
}

function ownRssBytes(pid: number): number {
  try {
    const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(s);
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** The direct children of `pid`, from each of its threads' /proc children list. */
export function childPids(pid: number): number[] {
  const out: number[] = [];
  try {
    for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
      const list = fs.readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim();
      if (list !== '') out.push(...list.split(' ').map(Number));
    }
  } catch {
    // gone, or a kernel without the children file
  }
  return out;
}

/** Open file descriptors of `pid`; 0 once the process is gone. */
export function fdCount(pid: number): number {
  try {
    return fs.readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return 0;
  }
}

export interface ProcSample {
  /** ms since the sampler started. */
  t: number;
  rss: number;
  fds: number;
}

/** Samples RSS and fds of a process every `everyMs` until stopped; keeps the maxima. */
export class ProcSampler {
  readonly samples: ProcSample[] = [];
  maxRss = 0;
  maxFds = 0;
  readonly #t0 = Date.now();
  readonly #timer: NodeJS.Timeout;

  constructor(
    readonly pid: number,
    everyMs = 250,
    readonly keep = true,
  ) {
    this.sample();
    this.#timer = setInterval(() => this.sample(), everyMs);
  }

  sample(): ProcSample {
    const s = { t: Date.now() - this.#t0, rss: rssBytes(this.pid), fds: fdCount(this.pid) };
    if (s.rss > this.maxRss) this.maxRss = s.rss;
    if (s.fds > this.maxFds) this.maxFds = s.fds;
    if (this.keep) this.samples.push(s);
    return s;
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}

export const MiB = 1024 * 1024;
