// A minimal certificate authority for getting started with TLS and mTLS, built on the openssl
// CLI (no ASN.1 of our own): one CA, ctrl's server certificate, one client certificate per
// region naming it as a SPIFFE ID. Real deployments should use their own PKI.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { isIP } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const DEFAULT_TRUST_DOMAIN = "flotilla";
export const DEFAULT_VALIDITY_DAYS = 365;

/** The files `init` writes into a PKI directory. */
export function pkiFiles(dir: string) {
  return {
    caCert: join(dir, "ca.pem"),
    caKey: join(dir, "ca.key"),
    serverCert: join(dir, "ctrl.pem"),
    serverKey: join(dir, "ctrl.key"),
  };
}

/** The files `issueAgent` writes for a region. */
export function agentFiles(dir: string, region: string) {
  return { cert: join(dir, `agent-${region}.pem`), key: join(dir, `agent-${region}.key`) };
}

/** The URI SAN naming a region's agent. */
export function regionSpiffeId(trustDomain: string, region: string): string {
  return `spiffe://${trustDomain}/region/${region}`;
}

export interface IssueOptions {
  /** Validity from now; negative issues an already expired certificate (for tests). */
  days?: number;
}

/** Makes the CA and ctrl's server certificate (localhost, 127.0.0.1, ::1 and `hosts`). Refuses to overwrite a CA. */
export function initPki(dir: string, hosts: string[] = [], options: IssueOptions = {}): ReturnType<typeof pkiFiles> {
  const files = pkiFiles(dir);
  if (existsSync(files.caKey)) throw new Error(`${files.caKey} exists; refusing to replace the CA (use another --dir)`);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  newKey(files.caKey);
  openssl([
    "req",
    "-x509",
    "-new",
    "-key",
    files.caKey,
    "-out",
    files.caCert,
    "-subj",
    "/CN=flotilla getting-started CA",
    "-days",
    String(options.days ?? 10 * DEFAULT_VALIDITY_DAYS),
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign",
  ]);
  issueServer(dir, hosts, options);
  return files;
}

/** (Re)issues ctrl's server certificate from the directory's CA. */
export function issueServer(dir: string, hosts: string[] = [], options: IssueOptions = {}): { cert: string; key: string } {
  const files = pkiFiles(dir);
  const names = [...new Set(["localhost", "127.0.0.1", "::1", ...hosts])];
  const san = names.map((h) => (isIP(h) ? `IP:${h}` : `DNS:${h}`)).join(",");
  issue(dir, { cert: files.serverCert, key: files.serverKey }, "/CN=flotilla-ctrl", [`subjectAltName=${san}`, "extendedKeyUsage=serverAuth"], options);
  return { cert: files.serverCert, key: files.serverKey };
}

/** Issues the client certificate of a region's agent: URI SAN spiffe://<trust domain>/region/<region>. */
export function issueAgent(dir: string, region: string, trustDomain = DEFAULT_TRUST_DOMAIN, options: IssueOptions = {}): { cert: string; key: string } {
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(region)) throw new Error(`--region ${JSON.stringify(region)}: expected a DNS-1123 label`);
  if (!/^[a-z0-9.-]+$/.test(trustDomain)) throw new Error(`--trust-domain ${JSON.stringify(trustDomain)}: expected lower-case letters, digits, '.' and '-'`);
  const files = agentFiles(dir, region);
  issue(dir, files, `/CN=flotilla-agent ${region}`, [`subjectAltName=URI:${regionSpiffeId(trustDomain, region)}`, "extendedKeyUsage=clientAuth"], options);
  return files;
}

function issue(dir: string, out: { cert: string; key: string }, subject: string, extensions: string[], options: IssueOptions): void {
  const { caCert, caKey } = pkiFiles(dir);
  if (!existsSync(caKey)) throw new Error(`no CA in ${dir}; run \`pnpm pki init --dir ${dir}\` first`);
  const work = mkdtempSync(join(tmpdir(), "flotilla-pki-"));
  try {
    const csr = join(work, "req.csr");
    const ext = join(work, "ext.cnf");
    writeFileSync(ext, `${[...extensions, "basicConstraints=critical,CA:FALSE", "keyUsage=critical,digitalSignature"].join("\n")}\n`);
    newKey(out.key);
    openssl(["req", "-new", "-key", out.key, "-out", csr, "-subj", subject]);
    openssl([
      "x509",
      "-req",
      "-in",
      csr,
      "-CA",
      caCert,
      "-CAkey",
      caKey,
      "-set_serial",
      `0x${randomBytes(16)
        .toString("hex")
        .replace(/^[89a-f]/, "1")}`,
      "-days",
      String(options.days ?? DEFAULT_VALIDITY_DAYS),
      "-extfile",
      ext,
      "-out",
      out.cert,
    ]);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

function newKey(path: string): void {
  openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path]);
  chmodSync(path, 0o600);
}

function openssl(args: string[]): void {
  try {
    execFileSync("openssl", args, { stdio: ["ignore", "ignore", "pipe"] });
  } catch (error) {
    const e = error as { code?: string; stderr?: Buffer };
    if (e.code === "ENOENT") throw new Error("the openssl command is required (not found on PATH)");
    throw new Error(`openssl ${args[0]} failed: ${e.stderr?.toString().trim() ?? String(error)}`);
  }
}
