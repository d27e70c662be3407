// How the CLI fails: one line on stderr, no stack trace, and a documented exit code.
import { Code, ConnectError } from "@connectrpc/connect";

/** Exit codes (README, `flotilla --help`). */
export const EXIT = {
  ok: 0,
  /** An error, a refused call, a FAILED rollout, or (diff) changes found. */
  failed: 1,
  /** A wait ran out of time. */
  timeout: 2,
} as const;

/** A mistake in the command line, a manifest or the config: nothing was sent. */
export class UsageError extends Error {}

/** A wait that ran out of time. */
export class TimeoutError extends Error {}

/** Ends the command with `code` after printing `message` (already formatted) on stderr. */
export class ExitError extends Error {
  readonly code: number;
  constructor(message: string, code: number) {
    super(message);
    this.code = code;
  }
}

/** The one line a failure prints, and its exit code. */
export function describeFailure(error: unknown, server: string | undefined): { line: string; code: number } {
  if (error instanceof ExitError) return { line: error.message, code: error.code };
  if (error instanceof TimeoutError) return { line: `error: ${error.message}`, code: EXIT.timeout };
  if (error instanceof UsageError) return { line: `error: ${error.message}`, code: EXIT.failed };
  if (error instanceof ConnectError) {
    const cause = (error.cause as NodeJS.ErrnoException | undefined)?.code;
    if (error.code === Code.Unavailable && server && (cause || /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|socket hang up|ECONNRESET/.test(error.rawMessage))) {
      return { line: `error: cannot reach ctrl at ${server}: ${cause ?? error.rawMessage}`, code: EXIT.failed };
    }
    return { line: `error: ${codeName(error.code)}: ${error.rawMessage}`, code: EXIT.failed };
  }
  const message = error instanceof Error ? error.message : String(error);
  return { line: `error: ${message.split("\n")[0]}`, code: EXIT.failed };
}

/** PERMISSION_DENIED, NOT_FOUND, …: the gRPC names operators know. */
export function codeName(code: Code): string {
  return (Code[code] ?? "UNKNOWN").replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}
