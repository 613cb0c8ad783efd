// The query answer written a batch of rows at a time (answers.ts): byte for
// byte the JSON a single JSON.stringify of the whole answer gives, whatever
// the number of batches, so that an answer is never one string (V8 refuses
// strings past about 512 MiB; such an answer once left its caller waiting on
// a connection that never got a byte). Served by a real node:http server.

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sendResult, wantsNdjson } from '../../src/query/answers.js';
import type { QueryResult } from '../../src/query/query-runner.js';

let server: http.Server;
let url: string;
let result: QueryResult;

beforeAll(async () => {
  server = http.createServer((_req, res) => void sendResult(res, result, 7, 10_000));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe('sendResult', () => {
  for (const n of [0, 1, 511, 512, 513, 1300]) {
    it(`${n} rows: the same text as one JSON.stringify of the answer`, async () => {
      const rows = Array.from({ length: n }, (_, i) => [i, `b"${i}\\n`, i % 3 === 0 ? null : { k: [i] }]);
      result = { columns: [{ name: 'n', type: 'INTEGER' }, { name: 's', type: 'VARCHAR' }, { name: 'j', type: 'JSON' }], rows, truncated: n === 1300 };
      const text = await (await fetch(url)).text();
      expect(text).toBe(JSON.stringify({ columns: result.columns, rows, rowCount: n, truncated: result.truncated, elapsedMs: 7 }));
    });
  }
});

describe('wantsNdjson', () => {
  it.each([
    [undefined, false],
    ['application/json', false],
    ['application/x-ndjson', true],
    ['Application/X-NDJSON; charset=utf-8', true],
    ['application/x-ndjson;q=0, application/json', false],
    ['application/json;q=0.5, application/x-ndjson;q=0.9', true],
    ['application/json, application/x-ndjson;q=0.5', false],
    ['application/json, application/x-ndjson', true],
    ['*/*', false],
  ])('%s → %s', (accept, want) => {
    expect(wantsNdjson(accept as string | undefined)).toBe(want);
  });
});
