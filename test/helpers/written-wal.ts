// A WAL the real ingester wrote, for the tests that then damage it on disk.

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, expect } from 'vitest';
import { post, type HttpReply } from './http.js';
import { startIngester, tempDir, type RunningIngester } from './ingester.js';
import { logsProto } from './otlp-bodies.js';

/**
 * An ingester (the tenant header trusted, no compactor) that stored `count`
 * requests acme-0, acme-1, … for tenant acme, then was stopped (its last
 * segment sealed) or killed -9 (unsealed). Returns the data directory (the
 * caller removes it), the WAL root, and acme's last logs segment with its size.
 * `env`: the ingester's extra environment (SIGLAKE_TEST_CHECKPOINT_MS, say).
 */
export async function acmeWal(
  how: 'stop' | 'kill9',
  count: number,
  prefix: string,
  env?: Record<string, string>,
): Promise<{ dataDir: string; wal: string; seg: string; size: number }> {
  const dataDir = tempDir(prefix);
  const ing = await startIngester({ dataDir, args: ['--trust-tenant-header', '--compactor=false'], ...(env === undefined ? {} : { env }) });
  try {
    for (let i = 0; i < count; i++) {
      const r = await post(ing.url, '/v1/logs', logsProto([`acme-${i}`]), { headers: { 'x-scope-orgid': 'acme' } });
      expect(r.status).toBe(200);
    }
    if (how === 'stop') expect(await ing.stop()).toBe(0);
  } finally {
    await ing.kill9();
  }
  const wal = path.join(dataDir, 'wal');
  const lane = path.join(wal, 'acme', 'logs');
  const segs = fs.readdirSync(lane).filter((f) => f.endsWith('.seg')).sort();
  const seg = path.join(lane, segs[segs.length - 1]!);
  const size = fs.statSync(seg).size;
  expect(size).toBeGreaterThan(32);
  return { dataDir, wal, seg, size };
}

/**
 * The directories and running ingesters a WAL test file makes, cleaned up
 * after all its tests (each ingester killed -9; the directories kept with
 * KEEP=1). Call once at the top of the file.
 */
export function walTestLeftovers(): { dirs: string[]; live: Set<RunningIngester> } {
  const dirs: string[] = [];
  const live = new Set<RunningIngester>();
  afterAll(async () => {
    for (const ing of live) await ing.kill9();
    for (const d of dirs) if (!process.env['KEEP']) fs.rmSync(d, { recursive: true, force: true });
  });
  return { dirs, live };
}

/** One log record `text` for `tenant` (the tenant header, trusted), over OTLP/HTTP protobuf. */
export const sendLog = (url: string, tenant: string, text: string): Promise<HttpReply> =>
  post(url, '/v1/logs', logsProto([text]), { headers: { 'x-scope-orgid': tenant } });
