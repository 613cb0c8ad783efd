// The native fast walk (native/otlp-walk.c, in the addon `npm run build`
// makes): the same contract as fastWalk() in src/otlp/wire-validator.ts, a
// record count or -1 (give up: the exact walk decides), at about twice the
// JS walk's speed on large bodies (docs/performance.md, "Releasing synced WAL pages, and the native walk").

import { loadAddon } from './addon.js';

export interface NativeWalk {
  /** The record count of a body the walk accepts, or -1 when it gives up. */
  walk(rootMsg: number, bytes: Uint8Array): number;
}

export type NativeWalkLoad = { walk: NativeWalk; failure?: undefined } | { walk: null; failure: string };

/** The walk's table, as the addon's init() takes it. */
export interface NativeWalkTable {
  actions: Int32Array;
  anyValue: number;
  maxAnyDepth: number;
  stackCap: number;
  /** The op codes and action bits the table is written in (checked against the addon's). */
  layout: Int32Array;
}

/** Loads the addon and hands it the table (this thread's); on any failure, says why. */
export function loadNativeWalk(table: NativeWalkTable, file?: string): NativeWalkLoad {
  const r = loadAddon(file);
  if (r.addon === null) return { walk: null, failure: r.failure };
  try {
    r.addon.init(table.actions, table.anyValue, table.maxAnyDepth, table.stackCap, table.layout);
  } catch (e) {
    return { walk: null, failure: `native OTLP walk: ${(e as Error).message}` };
  }
  return { walk: r.addon };
}
