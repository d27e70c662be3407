// What runs before a request's body is read: authentication (an unauthenticated request's
// body is never read, decompressed or parsed), the encodings a gRPC client may use, and the
// fix-up of connect's code for a body that does not parse.
import { Code, ConnectError, type HandlerContext, type Interceptor, type StreamResponse } from "@connectrpc/connect";

export type RequestGate = (ctx: HandlerContext) => Promise<void>;

/**
 * A gate from interceptors that look only at headers and context values (authentication):
 * connect runs gates before it reads the body, interceptors after. Rejections are passed
 * to `rejected` (they never reach the metrics interceptor), and UNAUTHENTICATED ones to
 * `unauthenticated` too (which counts them per connection).
 */
export function requestGate(
  checks: Interceptor[],
  rejected: (ctx: HandlerContext, error: ConnectError) => void,
  acceptEncodings: string[],
  unauthenticated: (ctx: HandlerContext) => void = () => {},
): RequestGate {
  const passed = async (): Promise<StreamResponse> => ({}) as StreamResponse;
  const check = checks.reduceRight<(req: never) => Promise<unknown>>((next, interceptor) => interceptor(next as never) as never, passed);
  return async (ctx) => {
    // gRPC servers name the encodings they accept, so a client whose encoding was refused
    // (UNIMPLEMENTED) knows what to use instead; connect does not.
    if (ctx.protocolName === "grpc" || ctx.protocolName === "grpc-web") ctx.responseHeader.set("grpc-accept-encoding", acceptEncodings.join(","));
    ctx.signal.addEventListener("abort", () => recodeParseError(ctx.signal.reason), { once: true });
    try {
      await check({
        stream: ctx.method.methodKind !== "unary",
        service: ctx.service,
        method: ctx.method,
        requestMethod: ctx.requestMethod,
        url: ctx.url,
        // Ends when the call ends (the authenticator follows agent streams with it).
        signal: ctx.signal,
        header: ctx.requestHeader,
        contextValues: ctx.values,
      } as never);
    } catch (error) {
      const connectError = ConnectError.from(error);
      rejected(ctx, connectError);
      if (connectError.code === Code.Unauthenticated) unauthenticated(ctx);
      throw connectError;
    }
  };
}

/**
 * connect-es shares its serialization with clients, where a message that does not parse is
 * the server's fault, and reports it as INTERNAL ("parse binary: …"). On a server it is the
 * caller's: INVALID_ARGUMENT, as for JSON. Every connect protocol aborts the call's context
 * with the error before it writes it, and abort listeners run at once: the only point where
 * the code can be corrected before it reaches the wire.
 */
function recodeParseError(reason: unknown): void {
  if (reason instanceof ConnectError && reason.code === Code.Internal && reason.rawMessage.startsWith("parse binary:")) {
    (reason as { code: Code }).code = Code.InvalidArgument;
    reason.message = `[invalid_argument] ${reason.rawMessage}`;
  }
}
