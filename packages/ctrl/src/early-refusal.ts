// Calls whose Authorization header fails on its own (no bearer token; neither the admin token
// nor a possible agent token, i.e. a forgery) are refused here, before connect builds anything
// for them: its request, handler context, abort signals and body pipeline are most of what a
// spray of such calls costs ctrl. The answer is the one connect writes in the caller's
// protocol, with the authenticator's code and message; the body is never read. A call connect
// would refuse for another reason first (a method or content type it does not serve) is left
// to connect, as is every call with a possible agent token (the authenticator looks it up).
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import type { ConnectError } from "@connectrpc/connect";
import { encodeEnvelope } from "@connectrpc/connect/protocol";
import {
  codeToHttpStatus,
  contentTypeStreamJson,
  contentTypeStreamProto,
  contentTypeUnaryJson,
  createEndStreamSerialization,
  endStreamFlag,
  errorToJsonBytes,
  parseContentType as parseConnectContentType,
} from "@connectrpc/connect/protocol-connect";
import {
  contentTypeJson as grpcContentTypeJson,
  contentTypeProto as grpcContentTypeProto,
  parseContentType as parseGrpcContentType,
  setTrailerStatus,
} from "@connectrpc/connect/protocol-grpc";
import {
  contentTypeJson as grpcWebContentTypeJson,
  contentTypeProto as grpcWebContentTypeProto,
  parseContentType as parseGrpcWebContentType,
  trailerFlag,
  trailerSerialize,
} from "@connectrpc/connect/protocol-grpc-web";
import type http from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";

type Request = http.IncomingMessage | Http2ServerRequest;
type Response = http.ServerResponse | Http2ServerResponse;

export interface EarlyRefusalOptions {
  /** Services whose every call needs credentials. */
  services: DescService[];
  /** The refusal an Authorization header earns on its own, or undefined (Authenticator.refusal). */
  refusal(authorization: string | undefined, cookie?: string, csrf?: string): ConnectError | undefined;
  /** Encodings a gRPC client may use, named in grpc-accept-encoding as the request gate does. */
  acceptEncodings: string[];
  /** Called for each refusal, as the request gate calls its own. */
  rejected(service: string, method: string, error: ConnectError): void;
  /** Called for each refusal with the answer's headers (counts failures per connection; may add `connection: close`). */
  unauthenticated(req: Request, responseHeader: Headers): void;
}

/** Writes the refusal of one call in its protocol, with `header` added. */
type Answer = (error: ConnectError, header: Headers) => void;

/** Returns a handler that answers a refused call and returns true, or returns false and leaves the call alone. */
export function earlyRefusal(options: EarlyRefusalOptions): (req: Request, res: Response) => boolean {
  const methods = new Map<string, DescMethod>();
  for (const service of options.services) for (const method of service.methods) methods.set(`/${service.typeName}/${method.name}`, method);
  const answerFor = answers(options.acceptEncodings.join(","));
  return (req, res) => {
    if (req.method !== "POST") return false;
    const method = methods.get(req.url?.split("?", 1)[0] ?? "");
    if (!method) return false;
    const csrf = req.headers["x-flotilla-csrf"];
    const error = options.refusal(req.headers.authorization, req.headers.cookie, Array.isArray(csrf) ? csrf[0] : csrf);
    if (!error) return false;
    const answer = answerFor(req, res, method);
    if (!answer) return false;
    options.rejected(method.parent.typeName, method.name, error);
    const header = new Headers();
    options.unauthenticated(req, header);
    answer(error, header);
    return true;
  };
}

/** The answer in the request's protocol, as connect tells it from the content type; undefined for what connect would refuse itself. */
function answers(acceptEncoding: string): (req: Request, res: Response, method: DescMethod) => Answer | undefined {
  const endStream = createEndStreamSerialization({});
  return (req, res, method) => {
    const write = (status: number, header: Headers, body: Uint8Array) => {
      // (Either response type; their writeHead signatures differ only in what is not used here.)
      (res as http.ServerResponse).writeHead(status, Object.fromEntries(header));
      res.end(body);
    };
    const contentType = req.headers["content-type"] ?? null;
    const grpc = parseGrpcContentType(contentType);
    if (grpc) {
      // Trailers-only, on HTTP/2 (gRPC over HTTP/1.1 is left to connect).
      if (!("stream" in req)) return undefined;
      return (error, header) => {
        header.set("content-type", grpc.binary ? grpcContentTypeProto : grpcContentTypeJson);
        header.set("grpc-accept-encoding", acceptEncoding);
        setTrailerStatus(header, error);
        // A stream reset with its headers (rapid reset) is gone already.
        if (req.stream.destroyed || req.stream.closed) return;
        req.stream.respond({ ":status": 200, ...Object.fromEntries(header) }, { endStream: true });
      };
    }
    const grpcWeb = parseGrpcWebContentType(contentType);
    if (grpcWeb) {
      if (grpcWeb.text) return undefined;
      return (error, header) => {
        header.set("content-type", grpcWeb.binary ? grpcWebContentTypeProto : grpcWebContentTypeJson);
        header.set("grpc-accept-encoding", acceptEncoding);
        write(200, header, encodeEnvelope(trailerFlag, trailerSerialize(setTrailerStatus(new Headers(), error))));
      };
    }
    const connect = parseConnectContentType(contentType);
    // Connect serves a unary method with unary content types only, a streaming one with streaming ones only.
    if (!connect || connect.stream !== (method.methodKind !== "unary")) return undefined;
    if (connect.stream) {
      return (error, header) => {
        header.set("content-type", connect.binary ? contentTypeStreamProto : contentTypeStreamJson);
        write(200, header, encodeEnvelope(endStreamFlag, endStream.serialize({ metadata: new Headers(), error })));
      };
    }
    return (error, header) => {
      const body = errorToJsonBytes(error, {});
      header.set("content-type", contentTypeUnaryJson);
      header.set("content-length", String(body.byteLength));
      write(codeToHttpStatus(error.code), header, body);
    };
  };
}
