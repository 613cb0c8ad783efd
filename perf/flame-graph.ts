// Renders a V8 .cpuprofile (what `node --cpu-prof` writes, one per thread) as
// a self-contained flame graph SVG (hover a frame for its name, place, self and
// total time) and as a top-N self-time table. No external tool, no download.
// `(idle)` samples are left out of the graph and the percentages, so widths
// are shares of the CPU time the thread used; the idle share is reported.

export interface CpuProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  hitCount?: number;
  children?: number[];
}

export interface CpuProfile {
  nodes: CpuProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

interface Frame {
  name: string;
  place: string;
  kind: 'project' | 'dependency' | 'node' | 'native' | 'system';
  selfUs: number;
  totalUs: number;
  children: Frame[];
}

export interface TopRow {
  name: string;
  place: string;
  selfMs: number;
  selfPct: number;
  totalMs: number;
  totalPct: number;
}

const COLORS: Record<Frame['kind'], [number, number]> = {
  project: [25, 90], // orange hues
  dependency: [95, 60], // green
  node: [205, 55], // blue
  native: [45, 15], // greyish yellow
  system: [0, 0], // grey
};

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

export class FlameGraph {
  readonly #root: Frame;
  readonly #idleUs: number;
  readonly #wallUs: number;
  readonly title: string;

  /**
   * `window`: keep only samples taken in [fromUs, toUs), in the profile's clock
   * (CLOCK_MONOTONIC µs, the same as process.hrtime() of any process on Linux),
   * e.g. the span the load ran, leaving start-up and shutdown out.
   */
  constructor(profile: CpuProfile, title: string, repoRoot: string, window?: { fromUs: number; toUs: number }) {
    this.title = title;
    const byId = new Map(profile.nodes.map((n) => [n.id, n]));
    // Time per sample: the deltas when present, else the mean interval.
    const selfUs = new Map<number, number>();
    const samples = profile.samples ?? [];
    const deltas = profile.timeDeltas ?? [];
    if (samples.length > 0 && deltas.length === samples.length) {
      let t = profile.startTime;
      for (let i = 0; i < samples.length; i++) {
        t += deltas[i];
        if (window !== undefined && (t < window.fromUs || t >= window.toUs)) continue;
        const dt = i + 1 < deltas.length ? deltas[i + 1] : 0;
        selfUs.set(samples[i], (selfUs.get(samples[i]) ?? 0) + Math.max(0, dt));
      }
    } else {
      const hits = profile.nodes.reduce((n, x) => n + (x.hitCount ?? 0), 0);
      const per = hits > 0 ? (profile.endTime - profile.startTime) / hits : 0;
      for (const n of profile.nodes) selfUs.set(n.id, (n.hitCount ?? 0) * per);
    }
    this.#wallUs =
      window === undefined
        ? profile.endTime - profile.startTime
        : Math.max(0, Math.min(window.toUs, profile.endTime) - Math.max(window.fromUs, profile.startTime));
    let idle = 0;
    const build = (n: CpuProfileNode): Frame | undefined => {
      const name = n.callFrame.functionName || '(anonymous)';
      if (name === '(idle)') {
        idle += selfUs.get(n.id) ?? 0;
        return undefined;
      }
      const url = n.callFrame.url;
      const place = FlameGraph.#shortPlace(url, n.callFrame.lineNumber, repoRoot);
      const kind: Frame['kind'] = name.startsWith('(')
        ? 'system'
        : url === ''
          ? 'native'
          : url.startsWith('node:')
            ? 'node'
            : url.includes('/node_modules/')
              ? 'dependency'
              : 'project';
      const f: Frame = { name, place, kind, selfUs: selfUs.get(n.id) ?? 0, totalUs: 0, children: [] };
      for (const c of n.children ?? []) {
        const child = byId.get(c);
        if (child === undefined) continue;
        const cf = build(child);
        if (cf !== undefined) f.children.push(cf);
      }
      f.totalUs = f.selfUs + f.children.reduce((s, c) => s + c.totalUs, 0);
      f.children.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      return f;
    };
    const rootNode = profile.nodes[0];
    this.#root = build(rootNode) ?? { name: '(root)', place: '', kind: 'system', selfUs: 0, totalUs: 0, children: [] };
    this.#root.name = 'all';
    this.#idleUs = idle;
  }

  static #shortPlace(url: string, line: number, repoRoot: string): string {
    if (url === '') return '';
    let u = url.startsWith('file://') ? decodeURIComponent(url.slice(7)) : url;
    const nm = u.lastIndexOf('/node_modules/');
    if (nm >= 0) u = u.slice(nm + '/node_modules/'.length);
    else if (u.startsWith(repoRoot + '/')) u = u.slice(repoRoot.length + 1);
    return `${u}:${line + 1}`;
  }

  /** CPU time of the thread (not idle), in ms. */
  get busyMs(): number {
    return this.#root.totalUs / 1000;
  }

  get idleMs(): number {
    return this.#idleUs / 1000;
  }

  get wallMs(): number {
    return this.#wallUs / 1000;
  }

  /** Functions by self time (a function's frames everywhere in the tree added up). */
  top(n: number): TopRow[] {
    const self = new Map<string, { name: string; place: string; selfUs: number; totalUs: number }>();
    const walk = (f: Frame, onPath: Set<string>): void => {
      const key = `${f.name}\u0000${f.place}`;
      let e = self.get(key);
      if (e === undefined) {
        e = { name: f.name, place: f.place, selfUs: 0, totalUs: 0 };
        self.set(key, e);
      }
      e.selfUs += f.selfUs;
      // Inclusive time counts a frame once even when it recurses.
      const outer = !onPath.has(key);
      if (outer) {
        e.totalUs += f.totalUs;
        onPath.add(key);
      }
      for (const c of f.children) walk(c, onPath);
      if (outer) onPath.delete(key);
    };
    for (const c of this.#root.children) walk(c, new Set());
    const busy = Math.max(1, this.#root.totalUs);
    return [...self.values()]
      .sort((a, b) => b.selfUs - a.selfUs)
      .slice(0, n)
      .map((e) => ({ name: e.name, place: e.place, selfMs: e.selfUs / 1000, selfPct: (100 * e.selfUs) / busy, totalMs: e.totalUs / 1000, totalPct: (100 * e.totalUs) / busy }));
  }

  topText(n: number): string {
    const rows = this.top(n);
    const lines = [
      `${this.title}: ${this.busyMs.toFixed(0)} ms on CPU, ${this.idleMs.toFixed(0)} ms idle, ${this.wallMs.toFixed(0)} ms profiled`,
      `${'self ms'.padStart(9)} ${'self %'.padStart(7)} ${'total %'.padStart(8)}  function (place)`,
    ];
    for (const r of rows) lines.push(`${r.selfMs.toFixed(1).padStart(9)} ${r.selfPct.toFixed(1).padStart(7)} ${r.totalPct.toFixed(1).padStart(8)}  ${r.name}${r.place ? ` (${r.place})` : ''}`);
    return lines.join('\n') + '\n';
  }

  /** The flame graph as one SVG document (root at the bottom). */
  svg(width = 1600): string {
    const ROW = 17;
    const root = this.#root;
    const minUs = root.totalUs / width / 2; // frames under half a pixel are left out
    let depth = 0;
    const measure = (f: Frame, d: number): void => {
      depth = Math.max(depth, d);
      for (const c of f.children) if (c.totalUs >= minUs) measure(c, d + 1);
    };
    measure(root, 0);
    const top = 48;
    const height = top + (depth + 1) * ROW + 24;
    const scale = root.totalUs > 0 ? width / root.totalUs : 0;
    const rects: string[] = [];
    const color = (f: Frame): string => {
      const [h, s] = COLORS[f.kind];
      // A stable per-name lightness, so neighbours differ.
      let x = 0;
      for (let i = 0; i < f.name.length; i++) x = (x * 31 + f.name.charCodeAt(i)) >>> 0;
      return `hsl(${h + (x % 20)},${s}%,${55 + (x % 20)}%)`;
    };
    const draw = (f: Frame, x: number, d: number): void => {
      const w = f.totalUs * scale;
      const y = height - 24 - (d + 1) * ROW;
      const pct = root.totalUs > 0 ? (100 * f.totalUs) / root.totalUs : 0;
      const tip = `${f.name}${f.place ? ` (${f.place})` : ''}\ntotal ${(f.totalUs / 1000).toFixed(1)} ms (${pct.toFixed(2)} %), self ${(f.selfUs / 1000).toFixed(1)} ms`;
      const label = w > 40 ? esc(f.name.length * 6.5 > w - 6 ? `${f.name.slice(0, Math.max(1, Math.floor((w - 6) / 6.5) - 1))}…` : f.name) : '';
      rects.push(
        `<g><title>${esc(tip)}</title><rect x="${x.toFixed(2)}" y="${y}" width="${Math.max(0.5, w - 0.5).toFixed(2)}" height="${ROW - 1}" fill="${color(f)}" rx="1"/>${label ? `<text x="${(x + 3).toFixed(2)}" y="${y + ROW - 5}">${label}</text>` : ''}</g>`,
      );
      let cx = x;
      for (const c of f.children) {
        if (c.totalUs >= minUs) draw(c, cx, d + 1);
        cx += c.totalUs * scale;
      }
    };
    draw(root, 0, 0);
    const sub = `${this.busyMs.toFixed(0)} ms on CPU, ${this.idleMs.toFixed(0)} ms idle (left out); hover a frame for details. orange: project, green: dependencies, blue: node internals, grey: native / GC / program`;
    return `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="monospace" font-size="11">
<rect width="100%" height="100%" fill="#fdfdf6"/>
<text x="${width / 2}" y="18" font-size="15" text-anchor="middle" font-family="sans-serif">${esc(this.title)}</text>
<text x="${width / 2}" y="36" font-size="11" text-anchor="middle" fill="#555" font-family="sans-serif">${esc(sub)}</text>
${rects.join('\n')}
</svg>
`;
  }
}
