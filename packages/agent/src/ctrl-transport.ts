// The agent's transport to ctrl: gRPC over HTTP/2, with TLS settings for an https URL (a CA
// to trust, a client certificate for mTLS). The certificate files are checked before every
// call and re-read when they changed: the next connection uses the new pair, while calls
// already open finish on theirs.
import type { Logger } from "@flotilla/runtime";
import { readFileSync, statSync } from "node:fs";
import { createSecureContext } from "node:tls";
import type { Interceptor, Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";

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
  const files = [options.tls?.caFile, options.tls?.certFile, options.tls?.keyFile].filter((f): f is string => f !== undefined);
  if (files.length > 0 && !options.baseUrl.startsWith("https:")) throw new Error(`TLS files need an https:// ctrl URL, got ${options.baseUrl}`);
  if (!options.tls?.certFile !== !options.tls?.keyFile) throw new Error("a client certificate needs its key (--client-cert with --client-key)");
  const create = () => createGrpcTransport({ baseUrl: options.baseUrl, interceptors: options.interceptors, nodeOptions: readTls(options.tls ?? {}) });
  let current = create();
  let loaded = signature(files);
  let failed = "";
  const transport = (): Transport => {
    const now = signature(files);
    if (now !== loaded && now !== failed) {
      try {
        current = create();
        loaded = now;
        failed = "";
        options.log.info("TLS files changed: new connections to ctrl use them");
      } catch (error) {
        failed = now;
        options.log.warn(`TLS files changed but do not load; keeping the previous ones: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    return current;
  };
  return {
    unary: (...args) => transport().unary(...args),
    stream: (...args) => transport().stream(...args),
  };
}

function readTls(files: CtrlTlsFiles): { ca?: Buffer; cert?: Buffer; key?: Buffer } {
  const read = (file: string | undefined) => (file === undefined ? undefined : readFileSync(file));
  const options = { ca: read(files.caFile), cert: read(files.certFile), key: read(files.keyFile) };
  // Fails now on a broken pair (e.g. a key not matching the certificate), not at a connection.
  createSecureContext(options);
  return options;
}

function signature(files: string[]): string {
  return files
    .map((file) => {
      try {
        const s = statSync(file);
        return `${s.ino}:${s.size}:${s.mtimeMs}`;
      } catch {
        return "missing";
      }
    })
    .join("|");
}
