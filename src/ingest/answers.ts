// Answering an ingest request, written once for both transports: count it in
// siglake_ingest_requests_total (and the records of an accepted one), log a
// refusal at its code's level, and hand the transport the bytes to send. Each
// acceptor supplies only how its transport sends an OK and a refusal.

import type { ErrorCode, IngestError } from '../errors.js';
import type { Logger } from '../log.js';
import type { IngestMetrics } from '../metrics/ingest-metrics.js';
import type { AuditNote } from '../tenants/audit-log.js';
import { asRefusal, errorForCompletion, logRefusal } from './responses.js';

/** One request in flight, as the answering side sees it. */
export interface Answerable {
  /** ENDPOINT index of siglake_ingest_requests_total (0 logs, 1 traces). */
  readonly endpoint: number;
  /** Its audit note, while the audit stream is on: every refusal answered here is audited with it. */
  audit?: AuditNote | undefined;
}

/** How one transport writes its two kinds of answer. */
export interface AnswerWriter<S extends Answerable> {
  sendOk(state: S): void;
  sendRefusal(state: S, err: IngestError): void;
}

export class Answers<S extends Answerable> {
  readonly #log: Logger;
  readonly #metrics: IngestMetrics;
  readonly #writer: AnswerWriter<S>;
  readonly #audit: ((e: IngestError, note: AuditNote | undefined) => void) | undefined;

  /** `audit`: a refusal's audit event and declared-tenant count (Admission.refused), once per request. */
  constructor(log: Logger, metrics: IngestMetrics, writer: AnswerWriter<S>, audit?: (e: IngestError, note: AuditNote | undefined) => void) {
    this.#log = log;
    this.#metrics = metrics;
    this.#writer = writer;
    this.#audit = audit;
  }

  /** The request was stored. */
  ok(state: S, records: number): void {
    this.#metrics.request(state.endpoint, 200);
    this.#metrics.records(state.endpoint, records);
    this.#writer.sendOk(state);
  }

  /**
   * Refuses the request with `err`, or with SIGLAKE_ADMISSION_FAILED when
   * `err` is not a refusal (a bug: its message is logged, never sent).
   * Returns the refusal sent.
   */
  refuse(state: S, err: unknown): IngestError {
    const e = asRefusal(err);
    logRefusal(this.#log, e, state.endpoint, err);
    this.#metrics.request(state.endpoint, e.httpStatus);
    if (state.audit !== undefined) this.#audit?.(e, state.audit);
    this.#writer.sendRefusal(state, e);
    return e;
  }

  /** The worker's answer: stored (`code` undefined), or refused with its code and message. */
  completed(state: S, code: ErrorCode | undefined, records: number, message: string | undefined): void {
    if (code === undefined) this.ok(state, records);
    else this.refuse(state, errorForCompletion(code, message));
  }
}
