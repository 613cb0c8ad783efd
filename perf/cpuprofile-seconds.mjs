// Second by second, what one thread did in a V8 CPU profile (`node
// --cpu-prof` writes one per thread): samples taken, time busy (not idle),
// the longest gap between two samples (the thread did not run for that
// long: descheduled, or stopped by its own GC), and the three functions with
// the most self time. perf/p4-round-stall.sh runs it on each thread.
//
//   node perf/cpuprofile-seconds.mjs FILE.cpuprofile [FROM_S] [TO_S]

import { readFileSync } from 'node:fs';

const [file, from = '0', to = 'Infinity'] = process.argv.slice(2);
if (file === undefined) {
  process.stderr.write('usage: node perf/cpuprofile-seconds.mjs FILE.cpuprofile [FROM_S] [TO_S]\n');
  process.exit(2);
}
const p = JSON.parse(readFileSync(file, 'utf8'));
const frames = new Map(p.nodes.map((n) => [n.id, n.callFrame]));
const label = (id) => {
  const c = frames.get(id);
  return `${c.functionName || '(anonymous)'} ${c.url.split('/').pop()}:${c.lineNumber}`;
};
const seconds = new Map();
let t = p.startTime;
for (let i = 0; i < p.samples.length; i++) {
  const d = p.timeDeltas[i] ?? 0;
  t += d;
  const s = Math.floor((t - p.startTime) / 1e6);
  let e = seconds.get(s);
  if (e === undefined) seconds.set(s, (e = { samples: 0, busyUs: 0, maxGapUs: 0, self: new Map() }));
  e.samples++;
  e.maxGapUs = Math.max(e.maxGapUs, d);
  const name = label(p.samples[i]);
  if (name.startsWith('(idle)')) continue;
  e.busyUs += d;
  e.self.set(name, (e.self.get(name) ?? 0) + d);
}
for (const [s, e] of [...seconds].sort((a, b) => a[0] - b[0])) {
  if (s < Number(from) || s > Number(to)) continue;
  const top = [...e.self]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 3)
    .map(([k, us]) => `${k} ${(us / 1000).toFixed(0)} ms`)
    .join(', ');
  console.log(`${String(s).padStart(3)} s  samples ${String(e.samples).padStart(4)}  busy ${String(Math.round(e.busyUs / 1000)).padStart(4)} ms  longest gap ${(e.maxGapUs / 1000).toFixed(1).padStart(5)} ms  ${top}`);
}
