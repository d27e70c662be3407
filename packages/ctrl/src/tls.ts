// TLS termination for ctrl's one port: ALPN h2 and http/1.1, certificate files re-read when
// they change, and (with a client CA) the verified client certificate of each connection.
import { ReloadingFiles, type Logger } from "@flotilla/runtime";
import type net from "node:net";
import tls from "node:tls";
import type { ClientCertificate } from "./auth.ts";
import type { SecureTransport } from "./listener.ts";
import type { NodeServerRequest } from "./services/cluster/watch-deployment-changes.ts";

export interface TlsFiles {
  /** PEM certificate chain of ctrl. */
  certFile: string;
  /** PEM private key of ctrl. */
  keyFile: string;
  /** PEM CA(s) that agents' client certificates must chain to; none: no client certificates asked for. */
  clientCaFile?: string;
}

export interface TlsOptions extends TlsFiles {
  /** SPIFFE trust domain of agent certificates: URI SAN spiffe://<trust domain>/region/<region>. */
  trustDomain: string;
  /** A connection that has not finished its handshake by then is closed. */
  handshakeTimeoutMs: number;
  log: Logger;
}

/** Where the verified client certificate of a connection is kept (on the TLS socket). */
const CLIENT_CERTIFICATE = Symbol("flotilla.clientCertificate");
type WithClientCertificate = { [CLIENT_CERTIFICATE]?: ClientCertificate };

/**
 * Terminates TLS on accepted sockets. The files are checked on every new connection (a few KB,
 * small beside a handshake; see ReloadingFiles), so the next handshake after a rotation uses
 * the new pair. A pair that does not load (half-written, key not matching) is logged once and
 * the previous one stays.
 */
export function tlsTransport(options: TlsOptions): SecureTransport {
  const requestCert = options.clientCaFile !== undefined;
  const paths = [options.certFile, options.keyFile, ...(options.clientCaFile ? [options.clientCaFile] : [])];
  const files = new ReloadingFiles({
    paths,
    load: ([cert, key, ca]) => {
      const contextOptions: tls.SecureContextOptions = { cert, key, ca };
      // Loading it here makes a broken pair (e.g. key not matching the certificate) fail now, not at a handshake.
      tls.createSecureContext(contextOptions);
      return contextOptions;
    },
    onReloaded: (changed) => options.log.info(`TLS: loaded the changed certificate files (${changed.join(", ")})`),
    onRejected: (_, error) =>
      options.log.warn(`TLS: keeping the previous certificate: the changed files do not load: ${error instanceof Error ? error.message : String(error)}`),
  });
  let serving = files.current();
  const server = tls.createServer({
    ...serving,
    ALPNProtocols: ["h2", "http/1.1"],
    // A client certificate is asked for but optional at the TLS layer: operators call with
    // the admin token and no certificate; ClusterService calls without one are refused by
    // the auth interceptor (UNAUTHENTICATED), which sees the method.
    requestCert,
    rejectUnauthorized: false,
    handshakeTimeout: options.handshakeTimeoutMs,
  });
  // Failed or timed-out handshakes (scanners, clients distrusting our CA) need no log line
  // each. With a listener here Node leaves closing the socket to it.
  server.on("tlsClientError", (_error, socket) => socket.destroy());
  return {
    onSecured(handler) {
      server.on("secureConnection", (socket: tls.TLSSocket) => {
        // Node lets a server either refuse every connection without a valid certificate
        // (rejectUnauthorized) or accept all; it has no per-certificate verify callback. So a
        // certificate that was presented and failed verification (expired, foreign CA, not a
        // client certificate) ends the connection here, right after the handshake and before
        // a byte of any request is read: to the client it is a refused handshake (in TLS 1.3 a
        // client learns of a rejected certificate only after its Finished in any case).
        const certificate = requestCert ? socket.getPeerCertificate() : undefined;
        const presented = certificate !== undefined && Object.keys(certificate).length > 0;
        if (presented && !socket.authorized) {
          socket.destroy();
          return;
        }
        if (presented) (socket as WithClientCertificate)[CLIENT_CERTIFICATE] = { region: spiffeRegion(certificate.subjectaltname, options.trustDomain) };
        handler(socket);
      });
    },
    accept(socket: net.Socket) {
      const latest = files.current();
      if (latest !== serving) server.setSecureContext((serving = latest));
      server.emit("connection", socket);
    },
  };
}

/** The verified client certificate under a request, if one was presented. */
export function clientCertificateOf(req: NodeServerRequest | undefined): ClientCertificate | undefined {
  try {
    // HTTP/2: the session's socket (a proxy that forwards property reads to the TLS socket).
    const socket = req && ("stream" in req ? req.stream.session?.socket : req.socket);
    return (socket as WithClientCertificate | undefined)?.[CLIENT_CERTIFICATE];
  } catch {
    return undefined; // the session lost its socket: the call is ending anyway
  }
}

/** The region of the certificate's one SPIFFE ID, if it is spiffe://<trustDomain>/region/<region>. */
export function spiffeRegion(subjectAltName: string | undefined, trustDomain: string): string | undefined {
  // A SPIFFE SVID carries exactly one URI SAN; Node lists SANs as "URI:…, DNS:…".
  const spiffeIds = (subjectAltName ?? "").split(", ").filter((san) => san.startsWith("URI:spiffe://"));
  if (spiffeIds.length !== 1) return undefined;
  const prefix = `URI:spiffe://${trustDomain}/region/`;
  const region = spiffeIds[0]!.startsWith(prefix) ? spiffeIds[0]!.slice(prefix.length) : "";
  return /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(region) ? region : undefined;
}
