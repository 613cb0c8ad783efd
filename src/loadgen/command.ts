// `siglake loadgen`: parse the flags, run the client threads, print the text
// report, and write the JSON report and the HTML chart when asked.
// Exit codes: 0 when the run completed, 1 when no request got any answer
// (every one failed at the transport level) or a client thread failed, 2 for
// bad flags.

import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { terminalWidth } from '../config/help.js';
import { ConfigError } from '../errors.js';
import { LoadCoordinator } from './load-coordinator.js';
import { LoadReport } from './load-report.js';
import { loadgenUsage, parseLoadgenArgs } from './loadgen-options.js';
import { JwtSigner } from './jwt-signer.js';
import { ReportChart } from './report-chart.js';

function write(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true });
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
  if (opts.out !== undefined) write(opts.out, JSON.stringify(json, null, 2) + '\n');
  if (opts.chart !== undefined) write(opts.chart, ReportChart.html(json));
  if (!opts.quiet) process.stdout.write(LoadReport.text(json));
  const answered = Object.keys(json.statusCounts).some((k) => !k.startsWith('error:') && k !== 'timeout');
  if (!answered) {
    process.stderr.write(`siglake loadgen: no request was answered by ${opts.target}\n`);
    return 1;
  }
  return 0;
}
