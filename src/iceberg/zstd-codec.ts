// zstd for Parquet pages. Node 20's zlib has no zstd, so the compressor is
// the zstd library built to WebAssembly (@bokuweb/zstd-wasm): synchronous once
// its module is instantiated.
//
// That module is per-thread state owned by the library, and instantiating it
// a second time swaps its memory under compressions in flight (pages then
// decode as "invalid zstd data"). So instantiation happens once per thread:
// the one promise below is the only mutable state here, and it only ever goes
// from unset to set.

import { compress, init } from '@bokuweb/zstd-wasm';

export type Compressor = (input: Uint8Array) => Uint8Array;

export class ZstdCodec {
  /** zstd level 3, the library default: most of the ratio of higher levels at several times the speed. */
  static readonly LEVEL = 3;
  static #instantiated: Promise<void> | null = null;

  static async load(level: number = ZstdCodec.LEVEL): Promise<Compressor> {
    ZstdCodec.#instantiated ??= init();
    await ZstdCodec.#instantiated;
    return (input: Uint8Array) => compress(input, level);
  }
}
