// Number and line formatting for the loadgen's terminal output: thousands
// separators, a fixed number of decimals per kind of figure, plurals, and
// lines cut to the terminal width.

/** 143956 → "143,956"; with `decimals`, always that many (1,234.50). */
export function fmtNum(v: number, decimals = 0): string {
  if (!Number.isFinite(v)) return '-';
  return v.toLocaleString('en-US', { minimumFractionDigits: decimals, maximumFractionDigits: decimals });
}

/** Milliseconds, always two decimals: 0.38, 12.00, 1,234.50. */
export function fmtMs(v: number): string {
  return fmtNum(v, 2);
}

/** "1 tenant", "3 tenants", "1 index", "2 indexes". */
export function plural(n: number, one: string, many = `${one}s`): string {
  return `${fmtNum(n)} ${n === 1 ? one : many}`;
}

/** The line cut to `width` columns (an ellipsis marks the cut). */
export function fitLine(line: string, width: number): string {
  const chars = [...line];
  if (chars.length <= width) return line;
  return chars.slice(0, Math.max(1, width - 1)).join('') + '…';
}

/** Joins parts with two spaces, leaving out optional ones (from the last) until the line fits `width`. */
export function fitParts(parts: readonly { text: string; optional?: boolean }[], width: number): string {
  const kept = parts.filter((p) => p.text !== '');
  const len = (ps: typeof kept): number => [...ps.map((p) => p.text).join('  ')].length;
  for (let i = kept.length - 1; i >= 0 && len(kept) > width; i--) {
    if (kept[i]!.optional) kept.splice(i, 1);
  }
  return fitLine(kept.map((p) => p.text).join('  '), width);
}
