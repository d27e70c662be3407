// `pnpm pki`: a CA, ctrl's server certificate and per-region agent certificates, checked
// with the openssl CLI; says it is for getting started.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const CLI = fileURLToPath(new URL("../src/pki-cli.ts", import.meta.url));
const pki = (...args: string[]) => spawnSync(process.execPath, [CLI, ...args], { encoding: "utf8" });
const x509 = (file: string, ...args: string[]) => execFileSync("openssl", ["x509", "-in", file, "-noout", ...args], { encoding: "utf8" });

test("init, issue-agent: certificates that verify, with the right names; keys readable by their owner only", () => {
  const dir = join(mkdtempSync(join(tmpdir(), "flotilla-pki-")), "pki");
  try {
    assert.match(pki("--help").stdout, /getting started/i);
    assert.equal(pki("init", "--dir", dir, "--host", "ctrl.example.com", "--host", "10.0.0.7").status, 0);
    assert.equal(pki("issue-agent", "--dir", dir, "--region", "eu-1").status, 0);
    execFileSync("openssl", ["verify", "-CAfile", join(dir, "ca.pem"), join(dir, "ctrl.pem"), join(dir, "agent-eu-1.pem")]);
    const server = x509(join(dir, "ctrl.pem"), "-ext", "subjectAltName,extendedKeyUsage");
    for (const name of [
      "DNS:localhost",
      "IP Address:127.0.0.1",
      "IP Address:0:0:0:0:0:0:0:1",
      "DNS:ctrl.example.com",
      "IP Address:10.0.0.7",
      "TLS Web Server Authentication",
    ]) {
      assert.ok(server.includes(name), `${name} in\n${server}`);
    }
    const agent = x509(join(dir, "agent-eu-1.pem"), "-ext", "subjectAltName,extendedKeyUsage");
    assert.match(agent, /URI:spiffe:\/\/flotilla\/region\/eu-1/);
    assert.match(agent, /TLS Web Client Authentication/);
    for (const key of ["ca.key", "ctrl.key", "agent-eu-1.key"]) assert.equal(statSync(join(dir, key)).mode & 0o777, 0o600, key);
  } finally {
    rmSync(join(dir, ".."), { recursive: true, force: true });
  }
});

test("clear errors: no CA replaced, no region, a bad region name, no CA yet", () => {
  const dir = join(mkdtempSync(join(tmpdir(), "flotilla-pki-")), "pki");
  try {
    assert.match(pki("issue-agent", "--dir", dir, "--region", "eu-1").stderr, /no CA in .*pnpm pki init/);
    assert.equal(pki("init", "--dir", dir).status, 0);
    const again = pki("init", "--dir", dir);
    assert.equal(again.status, 1);
    assert.match(again.stderr, /refusing to replace the CA/);
    assert.match(pki("issue-agent", "--dir", dir).stderr, /--region is required/);
    assert.match(pki("issue-agent", "--dir", dir, "--region", "EU_1").stderr, /DNS-1123 label/);
  } finally {
    rmSync(join(dir, ".."), { recursive: true, force: true });
  }
});
