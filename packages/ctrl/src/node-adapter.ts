// connect's Node.js adapter (connectNodeAdapter), except for what it does when writing a
// response fails: connect prints the whole error object for every such call, while a client
// that went away mid-response (a cancelled sync, a reset stream) is ordinary for a server,
// and any other write failure deserves one line; and each request may be wrapped before connect
// reads it (its body bounded per RPC: request-body.ts).
import type { DescMethod } from "@bufbuild/protobuf";
import { createConnectRouter } from "@connectrpc/connect";
import type { UniversalServerRequest } from "@connectrpc/connect/protocol";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse, type ConnectNodeAdapterOptions } from "@connectrpc/connect-node";

type NodeHandler = NonNullable<ConnectNodeAdapterOptions["fallback"]>;

export interface NodeAdapterOptions extends ConnectNodeAdapterOptions {
  /** Requests for no RPC. */
  fallback: NodeHandler;
  /** Reports a response that could not be written to a client still connected. */
  logError(line: string): void;
  /** The request connect serves for a call of `method` (default: as it came). */
  request?(method: DescMethod, request: UniversalServerRequest): UniversalServerRequest;
}

export function nodeAdapter(options: NodeAdapterOptions): NodeHandler {
  const router = createConnectRouter(options);
  options.routes(router);
  const handlers = new Map(router.handlers.map((handler) => [handler.requestPath, handler]));
  return (req, res) => {
    const handler = handlers.get(req.url?.split("?", 2)[0] ?? "");
    if (!handler) return options.fallback(req, res);
    const request = universalRequestFromNodeRequest(req, res, undefined, options.contextValues?.(req));
    // A response closed before it finished (its connection destroyed, by the client or by ctrl)
    // emits neither 'drain' nor 'error', so connect's pending write, and the handler suspended
    // behind it, would wait forever; its next write fails instead, which ends the handler.
    res.once("close", () => {
      if (!res.writableFinished) res.emit("drain");
    });
    handler(options.request ? options.request(handler.method, request) : request)
      .then((response) => universalResponseToNodeResponse(response, res))
      .catch((reason: unknown) => {
        const clientGone = "stream" in res ? res.stream.destroyed : res.destroyed;
        if (clientGone) return;
        options.logError(
          `${handler.service.typeName}/${handler.method.name}: writing the response failed: ${reason instanceof Error ? reason.message : String(reason)}`,
        );
      });
  };
}
