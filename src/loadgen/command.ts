// `siglake loadgen`: parse the flags, run the client threads, print the text
// report, and write the JSON report and the HTML chart when asked.
// Exit codes: 0 when the run completed with at most --max-error-rate (1 %) of
// the requests refused or failed; 1 when more were (the last line names the
// most common refusal and its likely fix), when no request got any answer (the
// last line names the target and what the requests met: ECONNREFUSED, a
// timeout…), or when a client thread failed; 2 for bad flags. A run ends at
// --duration whatever the target does (load-client.ts).

import { writeFileSync } from 'node:fs';
import { makeDirsSync } from '../make-dirs.js';
import { dirname } from 'node:path';
import { terminalWidth } from '../config/help.js';
import { ConfigError } from '../errors.js';
import { LoadCoordinator } from './load-coordinator.js';
import { LoadReport } from './load-report.js';
import { loadgenUsage, parseLoadgenArgs } from './loadgen-options.js';
import { JwtSigner } from './jwt-signer.js';
import { ReportChart } from './report-chart.js';

/** A status that is no answer from the target: a transport error, a timeout, or gRPC UNAVAILABLE for a connection never made. */
function unanswered(status: string, sample: string | undefined): boolean {
  if (status.startsWith('error:') || status === 'timeout') return true;
  return status === 'UNAVAILABLE' && sample !== undefined && /No connection established|ECONNREFUSED|Failed to connect/i.test(sample);
}

function write(path: string, text: string): void {
  makeDirsSync(dirname(path));
  writeFileSync(path, text);
}

export async function runLoadgen(argv: string[]): Promise<number> {
  let opts;
  try {
    opts = parseLoadgenArgs(argv);
    // Read and check the key here, so a bad one is a flag error, not a thread failure.
    if (opts !== 'help' && opts.jwt !== undefined) new JwtSigner(opts.jwt);
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`siglake loadgen: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
  if (opts === 'help') {
    process.stdout.write(loadgenUsage(terminalWidth()));
    return 0;
  }
  const coordinator = new LoadCoordinator(opts, process.stdout);
  let interrupted = 0;
  const onSigint = (): void => {
    interrupted++;
    if (interrupted > 1) process.exit(130);
    process.stderr.write('\nsiglake loadgen: stopping (waiting for requests in flight; ^C again to quit)\n');
    coordinator.stop();
  };
  process.on('SIGINT', onSigint);
  let json;
  try {
    json = (await coordinator.run()).toJSON();
  } catch (e) {
    process.stderr.write(`siglake loadgen: ${(e as Error).message}\n`);
    return 1;
  } finally {
    process.off('SIGINT', onSigint);
  }
  const wrote: string[] = [];
  if (opts.out !== undefined) {
    write(opts.out, JSON.stringify(json, null, 2) + '\n');
    wrote.push(opts.out);
  }
  if (opts.chart !== undefined) {
    write(opts.chart, ReportChart.html(json));
    wrote.push(opts.chart);
  }
  if (!opts.quiet) {
    process.stdout.write(LoadReport.text(json, terminalWidth()));
    if (wrote.length > 0) process.stdout.write(`  wrote ${wrote.join(', ')}\n`);
  }
  const answered = Object.keys(json.statusCounts).some((k) => !unanswered(k, json.errorSamples[k]));
  const verdict = LoadReport.verdictLine(json);
  if (!answered) {
    if (verdict !== undefined) process.stderr.write(`${verdict}\n`);
    // One line that names the target and what happened to the requests (ECONNREFUSED, a timeout…).
    const top = json.verdict.refusals[0];
    const what = top === undefined ? 'none was sent' : `${top.status} x ${top.count}${top.message !== '' ? ` (${top.message})` : ''}`;
    process.stderr.write(`siglake loadgen: no request was answered by ${opts.target}: ${what}\n`);
    return 1;
  }
  // The last line says whether the run passed and, if not, what to fix.
  if (verdict !== undefined) (json.verdict.failed ? process.stderr : process.stdout).write(`${verdict}\n`);
  return json.verdict.failed ? 1 : 0;
}
