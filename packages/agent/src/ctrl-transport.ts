// The agent's transport to ctrl: gRPC over HTTP/2, accepting zstd first (a snapshot's sealed
// secret values do not compress, and zstd passes over them at a fraction of gzip's cost on
// ctrl), then gzip; with TLS settings for an https URL (a CA to trust, a client certificate
// for mTLS). The certificate files are checked before every call (ReloadingFiles) and loaded
// again when they changed: the next connection uses the new pair, while calls already open
// finish on theirs.
import { ReloadingFiles, type Logger } from "@flotilla/runtime";
import { createSecureContext } from "node:tls";
import type { Interceptor, Transport } from "@connectrpc/connect";
import { compressionGzip, createGrpcTransport } from "@connectrpc/connect-node";
import { compressionZstd } from "@flotilla/runtime/compression";

export interface CtrlTlsFiles {
  /** PEM CA(s) to verify ctrl's certificate with; default: the system's. */
  caFile?: string;
  /** PEM client certificate for mTLS (with keyFile). */
  certFile?: string;
  keyFile?: string;
}

export interface CtrlTransportOptions {
  baseUrl: string;
  interceptors: Interceptor[];
  tls?: CtrlTlsFiles;
  log: Logger;
}

export function ctrlTransport(options: CtrlTransportOptions): Transport {
  const { caFile, certFile, keyFile } = options.tls ?? {};
  if ((caFile ?? certFile ?? keyFile) !== undefined && !options.baseUrl.startsWith("https:"))
    throw new Error(`TLS files need an https:// ctrl URL, got ${options.baseUrl}`);
  if (!certFile !== !keyFile) throw new Error("a client certificate needs its key (--client-cert with --client-key)");
  const paths = [caFile, certFile, keyFile].filter((file): file is string => file !== undefined);
  const files = new ReloadingFiles({
    paths,
    load: (contents) => {
      const next = (file: string | undefined) => (file === undefined ? undefined : contents.shift());
      const tls = { ca: next(caFile), cert: next(certFile), key: next(keyFile) };
      // Fails now on a broken pair (e.g. a key not matching the certificate), not at a connection.
      createSecureContext(tls);
      return createGrpcTransport({
        baseUrl: options.baseUrl,
        interceptors: options.interceptors,
        nodeOptions: tls,
        acceptCompression: [compressionZstd, compressionGzip],
      });
    },
    onReloaded: () => options.log.info("TLS files changed: new connections to ctrl use them"),
    onRejected: (_, error) =>
      options.log.warn(`TLS files changed but do not load; keeping the previous ones: ${error instanceof Error ? error.message : String(error)}`),
  });
  return {
    unary: (...args) => files.current().unary(...args),
    stream: (...args) => files.current().stream(...args),
  };
}
