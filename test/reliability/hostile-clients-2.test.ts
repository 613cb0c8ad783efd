// Hostile and careless clients, second pass (issue 11, docs/reliability.md
// "Hostile clients, second pass"): each case is one defect found from outside,
// checked against the real process, with what a client relies on: the status
// or gRPC code, the counters, and what is (not) on disk.

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOGS_EXPORT, grpc, rawGrpcCall } from '../helpers/grpc-client.js';
import type { RunningIngester } from '../helpers/ingester.js';
import { logsProto } from '../helpers/otlp-bodies.js';
import {
  Client,
  TRANSPORTS,
  delta,
  expectAccepted,
  expectRefused,
  only,
  rawHttpPost,
  textsUnder,
  topDirs,
  walBytes,
  type Reply,
} from '../helpers/tenancy-client.js';
import { recordFigures } from './lib/scale.js';
import { startWalIngester } from './lib/wal-ingester.js';

const figures: Record<string, unknown> = {};
const live = new Set<RunningIngester>();

afterAll(async () => {
  for (const ing of live) await ing.kill9();
  recordFigures('hostile-clients-2', figures);
});

async function start(args: string[]): Promise<RunningIngester> {
  const ing = await startWalIngester({ args });
  live.add(ing);
  return ing;
}

/** One gRPC call over node:http2 with header fields exactly as given (arrays: several fields). */
async function rawGrpc(ing: RunningIngester, body: Uint8Array, headers: Record<string, string | string[]>): Promise<Reply> {
  const r = await rawGrpcCall(ing.grpcAddress, LOGS_EXPORT, body, { headers: headers as Record<string, string> });
  return { transport: 'grpc', status: -1, code: r.code, message: r.message, retryAfter: null };
}

async function stop(ing: RunningIngester): Promise<void> {
  expect(ing.exitCode).toBeNull();
  expect(await ing.stop()).toBe(0);
  live.delete(ing);
}

describe('default mode with bearer tokens (--auth-bearer-tokens tok-acme,tok-beta)', () => {
  let ing: RunningIngester;
  let c: Client;
  beforeAll(async () => {
    ing = await start(['--auth-bearer-tokens', 'tok-acme,tok-beta']);
    c = new Client(ing);
  });
  afterAll(async () => {
    c?.close();
    if (ing) await stop(ing);
  });

  it('regression (two-authorization-headers, item 9): two Authorization headers → 400 / INVALID_ARGUMENT on both transports, nothing stored', async () => {
    const walBefore = walBytes(ing.walDir);
    const body = logsProto(['two-authorizations-http']);
    const http = await expectRefused(
      c,
      () => rawHttpPost(ing, 'logs', body, { Authorization: 'Bearer tok-acme', authorization: 'Bearer tok-beta' }),
      400,
    );
    expect(http.message).toMatch(/Authorization/);
    // Neither grpc-js nor node:http2 sends two authorization fields; Node's HTTP/2
    // server folds two into "a, b", which is what goes out here by hand.
    const rpc = await expectRefused(
      c,
      () => rawGrpc(ing, logsProto(['two-authorizations-grpc']), { authorization: 'Bearer tok-acme, Bearer tok-beta' }),
      400,
    );
    expect(rpc.message).toMatch(/Authorization/);
    // One credential is still fine on both.
    for (const t of TRANSPORTS) await expectAccepted(c, () => c.send(t, 'logs', `one-authorization-${t}`, { authorization: 'Bearer tok-beta' }));
    expect(walBytes(ing.walDir)).toBeGreaterThan(walBefore);
    expect(textsUnder(path.join(ing.walDir, 'logs')).filter((t) => t.startsWith('two-authorizations'))).toEqual([]);
    figures['twoAuthorizationHeaders'] = { http: http.status, grpc: rpc.code };
  });

  it('regression (comma-list-org-id, item 10): X-Scope-OrgID: acme,beta → 400 / INVALID_ARGUMENT on both transports, no denial counted', async () => {
    const outcomes: Record<string, number> = {};
    for (const t of TRANSPORTS) {
      const r = await expectRefused(
        c,
        () => c.send(t, 'logs', `comma-org-${t}`, { authorization: 'Bearer tok-acme', 'x-scope-orgid': 'acme,beta' }),
        400,
      );
      outcomes[t] = t === 'http' ? r.status : r.code;
    }
    // With a space after the comma, as a proxy folds two fields.
    await expectRefused(
      c,
      () => rawHttpPost(ing, 'logs', logsProto(['comma-space-org']), { Authorization: 'Bearer tok-acme', 'X-Scope-OrgID': 'acme, beta' }),
      400,
    );
    figures['commaListOrgId'] = outcomes;
    expect(topDirs(ing.walDir).filter((d) => d !== 'logs')).toEqual([]);
  });
});

describe('--rate-limit-per-sec alone (--trust-tenant-header --rate-limit-per-sec 0.01 --rate-limit-burst 3)', () => {
  let ing: RunningIngester;
  let c: Client;
  beforeAll(async () => {
    ing = await start(['--trust-tenant-header', '--rate-limit-per-sec', '0.01', '--rate-limit-burst', '3']);
    c = new Client(ing);
  });
  afterAll(async () => {
    c?.close();
    if (ing) await stop(ing);
  });

  it('regression (one-global-bucket, item 8): tenant a spending its bucket never refuses tenant b', async () => {
    const a: number[] = [];
    for (let i = 0; i < 5; i++) a.push((await c.send('http', 'logs', `rate-a-${i}`, { 'x-scope-orgid': 'a' })).status);
    expect(a).toEqual([200, 200, 200, 429, 429]);
    const b: boolean[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await c.send(i % 2 ? 'grpc' : 'http', 'logs', `rate-b-${i}`, { 'x-scope-orgid': 'b' });
      b.push(r.transport === 'http' ? r.status === 200 : r.code === grpc.status.OK);
    }
    expect(b).toEqual([true, true, true]);
    expect(textsUnder(path.join(ing.walDir, 'b')).sort()).toEqual(['rate-b-0', 'rate-b-1', 'rate-b-2']);
    figures['tenantRateAlone'] = { a, bAccepted: 3 };
  });
});

void fs;
void delta;
void only;
