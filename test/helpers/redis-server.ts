// A real `redis-server` for tests: started on a free port in a temporary
// directory, with no persistence. It can be killed with SIGKILL, paused with
// SIGSTOP (so commands time out) and started again on the same port.
//
// The port lies below the kernel's ephemeral range (freeFixedPort), so that
// while the server is down no listen(0) or outgoing connection of another
// process can take it; should something hold it all the same, start() picks
// another port and restart() tries again for a while, then fails saying so.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freeFixedPort } from './free-port.js';

export const REDIS_SERVER_BIN = process.env.REDIS_SERVER_BIN ?? '/usr/bin/redis-server';

/** redis-server could not listen: another process holds the port. */
class PortTakenError extends Error {}

/** How long restart() waits for a port another process holds to be free again. */
const RESTART_PORT_WAIT_MS = 10_000;

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

  /** Start a fresh redis-server on a free port (another one if something takes it first). */
  static async start(): Promise<RedisServer> {
    const dir = mkdtempSync(join(tmpdir(), 'siglake-redis-'));
    for (let attempt = 1; ; attempt++) {
      const server = new RedisServer(await freeFixedPort(), dir);
      try {
        await server.#spawn();
        return server;
      } catch (e) {
        if (!(e instanceof PortTakenError) || attempt >= 5) {
          rmSync(dir, { recursive: true, force: true });
          throw e;
        }
      }
    }
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.#child !== null;
  }

  /**
   * Start the server again on the same port (after kill9()); it comes back
   * empty (no persistence). A port another process took meanwhile is tried
   * again for RESTART_PORT_WAIT_MS, then this fails naming the port.
   */
  async restart(): Promise<void> {
    const until = Date.now() + RESTART_PORT_WAIT_MS;
    for (;;) {
      try {
        await this.#spawn();
        return;
      } catch (e) {
        if (!(e instanceof PortTakenError)) throw e;
        if (Date.now() > until) {
          throw new Error(
            `redis-server could not be started again on port ${this.port}: another process has held it for ${RESTART_PORT_WAIT_MS} ms since the server went down (${e.message})`,
          );
        }
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  /** One start of redis-server on this.port; PortTakenError when the port is in use. */
  async #spawn(): Promise<void> {
    if (this.#child !== null) throw new Error('redis-server is already running');
    const child = spawn(
      REDIS_SERVER_BIN,
      ['--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir, '--save', '', '--appendonly', 'no', '--protected-mode', 'no', '--loglevel', 'warning'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    // redis-server logs (a failed bind too) on stdout; keep the tail of both.
    let output = '';
    const keep = (c: Buffer) => {
      output = (output + c.toString()).slice(-4096);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    this.#child = child;
    // 'close': the process has exited and its output is all read.
    this.#exited = new Promise((resolve) => child.once('close', () => resolve()));
    const died = this.#exited.then(() => {
      const why = output.trim();
      const inUse = why.split('\n').find((l) => /address already in use/i.test(l));
      if (inUse !== undefined) throw new PortTakenError(inUse.trim());
      throw new Error(`redis-server exited during start-up: ${why}`);
    });
    died.catch(() => undefined);
    try {
      await Promise.race([waitForPong(this.port, 10_000), died]);
      // Whatever answered PING must be this server, not another one that holds the port.
      if (child.exitCode !== null || child.signalCode !== null) await died;
    } catch (e) {
      child.kill('SIGKILL');
      await this.#exited;
      this.#child = null;
      throw e;
    }
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
