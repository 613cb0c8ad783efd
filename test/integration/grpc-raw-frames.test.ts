// Raw HTTP/2 frames at the gRPC port, from a client with no credentials.
// Found by a red-team review (stop 47): grpc-js answers a stream without an
// application/grpc content type (415), or for an unknown path, from the
// session's 'stream' event; when the same write also held a connection error
// (a HEADERS frame on stream 0), Node had torn the session down first, and
// grpc-js's respond() on the destroyed stream threw out of an event emitter:
// 69 bytes ended `siglake ingest`, every tenant with it. So did a flood of
// ~1,100 such streams in one write.

import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startIngester, type RunningIngester } from '../helpers/ingester.js';

const running: RunningIngester[] = [];
afterEach(async () => {
  for (const i of running.splice(0)) await i.stop();
});

function frame(type: number, flags: number, stream: number, payload: Buffer): Buffer {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(stream, 5);
  return Buffer.concat([h, payload]);
}

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
const SETTINGS = frame(4, 0, 0, Buffer.alloc(0));
const HEADERS = 1;
const END_STREAM_HEADERS = 0x5;
/** HPACK: :method POST, :scheme http, :authority "x" (literal), :path "/x" (literal); no content-type. */
const NO_CONTENT_TYPE = Buffer.from([0x83, 0x86, 0x41, 1, 0x78, 0x44, 2, 0x2f, 0x78]);
/** HPACK: the same, :path "/nope" and content-type application/grpc: an unknown method. */
const UNKNOWN_PATH = Buffer.concat([Buffer.from([0x83, 0x86, 0x41, 1, 0x78, 0x44, 5]), Buffer.from('/nope'), Buffer.from([0x0f, 0x10, 16]), Buffer.from('application/grpc')]);

async function blast(port: number, bytes: Buffer): Promise<void> {
  const s = net.connect(port, '127.0.0.1');
  s.on('error', () => undefined);
  s.on('data', () => undefined);
  await new Promise<void>((r) => s.on('connect', () => r()));
  s.write(bytes);
  // Long enough for the session to be torn down and grpc-js's queued 'stream' events to run.
  await new Promise((r) => setTimeout(r, 800));
  s.destroy();
}

async function stillServes(ing: RunningIngester, token?: string): Promise<void> {
  expect(ing.exitCode, ing.stderr).toBeNull();
  expect((await fetch(`${ing.url}/readyz`)).status).toBe(200);
  const r = await fetch(`${ing.url}/v1/logs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) },
    body: JSON.stringify({ resourceLogs: [{ scopeLogs: [{ logRecords: [{ body: { stringValue: 'after' } }] }] }] }),
  });
  expect(r.status).toBe(200);
}

describe('the gRPC port under raw HTTP/2 frames', () => {
  for (const [name, block] of [
    ['no content type', NO_CONTENT_TYPE],
    ['an unknown path', UNKNOWN_PATH],
  ] as const) {
    it(`a stream grpc-js answers itself (${name}) and a connection error in one write: the ingester lives on`, async () => {
      const ing = await startIngester({ args: ['--compactor=false', '--auth-bearer-tokens', 's3cret'] });
      running.push(ing);
      for (let i = 0; i < 3; i++) {
        await blast(ing.grpcPort, Buffer.concat([PREFACE, SETTINGS, frame(HEADERS, END_STREAM_HEADERS, 1, block), frame(HEADERS, END_STREAM_HEADERS, 0, block)]));
      }
      await stillServes(ing, 's3cret');
    });
  }

  it('1,200 such streams in one write: the ingester lives on', async () => {
    const ing = await startIngester({ args: ['--compactor=false'] });
    running.push(ing);
    const parts = [PREFACE, SETTINGS];
    // The first stream's literals enter the dynamic table (:authority 63, :path 62): the rest index them.
    for (let i = 0; i < 1200; i++) parts.push(frame(HEADERS, END_STREAM_HEADERS, 1 + 2 * i, i === 0 ? NO_CONTENT_TYPE : Buffer.from([0x83, 0x86, 0xbf, 0xbe])));
    await blast(ing.grpcPort, Buffer.concat(parts));
    await stillServes(ing);
  });
});
