// A caller handed the WAL a value the format cannot hold (a payload over
// 4 GiB, an unknown record type, a negative time): a bug in the caller, not a
// condition to answer a client with.

export class WalArgumentError extends RangeError {
  readonly code = 'SIGLAKE_WAL_ARGUMENT';
  constructor(message: string) {
    super(message);
    this.name = 'WalArgumentError';
  }
}
