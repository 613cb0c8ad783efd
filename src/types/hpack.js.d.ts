// The parts of hpack.js (RFC 7541) Siglake uses: its tables, read once by
// src/ingest/hpack-decoder.ts, and its compressor and decompressor, the
// encoder and the oracle of that decoder's tests. The table size option is
// `maxSize` (a `size` is ignored, and the table then never evicts).
declare module 'hpack.js' {
  interface DecodedHeader {
    name: string;
    value: string;
    neverIndex: boolean;
  }
  interface Decompressor {
    write(chunk: Buffer): void;
    execute(): void;
    read(): DecodedHeader | null;
  }
  interface EncodedHeader {
    name: string;
    value: string;
    huffman?: boolean;
    incremental?: boolean;
    neverIndex?: boolean;
  }
  interface Compressor {
    write(headers: EncodedHeader[]): void;
    read(): Buffer | null;
    updateTableSize(size: number): void;
  }
  const hpack: {
    decompressor: { create(options: { table: { maxSize: number } }): Decompressor };
    compressor: { create(options: { table: { maxSize: number } }): Compressor };
  };
  export default hpack;
}
