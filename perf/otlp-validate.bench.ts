// Throughput of the OTLP body path a writer worker runs per request: the
// protobuf wire validator and the OTLP/JSON → protobuf converter, on fixture
// bodies of about 1 KiB and 256 KiB, beside the alternatives (protobufjs
// reflection decode; JSON.parse alone, which builds no protobuf at all).
//
// Run (Node 20 cannot run .ts directly; tsc emits next to the sources so
// proto/ is found by walking up):
//   npx tsc -p tsconfig.test.json --noEmit false --outDir perf/results/tmp/build
//   node perf/results/tmp/build/perf/otlp-validate.bench.js [--time-ms 1000]
// Prints the median (p50) time per iteration and the MB/s it implies.
// `validate` is the entry point the workers call (the fast walk, the exact walk
// only for bodies it gives up on); `  exact walk` is the exact walk alone, as
// every body was validated before the fast walk (issue 18).

import { Bench } from 'tinybench';
import { throughputRows } from './throughput-table.js';
import { FixtureGenerator, type Fixture } from '../src/otlp/fixtures.js';
import { otlpJsonToProtobuf } from '../src/otlp/json-decoder.js';
import { ProtoRoot } from '../src/otlp/proto-root.js';
import type { Signal } from '../src/otlp/schema.js';
import { validateExportRequest, validateExportRequestExact } from '../src/otlp/wire-validator.js';

const argTime = process.argv.indexOf('--time-ms');
const timeMs = argTime > 0 ? Number(process.argv[argTime + 1]) : 1000;

const root = ProtoRoot.load();
const gen = new FixtureGenerator(20240601, root);

interface Corpus {
  label: string;
  signal: Signal;
  fixtures: Fixture[];
  protobufBytes: number;
  jsonBytes: number;
}

/** Enough distinct bodies per iteration that one iteration is well above timer resolution. */
function corpus(signal: Signal, targetBytes: number, count: number, allValueKinds: boolean): Corpus {
  const fixtures: Fixture[] = [];
  for (let i = 0; i < count; i++) fixtures.push(gen.request(signal, { targetBytes, allValueKinds }));
  return {
    label: `${signal} ${targetBytes >= 1 << 20 ? `${targetBytes >> 20} MiB` : `${targetBytes >> 10} KiB`}${allValueKinds ? ' all kinds' : ''}`,
    signal,
    fixtures,
    protobufBytes: fixtures.reduce((n, f) => n + f.protobuf.length, 0),
    jsonBytes: fixtures.reduce((n, f) => n + f.json.length, 0),
  };
}

const corpora = [
  corpus('logs', 1024, 256, false),
  corpus('logs', 256 * 1024, 4, false),
  corpus('logs', 1024, 256, true),
  corpus('traces', 1024, 256, false),
  corpus('traces', 256 * 1024, 4, false),
];

const bench = new Bench({ time: timeMs, warmupTime: 200 });
const bytesPerTask = new Map<string, number>();
let sink = 0;

for (const c of corpora) {
  const type = root.requestType(c.signal);
  const add = (name: string, bytes: number, fn: () => void): void => {
    bytesPerTask.set(name, bytes);
    bench.add(name, fn);
  };
  add(`validate ${c.label}`, c.protobufBytes, () => {
    for (const f of c.fixtures) sink += validateExportRequest(c.signal, f.protobuf);
  });
  add(`  exact walk ${c.label}`, c.protobufBytes, () => {
    for (const f of c.fixtures) sink += validateExportRequestExact(c.signal, f.protobuf);
  });
  add(`  protobufjs decode ${c.label}`, c.protobufBytes, () => {
    for (const f of c.fixtures) sink += type.decode(f.protobuf) === null ? 0 : 1;
  });
  add(`json→protobuf ${c.label}`, c.jsonBytes, () => {
    for (const f of c.fixtures) sink += otlpJsonToProtobuf(c.signal, f.json).records;
  });
  add(`  JSON.parse only ${c.label}`, c.jsonBytes, () => {
    const decoder = new TextDecoder();
    for (const f of c.fixtures) sink += JSON.parse(decoder.decode(f.json)) === null ? 0 : 1;
  });
}

await bench.run();

console.table(throughputRows(bench, bytesPerTask));
console.log(`node ${process.version}, ${timeMs} ms per task (sink ${sink > 0 ? 'ok' : 'empty'})`);
