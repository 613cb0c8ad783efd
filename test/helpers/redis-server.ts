// A real `redis-server` for tests: started on a free port in a temporary
// directory, with no persistence. It can be killed with SIGKILL, paused with
// SIGSTOP (so commands time out) and started again on the same port.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './free-port.js';

export const REDIS_SERVER_BIN = process.env.REDIS_SERVER_BIN ?? '/usr/bin/redis-server';

/** Resolves once something accepts TCP connections on the port and answers PING. */
async function waitForPong(port: number, deadlineMs: number): Promise<void> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const sock = createConnection({ host: '127.0.0.1', port });
      let data = '';
      sock.setTimeout(500, () => {
        sock.destroy();
        resolve(false);
      });
      sock.once('error', () => resolve(false));
      sock.on('data', (chunk) => {
        data += chunk.toString('latin1');
        if (data.includes('\r\n')) {
          sock.destroy();
          resolve(data.startsWith('+PONG'));
        }
      });
      sock.once('connect', () => sock.write('PING\r\n'));
    });
    if (ok) return;
    if (Date.now() > until) throw new Error(`redis-server did not answer PING on port ${port} within ${deadlineMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export class RedisServer {
  readonly port: number;
  readonly dir: string;
  #child: ChildProcess | null = null;
  #exited: Promise<void> = Promise.resolve();

  private constructor(port: number, dir: string) {
    this.port = port;
    this.dir = dir;
  }

  /** Start a fresh redis-server on a free port. */
  static async start(): Promise<RedisServer> {
    const server = new RedisServer(await freePort(), mkdtempSync(join(tmpdir(), 'siglake-redis-')));
    await server.restart();
    return server;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.#child !== null;
  }

  /** (Re)start the server on the same port; it comes back empty (no persistence). */
  async restart(): Promise<void> {
    if (this.#child !== null) throw new Error('redis-server is already running');
    const child = spawn(
      REDIS_SERVER_BIN,
      ['--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir, '--save', '', '--appendonly', 'no', '--protected-mode', 'no', '--loglevel', 'warning'],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr?.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    this.#child = child;
    this.#exited = new Promise((resolve) => child.once('exit', () => resolve()));
    const died = this.#exited.then(() => {
      throw new Error(`redis-server exited during start-up: ${stderr.trim()}`);
    });
    died.catch(() => undefined);
    await Promise.race([waitForPong(this.port, 10_000), died]);
  }

  /** SIGKILL, as a crash: no shutdown, connections drop. */
  async kill9(): Promise<void> {
    const child = this.#child;
    if (child === null) return;
    child.kill('SIGCONT');
    child.kill('SIGKILL');
    await this.#exited;
    this.#child = null;
  }

  /** SIGSTOP: the server keeps its connections but answers nothing. */
  pause(): void {
    this.#child?.kill('SIGSTOP');
  }

  /** SIGCONT after pause(). */
  resume(): void {
    this.#child?.kill('SIGCONT');
  }

  /** Kill the server and remove its directory. */
  async stop(): Promise<void> {
    await this.kill9();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
