// What a loadgen run's refusals mean and what to do about them: the verdict
// (did more than --max-error-rate of the requests fail?), the most common
// refusal with the reason label its message names, and the fix a person most
// likely needs.

export interface RefusalSummary {
  /** Status key: "403", "UNAVAILABLE", "error:ECONNREFUSED", "timeout"… */
  status: string;
  count: number;
  /** Share of all counted requests, 0..1. */
  share: number;
  /** The first message seen for the status (may be empty). */
  message: string;
  /** The reason label the message names (`header_not_trusted`), if any. */
  reason: string | undefined;
  fix: string;
}

export interface Verdict {
  requests: number;
  refused: number;
  /** Refused and failed share, 0..1. */
  refusedShare: number;
  maxErrorRate: number;
  failed: boolean;
  /** The refusals by count, most first. */
  refusals: RefusalSummary[];
}

export interface RunContext {
  target: string;
  tenants: number;
  tenantMode: string;
  protocol: string;
}

const OK = new Set(['200', 'OK']);

/** The reason label in a refusal message: `tenant denied (header_not_trusted): …` → header_not_trusted. */
export function reasonOf(message: string): string | undefined {
  const m = /\(([a-z][a-z0-9_]*_[a-z0-9_]+)\)/.exec(message) ?? /\b(queue_full|lane_cap|mem_breaker|rate_limited|header_not_trusted|not_allowed|at_capacity|claim_missing|claim_invalid|header_mismatch)\b/.exec(message);
  return m?.[1];
}

/** The most likely fix for a refusal. */
export function fixFor(status: string, reason: string | undefined, message: string, run: RunContext): string {
  switch (reason) {
    case 'header_not_trusted':
      return run.tenants > 1 && run.tenantMode === 'header'
        ? 'start the ingester with --trust-tenant-header'
        : 'start the ingester with --trust-tenant-header, or drop --tenant-header';
    case 'not_allowed':
      return "add the tenants to the ingester's --allowed-tenants, or change --tenants / --tenant-prefix";
    case 'at_capacity':
      return "raise the ingester's --max-tenants, or send fewer --tenants";
    case 'claim_missing':
    case 'claim_invalid':
      return "give --tenant-claim the claim the ingester's --tenant-claim names";
    case 'header_mismatch':
      return 'drop --header x-scope-orgid: the JWT already names the tenant';
    case 'queue_full':
    case 'mem_breaker':
      return 'the ingester is shedding load: lower --connections or --rate, or give it more --workers';
    case 'lane_cap':
      return "raise the ingester's --ingest-max-lanes, or send fewer --tenants x --indexes";
    case 'rate_limited':
      return "the ingester's rate limit: lower --rate, or raise its --rate-limit-per-sec";
    default:
      break;
  }
  if (status === '401' || status === 'UNAUTHENTICATED') return "pass --bearer with one of the ingester's --auth-bearer-tokens, or --jwt-key for its OIDC issuer";
  if (status === '403' || status === 'PERMISSION_DENIED') return 'see the message: the tenant was refused (docs/multi-tenancy.md)';
  if (status === '413' || (status === 'RESOURCE_EXHAUSTED' && /too large|larger|size/i.test(message))) return "lower --body-bytes, or raise the ingester's --max-request-bytes";
  if (status === '429' || status === 'RESOURCE_EXHAUSTED') return "the ingester's rate limit: lower --rate, or raise its --rate-limit-per-sec";
  if (status === '404' || status === 'UNIMPLEMENTED') return `check --target (${run.target}): is an OTLP ${run.protocol === 'grpc' ? 'gRPC' : 'HTTP'} ingester listening there?`;
  if (status === '503' || status === 'UNAVAILABLE') {
    if (/connect|ECONNREFUSED|No connection/i.test(message)) return `nothing answers at ${run.target}: start the ingester or fix --target`;
    return 'the ingester is shedding load: lower --connections or --rate';
  }
  if (status === 'error:ECONNREFUSED') return `nothing listens at ${run.target}: start the ingester or fix --target`;
  if (status.startsWith('error:')) return `the connection failed (${status.slice(6)}): check --target and the ingester's log`;
  if (status === 'timeout' || status === 'DEADLINE_EXCEEDED') {
    // Abandoned at the end of the run (LoadClient's drain), or past --timeout-ms.
    return `no answer within --timeout-ms or by the end of the run: the ingester at ${run.target} is overloaded or stalled (or not an OTLP ingester); lower --connections or --rate`;
  }
  if (status === '500' || status === 'INTERNAL') return "a server error: see the ingester's log (disk full? docs/operations.md)";
  return "see the message and the ingester's log";
}

export function verdictOf(statusCounts: Readonly<Record<string, number>>, samples: Readonly<Record<string, string>>, maxErrorRate: number, run: RunContext): Verdict {
  let requests = 0;
  let refused = 0;
  const refusals: RefusalSummary[] = [];
  for (const [status, count] of Object.entries(statusCounts)) {
    requests += count;
    if (OK.has(status)) continue;
    refused += count;
  }
  for (const [status, count] of Object.entries(statusCounts)) {
    if (OK.has(status)) continue;
    const message = samples[status] ?? '';
    const reason = reasonOf(message);
    refusals.push({ status, count, share: requests > 0 ? count / requests : 0, message, reason, fix: fixFor(status, reason, message, run) });
  }
  refusals.sort((a, b) => b.count - a.count || a.status.localeCompare(b.status));
  const refusedShare = requests > 0 ? refused / requests : 0;
  return { requests, refused, refusedShare, maxErrorRate, failed: refusedShare * 100 > maxErrorRate, refusals };
}
