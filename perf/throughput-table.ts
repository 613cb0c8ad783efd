// The table that the byte-throughput benchmarks print: per tinybench task,
// bytes per iteration, median time per iteration and the MB/s it makes.

import type { Bench } from 'tinybench';

export function throughputRows(bench: Bench, bytesPerTask: ReadonlyMap<string, number>): Record<string, unknown>[] {
  return bench.tasks.map((t) => {
    const r = t.result;
    if (r.state !== 'completed') return { task: t.name, state: r.state };
    const p50 = r.latency.p50;
    const bytes = bytesPerTask.get(t.name) ?? 0;
    return {
      task: t.name,
      'bytes/iter': bytes,
      'p50 ms/iter': Number(p50.toFixed(4)),
      'p50 MB/s': Math.round(bytes / 1e6 / (p50 / 1000)),
      samples: r.latency.samplesCount,
    };
  });
}
