import { createGzip, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { BodyError } from '../../src/errors.js';
import { gunzipCapped } from '../../src/otlp/gzip.js';

function refusal(body: Uint8Array, maxBytes: number): BodyError {
  try {
    gunzipCapped(body, maxBytes);
  } catch (err) {
    expect(err).toBeInstanceOf(BodyError);
    return err as BodyError;
  }
  return expect.unreachable('the body was accepted');
}

/** gzip of `total` zero bytes, compressed in 1 MiB steps so the input never sits in memory. */
async function zeroBomb(total: number): Promise<Buffer> {
  const gz = createGzip({ level: 1 });
  const parts: Buffer[] = [];
  gz.on('data', (d: Buffer) => parts.push(d));
  const done = new Promise((resolve) => gz.once('end', resolve));
  const chunk = Buffer.alloc(1 << 20);
  for (let sent = 0; sent < total; sent += chunk.length) {
    if (!gz.write(chunk)) await new Promise((resolve) => gz.once('drain', resolve));
  }
  gz.end();
  await done;
  return Buffer.concat(parts);
}

describe('gunzipCapped', () => {
  const text = Buffer.from('{"resourceLogs":[]} '.repeat(500));

  it('inflates a gzip body, and a body of several gzip members', () => {
    expect(Buffer.from(gunzipCapped(gzipSync(text), 1 << 20)).equals(text)).toBe(true);
    const two = Buffer.concat([gzipSync(text), gzipSync(Buffer.from('tail'))]);
    expect(Buffer.from(gunzipCapped(two, 1 << 20)).toString()).toBe(`${text.toString()}tail`);
    expect(gunzipCapped(gzipSync(Buffer.alloc(0)), 100).length).toBe(0);
  });

  it('allows exactly the cap and refuses one byte more with a 413', () => {
    const body = gzipSync(text);
    expect(gunzipCapped(body, text.length).length).toBe(text.length);
    const e = refusal(body, text.length - 1);
    expect(e.code).toBe('SIGLAKE_BODY_TOO_LARGE');
    expect(e.httpStatus).toBe(413);
    expect(e.message).toBe(`gzip body inflates past the ${text.length - 1}-byte request limit`);
    expect(refusal(gzipSync(Buffer.from('x')), 0).code).toBe('SIGLAKE_BODY_TOO_LARGE');
    expect(gunzipCapped(gzipSync(Buffer.alloc(0)), 0).length).toBe(0);
  });

  it.each([
    ['an empty body', Buffer.alloc(0), /unexpected end of file/],
    ['plain text', Buffer.from('{"resourceLogs":[]}'), /incorrect header check/],
    ['a truncated body', gzipSync(Buffer.from('hello world, hello world')).subarray(0, 15), /unexpected end of file/],
    ['a body without its trailer', gzipSync(Buffer.from('hello')).subarray(0, -4), /unexpected end of file/],
    ['trailing garbage', Buffer.concat([gzipSync(Buffer.from('hello')), Buffer.from('garbage')]), /incorrect header check/],
    ['a corrupted checksum', (() => { const b = gzipSync(Buffer.from('hello')); b[b.length - 6] ^= 0xff; return b; })(), /incorrect data check/],
    ['corrupted deflate data', (() => { const b = gzipSync(text); b.fill(0xff, 12, 30); return b; })(), /invalid/],
  ])('refuses %s with a 400', (_name, body, message) => {
    const e = refusal(body, 1 << 20);
    expect(e.code).toBe('SIGLAKE_BAD_BODY');
    expect(e.httpStatus).toBe(400);
    expect(e.message).toMatch(/^invalid gzip body: /);
    expect(e.message).toMatch(message);
  });

  it('stops a 1 GiB gzip bomb at the cap: quickly and with bounded memory', async () => {
    const bomb = await zeroBomb(1 << 30);
    expect(bomb.length).toBeLessThan(8 << 20);
    const cap = 8 << 20;
    const before = process.memoryUsage().arrayBuffers;
    const started = performance.now();
    const e = refusal(bomb, cap);
    const elapsed = performance.now() - started;
    const grown = process.memoryUsage().arrayBuffers - before;
    expect(e.code).toBe('SIGLAKE_BODY_TOO_LARGE');
    // Inflating all of it would take seconds and a gibibyte; the cap stops it at 8 MiB.
    expect(elapsed).toBeLessThan(1000);
    expect(grown).toBeLessThan(64 << 20);
  });
});
