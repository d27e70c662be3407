// Getting-started certificates for the TLS variants of B1 and B2 (pnpm pki's module), in a
// temporary directory removed by cleanup().
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { initPki } from "@flotilla/ctrl/pki";

export interface BenchTls {
  /** ctrl's certificate and key files. */
  server: { certFile: string; keyFile: string };
  /** The CA clients trust. */
  ca: Buffer;
  cleanup(): void;
}

export function benchTls(): BenchTls {
  const dir = mkdtempSync(join(tmpdir(), "flotilla-bench-tls-"));
  const files = initPki(join(dir, "pki"));
  return {
    server: { certFile: files.serverCert, keyFile: files.serverKey },
    ca: readFileSync(files.caCert),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}
