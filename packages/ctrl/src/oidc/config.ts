// ctrl's single sign-on flags (config.ts) as SsoOptions; a mistake is an error naming its flag.
import { readFileSync } from "node:fs";
import { parseDuration } from "@flotilla/runtime";
import { positiveDuration, type CtrlConfig } from "../config.ts";
import type { SsoOptions } from "../server.ts";

export function ssoOptions(config: CtrlConfig): SsoOptions | undefined {
  const issuer = config["oidc-issuer"];
  if (!issuer) return undefined;
  let url: URL;
  try {
    url = new URL(issuer);
  } catch {
    throw new Error(`--oidc-issuer ${JSON.stringify(issuer)}: expected a URL such as https://login.example.com`);
  }
  if (url.protocol !== "https:" && !["127.0.0.1", "localhost", "[::1]"].includes(url.hostname)) {
    throw new Error(`--oidc-issuer ${JSON.stringify(issuer)}: must be https (plain http only on a loopback address)`);
  }
  const secretFile = config["oidc-client-secret-file"];
  if (!secretFile) throw new Error("--oidc-issuer needs --oidc-client-secret-file (the console client's secret, from a file)");
  let clientSecret: string;
  try {
    clientSecret = readFileSync(secretFile, "utf8").split("\n", 1)[0]!.trim();
  } catch (error) {
    throw new Error(`--oidc-client-secret-file: cannot read it (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
  if (clientSecret.length < 16) throw new Error("--oidc-client-secret-file: the secret is shorter than 16 characters");
  const skewMs = parseDuration(config["oidc-clock-skew"], "oidc-clock-skew");
  if (!(skewMs >= 0) || skewMs > 10 * 60_000)
    throw new Error(`--oidc-clock-skew ${JSON.stringify(config["oidc-clock-skew"])}: expected a duration from 0s to 10m`);
  const audiences = config["oidc-audience"]
    .split(",")
    .map((a) => a.trim())
    .filter(Boolean);
  return {
    issuer,
    clientId: config["oidc-client-id"],
    clientSecret,
    cliClientId: config["oidc-cli-client-id"],
    audiences: audiences.length > 0 ? audiences : undefined,
    groupsClaim: config["oidc-groups-claim"] || "groups",
    redirectUrl: config["oidc-redirect-url"] || undefined,
    jwksCacheMs: positiveDuration("oidc-jwks-cache", config["oidc-jwks-cache"]),
    clockSkewMs: skewMs,
    sessionMaxAgeMs: positiveDuration("session-max-age", config["session-max-age"]),
  };
}
