// Runs compaction rounds every interval until stopped: the body of the
// compactor thread inside `siglake ingest` and of `siglake compact` without
// --once. A round that left sealed segments behind (its byte budget ran out)
// and made progress is followed at once by the next; a failed round, or one
// that committed and retired nothing, is logged and retried at the next tick
// (everything it did not commit is still in the WAL).

import type { Logger } from 'pino';
import type { Compactor } from './compactor.js';

/**
 * What one round came to, for readiness (issue 19): `failed` when it threw or
 * when every table it had work for failed to commit (a round with nothing to
 * do is not a failure). `error` is the message of the failure.
 */
export type RoundOutcome = { failed: false } | { failed: true; error: string };

export class CompactorLoop {
  readonly #compactor: Compactor;
  readonly #intervalMs: number;
  readonly #log: Logger;
  #stopping = false;
  #wake: (() => void) | null = null;
  #done: Promise<void> | null = null;
  readonly #onRound: ((o: RoundOutcome) => void) | undefined;
  /** Runs after each tick's rounds (retention, src/retention); its failure is logged, never stops the loop. */
  afterRounds: (() => Promise<void>) | undefined;

  constructor(compactor: Compactor, intervalMs: number, log: Logger, onRound?: (o: RoundOutcome) => void) {
    this.#compactor = compactor;
    this.#intervalMs = intervalMs;
    this.#log = log;
    this.#onRound = onRound;
  }

  /** Starts the loop; the first round runs after one interval. */
  start(): Promise<void> {
    this.#done ??= this.#run();
    return this.#done;
  }

  /** Asks the loop to stop after the round in progress; resolves when it has. */
  stop(): Promise<void> {
    this.#stopping = true;
    this.#wake?.();
    return this.#done ?? Promise.resolve();
  }

  async #run(): Promise<void> {
    this.#compactor.measureLag();
    while (!this.#stopping) {
      await this.#sleep(this.#intervalMs);
      while (!this.#stopping) {
        let backlog = false;
        try {
          const r = await this.#compactor.runRound();
          // Straight on only while rounds make progress: a backlog whose every table failed
          // (a revoked key, a read-only catalog) waits for the next tick like any failure, instead
          // of re-reading the WAL and writing orphan files back to back.
          backlog = r.backlog && (r.commits > 0 || r.retired > 0);
          this.#onRound?.(
            r.firstError !== undefined && r.commits === 0 ? { failed: true, error: r.firstError } : { failed: false },
          );
        } catch (e) {
          this.#log.error({ err: (e as Error).message, code: (e as { code?: string }).code }, 'compaction round failed; retrying next interval');
          this.#onRound?.({ failed: true, error: (e as Error).message });
        }
        if (!backlog) break;
      }
      if (this.afterRounds !== undefined && !this.#stopping) {
        await this.afterRounds().catch((e: unknown) => this.#log.error({ err: (e as Error).message }, 'retention round failed; retrying later'));
      }
    }
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      if (this.#stopping) return resolve();
      const t = setTimeout(done, ms);
      const self = this;
      function done(): void {
        clearTimeout(t);
        self.#wake = null;
        resolve();
      }
      this.#wake = done;
    });
  }
}
