// A gRPC or gRPC-Web call of a method ctrl does not serve: HTTP 200 with grpc-status 12
// (UNIMPLEMENTED), trailers-only, as gRPC clients expect; not a text/plain 404. The body is
// not read.
import type http from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";

/** Answers `req` if it is a gRPC or gRPC-Web call; false for anything else. */
export function answerUnknownRpc(req: http.IncomingMessage | Http2ServerRequest, res: http.ServerResponse | Http2ServerResponse): boolean {
  const contentType = req.headers["content-type"] ?? "";
  if (req.method !== "POST" || !/^application\/grpc(-web)?([+;]|$)/.test(contentType)) return false;
  const headers = {
    "content-type": contentType,
    "grpc-status": "12",
    "grpc-message": encodeURIComponent(`unknown method ${req.url}`),
  };
  if ("stream" in req) req.stream.respond({ ":status": 200, ...headers }, { endStream: true });
  else (res as http.ServerResponse).writeHead(200, headers).end();
  return true;
}
