// Maps store failures to RPC codes, and builds errors carrying a google.rpc.ErrorInfo reason.
import type { Logger } from "@flotilla/runtime";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "@flotilla/proto/google/rpc/error_details_pb.js";
import { ERROR_DOMAIN } from "@flotilla/runtime";
import { StoreError, type StoreErrorCode } from "@flotilla/store";

const storeCodes: Record<StoreErrorCode, Code> = {
  invalid_argument: Code.InvalidArgument,
  not_found: Code.NotFound,
  already_exists: Code.AlreadyExists,
  aborted: Code.Aborted,
  failed_precondition: Code.FailedPrecondition,
};

/** Maps caller-caused store failures to their RPC code; anything else stays internal (and is logged, with its stack). */
export function connectErrors(log: Logger): (error: unknown) => unknown {
  return (error) => {
    if (error instanceof StoreError) return new ConnectError(error.message, storeCodes[error.code]);
    if (isDatabaseUnavailable(error)) return new ConnectError(`database unavailable (${(error as { code: string }).code}); retry`, Code.Unavailable);
    if (!(error instanceof ConnectError) && !isTransportError(error)) {
      log.error(`internal error: ${error instanceof Error ? error.message : String(error)}`, { stack: error instanceof Error ? error.stack : undefined });
    }
    return error;
  };
}

const DATABASE_DOWN = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "PROTOCOL_CONNECTION_LOST",
  "PROTOCOL_SEQUENCE_TIMEOUT",
  "ER_CON_COUNT_ERROR",
  "SQLITE_BUSY",
  "SQLITE_CANTOPEN",
]);

/** The database cannot be reached right now: the caller should retry, it did nothing wrong. */
function isDatabaseUnavailable(error: unknown): boolean {
  const code = (error as { code?: string })?.code;
  return code !== undefined && DATABASE_DOWN.has(code);
}

/** The peer went away or the stream was reset: not a server fault. */
function isTransportError(error: unknown): boolean {
  const code = (error as { code?: string })?.code ?? "";
  return code.startsWith("ERR_HTTP2_") || code === "ECANCELED" || code === "EPIPE" || code === "ERR_STREAM_PREMATURE_CLOSE" || code === "ERR_STREAM_DESTROYED";
}

export function invalidArgument(field: string, problem: string): ConnectError {
  return new ConnectError(`${field}: ${problem}`, Code.InvalidArgument);
}

/** An error with a machine-readable reason a client acts on (e.g. RESYNC_REQUIRED). */
export function reasonError(code: Code, reason: string, message: string, metadata: Record<string, string> = {}): ConnectError {
  return new ConnectError(message, code, undefined, [{ desc: ErrorInfoSchema, value: create(ErrorInfoSchema, { reason, domain: ERROR_DOMAIN, metadata }) }]);
}
