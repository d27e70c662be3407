// Failures a caller can cause. The API layer maps each code to its RPC status.
export type StoreErrorCode = "invalid_argument" | "not_found" | "already_exists" | "aborted" | "failed_precondition";

export class StoreError extends Error {
  readonly code: StoreErrorCode;
  /** The request field at fault, e.g. "deployment.regions[1].region". */
  readonly field: string | undefined;
  constructor(code: StoreErrorCode, message: string, field?: string) {
    super(message);
    this.name = "StoreError";
    this.code = code;
    this.field = field;
  }
}
