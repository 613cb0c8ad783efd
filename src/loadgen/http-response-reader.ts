// Reads HTTP/1.1 responses off one keep-alive connection that carries one
// request at a time (the loadgen's HTTP sender). Bytes go in as the socket
// delivers them, split anywhere; a response comes out once its body has ended.
// Bodies are framed by Content-Length, by chunked transfer coding (RFC 9112
// §7.1, trailers skipped), or by the end of the connection; 1xx interim
// responses are skipped. Only the first `keepBytes` of a body are kept, and
// none of a 200's (the loadgen shows a refusal's message, never a 200's body,
// so an answer it counts costs no copy). Anything that is not
// HTTP/1.x throws a `ResponseFormatError`, and the connection is to be closed.

/** One response read off the connection. */
export interface WireResponse {
  status: number;
  /** The Content-Type header, lower-cased ("" when absent). */
  contentType: string;
  /** The connection must not carry another request (Connection: close, HTTP/1.0, or a body read to the end of the connection). */
  close: boolean;
  /** The first `keepBytes` of the body; empty for a 200. */
  body: Buffer;
}

export class ResponseFormatError extends Error {}

/** A status line and headers beyond this are refused, as a server would refuse such a request. */
const MAX_HEAD_BYTES = 64 * 1024;
const CRLF2 = Buffer.from('\r\n\r\n');
const EMPTY = Buffer.alloc(0);

/** How the body of the response being read ends ('head': no response under way). */
type Framing = 'head' | 'length' | 'chunked' | 'until-close';
/** Where a chunked body is: a chunk-size line, a chunk's data, the CRLF after it, the trailers. */
type ChunkState = 'size' | 'data' | 'data-end' | 'trailers';

export class ResponseReader {
  readonly #keepBytes: number;
  #state: Framing = 'head';
  /** Bytes not yet consumed (the head being read, or a chunked body's framing). */
  #pending: Buffer = EMPTY;
  /** Length framing: body bytes still to come. Chunked: the current chunk's bytes still to come. */
  #left = 0;
  #chunk: ChunkState = 'size';
  #status = 0;
  #contentType = '';
  #close = false;
  #kept: Buffer[] = [];
  #keptBytes = 0;

  constructor(keepBytes: number) {
    this.#keepBytes = keepBytes;
  }

  /** Whether part of a response has been read and not yet returned. */
  get midResponse(): boolean {
    return this.#state !== 'head' || this.#pending.length > 0;
  }

  /** Forgets everything read (the connection was closed or replaced). */
  reset(): void {
    this.#state = 'head';
    this.#pending = EMPTY;
    this.#kept = [];
    this.#keptBytes = 0;
  }

  /**
   * Feeds the bytes the socket delivered. Returns the response when it ended
   * within them, else undefined. Bytes after the end of the response (the
   * connection carries one request at a time, so a server sent more than it
   * was asked) throw.
   */
  feed(data: Buffer): WireResponse | undefined {
    let buf = this.#pending.length > 0 ? Buffer.concat([this.#pending, data]) : data;
    this.#pending = EMPTY;
    for (;;) {
      switch (this.#state) {
        case 'head': {
          const end = buf.indexOf(CRLF2);
          if (end < 0) {
            if (buf.length > MAX_HEAD_BYTES) throw new ResponseFormatError(`a response head longer than ${MAX_HEAD_BYTES} bytes`);
            this.#pending = buf;
            return undefined;
          }
          const interim = this.#head(buf.toString('latin1', 0, end));
          buf = buf.subarray(end + 4);
          if (interim) continue;
          if (this.#state === 'head') return this.#done(buf);
          continue;
        }
        case 'length': {
          const take = Math.min(this.#left, buf.length);
          this.#keep(buf, 0, take);
          this.#left -= take;
          if (this.#left > 0) return undefined;
          return this.#done(buf.subarray(take));
        }
        case 'until-close':
          this.#keep(buf, 0, buf.length);
          return undefined;
        case 'chunked': {
          const r = this.#chunked(buf);
          if (r < 0) return undefined;
          return this.#done(buf.subarray(r));
        }
      }
    }
  }

  /** The connection ended: a body framed by the end of the connection is complete; anything else was cut off (undefined). */
  end(): WireResponse | undefined {
    if (this.#state !== 'until-close') return undefined;
    return this.#done(EMPTY);
  }

  /** Parses a status line and headers. Returns true for a 1xx interim response (skipped). */
  #head(head: string): boolean {
    const lines = head.split('\r\n');
    const m = /^HTTP\/1\.([01]) (\d{3})(?: |$)/.exec(lines[0]!);
    if (m === null) throw new ResponseFormatError(`not an HTTP/1.x status line: ${JSON.stringify(lines[0]!.slice(0, 60))}`);
    const status = Number(m[2]);
    let keepAlive = m[1] === '1';
    let length = -1;
    let chunked = false;
    let contentType = '';
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i]!;
      const colon = line.indexOf(':');
      if (colon <= 0) throw new ResponseFormatError(`a header line without a name: ${JSON.stringify(line.slice(0, 60))}`);
      const name = line.slice(0, colon).toLowerCase();
      const value = line.slice(colon + 1).trim();
      if (name === 'content-length') {
        if (!/^\d{1,15}$/.test(value) || (length >= 0 && Number(value) !== length)) throw new ResponseFormatError(`a bad Content-Length: ${JSON.stringify(value)}`);
        length = Number(value);
      } else if (name === 'transfer-encoding') {
        const codings = value.toLowerCase().split(',');
        chunked = codings[codings.length - 1]!.trim() === 'chunked';
      } else if (name === 'connection') {
        const tokens = value.toLowerCase().split(',').map((t) => t.trim());
        if (tokens.includes('close')) keepAlive = false;
        else if (tokens.includes('keep-alive')) keepAlive = true;
      } else if (name === 'content-type') {
        contentType = value.toLowerCase();
      }
    }
    if (status < 200) return status !== 101 ? true : this.#fail('a 101 Switching Protocols answer to a POST');
    this.#status = status;
    this.#contentType = contentType;
    this.#close = !keepAlive;
    this.#kept = [];
    // Nothing of a 200's body is kept: as if its room were already used.
    this.#keptBytes = status === 200 ? this.#keepBytes : 0;
    if (status === 204 || status === 304) {
      this.#state = 'head';
    } else if (chunked) {
      this.#state = 'chunked';
      this.#chunk = 'size';
    } else if (length >= 0) {
      this.#state = length > 0 ? 'length' : 'head';
      this.#left = length;
    } else {
      this.#state = 'until-close';
      this.#close = true;
    }
    return false;
  }

  #fail(why: string): never {
    throw new ResponseFormatError(why);
  }

  /** Consumes chunked framing from `buf`; the index after the last trailer line when the body ended, else -1 (the rest is kept). */
  #chunked(buf: Buffer): number {
    let at = 0;
    for (;;) {
      if (this.#chunk === 'data') {
        const take = Math.min(this.#left, buf.length - at);
        this.#keep(buf, at, at + take);
        this.#left -= take;
        at += take;
        if (this.#left > 0) return -1;
        this.#chunk = 'data-end';
        continue;
      }
      const eol = buf.indexOf('\r\n', at, 'latin1');
      if (eol < 0) {
        if (buf.length - at > MAX_HEAD_BYTES) throw new ResponseFormatError('a chunk-size or trailer line that does not end');
        this.#pending = buf.subarray(at);
        return -1;
      }
      const line = buf.toString('latin1', at, eol);
      at = eol + 2;
      if (this.#chunk === 'data-end') {
        if (line !== '') throw new ResponseFormatError('chunk data longer than its size');
        this.#chunk = 'size';
      } else if (this.#chunk === 'size') {
        const size = /^([0-9a-fA-F]{1,12})[ \t]*(?:;.*)?$/.exec(line);
        if (size === null) throw new ResponseFormatError(`a bad chunk size: ${JSON.stringify(line.slice(0, 40))}`);
        this.#left = parseInt(size[1]!, 16);
        this.#chunk = this.#left === 0 ? 'trailers' : 'data';
      } else if (line === '') {
        return at;
      }
    }
  }

  #keep(buf: Buffer, from: number, to: number): void {
    const room = this.#keepBytes - this.#keptBytes;
    if (room <= 0 || to <= from) return;
    const piece = buf.subarray(from, Math.min(to, from + room));
    // A copy: the socket's buffer is not ours to hold on to.
    this.#kept.push(Buffer.from(piece));
    this.#keptBytes += piece.length;
  }

  #done(rest: Buffer): WireResponse {
    if (rest.length > 0) throw new ResponseFormatError(`${rest.length} bytes after the end of the response`);
    const body = this.#kept.length === 0 ? EMPTY : this.#kept.length === 1 ? this.#kept[0]! : Buffer.concat(this.#kept);
    const r: WireResponse = { status: this.#status, contentType: this.#contentType, close: this.#close, body };
    this.#state = 'head';
    this.#kept = [];
    this.#keptBytes = 0;
    return r;
  }
}
