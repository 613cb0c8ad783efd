// Builds Siglake's native addon (native/*.c: the OTLP walk, the WAL's
// page-cache release and the checkpoint's deferred-run writes, one Node-API addon) with node-gyp, before tsc:
// `npm run build` runs it. The addon is optional: without it the ingester
// uses the JavaScript walk (--otlp-walk auto, the default) and leaves the
// page cache to the kernel, so a machine without a C toolchain still builds
// and runs Siglake; this script then says why and exits 0.
// SIGLAKE_NATIVE_BUILD=required makes a failed build fail (CI sets it, so
// that the tests that hold the addon to the JS walks always have it).
//
// The Node headers come from the running Node's own installation when it has
// them (Debian's nodejs, the official tarballs and images all do), so node-gyp
// downloads nothing.

import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.join(here, 'build', 'Release', 'siglake_native.node');
const sources = ['addon.c', 'addon.h', 'otlp-walk.c', 'page-cache.c', 'deferred-runs.c', 'thread-sched.c'].map((f) => path.join(here, f));
const required = process.env.SIGLAKE_NATIVE_BUILD === 'required';

function give(why) {
  if (required) {
    console.error(`native addon: ${why}`);
    process.exit(1);
  }
  console.error(`native addon not built (${why}); the JavaScript walk will be used and WAL pages left in the page cache`);
  process.exit(0);
}

// Up to date: nothing to do (npm run build runs before every test run).
const inputs = [...sources, path.join(here, 'binding.gyp')];
if (existsSync(out) && inputs.every((f) => statSync(f).mtimeMs <= statSync(out).mtimeMs)) process.exit(0);

let gyp;
try {
  gyp = createRequire(import.meta.url).resolve('node-gyp/bin/node-gyp.js');
} catch {
  give('node-gyp is not installed: run npm ci');
}
const args = [gyp, 'rebuild', '--directory', here, '--loglevel', 'warn'];
const prefix = path.resolve(process.execPath, '..', '..');
if (existsSync(path.join(prefix, 'include', 'node', 'node_api.h'))) args.push(`--nodedir=${prefix}`);
const r = spawnSync(process.execPath, args, { stdio: ['ignore', 'inherit', 'inherit'] });
if (r.error !== undefined) give(r.error.message);
if (r.status !== 0) give(`node-gyp exited with ${r.status ?? r.signal} (a C compiler, make and python3 are needed)`);
if (!existsSync(out)) give(`node-gyp did not produce ${path.relative(process.cwd(), out)}`);
