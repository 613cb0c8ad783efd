// The "crash" row of the reliability table, with a ledger: many concurrent
// clients send requests whose log bodies and span names are unique markers,
// to a random mix of tenants, indexes and signals over HTTP (protobuf, JSON,
// gzip) and gRPC; the test records which got a 200 (or gRPC OK); the real
// `siglake ingest` process is killed with SIGKILL at a random moment, many
// rounds on the same data directory, in each of the three --wal-fsync modes.
//
// After each crash, before the restart: `siglake wal verify` accepts what the
// crash left (a torn tail only in a lane's last segment, `.tmp` leftovers).
// After the restart: recovery cut exactly the torn bytes verify announced and
// counted them in siglake_wal_truncated_bytes_total, verify is clean (no torn
// tail, no leftover, no problem), no segment file vanished and every segment
// made in the crashed life had a number above all numbers used before it, and
// every acknowledged marker is found by `siglake wal dump`, in its lane, once.
//
// Zero loss is checked in all three modes. A SIGKILL kills the process, not
// the machine: what write() handed to the kernel is in the page cache and
// reaches the disk anyway, so `interval` and `never` (which acknowledge after
// write, before fdatasync) lose nothing acknowledged on a process crash
// either. Their documented loss window (up to --wal-fsync-interval-ms of
// acknowledged writes for `interval`, whatever the kernel had not written
// back for `never`) applies to a machine crash or power loss, which this test
// cannot cause; see docs/reliability.md.

import fs from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { tempDir, type RunningIngester } from '../helpers/ingester.js';
import { LoadRun, Ledger, checkLedger, expectLedgerIntact, laneMatrix, sleep, until } from './lib/load.js';
import { Prng } from './lib/prng.js';
import { startWalIngester } from './lib/wal-ingester.js';
import { CHAOS, baseSeed, recordFigures, scaled } from './lib/scale.js';
import { appendTornTail, dumpWal, numberingViolations, snapshotWal, verifyWal, type WalSnapshot } from './lib/wal-files.js';

const MODES = ['batch', 'interval', 'never'] as const;
type Mode = (typeof MODES)[number];

const ROUNDS = scaled(3, 40, 'SIGLAKE_CRASH_ROUNDS');
/** A fresh data directory every this many rounds (dump time grows with the WAL). */
const ROUNDS_PER_DIR = scaled(1000, 10);
const CLIENTS = scaled(12, 24);
const TENANTS = ['default', 'acme', 'globex', 'initech', 'umbrella', 'hooli'];
const INDEXES = ['audit', 'payments', 'k8s-events'];
/** Every tenant's managed indexes exist before data is sent to them (contract §6). */
const ALL_INDEXES = Object.fromEntries(TENANTS.map((t) => [t, INDEXES]));

interface ModeFigures {
  mode: Mode;
  rounds: number;
  killsDuringRecovery: number;
  ackedRequests: number;
  ackedRecords: number;
  lost: number;
  /** Torn tails the SIGKILL itself left. */
  tornTailsCut: number;
  /** Torn tails the test appended after the crash (crash-mid-append shapes). */
  injectedTornTails: number;
  bytesCut: number;
  tmpLeftovers: number;
  unackedButPresent: number;
  requestsSent: number;
}

const figures: ModeFigures[] = [];
const seed = baseSeed('crash-ledger');
const live = new Set<RunningIngester>();

afterAll(async () => {
  for (const ing of live) await ing.kill9();
  recordFigures('crash-ledger', {
    seed,
    roundsPerMode: ROUNDS,
    clients: CLIENTS,
    totals: {
      rounds: figures.reduce((s, f) => s + f.rounds, 0),
      ackedRequests: figures.reduce((s, f) => s + f.ackedRequests, 0),
      ackedRecords: figures.reduce((s, f) => s + f.ackedRecords, 0),
      lost: figures.reduce((s, f) => s + f.lost, 0),
      tornTailsCut: figures.reduce((s, f) => s + f.tornTailsCut, 0),
      injectedTornTails: figures.reduce((s, f) => s + f.injectedTornTails, 0),
      bytesCut: figures.reduce((s, f) => s + f.bytesCut, 0),
      tmpLeftovers: figures.reduce((s, f) => s + f.tmpLeftovers, 0),
    },
    modes: figures,
  });
});

describe.each(MODES)('kill -9 under load, --wal-fsync %s', (mode) => {
  it(
    `every acknowledged marker survives ${ROUNDS} rounds of kill -9; tails cut and counted; verify clean; numbering never reused`,
    async () => {
      const prng = new Prng(seed ^ (MODES.indexOf(mode) * 0x9e3779b1));
      const f: ModeFigures = {
        mode,
        rounds: 0,
        killsDuringRecovery: 0,
        ackedRequests: 0,
        ackedRecords: 0,
        lost: 0,
        tornTailsCut: 0,
        injectedTornTails: 0,
        bytesCut: 0,
        tmpLeftovers: 0,
        unackedButPresent: 0,
        requestsSent: 0,
      };
      figures.push(f);
      let dataDir = tempDir(`siglake-crash-${mode}-`);
      let ledger = new Ledger();
      // The files as the last life found them at its start (after recovery).
      let atStart: WalSnapshot = new Map();
      let needsRecovery = false;

      const restartAndCheck = async (round: number, killDuringRecovery: boolean): Promise<RunningIngester | null> => {
        const walDir = `${dataDir}/wal`;
        let expectedCut = 0;
        if (needsRecovery) {
          // What the crash left, before anything repairs it.
          const crashed = snapshotWal(walDir);
          expect(numberingViolations(atStart, crashed), `round ${round}: numbering after the crash`).toEqual([]);
          const natural = verifyWal(walDir);
          expect(natural.status, `round ${round}: verify after the crash must accept torn tails and leftovers only\n${natural.output}`).toBe(0);
          f.tornTailsCut += natural.tornTails;
          f.tmpLeftovers += natural.leftoverTmp;
          // A SIGKILL rarely lands inside a write(); half the time, add the torn
          // tails a crash mid-append leaves (a machine crash leaves them often).
          if (prng.chance(0.5) && crashed.size > 0) {
            // One torn tail per lane at most: a crash tears one append per file.
            const lanes = [...crashed.keys()];
            for (let k = 0; k < 1 + prng.int(2) && lanes.length > 0; k++) {
              const lane = lanes.splice(prng.int(lanes.length), 1)[0]!;
              const kind = prng.pick(['short-header', 'short-payload', 'zero-blocks'] as const);
              const n = appendTornTail(`${walDir}/${lane}`, kind, (m) => prng.int(m));
              if (n > 0) f.injectedTornTails++;
            }
          }
          const v = verifyWal(walDir);
          expect(v.status, `round ${round}: verify after the crash (and the injected tails)\n${v.output}`).toBe(0);
          expectedCut = v.bytesToCut;
          f.bytesCut += v.bytesToCut;
          atStart = snapshotWal(walDir);
        }
        const args = [
          '--trust-tenant-header',
          '--wal-fsync',
          mode,
          '--wal-fsync-interval-ms',
          String(prng.pick([20, 100, 250])),
          '--wal-segment-bytes',
          String(prng.pick([48 * 1024, 256 * 1024, 1024 * 1024, 64 * 1024 * 1024])),
          '--wal-segment-max-age-secs',
          String(prng.pick([0, 1, 60])),
          '--log-level',
          'info',
        ];
        const workers = prng.pick([1, 2, 2]);
        if (killDuringRecovery) {
          // Killed as soon as it listens: the workers may be in the middle of repairing tails.
          const ing = await startWalIngester({ dataDir, workers, args, waitFor: 'listening', indexes: ALL_INDEXES });
          live.add(ing);
          await ing.kill9();
          live.delete(ing);
          f.killsDuringRecovery++;
          // Whatever it did or did not repair, the next start must finish the job.
          const again = verifyWal(walDir);
          expect(again.status, again.output).toBe(0);
          expectedCut = again.bytesToCut;
        }
        const ing = await startWalIngester({ dataDir, workers, args, indexes: ALL_INDEXES });
        live.add(ing);
        // Recovery cut exactly what verify said it would, and counted it.
        expect(await ing.metric('siglake_wal_truncated_bytes_total'), `round ${round}: truncated bytes`).toBe(expectedCut);
        const repaired = ing.logs.filter((l) => l.msg === 'WAL tail repaired: cut back to the last whole record').length;
        if (expectedCut > 0) expect(repaired).toBeGreaterThan(0);
        // The server is idle (lanes make files lazily): what is on disk now is the repaired WAL.
        if (fs.existsSync(walDir)) {
          const v = verifyWal(walDir);
          expect(v.status, v.output).toBe(0);
          expect(v.tornTails, v.output).toBe(0);
          expect(v.problems, v.output).toBe(0);
          expect(v.leftoverTmp, v.output).toBe(0);
        } else {
          expect(needsRecovery, 'a crashed life left no WAL directory').toBe(false);
        }
        const repairedSnap = snapshotWal(walDir);
        // Repair cuts tails and deletes .tmp files; it never removes a segment or renumbers one.
        expect(numberingViolations(atStart, repairedSnap)).toEqual([]);
        for (const [lane, l] of atStart) {
          const now = repairedSnap.get(lane)!;
          for (const s of l.segments) {
            const after = now.segments.find((x) => x.n === s.n)!;
            expect(after.size, `${lane}/${s.n} grew during recovery`).toBeLessThanOrEqual(s.size);
          }
        }
        atStart = repairedSnap;
        // The ledger: every acknowledged marker, in its lane, once; nothing invented.
        expectLedgerIntact(ledger, walDir, `crash-${mode}-`, `round ${round}: `);
        return ing;
      };

      const settle = (ledgerNow: Ledger) => {
        const c = checkLedger(ledgerNow, dumpWal(`${dataDir}/wal`), `crash-${mode}-`);
        f.ackedRequests += c.ackedRequests;
        f.ackedRecords += c.ackedRecords;
        f.lost += c.lost.length;
        f.unackedButPresent += c.unackedPresent;
        f.requestsSent += ledgerNow.entries.length;
      };

      for (let round = 0; round < ROUNDS; round++) {
        if (round > 0 && round % ROUNDS_PER_DIR === 0) {
          // Close the books of this directory and start a fresh one.
          const ing = await restartAndCheck(round, false);
          expect(await ing!.stop()).toBe(0);
          live.delete(ing!);
          settle(ledger);
          // Checked: its WAL is no longer needed (a failing round keeps its directory for a look).
          fs.rmSync(dataDir, { recursive: true, force: true });
          dataDir = tempDir(`siglake-crash-${mode}-`);
          ledger = new Ledger();
          atStart = new Map();
          needsRecovery = false;
        }
        const killDuringRecovery = needsRecovery && prng.chance(0.2);
        const ing = (await restartAndCheck(round, killDuringRecovery))!;
        const lanes = laneMatrix(
          TENANTS.filter((t) => t === 'default' || prng.chance(0.6)),
          INDEXES.filter(() => prng.chance(0.5)),
        );
        const load = new LoadRun({
          ing,
          prng: prng.fork(),
          ledger,
          tag: `crash-${mode}-r${round}`,
          lanes,
          clients: CLIENTS,
          // Large bodies make large writes, which a SIGKILL can cut short: torn tails for recovery to cut.
          padChance: prng.pick([0.1, 0.3]),
          maxPadBytes: prng.pick([16 * 1024, 256 * 1024, 2 * 1024 * 1024]),
        });
        // Some acknowledgements first, then a random moment.
        const base = ledger.acked.length;
        await until(() => ledger.acked.length >= base + 20, 60_000, 'the first acknowledgements');
        await sleep(prng.range(0, CHAOS ? 3000 : 1200));
        await ing.kill9();
        live.delete(ing);
        await load.stop();
        needsRecovery = true;
        f.rounds++;
      }
      // The last crash: recover, check, then a clean stop.
      const last = (await restartAndCheck(ROUNDS, false))!;
      expect(await last.stop()).toBe(0);
      live.delete(last);
      const v = verifyWal(`${dataDir}/wal`);
      expect(v.status, v.output).toBe(0);
      expect(v.tornTails).toBe(0);
      settle(ledger);
      expect(f.lost).toBe(0);
      fs.rmSync(dataDir, { recursive: true, force: true });
      expect(f.ackedRequests).toBeGreaterThan(0);
      console.log(`[crash-ledger] ${mode}: ${JSON.stringify(f)}`);
    },
    CHAOS ? 3_600_000 : 240_000,
  );
});
