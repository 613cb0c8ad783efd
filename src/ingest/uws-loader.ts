// Loads uWebSockets.js's native binary directly. The package silently falls
// back to a slow JavaScript server when the binary does not load; we refuse to
// start instead, unless --allow-uws-fallback says otherwise.

import { createRequire } from 'node:module';
import path from 'node:path';
import type * as UWS from 'uWebSockets.js';
import { ConfigError } from '../errors.js';

export type Uws = typeof UWS;

export interface LoadedUws {
  uws: Uws;
  native: boolean;
  /** Why the native binary did not load, when it did not. */
  failure?: string;
}

export function loadUws(allowFallback: boolean): LoadedUws {
  const require = createRequire(import.meta.url);
  const pkgDir = path.dirname(require.resolve('uWebSockets.js/package.json'));
  const binary = path.join(
    pkgDir,
    'binaries',
    `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`,
  );
  try {
    return { uws: require(binary) as Uws, native: true };
  } catch (e) {
    const failure = `uWebSockets.js native binary ${path.basename(binary)} did not load: ${(e as Error).message.split('\n')[0]}`;
    if (!allowFallback) {
      throw new ConfigError(`${failure}; refusing to start on the slow JavaScript fallback (set --allow-uws-fallback to allow it)`);
    }
    process.env['UWS_USE_FALLBACK'] = '1';
    return { uws: require('uWebSockets.js') as Uws, native: false, failure };
  }
}
