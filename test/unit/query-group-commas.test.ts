// The GROUP BY comma count (src/query/statement-guard.ts, groupByCommas) may
// count more commas than the engine's GROUP BY lists hold, never fewer: each
// case here is a way the engine still reads a GROUP BY list that a reading
// without a lexer could miss.

import { describe, expect, it } from 'vitest';
import { groupByCommas } from '../../src/query/statement-guard.js';

const items = (n: number) => Array.from({ length: n }, (_, i) => `b || ${i}`).join(', ');

describe('groupByCommas', () => {
  it('counts a list to its end only: HAVING, ORDER BY, a closing parenthesis, UNION', () => {
    expect(groupByCommas(`SELECT a, b, c FROM t WHERE x IN (1, 2) GROUP BY a, b, c HAVING y IN (1, 2, 3) ORDER BY a, b`)).toBe(2);
    expect(groupByCommas(`WITH g AS (SELECT a FROM t GROUP BY a, b) SELECT * FROM g WHERE a IN (1, 2, 3)`)).toBe(1);
    expect(groupByCommas(`SELECT 1 GROUP BY a, b UNION ALL SELECT 1, 2, 3`)).toBe(1);
    expect(groupByCommas(`SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY a), b, c FROM t`)).toBe(0);
    expect(groupByCommas(`SELECT 'resource-group', 1, 2 FROM t`)).toBe(0);
  });

  it('counts at least the items wherever the engine still reads a list', () => {
    expect(groupByCommas(`SELECT 1 FROM t GROUP BY t . limit, ${items(10)}`)).toBe(10);
    expect(groupByCommas(`SELECT 1 FROM t GROUP BY a, (b, c), cube(d, e), ${items(3)}`)).toBe(7);
    expect(groupByCommas(`SELECT 1 FROM t GROUP /* c */ BY ${items(10)}`)).toBeGreaterThanOrEqual(9);
    expect(groupByCommas(`SELECT 1 FROM t GROUP -- c\n BY ${items(10)}`)).toBeGreaterThanOrEqual(9);
    expect(groupByCommas(`SELECT 1 GROUP BY a || ')', ${items(10)}`)).toBeGreaterThanOrEqual(10);
    expect(groupByCommas(`SELECT 1 GROUP BY a || " limit", ${items(10)}`)).toBeGreaterThanOrEqual(10);
    expect(groupByCommas(`SELECT 1 GROUP BY a /* ) */, ${items(10)}`)).toBeGreaterThanOrEqual(10);
    expect(groupByCommas(`SELECT 1 GROUP BY $$)$$, ${items(10)}`)).toBeGreaterThanOrEqual(10);
    expect(groupByCommas(`SELECT 1 GROUP\n\tby ${items(10)}`)).toBe(9);
    expect(groupByCommas(`SELECT 1GROUP BY ${items(10)}`)).toBe(9);
    expect(groupByCommas(`SELECT 1 FROM (SELECT 1 GROUP BY ${items(5)}) GROUP BY ${items(5)}`)).toBe(8);
  });

  it('counts a comma once however many lists hold it (100,000 nested lists of a 1 MiB text)', () => {
    expect(groupByCommas('group by ('.repeat(100_000) + ','.repeat(20_000))).toBe(20_000);
    expect(groupByCommas('within group ('.repeat(80_000) + ','.repeat(10))).toBe(0);
  });
});
