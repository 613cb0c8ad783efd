// The audit stream's accounting when its file refuses writes (a full disk:
// /dev/full answers every write ENOSPC): every event lost is counted in
// siglake_audit_events_dropped_total, one per event (it counted one per
// batch of events), and the loss is logged at warn, throttled, never with a
// token.

import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { post } from '../helpers/http.js';
import { startIngester, tempDir } from '../helpers/ingester.js';
import { logsProto } from '../helpers/otlp-bodies.js';
import { until } from '../helpers/wait.js';

describe('audit file that refuses writes', () => {
  it('counts every event lost, and says so at warn', async () => {
    const dir = tempDir('siglake-audit-full-');
    const tenants = path.join(dir, 'tenants.yaml');
    fs.writeFileSync(tenants, 'tenants:\n  - id: acme\n    subjects: { claims: { org_id: acme } }\n');
    const ing = await startIngester({ args: ['--auth-bearer-tokens', 'tok-audit-1', '--tenants-file', tenants, '--audit-file', '/dev/full'] });
    try {
      // 60 refusals at once (no credentials: 401), each one audit event.
      const replies = await Promise.all(Array.from({ length: 60 }, () => post(ing.url, '/v1/logs', logsProto(['x']), { contentType: 'application/x-protobuf' })));
      expect(replies.map((r) => r.status)).toEqual(Array(60).fill(401));
      await until(async () => (await ing.metric('siglake_audit_events_dropped_total')) === 60, 10_000, 'every lost event counted');
      const warned = ing.logs.filter((l) => l.msg.startsWith('audit file write failed'));
      expect(warned.length).toBeGreaterThanOrEqual(1);
      expect(warned.length).toBeLessThanOrEqual(2); // throttled: one line per 10 s
      expect(String(warned[0]!['err'])).toMatch(/ENOSPC/);
      expect(JSON.stringify(ing.logs)).not.toContain('tok-audit-1');
    } finally {
      expect(await ing.stop()).toBe(0);
    }
  });
});
