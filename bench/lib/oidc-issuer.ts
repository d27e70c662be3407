// A local OpenID issuer for the benchmarks: its discovery document and JWKS over HTTP, and ID
// tokens signed with its ES256 key, as a company's identity provider signs them. ctrl verifies
// them as it verifies any issuer's (discovery, JWKS, issuer, audience, expiry).
import { createServer } from "node:http";
import { generateKeyPairSync, randomUUID, sign, type KeyObject } from "node:crypto";
import type { CtrlOptions } from "@flotilla/ctrl";

/** The audience of the issuer's ID tokens: ctrl's client id. */
export const BENCH_CLIENT_ID = "bench-console";

export interface LocalIssuer {
  issuer: string;
  /** ctrl's single sign-on settings for this issuer. */
  sso: NonNullable<CtrlOptions["sso"]>;
  /** An ID token for `sub` in `groups`, valid for an hour, each with its own id. */
  token(sub: string, groups: string[]): string;
  close(): void;
}

export async function localIssuer(): Promise<LocalIssuer> {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const kid = "bench-key";
  const jwk = { ...publicKey.export({ format: "jwk" }), kid, alg: "ES256", use: "sig" };
  let issuer = "";
  const server = createServer((req, res) => {
    res.setHeader("content-type", "application/json");
    if (req.url === "/.well-known/openid-configuration") {
      res.end(JSON.stringify({ issuer, authorization_endpoint: `${issuer}/auth`, token_endpoint: `${issuer}/token`, jwks_uri: `${issuer}/jwks` }));
    } else if (req.url === "/jwks") res.end(JSON.stringify({ keys: [jwk] }));
    else res.writeHead(404).end("{}");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  issuer = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url");
  const token = (sub: string, groups: string[]) => {
    const seconds = Math.floor(Date.now() / 1000);
    const input = `${b64({ alg: "ES256", kid, typ: "JWT" })}.${b64({ iss: issuer, aud: BENCH_CLIENT_ID, sub, groups, iat: seconds, exp: seconds + 3600, jti: randomUUID() })}`;
    return `${input}.${sign("sha256", Buffer.from(input), { key: privateKey as KeyObject, dsaEncoding: "ieee-p1363" }).toString("base64url")}`;
  };
  return {
    issuer,
    sso: { issuer, clientId: BENCH_CLIENT_ID, clientSecret: "bench-console-secret-0123456789abcdef", cliClientId: "bench-cli" },
    token,
    close: () => server.close(),
  };
}
