// Deterministic OTLP logs and traces requests for tests, benchmarks and the
// load generator: realistic resources (service.name, host.name, k8s...),
// scopes, log bodies of a chosen size, severities, trace and span ids, span
// trees with kinds, attributes, events, links and statuses. The same seed gives
// the same bytes on every machine. Each request comes as protobuf (encoded by
// protobufjs, independent of the project's own JSON decoder) and as OTLP/JSON.

import { Prng } from '../prng.js';
import { ProtoRoot } from './proto-root.js';
import { MESSAGES, Msg, type MsgId, type Signal } from './schema.js';

export interface FixtureOptions {
  /** Approximate protobuf size of the request in bytes (default 1024); at least one record is made. */
  targetBytes?: number;
  /** Average log body length in bytes (default 160); each body is 50-150 % of it. */
  logBodyBytes?: number;
  /** Resource{Logs,Spans} entries per request, each with one scope (default 1); records go round-robin. */
  resources?: number;
  /**
   * Give every record attributes of each AnyValue kind (bool, int, double,
   * bytes, array, nested kvlist) and make every fourth log body a kvlist (default false).
   */
  allValueKinds?: boolean;
  /** Time of the first record in ns since the epoch, as a decimal string (default 1700000000000000000). */
  startTimeUnixNano?: string;
}

export interface Fixture {
  signal: Signal;
  /** ExportLogsServiceRequest / ExportTraceServiceRequest bytes. */
  protobuf: Uint8Array;
  /** The same request as OTLP/JSON text (UTF-8). */
  json: Uint8Array;
  /** The object `json` was serialised from (hex ids, 64-bit integers as strings, bytes as base64). */
  otlpJson: Record<string, unknown>;
  /** Log records or spans. */
  records: number;
}

type Obj = Record<string, unknown>;

const SERVICES = ['checkout', 'cart', 'payment', 'frontend', 'inventory', 'shipping', 'recommendation', 'auth'];
const NAMESPACES = ['shop', 'platform', 'billing'];
const ENVIRONMENTS = ['production', 'staging'];
const LANGUAGES = ['java', 'go', 'nodejs', 'python', 'dotnet'];
const LOG_SCOPES = ['io.opentelemetry.logback-appender-1.0', 'go.opentelemetry.io/contrib/bridges/otelslog', '@opentelemetry/winston-transport', 'opentelemetry.sdk._logs'];
const TRACE_SCOPES = ['io.opentelemetry.spring-webmvc-6.0', 'go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp', '@opentelemetry/instrumentation-http', 'opentelemetry.instrumentation.flask'];
const ROUTES = ['/api/v1/cart', '/api/v1/orders/{id}', '/api/v1/products', '/api/v1/checkout', '/healthz', '/api/v2/users/{id}/sessions'];
const METHODS = ['GET', 'GET', 'GET', 'POST', 'PUT', 'DELETE'];
const THREADS = ['http-nio-8080-exec-1', 'http-nio-8080-exec-7', 'main', 'kafka-consumer-0', 'scheduler-2'];
const WORDS = ['request', 'completed', 'user', 'order', 'cache', 'miss', 'retry', 'upstream', 'latency', 'session', 'token', 'refreshed', 'inventory', 'reserved', 'payment', 'authorized', 'queue', 'depth', 'shard', 'rebalanced', 'timeout', 'connection', 'pool', 'exhausted'];
const UNICODE_WORDS = ['café', 'Zürich', 'naïve', '東京', 'данные', 'résumé', '✓', '🚀'];
const TABLES = ['orders', 'order_items', 'users', 'products', 'sessions'];
const SEVERITY_TABLE: readonly (readonly [number, number, string])[] = [
  // [cumulative weight, severity number, text]
  [10, 5, 'DEBUG'],
  [80, 9, 'INFO'],
  [92, 13, 'WARN'],
  [99, 17, 'ERROR'],
  [100, 21, 'FATAL'],
];

const MS = 1_000_000n;

export class FixtureGenerator {
  readonly #root: ProtoRoot;
  readonly #rng: Prng;

  /** `root` defaults to a freshly loaded ProtoRoot; pass one to share it. */
  constructor(seed: number, root: ProtoRoot = ProtoRoot.load()) {
    this.#root = root;
    // 12 warm-up rounds: the sequences (and so the committed bench fixtures) predate the shared Prng.
    this.#rng = new Prng(seed, 12);
  }

  logs(options: FixtureOptions = {}): Fixture {
    return this.request('logs', options);
  }

  traces(options: FixtureOptions = {}): Fixture {
    return this.request('traces', options);
  }

  /** The next request of `signal`; successive calls give different requests. */
  request(signal: Signal, options: FixtureOptions = {}): Fixture {
    const target = options.targetBytes ?? 1024;
    const resources = Math.max(1, options.resources ?? 1);
    const start = BigInt(options.startTimeUnixNano ?? '1700000000000000000');
    const root = this.#root;
    const recordMsg = signal === 'logs' ? Msg.LogRecord : Msg.Span;
    const recordType = root.type(MESSAGES[recordMsg].fullName);

    const groups: Obj[] = [];
    const recordLists: Obj[][] = [];
    for (let r = 0; r < resources; r++) {
      const records: Obj[] = [];
      recordLists.push(records);
      const scopeKey = signal === 'logs' ? 'logRecords' : 'spans';
      const scope: Obj = { scope: this.#scope(signal), [scopeKey]: records };
      if (this.#rng.int(2) === 0) scope.schemaUrl = 'https://opentelemetry.io/schemas/1.26.0';
      groups.push({
        resource: this.#resource(),
        [signal === 'logs' ? 'scopeLogs' : 'scopeSpans']: [scope],
      });
    }
    const request: Obj = { [signal === 'logs' ? 'resourceLogs' : 'resourceSpans']: groups };
    const rootMsg = signal === 'logs' ? Msg.ExportLogsServiceRequest : Msg.ExportTraceServiceRequest;
    let estimate = root.encodeRequest(signal, toProtobufjs(rootMsg, request)).length;

    let n = 0;
    let time = start;
    const trace = { id: '', spans: 0, parent: '' };
    for (;;) {
      time += BigInt(this.#rng.int(50) + 1) * MS;
      let record: Obj;
      if (signal === 'logs') {
        record = this.#logRecord(time, n, options);
      } else {
        if (trace.spans === 0) {
          trace.id = this.#hex(16);
          trace.spans = 3 + this.#rng.int(8);
          trace.parent = '';
        }
        record = this.#span(time, trace.id, trace.parent, options);
      }
      const size = recordType.encode(recordType.fromObject(toProtobufjs(recordMsg, record))).finish().length;
      const next = estimate + 1 + varintSize(size) + size;
      // Stop at whichever of with/without this record lands nearer the target.
      if (n > 0 && next - target > target - estimate) break;
      recordLists[n % resources].push(record);
      if (signal === 'traces') {
        trace.parent = record.spanId as string;
        trace.spans--;
      }
      estimate = next;
      n++;
      if (estimate >= target) break;
    }

    const protobuf = root.encodeRequest(signal, toProtobufjs(rootMsg, request));
    return { signal, protobuf, json: new TextEncoder().encode(JSON.stringify(request)), otlpJson: request, records: n };
  }

  // ---- content ---------------------------------------------------------------

  #resource(): Obj {
    const service = this.#rng.pick(SERVICES);
    const lang = this.#rng.pick(LANGUAGES);
    const attrs = [
      kv('service.name', str(service)),
      kv('service.namespace', str(this.#rng.pick(NAMESPACES))),
      kv('service.version', str(`1.${this.#rng.int(20)}.${this.#rng.int(10)}`)),
      kv('service.instance.id', str(this.#uuid())),
      kv('deployment.environment.name', str(this.#rng.pick(ENVIRONMENTS))),
      kv('host.name', str(`ip-10-0-${this.#rng.int(256)}-${this.#rng.int(256)}.ec2.internal`)),
      kv('host.arch', str(this.#rng.int(4) === 0 ? 'arm64' : 'amd64')),
      kv('os.type', str('linux')),
      kv('process.pid', int(1 + this.#rng.int(65535))),
      kv('k8s.namespace.name', str(service)),
      kv('k8s.pod.name', str(`${service}-${this.#hex(5)}-${this.#hex(3)}`)),
      kv('telemetry.sdk.name', str('opentelemetry')),
      kv('telemetry.sdk.language', str(lang)),
      kv('telemetry.sdk.version', str(`1.${20 + this.#rng.int(20)}.0`)),
    ];
    return { attributes: attrs };
  }

  #scope(signal: Signal): Obj {
    return {
      name: this.#rng.pick(signal === 'logs' ? LOG_SCOPES : TRACE_SCOPES),
      version: `${1 + this.#rng.int(3)}.${this.#rng.int(40)}.${this.#rng.int(5)}`,
    };
  }

  #logRecord(time: bigint, n: number, options: FixtureOptions): Obj {
    const roll = this.#rng.int(100);
    const [, severity, text] = SEVERITY_TABLE.find(([w]) => roll < w) ?? SEVERITY_TABLE[1];
    const record: Obj = {
      timeUnixNano: time.toString(),
      observedTimeUnixNano: (time + BigInt(this.#rng.int(5_000_000) + 1)).toString(),
      severityNumber: severity,
      severityText: text,
    };
    const structured = options.allValueKinds === true && n % 4 === 3;
    record.body = structured ? this.#structuredBody() : str(this.#message(options.logBodyBytes ?? 160));
    const attrs = [
      kv('thread.name', str(this.#rng.pick(THREADS))),
      kv('code.function', str(`com.example.${this.#rng.pick(SERVICES)}.Handler.handle`)),
      kv('http.route', str(this.#rng.pick(ROUTES))),
    ];
    if (options.allValueKinds === true) attrs.push(...this.#everyKind());
    record.attributes = attrs;
    if (this.#rng.int(10) < 7) {
      record.traceId = this.#hex(16);
      record.spanId = this.#hex(8);
      record.flags = 1;
    }
    if (this.#rng.int(20) === 0) record.eventName = 'app.checkout.completed';
    return record;
  }

  #span(time: bigint, traceId: string, parent: string, options: FixtureOptions): Obj {
    const kindRoll = this.#rng.int(10);
    const kind = parent === '' ? 2 : kindRoll < 5 ? 3 : kindRoll < 8 ? 1 : kindRoll < 9 ? 4 : 5;
    const method = this.#rng.pick(METHODS);
    const route = this.#rng.pick(ROUTES);
    const table = this.#rng.pick(TABLES);
    const isDb = kind === 3 && this.#rng.int(2) === 0;
    const name = isDb ? `SELECT ${table}` : kind === 4 ? `${table} publish` : kind === 5 ? `${table} process` : `${method} ${route}`;
    const duration = BigInt(this.#rng.int(250_000) + 50) * 1000n;
    const attrs = isDb
      ? [
          kv('db.system', str('postgresql')),
          kv('db.namespace', str('shop')),
          kv('db.query.text', str(`SELECT * FROM ${table} WHERE id = $1 AND tenant = $2 LIMIT ${1 + this.#rng.int(100)}`)),
          kv('server.address', str(`pg-${this.#rng.int(3)}.internal`)),
          kv('server.port', int(5432)),
        ]
      : [
          kv('http.request.method', str(method)),
          kv('http.route', str(route)),
          kv('url.path', str(route.replace('{id}', String(this.#rng.int(100000))))),
          kv('http.response.status_code', int(this.#rng.int(20) === 0 ? 503 : 200)),
          kv('server.address', str(`${this.#rng.pick(SERVICES)}.svc.cluster.local`)),
          kv('user_agent.original', str('Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36')),
        ];
    if (options.allValueKinds === true) attrs.push(...this.#everyKind());
    const span: Obj = {
      traceId,
      spanId: this.#hex(8),
      name,
      kind,
      startTimeUnixNano: time.toString(),
      endTimeUnixNano: (time + duration).toString(),
      attributes: attrs,
      // Sampled, and the parent is known to be local (W3C flags plus the OTLP is-remote bits).
      flags: 0x101,
    };
    if (parent !== '') span.parentSpanId = parent;
    if (this.#rng.int(4) === 0) span.traceState = `rojo=${this.#hex(8)},congo=t61rcWkgMzE`;
    const failed = this.#rng.int(20) === 0;
    if (failed) {
      span.status = { code: 2, message: 'upstream unavailable' };
      span.events = [
        {
          timeUnixNano: (time + duration / 2n).toString(),
          name: 'exception',
          attributes: [
            kv('exception.type', str('java.net.ConnectException')),
            kv('exception.message', str('Connection refused')),
            kv('exception.stacktrace', str(this.#message(Math.max(64, options.logBodyBytes ?? 160)))),
          ],
        },
      ];
    } else if (this.#rng.int(3) === 0) {
      span.status = { code: 1 };
    }
    if (this.#rng.int(6) === 0) {
      span.events = [
        ...((span.events as Obj[] | undefined) ?? []),
        { timeUnixNano: (time + 1000n).toString(), name: 'cache.miss', attributes: [kv('cache.key', str(`${table}:${this.#rng.int(1000)}`))] },
      ];
    }
    if (this.#rng.int(10) === 0) {
      span.links = [{ traceId: this.#hex(16), spanId: this.#hex(8), attributes: [kv('link.reason', str('batch'))], flags: 1 }];
    }
    if (this.#rng.int(50) === 0) span.droppedAttributesCount = 1 + this.#rng.int(5);
    return span;
  }

  /** Log text of about `size` bytes: a line from a template, padded with words. */
  #message(size: number): string {
    const target = Math.max(8, Math.round(size * (0.5 + this.#rng.float())));
    const lead = [
      `${this.#rng.pick(METHODS)} ${this.#rng.pick(ROUTES)} completed status=${this.#rng.int(5) === 0 ? 500 : 200} duration_ms=${this.#rng.int(900)}`,
      `order ${this.#rng.int(1_000_000)} reserved ${1 + this.#rng.int(9)} items for user ${this.#hex(6)}`,
      `cache miss for key session:${this.#hex(8)}; loading from upstream`,
      `retrying upstream call attempt=${1 + this.#rng.int(4)} backoff_ms=${this.#rng.int(2000)}`,
    ][this.#rng.int(4)];
    let text = lead;
    let bytes = Buffer.byteLength(lead);
    while (bytes < target) {
      const w = this.#rng.int(20) === 0 ? this.#rng.pick(UNICODE_WORDS) : this.#rng.pick(WORDS);
      const piece = this.#rng.int(3) === 0 ? ` ${w}=${this.#rng.int(10000)}` : ` ${w}`;
      text += piece;
      bytes += Buffer.byteLength(piece);
    }
    if (bytes <= target) return text;
    // Cut to `target` bytes on a character boundary (never inside a UTF-8 sequence).
    const utf8 = Buffer.from(text);
    let cut = target;
    while (cut > 0 && (utf8[cut] & 0xc0) === 0x80) cut--;
    return utf8.subarray(0, cut).toString('utf8');
  }

  #structuredBody(): Obj {
    return {
      kvlistValue: {
        values: [
          kv('msg', str(`${this.#rng.pick(WORDS)} ${this.#rng.pick(WORDS)}`)),
          kv('order_id', int(this.#rng.int(1_000_000))),
          kv('ok', { boolValue: this.#rng.int(2) === 0 }),
          kv('items', { arrayValue: { values: [str(this.#rng.pick(TABLES)), int(this.#rng.int(10))] } }),
        ],
      },
    };
  }

  /** One attribute of every AnyValue kind, with edge values (negative and 64-bit ints, empty values). */
  #everyKind(): Obj[] {
    const bigInts = ['-9223372036854775808', '9223372036854775807', '-1', '0', '1700000000000000001'];
    return [
      kv('siglake.bool', { boolValue: this.#rng.int(2) === 0 }),
      kv('siglake.int', { intValue: this.#rng.pick(bigInts) }),
      kv('siglake.double', { doubleValue: (this.#rng.int(2_000_000) - 1_000_000) / 1000 }),
      kv('siglake.bytes', { bytesValue: Buffer.from(this.#hex(1 + this.#rng.int(12)), 'hex').toString('base64') }),
      kv('siglake.empty_string', str('')),
      kv('siglake.unset', {}),
      kv('siglake.array', { arrayValue: { values: [str(this.#rng.pick(WORDS)), int(this.#rng.int(100)), { boolValue: true }, { doubleValue: 0.5 }, {}] } }),
      kv('siglake.kvlist', {
        kvlistValue: {
          values: [
            kv('a', str(this.#rng.pick(UNICODE_WORDS))),
            kv('nested', { kvlistValue: { values: [kv('deep', { arrayValue: { values: [int(-7)] } })] } }),
            kv('empty', { arrayValue: {} }),
          ],
        },
      }),
    ];
  }

  // ---- randomness --------------------------------------------------------------

  #hex(bytes: number): string {
    let s = '';
    for (let i = 0; i < bytes; i++) s += (this.#rng.u32() & 0xff).toString(16).padStart(2, '0');
    return s;
  }

  #uuid(): string {
    const h = this.#hex(16);
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }
}

function str(s: string): Obj {
  return { stringValue: s };
}

function int(n: number): Obj {
  return { intValue: String(n) };
}

function kv(key: string, value: Obj): Obj {
  return { key, value };
}

function varintSize(n: number): number {
  let size = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    size++;
  }
  return size;
}

/**
 * The protobufjs form of an OTLP/JSON-shaped object of message `msg`: hex ids
 * become bytes (everything else protobufjs' fromObject reads as it is).
 */
export function toProtobufjs(msg: MsgId, obj: Obj): Obj {
  const out: Obj = {};
  for (const f of MESSAGES[msg].fields) {
    const v = obj[f.jsonName];
    if (v === undefined || v === null) continue;
    if (f.message !== -1) {
      const child = f.message;
      out[f.jsonName] = f.repeated ? (v as Obj[]).map((e) => toProtobufjs(child, e)) : toProtobufjs(child, v as Obj);
    } else if (f.idLength !== 0) {
      out[f.jsonName] = Buffer.from(v as string, 'hex');
    } else {
      out[f.jsonName] = v;
    }
  }
  return out;
}
