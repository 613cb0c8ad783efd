#!/usr/bin/env node
// Writes the canned request bodies of the side-by-side run, made by the
// project's own FixtureGenerator (dist/otlp/fixtures.js: run `npx tsc -p
// tsconfig.json` first): for each size, the OTLP/HTTP protobuf body (`.pb`)
// and the same message framed for gRPC (`.grpc`: 1-byte flag, 4-byte
// big-endian length, message), plus manifest.json with sizes and record
// counts. Same seed, same bytes on every machine.
//
//   node native-bench/make-fixtures.mjs [--sizes 1k,256k] [--out native-bench/fixtures]

import { mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const here = dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({ options: { sizes: { type: 'string', default: '1k,256k' }, out: { type: 'string', default: join(here, 'fixtures') } } });
const { FixtureGenerator } = await import(join(here, '..', 'dist', 'otlp', 'fixtures.js'));

const SEED = 20240601;
const parseSize = (s) => {
  const m = /^(\d+)(k|m)?$/i.exec(s.trim());
  if (!m) throw new Error(`bad size ${s}`);
  return Number(m[1]) * (m[2]?.toLowerCase() === 'k' ? 1024 : m[2]?.toLowerCase() === 'm' ? 1 << 20 : 1);
};

mkdirSync(values.out, { recursive: true });
const manifestPath = join(values.out, 'manifest.json');
const manifest = existsSync(manifestPath) ? JSON.parse(readFileSync(manifestPath, 'utf8')) : {};
for (const label of values.sizes.split(',')) {
  const target = parseSize(label);
  for (const signal of ['logs', 'traces']) {
    const name = `${signal}-${label.toLowerCase()}`;
    const f = new FixtureGenerator(SEED + target, undefined).request(signal, { targetBytes: target });
    const pb = Buffer.from(f.protobuf);
    const framed = Buffer.alloc(5 + pb.length);
    framed.writeUInt32BE(pb.length, 1);
    pb.copy(framed, 5);
    writeFileSync(join(values.out, `${name}.pb`), pb);
    writeFileSync(join(values.out, `${name}.grpc`), framed);
    manifest[name] = { signal, targetBytes: target, bytes: pb.length, records: f.records, seed: SEED + target };
  }
}
writeFileSync(manifestPath, JSON.stringify(manifest, null, 2) + '\n');
console.log(JSON.stringify(manifest));
