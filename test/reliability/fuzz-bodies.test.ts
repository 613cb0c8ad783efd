// The "bad bodies" row of the reliability table as a seeded fuzzer against the
// real process: FixtureGenerator requests (logs and traces, protobuf and
// OTLP/JSON) mutated structurally and byte by byte (bit flips, truncation,
// huge declared lengths, wrong wire types, overlong varints, deep nesting,
// invalid UTF-8, odd id lengths, unknown and group fields, wrong JSON types,
// duplicate keys), gzipped or not (corrupt gzip, gzip bombs), over the body
// cap, with wrong content types and encodings, over HTTP and gRPC.
//
// An independent oracle (test/reliability/lib/otlp-oracle.ts: protobufjs'
// schema plus the contract's rules) says what each body is. Invariants:
// - the process never crashes and answers every request: 200 only for a body
//   the oracle finds valid, else the 4xx of its class (400 / 413 / 415) with a
//   reason; never a 5xx, never a hang;
// - RSS stays under a bound;
// - the WAL holds exactly the accepted bodies: each protobuf one byte for byte,
//   each OTLP/JSON one as protobuf meaning the same (protobufjs' reading of the
//   JSON), every stored payload valid by the oracle with the right record
//   count, and no lane a refused body would have made.
// CI runs a few thousand cases; SIGLAKE_CHAOS=1 runs 100,000 or more.

import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FixtureGenerator, type Fixture } from '../../src/otlp/fixtures.js';
import { RecordType } from '../../src/wal/format.js';
import { SegmentReader } from '../../src/wal/segment-reader.js';
import { OtlpRowDecoder } from '../../src/compactor/otlp-row-decoder.js';
import { OtlpWireRows } from '../../src/compactor/otlp-wire-rows.js';
import { RawGrpcClient } from '../helpers/grpc-client.js';
import { listFiles, type RunningIngester } from '../helpers/ingester.js';
import { decodeStatus, gzip, proto } from '../helpers/otlp-bodies.js';
import { MiB, ProcSampler } from './lib/proc.js';
import { ProtoMutator, mutateJson, type JsonExpectation } from './lib/otlp-mutator.js';
import { OtlpOracle, gunzipOracle, parseJsonStrict, type HttpClass, type Signal } from './lib/otlp-oracle.js';
import { Prng } from './lib/prng.js';
import { startWalIngester } from './lib/wal-ingester.js';
import { CHAOS, baseSeed, figuresDir, recordFigures, scaled } from './lib/scale.js';
import { verifyWal } from './lib/wal-files.js';

const CASES = scaled(3000, 100_000, 'SIGLAKE_FUZZ_CASES');
const CONCURRENCY = 8;
const CAP = 256 * 1024;
const RSS_BOUND = 512 * MiB;
const JSON_INDEX = 'json';
const seed = baseSeed('fuzz-bodies');
const live = new Set<RunningIngester>();
let figures: Record<string, unknown> = {};

afterAll(async () => {
  for (const ing of live) await ing.kill9();
  recordFigures('fuzz-bodies', { seed, cases: CASES, capBytes: CAP, ...figures });
});

type Expect = HttpClass | 'either';

interface FuzzCase {
  i: number;
  transport: 'http' | 'grpc';
  /** The endpoint's signal (a body may be of the other one). */
  signal: Signal;
  contentType: string | undefined;
  encoding: string | undefined;
  index: string | undefined;
  body: Uint8Array;
  kinds: string[];
  expect: Expect;
  why?: string;
  /** What the WAL must hold if the answer is 200 ('proto': these bytes; 'json': this meaning). */
  stored?: { kind: 'proto'; bytes: Uint8Array; records: number } | { kind: 'json'; value: Record<string, unknown> };
}

const oracle = new OtlpOracle(proto);
const referenceDecoder = new OtlpRowDecoder(proto);
const wireDecoder = new OtlpWireRows();
const mutator = new ProtoMutator(oracle);
const sha = (b: Uint8Array | string) => createHash('sha1').update(b).digest('base64');

/** Pools of valid requests to mutate: different sizes, resources, value kinds. */
function corpus(prng: Prng): Record<Signal, Fixture[]> {
  const gen = new FixtureGenerator(prng.u32(), proto);
  const make = (signal: Signal) =>
    Array.from({ length: 48 }, () =>
      gen.request(signal, {
        targetBytes: prng.pick([120, 400, 1024, 3000, 9000]),
        resources: prng.range(1, 3),
        allValueKinds: prng.chance(0.5),
        logBodyBytes: prng.pick([16, 160, 600]),
      }),
    );
  return { logs: make('logs'), traces: make('traces') };
}

function classify(c: FuzzCase, jsonExpect: JsonExpectation | undefined): void {
  if (c.transport === 'grpc') {
    if (c.body.length > CAP) return void (c.expect = 413);
    const v = oracle.check(c.signal, c.body);
    c.expect = v.valid ? 200 : 400;
    c.why = v.why;
    if (v.valid && c.body.length > 0) c.stored = { kind: 'proto', bytes: c.body, records: v.records };
    return;
  }
  const ct = c.contentType;
  if (ct !== 'application/x-protobuf' && ct !== 'application/json') return void (c.expect = 415);
  const enc = c.encoding?.toLowerCase();
  if (enc !== undefined && enc !== 'gzip') return void (c.expect = 415);
  if (c.body.length > CAP) return void (c.expect = 413);
  let bytes = c.body;
  if (enc === 'gzip') {
    const g = gunzipOracle(c.body, CAP);
    if (g === 400 || g === 413) return void (c.expect = g);
    bytes = g;
  }
  if (ct === 'application/json') {
    const p = parseJsonStrict(bytes);
    if (!p.ok) return void (c.expect = 400);
    c.expect = jsonExpect ?? 'either';
    if (c.expect !== 400 && p.value !== null && typeof p.value === 'object' && !Array.isArray(p.value)) {
      c.stored = { kind: 'json', value: p.value as Record<string, unknown> };
    }
    if (c.expect !== 400 && (p.value === null || typeof p.value !== 'object' || Array.isArray(p.value))) c.expect = 400;
    return;
  }
  const v = oracle.check(c.signal, bytes);
  c.expect = v.valid ? 200 : 400;
  c.why = v.why;
  if (v.valid && bytes.length > 0) c.stored = { kind: 'proto', bytes, records: v.records };
}

function makeCase(i: number, prng: Prng, pool: Record<Signal, Fixture[]>, bombs: Uint8Array[]): FuzzCase {
  const bodySignal: Signal = prng.chance(0.5) ? 'logs' : 'traces';
  // Now and then a body goes to the other signal's endpoint.
  const signal: Signal = prng.chance(0.05) ? (bodySignal === 'logs' ? 'traces' : 'logs') : bodySignal;
  const base = prng.pick(pool[bodySignal]);
  const donor = prng.pick(pool[bodySignal]);
  const c: FuzzCase = {
    i,
    transport: 'http',
    signal,
    contentType: 'application/x-protobuf',
    encoding: undefined,
    index: undefined,
    body: new Uint8Array(0),
    kinds: [],
    expect: 400,
  };
  let jsonExpect: JsonExpectation | undefined;
  const route = prng.weighted([
    [50, 'proto'],
    [10, 'grpc'],
    [24, 'json'],
    [5, 'content-type'],
    [3, 'encoding'],
    [5, 'over-cap'],
    [3, 'bomb'],
  ] as const);
  c.kinds.push(route);
  if (route === 'proto' || route === 'grpc') {
    const m = mutator.mutate(bodySignal, base.protobuf, donor.protobuf, prng);
    c.body = m.body;
    c.kinds.push(...m.kinds);
    if (route === 'grpc') c.transport = 'grpc';
  } else if (route === 'json') {
    const m = mutateJson(base.otlpJson, prng);
    c.body = m.body;
    c.kinds.push(m.kind);
    c.contentType = 'application/json';
    c.index = JSON_INDEX;
    // Sent to the other signal's endpoint, its top-level key is unknown there and skipped, whatever it holds.
    jsonExpect = bodySignal === signal ? m.expect : 'either';
  } else if (route === 'content-type') {
    c.body = prng.chance(0.5) ? base.protobuf : base.json;
    c.contentType = prng.pick([undefined, 'text/plain', 'application/xml', 'application/grpc', 'multipart/form-data', 'application/octet-stream']);
  } else if (route === 'encoding') {
    c.body = base.protobuf;
    c.encoding = prng.pick(['br', 'deflate', 'compress', 'zstd']);
  } else if (route === 'over-cap') {
    const big = prng.bytes(CAP + 1 + prng.int(64 * 1024));
    c.body = prng.chance(0.3) ? gzip(big) : big; // random bytes do not compress: over the cap either way
    if (c.body !== big) c.encoding = 'gzip';
    if (prng.chance(0.3)) c.transport = 'grpc';
  } else {
    c.body = prng.pick(bombs);
    c.encoding = 'gzip';
    c.contentType = prng.pick(['application/x-protobuf', 'application/json']);
  }
  // Some valid-so-far HTTP bodies travel gzipped, a few of them with the gzip stream damaged.
  if ((route === 'proto' || route === 'json') && prng.chance(0.15)) {
    let gz = gzip(c.body);
    c.kinds.push('gzip');
    if (prng.chance(0.3)) {
      gz = Uint8Array.from(gz);
      const what = prng.int(3);
      if (what === 0) gz[prng.int(gz.length)]! ^= 1 << prng.int(8);
      else if (what === 1) gz = gz.subarray(0, prng.int(gz.length));
      else gz = Uint8Array.from([...gz, ...prng.bytes(1 + prng.int(8))]);
      c.kinds.push('gzip-damaged');
    }
    c.body = gz;
    c.encoding = prng.pick(['gzip', 'GZIP', 'Gzip']);
  }
  classify(c, jsonExpect);
  return c;
}

interface Answer {
  status: number;
  reason: string;
}

const GRPC_TO_HTTP: Record<number, number> = { 0: 200, 3: 400, 8: 413 };

async function send(ing: RunningIngester, rpc: RawGrpcClient, c: FuzzCase): Promise<Answer> {
  if (c.transport === 'grpc') {
    const r = await rpc.export(c.signal, c.body, {}, 60_000);
    return { status: GRPC_TO_HTTP[r.code] ?? -100 - r.code, reason: r.details };
  }
  const headers: Record<string, string> = {};
  if (c.contentType !== undefined) headers['content-type'] = c.contentType;
  if (c.encoding !== undefined) headers['content-encoding'] = c.encoding;
  if (c.index !== undefined) headers['x-siglake-index'] = c.index;
  try {
    const res = await fetch(`${ing.url}/v1/${c.signal}`, { method: 'POST', body: c.body, headers, signal: AbortSignal.timeout(60_000) });
    const body = new Uint8Array(await res.arrayBuffer());
    let reason = '';
    if (res.status !== 200) {
      const ct = res.headers.get('content-type') ?? '';
      reason = ct.startsWith('text/plain') ? Buffer.from(body).toString('utf8') : decodeStatus(ct, body).message;
    }
    return { status: res.status, reason };
  } catch (e) {
    return { status: -1, reason: `transport error: ${(e as Error).message} ${(e as { cause?: Error }).cause?.message ?? ''}` };
  }
}

/** Every record of every lane under `walDir`: lane, type, count and payload. */
function walRecords(walDir: string): { lane: string; type: number; count: number; payload: Buffer }[] {
  const out: { lane: string; type: number; count: number; payload: Buffer }[] = [];
  for (const f of listFiles(walDir)) {
    const m = /^(.*)\/(\d+)\.seg$/.exec(f);
    if (!m) continue;
    const r = new SegmentReader(path.join(walDir, f));
    try {
      for (let rec = r.next(); rec !== null; rec = r.next()) {
        out.push({ lane: m[1]!, type: rec.type, count: rec.count, payload: Buffer.from(rec.payload) });
      }
    } finally {
      r.close();
    }
  }
  return out;
}

describe(`fuzzed bodies (${CASES} cases, --max-request-bytes ${CAP})`, () => {
  it('no crash; 200 only for valid bodies, else the 4xx of their class with a reason; RSS bounded; the WAL holds exactly the accepted bodies', async () => {
    const prng = new Prng(seed);
    const pool = corpus(prng.fork());
    const bombs = [
      gzip(new Uint8Array(CAP + 1)),
      gzip(new Uint8Array(8 * MiB)),
      Buffer.concat(Array.from({ length: 64 }, () => gzip(new Uint8Array(MiB)))),
    ];
    const ing = await startWalIngester({ workers: 2, args: ['--max-request-bytes', String(CAP), '--request-timeout-secs', '60'], indexes: { default: [JSON_INDEX] } });
    live.add(ing);
    const sampler = new ProcSampler(ing.child.pid!, 200, false);
    const rpcs = Array.from({ length: CONCURRENCY }, () => new RawGrpcClient(ing.grpcAddress));

    const mismatches: { c: FuzzCase; got: Answer }[] = [];
    const expectedProto = new Map<string, number>(); // lane|sha → count
    const expectedJson: { signal: Signal; value: Record<string, unknown>; i: number }[] = [];
    const stats = { sent: 0, ok: 0, refused: 0, byStatus: {} as Record<string, number>, byKind: {} as Record<string, number>, eitherOk: 0 };
    let next = 0;
    const gen = prng.fork();
    const worker = async (w: number) => {
      for (;;) {
        const i = next++;
        if (i >= CASES) return;
        const c = makeCase(i, gen, pool, bombs);
        const got = await send(ing, rpcs[w]!, c);
        stats.sent++;
        stats.byStatus[got.status] = (stats.byStatus[got.status] ?? 0) + 1;
        for (const k of c.kinds) stats.byKind[k] = (stats.byKind[k] ?? 0) + 1;
        const fits = c.expect === 'either' ? got.status === 200 || got.status === 400 : got.status === c.expect;
        const reasoned = got.status === 200 || got.reason.trim() !== '';
        if (!fits || !reasoned) {
          mismatches.push({ c, got });
          continue;
        }
        if (got.status !== 200) {
          stats.refused++;
          continue;
        }
        stats.ok++;
        if (c.expect === 'either') stats.eitherOk++;
        if (c.stored?.kind === 'proto') {
          const key = `${c.signal}|${sha(c.stored.bytes)}|${c.stored.records}`;
          expectedProto.set(key, (expectedProto.get(key) ?? 0) + 1);
        } else if (c.stored?.kind === 'json') {
          expectedJson.push({ signal: c.signal, value: c.stored.value, i: c.i });
        }
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, (_, w) => worker(w)));
    sampler.stop();
    for (const r of rpcs) r.close();

    // Keep the first mismatches as files, to replay by hand.
    if (mismatches.length > 0) {
      const dir = path.join(figuresDir(), `fuzz-mismatches-${seed}`);
      fs.mkdirSync(dir, { recursive: true });
      for (const { c, got } of mismatches.slice(0, 40)) {
        fs.writeFileSync(path.join(dir, `${c.i}.bin`), c.body);
        fs.writeFileSync(
          path.join(dir, `${c.i}.json`),
          JSON.stringify({ ...c, body: undefined, stored: undefined, bodyBytes: c.body.length, got }, null, 2),
        );
      }
    }
    const summary = mismatches
      .slice(0, 25)
      .map(({ c, got }) => `#${c.i} ${c.transport} ${c.signal} ${c.contentType ?? '-'} ${c.encoding ?? '-'} [${c.kinds.join(',')}] ${c.body.length}B expected ${c.expect}${c.why ? ` (${c.why})` : ''}, got ${got.status}: ${got.reason.slice(0, 160)}`);

    const alive = ing.exitCode === null && (await fetch(`${ing.url}/healthz`)).status === 200;
    expect(ing.exitCode, 'the ingester crashed').toBeNull();
    expect(alive).toBe(true);
    expect(await ing.stop()).toBe(0);
    live.delete(ing);

    // The WAL: exactly the accepted bodies, each valid, nothing else, no stray lane.
    const recs = walRecords(ing.walDir);
    const lanes = [...new Set(recs.map((r) => r.lane))].sort();
    const invalidStored: string[] = [];
    const gotProto = new Map<string, number>();
    const gotJson = new Map<string, number>();
    // The compactor's wire decoder reads every stored payload as the protobufjs decoder it replaced does.
    const decoderMismatches: string[] = [];
    for (const r of recs) {
      const sig: Signal = r.type === RecordType.TRACES ? 'traces' : 'logs';
      const rows = (d: OtlpRowDecoder | OtlpWireRows): string => {
        try {
          const out: unknown[] = [];
          d[sig](r.payload, 0, (row) => out.push(row));
          return JSON.stringify(out, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x));
        } catch (e) {
          return `threw ${(e as Error).name}`;
        }
      };
      const want = rows(referenceDecoder);
      if (rows(wireDecoder) !== want) decoderMismatches.push(`${r.lane}: ${sha(r.payload)} (${want.slice(0, 80)})`);
      const v = oracle.check(sig, r.payload);
      if (!v.valid) invalidStored.push(`${r.lane}: ${v.why}`);
      else if (v.records !== r.count) invalidStored.push(`${r.lane}: record count ${r.count}, the payload holds ${v.records}`);
      if (r.lane === `indexes/${JSON_INDEX}`) {
        const key = `${sig}|${sha(oracle.canonicalOfProtobuf(sig, r.payload))}`;
        gotJson.set(key, (gotJson.get(key) ?? 0) + 1);
      } else {
        if (r.lane !== sig) invalidStored.push(`a ${sig} record in lane ${r.lane}`);
        const key = `${sig}|${sha(r.payload)}|${r.count}`;
        gotProto.set(key, (gotProto.get(key) ?? 0) + 1);
      }
    }
    const wantJson = new Map<string, number>();
    const jsonUnreadable: string[] = [];
    for (const j of expectedJson) {
      let canon: string;
      try {
        canon = oracle.canonicalOfJson(j.signal, j.value);
      } catch (e) {
        jsonUnreadable.push(`#${j.i}: accepted, but protobufjs cannot read it as OTLP/JSON: ${(e as Error).message}`);
        continue;
      }
      // An accepted JSON request with nothing in it writes no record.
      if (proto.requestType(j.signal).encode(proto.requestType(j.signal).fromObject(JSON.parse(canon) as object)).finish().length === 0) continue;
      const key = `${j.signal}|${sha(canon)}`;
      wantJson.set(key, (wantJson.get(key) ?? 0) + 1);
    }
    const diff = (want: Map<string, number>, got: Map<string, number>) => {
      const out: string[] = [];
      for (const k of new Set([...want.keys(), ...got.keys()])) {
        if ((want.get(k) ?? 0) !== (got.get(k) ?? 0)) out.push(`${k}: expected ${want.get(k) ?? 0}, stored ${got.get(k) ?? 0}`);
      }
      return out;
    };
    const v = verifyWal(ing.walDir);

    figures = {
      sent: stats.sent,
      accepted: stats.ok,
      refused: stats.refused,
      acceptedUndecided: stats.eitherOk,
      mismatches: mismatches.length,
      crashes: ing.exitSignal !== null || !alive ? 1 : 0,
      maxRssMiB: Math.round(sampler.maxRss / MiB),
      walRecords: recs.length,
      invalidStored: invalidStored.length,
      decoderMismatches: decoderMismatches.length,
      byStatus: stats.byStatus,
      byKind: stats.byKind,
    };
    expect(summary, `${mismatches.length} of ${CASES} answers broke the oracle`).toEqual([]);
    expect(sampler.maxRss).toBeLessThan(RSS_BOUND);
    expect(lanes.filter((l) => l !== 'logs' && l !== 'traces' && l !== `indexes/${JSON_INDEX}`)).toEqual([]);
    expect(invalidStored.slice(0, 20)).toEqual([]);
    expect(decoderMismatches.slice(0, 20), 'stored payloads the two compactor decoders read differently').toEqual([]);
    expect(diff(expectedProto, gotProto).slice(0, 20)).toEqual([]);
    expect(jsonUnreadable.slice(0, 20)).toEqual([]);
    expect(diff(wantJson, gotJson).slice(0, 20)).toEqual([]);
    expect(v.status, v.output).toBe(0);
    // The fuzzer reached both sides of the line.
    expect(stats.ok).toBeGreaterThan(CASES * 0.1);
    expect(stats.refused).toBeGreaterThan(CASES * 0.3);
  }, CHAOS ? 7_200_000 : 240_000);
});
