// A real SeaweedFS S3 server for the S3 warehouse tests: `weed server -s3`
// (master, volume server, filer and S3 gateway in one process) built by
// test/interop/seaweedfs/install.sh, started in a temporary directory on
// 127.0.0.1 only, every port a free one, with one S3 identity whose keys the
// tests hand to Siglake through the standard AWS environment variables.
// stop() kills it and removes its directory; call it in afterAll.

import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { CreateBucketCommand, DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { freePort } from './free-port.js';

export const SEAWEEDFS_BIN =
  process.env['SEAWEEDFS_BIN'] ??
  path.join(process.env['SIGLAKE_INTEROP_CACHE'] ?? path.join(os.homedir(), '.cache', 'siglake-interop'), 'seaweedfs', 'weed');

const ACCESS_KEY = 'siglake-test-access';
const SECRET_KEY = 'siglake-test-secret-key-0123456789';

export class SeaweedFs {
  readonly accessKeyId = ACCESS_KEY;
  readonly secretAccessKey = SECRET_KEY;
  readonly region = 'us-east-1';
  readonly client: S3Client;
  log = '';
  #child: ChildProcess | null;
  #exited: Promise<void>;

  private constructor(
    readonly dir: string,
    readonly s3Port: number,
    child: ChildProcess,
  ) {
    this.#child = child;
    this.#exited = new Promise((resolve) => child.once('exit', () => resolve()));
    child.stdout?.on('data', (c: Buffer) => this.#keep(c));
    child.stderr?.on('data', (c: Buffer) => this.#keep(c));
    this.client = new S3Client({
      endpoint: this.endpoint,
      region: this.region,
      forcePathStyle: true,
      credentials: { accessKeyId: this.accessKeyId, secretAccessKey: this.secretAccessKey },
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  static async start(): Promise<SeaweedFs> {
    if (!fs.existsSync(SEAWEEDFS_BIN)) {
      throw new Error(`SeaweedFS is not built: ${SEAWEEDFS_BIN} is missing (run test/interop/seaweedfs/install.sh)`);
    }
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'siglake-seaweedfs-'));
    fs.mkdirSync(path.join(dir, 'data'));
    const ports: number[] = [];
    while (ports.length < 8) {
      const p = await freePort();
      if (!ports.includes(p)) ports.push(p);
    }
    const [master, masterGrpc, volume, volumeGrpc, filer, filerGrpc, s3, s3Grpc] = ports as [number, number, number, number, number, number, number, number];
    const identities = {
      identities: [
        {
          name: 'siglake',
          credentials: [{ accessKey: ACCESS_KEY, secretKey: SECRET_KEY }],
          actions: ['Admin', 'Read', 'List', 'Tagging', 'Write'],
        },
      ],
    };
    fs.writeFileSync(path.join(dir, 's3.json'), JSON.stringify(identities));
    const args = [
      'server',
      '-ip=127.0.0.1',
      '-ip.bind=127.0.0.1',
      `-dir=${path.join(dir, 'data')}`,
      '-filer',
      '-s3',
      `-s3.config=${path.join(dir, 's3.json')}`,
      `-master.port=${master}`,
      `-master.port.grpc=${masterGrpc}`,
      `-volume.port=${volume}`,
      `-volume.port.grpc=${volumeGrpc}`,
      `-filer.port=${filer}`,
      `-filer.port.grpc=${filerGrpc}`,
      `-filer.localSocket=${path.join(dir, 'filer.sock')}`,
      `-s3.port=${s3}`,
      `-s3.port.grpc=${s3Grpc}`,
      `-s3.localSocket=${path.join(dir, 's3.sock')}`,
      // Off: the Iceberg REST and Lance listeners (fixed default ports), telemetry (no network here).
      '-s3.port.iceberg=0',
      '-s3.port.lance=0',
      '-master.telemetry=false',
      // As on AWS: writing to a bucket that does not exist is an error, not a way to create it.
      '-s3.autoCreateBucket=false',
      // Small volumes: a test writes megabytes, not the default 30 GB volumes' worth.
      '-master.volumeSizeLimitMB=64',
      '-volume.max=64',
    ];
    const child = spawn(SEAWEEDFS_BIN, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    const server = new SeaweedFs(dir, s3, child);
    try {
      await server.#waitReady(120_000);
    } catch (e) {
      await server.stop();
      throw e;
    }
    return server;
  }

  get endpoint(): string {
    return `http://127.0.0.1:${this.s3Port}`;
  }

  /** The standard AWS variables a Siglake process reads its credentials from. */
  get env(): Record<string, string> {
    return {
      AWS_ACCESS_KEY_ID: this.accessKeyId,
      AWS_SECRET_ACCESS_KEY: this.secretAccessKey,
      AWS_REGION: this.region,
      AWS_EC2_METADATA_DISABLED: 'true',
    };
  }

  /** The Siglake flags that point the warehouse at `s3://bucket/prefix` on this server. */
  warehouseFlags(bucket: string, prefix = 'warehouse'): string[] {
    return ['--warehouse', `s3://${bucket}/${prefix}`, '--warehouse-s3-endpoint', this.endpoint, '--warehouse-s3-force-path-style'];
  }

  async createBucket(name: string): Promise<void> {
    await this.client.send(new CreateBucketCommand({ Bucket: name }));
  }

  /** Every key under a prefix, sorted. */
  async keys(bucket: string, prefix = ''): Promise<string[]> {
    const out: string[] = [];
    let token: string | undefined;
    do {
      const r = await this.client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
      for (const o of r.Contents ?? []) if (o.Key !== undefined) out.push(o.Key);
      token = r.IsTruncated === true ? r.NextContinuationToken : undefined;
    } while (token !== undefined);
    return out.sort();
  }

  /** SIGSTOP: the server keeps its connections but answers nothing. */
  pause(): void {
    this.#child?.kill('SIGSTOP');
  }

  /** SIGCONT after pause(). */
  resume(): void {
    this.#child?.kill('SIGCONT');
  }

  /** SIGKILL and remove the data directory. */
  async stop(): Promise<void> {
    this.client.destroy();
    const child = this.#child;
    if (child !== null) {
      this.#child = null;
      child.kill('SIGCONT');
      child.kill('SIGKILL');
      await this.#exited;
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  #keep(c: Buffer): void {
    this.log += c.toString();
    if (this.log.length > 64 * 1024) this.log = this.log.slice(-32 * 1024);
  }

  /** Ready when an object can be written and deleted (the volume server has registered with the master). */
  async #waitReady(deadlineMs: number): Promise<void> {
    const until = Date.now() + deadlineMs;
    let exited = false;
    void this.#exited.then(() => {
      exited = true;
    });
    let last: unknown;
    const bucket = 'siglake-ready-probe';
    for (;;) {
      if (exited) throw new Error(`weed server exited during start-up: ${this.log.slice(-4000)}`);
      try {
        await this.client.send(new CreateBucketCommand({ Bucket: bucket })).catch((e: { name?: string }) => {
          if (e.name !== 'BucketAlreadyOwnedByYou' && e.name !== 'BucketAlreadyExists') throw e;
        });
        await this.client.send(new PutObjectCommand({ Bucket: bucket, Key: 'probe', Body: 'ok' }));
        await this.client.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'probe' }));
        return;
      } catch (e) {
        last = e;
      }
      if (Date.now() > until) throw new Error(`SeaweedFS S3 not ready within ${deadlineMs} ms: ${(last as Error)?.message}\n${this.log.slice(-4000)}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

/**
 * Makes the global fetch (icebird's and hyparquet's) serve the URLs icebird
 * turns `s3://bucket/key` into (`https://bucket.s3.amazonaws.com/key`) from
 * this S3 server through the SDK: HEAD, GET and Range GET. Other URLs go to
 * the real fetch. Returns a restore function.
 */
export function installS3Fetch(server: SeaweedFs): () => void {
  const real = globalThis.fetch;
  globalThis.fetch = (async (input: string | URL | Request, init?: RequestInit) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const m = /^https:\/\/([^/]+)\.s3\.amazonaws\.com\/(.+)$/.exec(url);
    if (m === null) return real(input, init);
    const [, bucket, key] = m as unknown as [string, string, string];
    try {
      if ((init?.method ?? 'GET').toUpperCase() === 'HEAD') {
        const h = await server.client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
        return new Response(null, { status: 200, headers: { 'content-length': String(h.ContentLength ?? 0) } });
      }
      const range = new Headers(init?.headers).get('range') ?? undefined;
      const r = await server.client.send(new GetObjectCommand({ Bucket: bucket, Key: key, Range: range }));
      const body = await r.Body!.transformToByteArray();
      const headers: Record<string, string> = { 'content-length': String(body.length) };
      if (r.ContentRange !== undefined) headers['content-range'] = r.ContentRange;
      return new Response(body, { status: range === undefined ? 200 : 206, headers });
    } catch (e) {
      const status = (e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode ?? 500;
      return new Response(String((e as Error).message), { status });
    }
  }) as typeof fetch;
  return () => {
    globalThis.fetch = real;
  };
}

/** Downloads an object to a local file (for DuckDB's read_parquet). */
export async function downloadObject(server: SeaweedFs, bucket: string, key: string, file: string): Promise<void> {
  const r = await server.client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
  fs.writeFileSync(file, await r.Body!.transformToByteArray());
}

/** `s3://bucket/key` → [bucket, key]. */
export function splitS3(uri: string): [string, string] {
  const m = /^s3:\/\/([^/]+)\/(.+)$/.exec(uri);
  if (m === null) throw new Error(`not an s3:// URI: ${uri}`);
  return [m[1]!, m[2]!];
}

/** What `useSeaweedBucket` hands a describe block once its beforeAll ran. */
export interface SeaweedBucket {
  readonly sw: SeaweedFs;
  /** A fresh local data directory (WAL, SQLite catalog), removed in afterAll. */
  readonly dataDir: string;
  /** `--catalog-url sqlite:<dataDir>/catalog.db` plus the warehouse flags for `s3://<bucket>/<prefix>`. */
  readonly lakeFlags: string[];
  readonly catalogUrl: string;
  readonly walDir: string;
}

/**
 * Registers beforeAll/afterAll for a describe block that needs one SeaweedFS
 * server with one bucket: start it, create the bucket, optionally route
 * icebird's fetch to it; stop it and remove the data directory afterwards.
 * Read the fields inside tests (they are set once beforeAll ran).
 */
export function useSeaweedBucket(bucket: string, opts: { dirPrefix: string; prefix?: string; s3Fetch?: boolean }): SeaweedBucket {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), opts.dirPrefix));
  const catalogUrl = `sqlite:${path.join(dataDir, 'catalog.db')}`;
  const fixture = { sw: undefined as unknown as SeaweedFs, dataDir, catalogUrl, walDir: path.join(dataDir, 'wal'), lakeFlags: [] as string[] };
  let restoreFetch: (() => void) | undefined;
  beforeAll(async () => {
    fixture.sw = await SeaweedFs.start();
    await fixture.sw.createBucket(bucket);
    fixture.lakeFlags = ['--catalog-url', catalogUrl, ...fixture.sw.warehouseFlags(bucket, opts.prefix ?? 'warehouse')];
    if (opts.s3Fetch === true) restoreFetch = installS3Fetch(fixture.sw);
  });
  afterAll(async () => {
    restoreFetch?.();
    await fixture.sw?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
  return fixture;
}
