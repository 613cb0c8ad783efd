// OTLP request bodies for the ingest integration tests: good ones (protobuf
// encoded by protobufjs, and the same requests as OTLP/JSON with hex ids and
// lowerCamelCase keys), the bad bodies of the reliability table, and decoding of
// the google.rpc.Status a refusal carries.

import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { ProtoRoot, type RpcStatus } from '../../src/otlp/proto-root.js';
import { SegmentReader } from '../../src/wal/segment-reader.js';

export const proto = ProtoRoot.load();

const TRACE_ID = '5b8efff798038103d269b633813fc60c';
const SPAN_ID = 'eee19b7ec3c1b174';

function hexBytes(hex: string): Uint8Array {
  return Uint8Array.from(Buffer.from(hex, 'hex'));
}

/** ExportLogsServiceRequest as OTLP/JSON (lowerCamelCase keys, hex ids, 64-bit ints as strings): one record per body. */
export function logsJson(bodies: string[], service = 'ingest-tests'): Record<string, unknown> {
  return {
    resourceLogs: [
      {
        resource: { attributes: [{ key: 'service.name', value: { stringValue: service } }] },
        scopeLogs: [
          {
            scope: { name: 'siglake-tests', version: '1.0.0' },
            logRecords: bodies.map((b, i) => ({
              timeUnixNano: String(1_700_000_000_000_000_000n + BigInt(i) * 1_000_000n),
              observedTimeUnixNano: String(1_700_000_000_000_000_000n + BigInt(i) * 1_000_000n + 5n),
              severityNumber: 9,
              severityText: 'INFO',
              body: { stringValue: b },
              attributes: [
                { key: 'k', value: { stringValue: 'v' } },
                { key: 'n', value: { intValue: String(i) } },
              ],
              traceId: TRACE_ID,
              spanId: SPAN_ID,
              flags: 1,
            })),
          },
        ],
      },
    ],
  };
}

/** ExportTraceServiceRequest as OTLP/JSON: one span per name. */
export function tracesJson(names: string[], service = 'ingest-tests'): Record<string, unknown> {
  return {
    resourceSpans: [
      {
        resource: { attributes: [{ key: 'service.name', value: { stringValue: service } }] },
        scopeSpans: [
          {
            scope: { name: 'siglake-tests' },
            spans: names.map((name, i) => ({
              traceId: TRACE_ID,
              spanId: (0x1000 + i).toString(16).padStart(16, '0'),
              parentSpanId: SPAN_ID,
              name,
              kind: 2,
              startTimeUnixNano: String(1_700_000_000_000_000_000n + BigInt(i)),
              endTimeUnixNano: String(1_700_000_000_000_000_000n + BigInt(i) + 1000n),
              attributes: [{ key: 'http.route', value: { stringValue: '/x' } }],
              status: { code: 1 },
            })),
          },
        ],
      },
    ],
  };
}

/** The OTLP/JSON object in protobufjs' form: hex ids become bytes. */
function toProtobufjsForm(json: Record<string, unknown>): Record<string, unknown> {
  return JSON.parse(JSON.stringify(json), (k, v: unknown) => {
    if ((k === 'traceId' || k === 'spanId' || k === 'parentSpanId') && typeof v === 'string') return hexBytes(v);
    return v;
  }) as Record<string, unknown>;
}

/** The same request as `logsJson(bodies)`, protobuf-encoded by protobufjs. */
export function logsProto(bodies: string[], service?: string): Uint8Array {
  return proto.encodeLogsRequest(toProtobufjsForm(logsJson(bodies, service)));
}

export function tracesProto(names: string[], service?: string): Uint8Array {
  return proto.encodeTraceRequest(toProtobufjsForm(tracesJson(names, service)));
}

export function jsonBytes(obj: unknown): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(obj));
}

export function gzip(b: Uint8Array): Uint8Array {
  return zlib.gzipSync(b);
}

/** A google.rpc.Status body as the request's encoding gives it (protobuf or JSON). */
export function decodeStatus(contentType: string, body: Uint8Array): RpcStatus {
  if (contentType.startsWith('application/json')) {
    return JSON.parse(Buffer.from(body).toString('utf8')) as RpcStatus;
  }
  if (contentType.startsWith('application/x-protobuf') || contentType.startsWith('application/protobuf')) return proto.decodeStatus(body);
  throw new Error(`not a google.rpc.Status content type: ${contentType}`);
}

// ------------------------------------------------------------------ bad bodies

/** Deterministic pseudo-random bytes (xorshift32). */
export function pseudoRandomBytes(n: number, seed = 0x9e3779b9): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed >>> 0;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out[i] = x & 0xff;
  }
  return out;
}

/** `n` (a non-negative safe integer) as a protobuf varint. */
export function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}

/** A length-delimited protobuf field: tag byte, length, contents. */
export function pbField(tag: number, contents: Uint8Array): Buffer {
  return Buffer.concat([Buffer.from([tag, ...varint(contents.length)]), contents]);
}

function varintLen(n: number): number {
  return varint(n).length;
}

/** A log record body that is `depth` nested AnyValue arrays around a string, as protobuf. */
export function deepNestedLogsProto(depth: number): Uint8Array {
  // Sizes from the inside out: AnyValue{string_value "x"} = 0a 01 78.
  const inner = [0x0a, 0x01, 0x78];
  const anyLen: number[] = [inner.length];
  const arrLen: number[] = [];
  for (let i = 0; i < depth; i++) {
    const a = 1 + varintLen(anyLen[i]!) + anyLen[i]!; // ArrayValue{values (1): AnyValue}
    arrLen.push(a);
    anyLen.push(1 + varintLen(a) + a); // AnyValue{array_value (5): ArrayValue}
  }
  const out: number[] = [];
  for (let i = depth - 1; i >= 0; i--) {
    out.push(0x2a, ...varint(arrLen[i]!)); // AnyValue.array_value
    out.push(0x0a, ...varint(anyLen[i]!)); // ArrayValue.values
  }
  out.push(...inner);
  const body = out; // the outermost AnyValue's content
  const record = [0x2a, ...varint(body.length), ...body]; // LogRecord.body (5)
  const scope = [0x12, ...varint(record.length), ...record]; // ScopeLogs.log_records (2)
  const resource = [0x12, ...varint(scope.length), ...scope]; // ResourceLogs.scope_logs (2)
  return Uint8Array.from([0x0a, ...varint(resource.length), ...resource]); // request.resource_logs (1)
}

/** The same nesting as OTLP/JSON. */
export function deepNestedLogsJson(depth: number): Uint8Array {
  const open = '{"arrayValue":{"values":['.repeat(depth);
  const close = ']}}'.repeat(depth);
  return new TextEncoder().encode(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":${open}{"stringValue":"x"}${close}}]}]}]}`);
}

/** A logs request whose one log body holds invalid UTF-8 (0xff 0xfe ...) in a string_value. */
export function invalidUtf8LogsProto(): Uint8Array {
  const marker = 'QQQQ';
  const good = logsProto([marker]);
  const at = Buffer.from(good).indexOf(Buffer.from(marker));
  if (at < 0) throw new Error('marker not found');
  const bad = Uint8Array.from(good);
  bad.set([0xff, 0xfe, 0xc0, 0x80], at);
  return bad;
}

export function invalidUtf8LogsJson(): Uint8Array {
  const marker = 'QQQQ';
  const good = Buffer.from(jsonBytes(logsJson([marker])));
  const at = good.indexOf(Buffer.from(marker));
  const bad = Uint8Array.from(good);
  bad.set([0xff, 0xfe, 0xc0, 0x80], at);
  return bad;
}

/** About 1 GiB of zeros, gzipped: 1024 gzip members of 1 MiB of zeros each (about 1 MB on the wire). */
export function gzipBombMultiMember(): Uint8Array {
  const member = zlib.gzipSync(Buffer.alloc(1 << 20), { level: 9 });
  return Buffer.concat(Array.from({ length: 1024 }, () => member));
}

/** `mib` MiB of zeros in one gzip member. */
export function gzipBombSingleMember(mib: number): Uint8Array {
  return zlib.gzipSync(Buffer.alloc(mib << 20), { level: 9 });
}

// ------------------------------------------------------------------ WAL payloads

/** Every record payload stored under `laneDir` (segment order), copied out. */
export function walPayloads(laneDir: string): Buffer[] {
  if (!fs.existsSync(laneDir)) return [];
  const out: Buffer[] = [];
  const names = fs
    .readdirSync(laneDir)
    .filter((n) => /^\d+\.seg$/.test(n))
    .sort((a, b) => Number.parseInt(a, 10) - Number.parseInt(b, 10));
  for (const n of names) {
    const r = new SegmentReader(path.join(laneDir, n));
    try {
      for (let rec = r.next(); rec !== null; rec = r.next()) out.push(Buffer.from(rec.payload));
    } finally {
      r.close();
    }
  }
  return out;
}
