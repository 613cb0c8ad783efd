// The part of hpack.js (RFC 7541 decoder) that src/ingest/grpc-header-tap.ts uses.
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
  const hpack: {
    decompressor: { create(options: { table: { size: number } }): Decompressor };
  };
  export default hpack;
}
