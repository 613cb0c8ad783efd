// The tenancy boundary without authentication (issue 3; contract §4, §5, §6,
// §8; reliability "bad headers" and "tenant isolation" rows), against the real
// `siglake ingest` process, over OTLP/HTTP and OTLP/gRPC for every rule:
//
//   - default mode: everything is tenant `default`; any other X-Scope-OrgID is
//     403 header_not_trusted
//   - trusted-header mode: X-Scope-OrgID routes to <wal>/<tenant>/; an invalid
//     identifier is a 400 that is not a denial, and leaves no directory
//   - --allowed-tenants (403 not_allowed, checked before the tenant cap)
//   - --max-tenants (403 at_capacity, first come, empty at every start)
//   - the lane cap is checked before the tenant cap is charged
//   - a request refused for its body leaves no tenant slot and no directory

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOGS_EXPORT, grpc, rawGrpcCall } from '../helpers/grpc-client.js';
import { listFiles, startIngester, tempDir, type RunningIngester } from '../helpers/ingester.js';
import { jsonBytes, logsJson, logsProto, pseudoRandomBytes } from '../helpers/otlp-bodies.js';
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

// ------------------------------------------------------------------ helpers

const sorted = (xs: string[]): string[] => [...xs].sort();

// ------------------------------------------------------------------ default mode

describe('default mode (neither option): every write is tenant default', () => {
  let ing: RunningIngester;
  let c: Client;
  const logsTexts: string[] = [];
  const tracesTexts: string[] = [];
  beforeAll(async () => {
    ing = await startIngester();
    c = new Client(ing);
  });
  afterAll(async () => {
    c?.close();
    if (ing) expect(await ing.stop()).toBe(0);
  });

  it('all six denial series exist at zero from start-up', async () => {
    expect(await c.denials()).toEqual(only(undefined));
    expect(await ing.metric('siglake_ingest_tenants_admitted')).toBe(0);
  });

  for (const t of TRANSPORTS) {
    it(`${t}: no X-Scope-OrgID → 200, stored under <wal>/logs and <wal>/traces`, async () => {
      await expectAccepted(c, () => c.send(t, 'logs', `dflt-noheader-${t}`));
      await expectAccepted(c, () => c.send(t, 'traces', `dflt-noheader-span-${t}`));
      logsTexts.push(`dflt-noheader-${t}`);
      tracesTexts.push(`dflt-noheader-span-${t}`);
    });

    it(`${t}: X-Scope-OrgID: default → 200, same place`, async () => {
      await expectAccepted(c, () => c.send(t, 'logs', `dflt-header-${t}`, { 'x-scope-orgid': 'default' }));
      await expectAccepted(c, () => c.send(t, 'traces', `dflt-header-span-${t}`, { 'x-scope-orgid': 'default' }));
      logsTexts.push(`dflt-header-${t}`);
      tracesTexts.push(`dflt-header-span-${t}`);
    });

    it(`${t}: X-Scope-OrgID naming another tenant → 403 header_not_trusted, counted once, nothing stored`, async () => {
      for (const [signal, other] of [
        ['logs', 'acme'],
        ['traces', 'acme'],
        ['logs', 'Default'],
        ['logs', 'tenant-b'],
      ] as const) {
        await expectRefused(c, () => c.send(t, signal, `dflt-refused-${other}-${t}`, { 'x-scope-orgid': other }), 403, 'header_not_trusted');
      }
    });

    it(`${t}: an empty X-Scope-OrgID → 400 (malformed, not a denial)`, async () => {
      await expectRefused(c, () => c.send(t, 'logs', `dflt-empty-${t}`, { 'x-scope-orgid': '' }), 400, 'SIGLAKE_BAD_HEADER');
    });
  }

  it('http: the refusal of an OTLP/JSON request is a google.rpc.Status in JSON naming the reason', async () => {
    const r = await expectRefused(
      c,
      () => c.send('http', 'logs', '', { 'x-scope-orgid': 'acme' }, jsonBytes(logsJson(['dflt-refused-json'])), 'application/json'),
      403,
      'header_not_trusted',
    );
    expect(r.bodyCode).toBe(grpc.status.PERMISSION_DENIED);
  });

  it('http: X-Scope-OrgID: default sent twice → 400 (a repeated header is malformed in every mode)', async () => {
    const body = logsProto(['dflt-two-headers-http']);
    await expectRefused(c, () => rawHttpPost(ing, 'logs', body, { 'X-Scope-OrgID': 'default', 'x-scope-orgid': 'default' }), 400, 'SIGLAKE_BAD_HEADER');
  });

  it('grpc: x-scope-orgid metadata with two values (both default) → INVALID_ARGUMENT', async () => {
    const md = new grpc.Metadata();
    md.add('x-scope-orgid', 'default');
    md.add('x-scope-orgid', 'default');
    await expectRefused(c, () => c.sendMetadata('logs', logsProto(['dflt-two-headers-grpc']), md), 400, 'SIGLAKE_BAD_HEADER');
  });

  it('only <wal>/logs and <wal>/traces exist and hold exactly the accepted records', async () => {
    expect(topDirs(ing.walDir)).toEqual(['logs', 'traces']);
    expect(textsUnder(path.join(ing.walDir, 'logs'))).toEqual(sorted(logsTexts));
    expect(textsUnder(path.join(ing.walDir, 'traces'))).toEqual(sorted(tracesTexts));
    const m = await ing.metrics();
    expect(m.get('siglake_ingest_tenants_admitted')).toBe(1);
  });
});

// ------------------------------------------------------------------ trusted-header mode

const ID_128 = 'T' + 'x'.repeat(126) + '9';
const ID_129 = ID_128 + 'z';
const RESERVED = ['logs', 'traces', 'metrics', 'indexes', 'tmp', 'checkpoints', 'archive', 'lost+found'];

function letterCases(name: string): string[] {
  const upper = name.toUpperCase();
  const capital = name.charAt(0).toUpperCase() + name.slice(1);
  const alternating = [...name].map((ch, i) => (i % 2 === 1 ? ch.toUpperCase() : ch)).join('');
  return [...new Set([name, upper, capital, alternating])];
}

/** Header values that break the identifier rule: each is a 400 in trusted-header mode. */
const INVALID_IDS: Array<[string, string]> = [
  ['129 characters', ID_129],
  ...RESERVED.flatMap((n) => letterCases(n).map((v): [string, string] => [`reserved ${JSON.stringify(v)}`, v])),
  ['../x', '../x'],
  ['a/b', 'a/b'],
  ['a dot', 'acme.prod'],
  ['a space', 'acme prod'],
  ['.hidden', '.hidden'],
  ['empty', ''],
];

// Cyrillic look-alikes: а (U+0430) and е (U+0435) in place of Latin a and e.
const LOOKALIKES: Array<[string, string]> = [
  ['leading Cyrillic а in "аcme"', '\u0430cme'],
  ['Cyrillic а inside "tenаnt"', 'ten\u0430nt'],
  ['trailing Cyrillic е in "acmе"', 'acm\u0435'],
];
// uWebSockets.js (20.30) trims bytes >= 0x80 off both ends of a header value
// as if they were spaces, before Siglake sees it (docs/multi-tenancy.md, known
// limitations): over HTTP only a look-alike INSIDE the value can be refused.
const HTTP_LOOKALIKE_INSIDE: Array<[string, string]> = [LOOKALIKES[1]!];
const HTTP_LOOKALIKE_AT_EDGES: Array<[string, string, string]> = [
  [LOOKALIKES[0]![0], LOOKALIKES[0]![1], 'cme'],
  [LOOKALIKES[2]![0], LOOKALIKES[2]![1], 'acm'],
];

describe('trusted-header mode (--trust-tenant-header)', () => {
  let ing: RunningIngester;
  let c: Client;
  const acmeTexts: string[] = [];
  const defaultLogs: string[] = [];
  beforeAll(async () => {
    ing = await startIngester({ args: ['--trust-tenant-header'] });
    c = new Client(ing);
  });
  afterAll(async () => {
    c?.close();
    if (ing) expect(await ing.stop()).toBe(0);
  });

  for (const t of TRANSPORTS) {
    it(`${t}: X-Scope-OrgID: acme → 200 into <wal>/acme/logs and <wal>/acme/traces`, async () => {
      await expectAccepted(c, () => c.send(t, 'logs', `acme-log-${t}`, { 'x-scope-orgid': 'acme' }));
      await expectAccepted(c, () => c.send(t, 'traces', `acme-span-${t}`, { 'x-scope-orgid': 'acme' }));
      acmeTexts.push(`acme-log-${t}`, `acme-span-${t}`);
      expect(fs.existsSync(path.join(ing.walDir, 'acme', 'logs'))).toBe(true);
      expect(fs.existsSync(path.join(ing.walDir, 'acme', 'traces'))).toBe(true);
    });

    it(`${t}: no X-Scope-OrgID → tenant default (<wal>/logs)`, async () => {
      await expectAccepted(c, () => c.send(t, 'logs', `hdr-default-${t}`));
      defaultLogs.push(`hdr-default-${t}`);
      expect(fs.existsSync(path.join(ing.walDir, 'logs'))).toBe(true);
    });

    it(`${t}: a 128-character identifier is accepted`, async () => {
      await expectAccepted(c, () => c.send(t, 'logs', `id128-${t}`, { 'x-scope-orgid': ID_128 }));
      expect(fs.existsSync(path.join(ing.walDir, ID_128, 'logs'))).toBe(true);
    });

    it(`${t}: every invalid identifier → 400, not counted as a denial`, async () => {
      for (const [, value] of INVALID_IDS) {
        await expectRefused(c, () => c.send(t, 'logs', `invalid-${t}`, { 'x-scope-orgid': value }), 400, 'SIGLAKE_BAD_HEADER');
      }
    });
  }

  it('http: two X-Scope-OrgID header lines (each valid on its own) → 400', async () => {
    const body = logsProto(['two-headers-http']);
    await expectRefused(c, () => rawHttpPost(ing, 'logs', body, { 'X-Scope-OrgID': 'dup-one', 'x-scope-orgid': 'dup-two' }), 400, 'SIGLAKE_BAD_HEADER');
  });

  it('grpc: x-scope-orgid metadata with two values (each valid on its own) → INVALID_ARGUMENT', async () => {
    const md = new grpc.Metadata();
    md.add('x-scope-orgid', 'dup-three');
    md.add('x-scope-orgid', 'dup-four');
    await expectRefused(c, () => c.sendMetadata('logs', logsProto(['two-headers-grpc']), md), 400, 'SIGLAKE_BAD_HEADER');
  });

  for (const [what, value] of HTTP_LOOKALIKE_INSIDE) {
    it(`http: a Unicode look-alike (${what}) → 400, never trimmed into another tenant`, async () => {
      const body = logsProto([`lookalike-http-${value}`]);
      await expectRefused(c, () => rawHttpPost(ing, 'logs', body, { 'X-Scope-OrgID': value }), 400, 'SIGLAKE_BAD_HEADER');
    });
  }

  for (const [what, value, trimmed] of HTTP_LOOKALIKE_AT_EDGES) {
    it(`http: known limitation: uWS trims a non-ASCII byte at an end of the value (${what} arrives as "${trimmed}")`, async () => {
      // Pinned so that a uWS that stops doing this fails here and the limitation
      // can be removed from the docs. In trusted-header mode the gateway sets
      // the header; a claim-mode header must still equal the verified claim.
      const r = await rawHttpPost(ing, 'logs', logsProto([`edge-lookalike-${trimmed}`]), { 'X-Scope-OrgID': value });
      expect(r.status).toBe(200);
      expect(textsUnder(path.join(ing.walDir, trimmed))).toEqual([`edge-lookalike-${trimmed}`]);
    });
  }

  for (const [what, value] of LOOKALIKES) {
    it(`grpc: a Unicode look-alike (${what}, UTF-8 bytes in the metadata) → INVALID_ARGUMENT, never routed to default`, async () => {
      const before = await c.denials();
      const walBefore = walBytes(ing.walDir);
      // grpc-js refuses to send a non-ASCII value, so the call goes out over node:http2 by hand.
      const r = await rawGrpcCall(ing.grpcAddress, LOGS_EXPORT, logsProto([`lookalike-grpc-${value}`]), {
        headers: { 'x-scope-orgid': Buffer.from(value, 'utf8').toString('latin1') },
      });
      expect(r.code, `grpc-status (${r.message})`).toBe(grpc.status.INVALID_ARGUMENT);
      expect(r.errorCode).toBe('SIGLAKE_BAD_HEADER');
      expect(delta(before, await c.denials())).toEqual(only(undefined));
      expect(walBytes(ing.walDir), 'bytes in the WAL').toBe(walBefore);
    });
  }

  it('http: control characters in X-Scope-OrgID are refused by uWS itself: no answer, nothing written', async () => {
    // uWebSockets.js drops a request whose header value holds a control
    // character before any handler runs (the connection idles out); it is
    // never admitted.
    const walBefore = walBytes(ing.walDir);
    const r = await rawHttpPost(ing, 'logs', logsProto(['control-char-http']), { 'X-Scope-OrgID': 'ac\u0001me' });
    expect(r.status).toBe(0);
    expect(walBytes(ing.walDir)).toBe(walBefore);
    expect(fs.existsSync(path.join(ing.walDir, 'ac\u0001me'))).toBe(false);
  });

  it('http: known limitation: a request head of more than 48 header fields gets no answer (not the contract\'s 431), and nothing is written', async () => {
    // uWebSockets.js 20.30 parses at most 48 fields and drops a longer head
    // without an answer; the connection idles out (docs/runbooks.md,
    // SIGLAKE_TOO_MANY_HEADERS). Pinned so that a uWS that answers 431 fails
    // here and the docs can say so. 30 extra fields are fine.
    const extra = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`x-extra-${i}`, 'v']));
    const walBefore = walBytes(ing.walDir);
    const many = await rawHttpPost(ing, 'logs', logsProto(['many-headers']), { 'X-Scope-OrgID': 'manyheaders', ...extra(60) });
    expect(many.status).toBe(0);
    expect(walBytes(ing.walDir)).toBe(walBefore);
    expect(fs.existsSync(path.join(ing.walDir, 'manyheaders'))).toBe(false);
    const some = await rawHttpPost(ing, 'logs', logsProto(['some-headers']), { 'X-Scope-OrgID': 'acme', ...extra(30) });
    expect(some.status).toBe(200);
    acmeTexts.push('some-headers');
  });

  it('no directory was created for any refused value; only the accepted tenants exist', async () => {
    expect(topDirs(ing.walDir)).toEqual(sorted(['acme', 'logs', ID_128, 'cme', 'acm']));
    for (const [, value] of [...INVALID_IDS, ...LOOKALIKES]) {
      if (value === '') continue;
      // A tenant directory would hold a logs lane (the default tenant's own
      // <wal>/logs is why a reserved name is checked this way).
      expect(fs.existsSync(path.join(ing.walDir, value, 'logs')), value).toBe(false);
    }
    // The inside look-alike was refused, not trimmed; the edge ones are the pinned uWS limitation.
    expect(fs.existsSync(path.join(ing.walDir, 'tennt'))).toBe(false);
    for (const dup of ['dup-one', 'dup-two', 'dup-three', 'dup-four']) expect(fs.existsSync(path.join(ing.walDir, dup))).toBe(false);
    expect(listFiles(path.join(ing.walDir, 'acme')).filter((f) => f.endsWith('/'))).toEqual(['logs/', 'traces/']);
    expect(textsUnder(path.join(ing.walDir, 'acme'))).toEqual(sorted(acmeTexts));
    expect(textsUnder(path.join(ing.walDir, 'logs'))).toEqual(sorted(defaultLogs));
    expect(textsUnder(path.join(ing.walDir, ID_128))).toEqual(['id128-grpc', 'id128-http']);
    expect(await c.denials()).toEqual(only(undefined));
    expect(await ing.metric('siglake_ingest_tenants_admitted')).toBe(5);
  });

  it('a request refused for its body on a novel tenant leaves no slot, no lane and no directory', async () => {
    const m0 = await ing.metrics();
    const admitted = m0.get('siglake_ingest_tenants_admitted');
    const lanes = m0.get('siglake_ingest_lanes');
    const cases: Array<[string, () => Promise<Reply>, number, `SIGLAKE_${string}` | undefined]> = [
      ['http 415 text/plain', () => c.send('http', 'logs', '', { 'x-scope-orgid': 'novel-415' }, logsProto(['x']), 'text/plain'), 415, undefined],
      ['http 400 random bytes', () => c.send('http', 'logs', '', { 'x-scope-orgid': 'novel-400' }, pseudoRandomBytes(512)), 400, 'SIGLAKE_BAD_BODY'],
      [
        'http 400 bad JSON',
        () => c.send('http', 'traces', '', { 'x-scope-orgid': 'novel-json' }, jsonBytes({ resourceSpans: 'no' }), 'application/json'),
        400,
        'SIGLAKE_BAD_BODY',
      ],
      ['grpc 400 random bytes', () => c.send('grpc', 'logs', '', { 'x-scope-orgid': 'novel-grpc' }, pseudoRandomBytes(512)), 400, 'SIGLAKE_BAD_BODY'],
      ['grpc 400 wrong wire type', () => c.send('grpc', 'traces', '', { 'x-scope-orgid': 'novel-grpc2' }, Uint8Array.from([0x08, 0x01])), 400, 'SIGLAKE_BAD_BODY'],
    ];
    for (const [what, send, status, code] of cases) {
      const r = await expectRefused(c, send, status, code);
      expect(r.message, what).not.toBe('');
    }
    const m1 = await ing.metrics();
    expect(m1.get('siglake_ingest_tenants_admitted')).toBe(admitted);
    expect(m1.get('siglake_ingest_lanes')).toBe(lanes);
    for (const t of ['novel-415', 'novel-400', 'novel-json', 'novel-grpc', 'novel-grpc2']) {
      expect(listFiles(path.join(ing.walDir, t)), t).toEqual([]);
    }
  });
});

// ------------------------------------------------------------------ allow-list

describe('--allowed-tenants team-a,team-b with --max-tenants 2 (trusted-header mode)', () => {
  let ing: RunningIngester;
  let c: Client;
  beforeAll(async () => {
    ing = await startIngester({ args: ['--trust-tenant-header', '--allowed-tenants', 'team-a,team-b', '--max-tenants', '2'] });
    c = new Client(ing);
  });
  afterAll(async () => {
    c?.close();
    if (ing) expect(await ing.stop()).toBe(0);
  });

  for (const t of TRANSPORTS) {
    it(`${t}: a tenant outside the list → 403 not_allowed, counted once (before any other tenant wrote)`, async () => {
      await expectRefused(c, () => c.send(t, 'logs', `c-${t}`, { 'x-scope-orgid': 'team-c' }), 403, 'not_allowed');
      await expectRefused(c, () => c.send(t, 'traces', `c-span-${t}`, { 'x-scope-orgid': 'team-c' }), 403, 'not_allowed');
      // No header means tenant default, which is not on the list either.
      await expectRefused(c, () => c.send(t, 'logs', `nohdr-${t}`), 403, 'not_allowed');
      expect(await ing.metric('siglake_ingest_tenants_admitted')).toBe(0);
    });
  }

  it('team-a and team-b are both admitted afterwards: the refusals spent no tenant slot', async () => {
    for (const t of TRANSPORTS) {
      await expectAccepted(c, () => c.send(t, 'logs', `a-${t}`, { 'x-scope-orgid': 'team-a' }));
      await expectAccepted(c, () => c.send(t, 'traces', `b-${t}`, { 'x-scope-orgid': 'team-b' }));
    }
    expect(await ing.metric('siglake_ingest_tenants_admitted')).toBe(2);
  });

  for (const t of TRANSPORTS) {
    it(`${t}: with the cap full, team-c is still not_allowed, never at_capacity (allow-list before tenant cap)`, async () => {
      await expectRefused(c, () => c.send(t, 'logs', `c-again-${t}`, { 'x-scope-orgid': 'team-c' }), 403, 'not_allowed');
    });
  }

  it('nothing on disk for team-c or default; team-a and team-b hold their own records', async () => {
    expect(topDirs(ing.walDir)).toEqual(['team-a', 'team-b']);
    expect(textsUnder(path.join(ing.walDir, 'team-a'))).toEqual(['a-grpc', 'a-http']);
    expect(textsUnder(path.join(ing.walDir, 'team-b'))).toEqual(['b-grpc', 'b-http']);
    const d = await c.denials();
    expect(d).toEqual({ ...only(undefined), not_allowed: 8 });
  });
});

// ------------------------------------------------------------------ tenant cap

describe('--max-tenants 2 (trusted-header mode)', () => {
  const dataDir = tempDir('siglake-tenancy-cap-');
  let ing: RunningIngester;
  let c: Client;
  const args = ['--trust-tenant-header', '--max-tenants', '2'];
  beforeAll(async () => {
    ing = await startIngester({ args, dataDir, indexes: { t1: ['audit'] } });
    c = new Client(ing);
  });
  afterAll(async () => {
    c?.close();
    if (ing) expect(await ing.stop()).toBe(0);
  });

  it('bad bodies on three novel tenants spend no slot and leave no directory', async () => {
    await expectRefused(c, () => c.send('http', 'logs', '', { 'x-scope-orgid': 'bad-1' }, logsProto(['x']), 'text/plain'), 415);
    await expectRefused(c, () => c.send('http', 'logs', '', { 'x-scope-orgid': 'bad-2' }, pseudoRandomBytes(300)), 400, 'SIGLAKE_BAD_BODY');
    await expectRefused(c, () => c.send('grpc', 'traces', '', { 'x-scope-orgid': 'bad-3' }, pseudoRandomBytes(300)), 400, 'SIGLAKE_BAD_BODY');
    const m = await ing.metrics();
    expect(m.get('siglake_ingest_tenants_admitted')).toBe(0);
    expect(m.get('siglake_ingest_lanes')).toBe(0);
    expect(listFiles(ing.walDir)).toEqual([]);
  });

  it('t1 (HTTP) and t2 (gRPC) are admitted', async () => {
    await expectAccepted(c, () => c.send('http', 'logs', 't1-first', { 'x-scope-orgid': 't1' }));
    await expectAccepted(c, () => c.send('grpc', 'logs', 't2-first', { 'x-scope-orgid': 't2' }));
    expect(await ing.metric('siglake_ingest_tenants_admitted')).toBe(2);
  });

  for (const t of TRANSPORTS) {
    it(`${t}: a third tenant → 403 at_capacity, counted once, nothing on disk`, async () => {
      await expectRefused(c, () => c.send(t, 'logs', `t3-${t}`, { 'x-scope-orgid': 't3' }), 403, 'at_capacity');
      await expectRefused(c, () => c.send(t, 'traces', `t3-span-${t}`, { 'x-scope-orgid': 't3' }), 403, 'at_capacity');
      expect(fs.existsSync(path.join(ing.walDir, 't3'))).toBe(false);
    });
  }

  it('t1 and t2 keep writing at the cap, on existing and on new lanes (traces, a managed index)', async () => {
    for (const t of TRANSPORTS) {
      await expectAccepted(c, () => c.send(t, 'logs', `t1-more-${t}`, { 'x-scope-orgid': 't1' }));
      await expectAccepted(c, () => c.send(t, 'traces', `t2-span-${t}`, { 'x-scope-orgid': 't2' }));
      await expectAccepted(c, () => c.send(t, 'logs', `t1-idx-${t}`, { 'x-scope-orgid': 't1', 'x-siglake-index': 'audit' }));
    }
    const m = await ing.metrics();
    expect(m.get('siglake_ingest_tenants_admitted')).toBe(2);
    expect(m.get('siglake_ingest_lanes')).toBe(4);
    expect(topDirs(ing.walDir)).toEqual(['t1', 't2']);
    expect(textsUnder(path.join(ing.walDir, 't1', 'indexes', 'audit'))).toEqual(['t1-idx-grpc', 't1-idx-http']);
    expect(textsUnder(path.join(ing.walDir, 't1', 'logs'))).toEqual(['t1-first', 't1-more-grpc', 't1-more-http']);
    expect(textsUnder(path.join(ing.walDir, 't2'))).toEqual(['t2-first', 't2-span-grpc', 't2-span-http']);
    expect(await c.denials()).toEqual({ ...only(undefined), at_capacity: 4 });
  });

  it('after a restart on the same data the set starts empty and admission is first come (WAL directories give no priority)', async () => {
    c.close();
    expect(await ing.stop()).toBe(0);
    ing = await startIngester({ args, dataDir });
    c = new Client(ing);
    const m = await ing.metrics();
    expect(m.get('siglake_ingest_tenants_admitted')).toBe(0);
    expect(await c.denials()).toEqual(only(undefined));

    await expectAccepted(c, () => c.send('grpc', 'logs', 't3-after-restart', { 'x-scope-orgid': 't3' }));
    await expectAccepted(c, () => c.send('http', 'logs', 't1-after-restart', { 'x-scope-orgid': 't1' }));
    expect(await ing.metric('siglake_ingest_tenants_admitted')).toBe(2);
    // t2 has a WAL directory from the last run, but arrived third.
    for (const t of TRANSPORTS) {
      await expectRefused(c, () => c.send(t, 'logs', `t2-after-restart-${t}`, { 'x-scope-orgid': 't2' }), 403, 'at_capacity');
    }
    expect(textsUnder(path.join(ing.walDir, 't3'))).toEqual(['t3-after-restart']);
    expect(textsUnder(path.join(ing.walDir, 't2'))).toEqual(['t2-first', 't2-span-grpc', 't2-span-http']);
    expect(topDirs(ing.walDir)).toEqual(['t1', 't2', 't3']);
  });
});

// ------------------------------------------------------------------ order of checks

describe('order of checks: lane cap before tenant cap (--ingest-max-lanes 1 --max-tenants 5)', () => {
  let ing: RunningIngester;
  let c: Client;
  const LANE_CAP = 'Service Unavailable: ingester lane limit reached (1 lanes)';
  beforeAll(async () => {
    ing = await startIngester({ args: ['--trust-tenant-header', '--ingest-max-lanes', '1', '--max-tenants', '5'] });
    c = new Client(ing);
  });
  afterAll(async () => {
    c?.close();
    if (ing) expect(await ing.stop()).toBe(0);
  });

  it('the first tenant takes the only lane', async () => {
    await expectAccepted(c, () => c.send('http', 'logs', 'first-lane', { 'x-scope-orgid': 'first' }));
    expect(await ing.metric('siglake_ingest_tenants_admitted')).toBe(1);
  });

  it('novel tenants past the lane cap → 503 without Retry-After (lane-cap text), and spend no tenant slot', async () => {
    // More novel tenants than --max-tenants: if the lane refusals spent slots, the gauge would show it.
    for (let i = 1; i <= 6; i++) {
      for (const t of TRANSPORTS) {
        const r = await expectRefused(c, () => c.send(t, 'logs', `novel-${i}-${t}`, { 'x-scope-orgid': `novel-${i}` }), 503, 'SIGLAKE_LANE_CAP');
        expect(r.message.startsWith(LANE_CAP)).toBe(true);
        expect(r.message).toContain('--ingest-max-lanes');
        expect(r.retryAfter).toBeNull();
      }
    }
    const m = await ing.metrics();
    expect(m.get('siglake_ingest_tenants_admitted')).toBe(1);
    expect(m.get('siglake_ingest_lanes')).toBe(1);
    expect(m.get('siglake_ingest_rejected_total{reason="lane_cap"}')).toBe(12);
    expect(m.get('siglake_ingest_tenant_denied_total{reason="at_capacity"}')).toBe(0);
    expect(topDirs(ing.walDir)).toEqual(['first']);
  });

  it('the admitted tenant still writes on its lane', async () => {
    await expectAccepted(c, () => c.send('grpc', 'logs', 'first-again', { 'x-scope-orgid': 'first' }));
    expect(textsUnder(path.join(ing.walDir, 'first'))).toEqual(['first-again', 'first-lane']);
  });
});
