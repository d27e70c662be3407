// Single sign-on against a real OpenID provider (packages/dev-idp: oidc-provider over real
// HTTP): ID tokens from its device flow sign in, groups grant project roles, and what must be
// refused is: another key, `alg: none`, a wrong issuer or audience, an expired token (past the
// skew), a cookie without its CSRF token. A key rotated at the provider is picked up without a
// restart; with the provider down, issued tokens keep working and a new sign-in fails clearly;
// a removed group's access ends with the token. Denied calls are in the audit trail, with the
// subject and groups.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { generateKeyPair, importJWK, SignJWT, type JWK } from "jose";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { HistoryService } from "@flotilla/proto/ctrl/v1/history_pb.js";
import { OperatorService, Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { ProjectService } from "@flotilla/proto/ctrl/v1/project_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { StatusService } from "@flotilla/proto/ctrl/v1/status_pb.js";
import { CLI_CLIENT_ID, CONSOLE_CLIENT_ID, DevIdp } from "@flotilla/dev-idp";
import { deviceFlowTokens, signInHeadless } from "@flotilla/dev-idp/headless";
import { testDatabases } from "@flotilla/testkit/databases";
import { startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";
import { parseConfig } from "../src/config.ts";
import { ssoOptions } from "../src/oidc/config.ts";
import { keyAlgorithm } from "../src/oidc/verifier.ts";
import type { SsoOptions } from "../src/server.ts";

const [{ db }] = await testDatabases();
const SECRET = "console-secret-for-tests-0123456789";

async function stack(t: { after(fn: () => Promise<void>): void }, sso: Partial<SsoOptions> = {}, idpOptions: { idTokenTtlSeconds?: number } = {}) {
  const idp = await new DevIdp({ port: 0, consoleSecret: SECRET, ...idpOptions }).start();
  const ctrl = await startTestCtrl(db, {
    sso: { issuer: idp.issuer, clientId: CONSOLE_CLIENT_ID, clientSecret: SECRET, cliClientId: CLI_CLIENT_ID, ...sso },
  });
  idp.allowRedirectUri(`${ctrl.url}/auth/callback`);
  t.after(async () => {
    await ctrl.close();
    await idp.stop();
  });
  await ctrl.client(RegionService).createRegion({ region: { name: "east" } });
  const projects = ctrl.client(ProjectService);
  await projects.createProject({
    project: { name: "team-a", namespaces: ["a-*"], regions: { names: ["*"] }, roles: [{ role: Role.DEPLOYER, groups: ["team-a"] }] },
  });
  await projects.createProject({
    project: { name: "team-b", namespaces: ["b-*"], regions: { names: ["*"] }, roles: [{ role: Role.DEPLOYER, groups: ["team-b"] }] },
  });
  return { idp, ctrl };
}

const deployment = (project: string, namespace: string, id = "web") => ({
  deployment: { id, project, namespace, image: "nginx:1", regions: [{ region: "east", replicas: 1 }] },
});

function refused(code: Code, pattern: RegExp) {
  return (error: unknown) => {
    const e = ConnectError.from(error);
    assert.equal(e.code, code, e.rawMessage);
    assert.match(e.rawMessage, pattern);
    return true;
  };
}

const whoAmI = (ctrl: TestCtrl, token: string) => ctrl.client(OperatorService, { token }).whoAmI({});

/** A token as the provider would sign it, with `claims` changed: for what the provider never issues. */
async function forged(idp: DevIdp, claims: Record<string, unknown>, key: JWK = idp.signingKeys[0]! as JWK) {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ sub: "alice", groups: ["team-a"], ...claims })
    .setProtectedHeader({ alg: "ES256", kid: key.kid })
    .setIssuer((claims.iss as string) ?? idp.issuer)
    .setAudience((claims.aud as string) ?? CLI_CLIENT_ID)
    .setIssuedAt((claims.iat as number) ?? now)
    .setExpirationTime((claims.exp as number) ?? now + 300)
    .sign(await importJWK(key, "ES256"));
}

test("alice signs in with the device flow: her group team-a grants deployer in team-a only; the denied write is audited with her subject and groups", async (t) => {
  const { idp, ctrl } = await stack(t);
  const { id_token } = await deviceFlowTokens(idp.issuer, CLI_CLIENT_ID, "alice", "alice");
  const me = await whoAmI(ctrl, id_token);
  assert.equal(me.actor, "oidc:alice");
  assert.equal(me.subject, "alice");
  assert.deepEqual(me.groups, ["team-a"]);
  assert.deepEqual(
    me.projectRoles.map((r) => [r.project, r.role]),
    [["team-a", Role.DEPLOYER]],
  );
  const deployments = ctrl.client(DeploymentService, { token: id_token });
  await deployments.createDeployment(deployment("team-a", "a-web"));
  await assert.rejects(deployments.createDeployment(deployment("team-b", "b-web")), refused(Code.PermissionDenied, /project "team-b"/));
  const audit = await ctrl.client(HistoryService).listAuditEvents({ project: "team-b" });
  const denied = audit.events.find((e) => e.decision === "denied");
  assert.ok(denied, "the denied attempt is in team-b's audit trail");
  assert.equal(denied.actor, "oidc:alice");
  assert.deepEqual(denied.groups, ["team-a"]);
  assert.equal(denied.action, "CreateDeployment");
  const allowed = (await ctrl.client(HistoryService).listAuditEvents({ project: "team-a" })).events.find((e) => e.action === "CreateDeployment");
  assert.equal(allowed?.decision, "allowed");
  assert.deepEqual(allowed?.groups, ["team-a"]);
  // A fleet-wide RPC denied to her is recorded too (no project).
  await assert.rejects(
    ctrl.client(RegionService, { token: id_token }).createRegion({ region: { name: "west" } }),
    refused(Code.PermissionDenied, /role admin/),
  );
  const all = await ctrl.client(HistoryService).listAuditEvents({ actor: "oidc:alice" });
  assert.ok(all.events.some((e) => e.action === "CreateRegion" && e.decision === "denied"));
});

test("refused: another key, alg none, a wrong issuer or audience, expired past the skew; accepted within the skew", async (t) => {
  const { idp, ctrl } = await stack(t, { clockSkewMs: 30_000 });
  const now = Math.floor(Date.now() / 1000);
  // Sanity: the forger's own token with the provider's key and right claims passes.
  assert.equal((await whoAmI(ctrl, await forged(idp, {}))).subject, "alice");
  const { privateKey } = await generateKeyPair("ES256", { extractable: true });
  const other = { ...(await (await import("jose")).exportJWK(privateKey)), kid: idp.signingKeys[0]!.kid };
  await assert.rejects(whoAmI(ctrl, await forged(idp, {}, other as JWK)), refused(Code.Unauthenticated, /signature does not verify/));
  const unsecured = `${Buffer.from(JSON.stringify({ alg: "none", kid: idp.signingKeys[0]!.kid })).toString("base64url")}.${Buffer.from(
    JSON.stringify({ sub: "alice", groups: ["team-a"], iss: idp.issuer, aud: CLI_CLIENT_ID, iat: now, exp: now + 300 }),
  ).toString("base64url")}.`;
  await assert.rejects(whoAmI(ctrl, unsecured), refused(Code.Unauthenticated, /invalid token/));
  await assert.rejects(whoAmI(ctrl, await forged(idp, { iss: "http://127.0.0.1:1" })), refused(Code.Unauthenticated, /iss/));
  await assert.rejects(whoAmI(ctrl, await forged(idp, { aud: "someone-else" })), refused(Code.Unauthenticated, /aud/));
  await assert.rejects(whoAmI(ctrl, await forged(idp, { iat: now - 600, exp: now - 60 })), refused(Code.Unauthenticated, /expired/));
  assert.equal((await whoAmI(ctrl, await forged(idp, { iat: now - 600, exp: now - 10 }))).subject, "alice", "within the 30 s skew");
  // A token whose header names HS256 with the key's id: the key fixes ES256.
  const hs256 = await new SignJWT({ sub: "alice", groups: ["team-a"] })
    .setProtectedHeader({ alg: "HS256", kid: idp.signingKeys[0]!.kid })
    .setIssuer(idp.issuer)
    .setAudience(CLI_CLIENT_ID)
    .setIssuedAt()
    .setExpirationTime("5m")
    .sign(new TextEncoder().encode("a-secret-the-attacker-chose-0123456789"));
  await assert.rejects(whoAmI(ctrl, hs256), refused(Code.Unauthenticated, /algorithm/));
});

test("a key rotated at the provider is picked up without restart; with the provider down issued tokens work and a new sign-in fails clearly", async (t) => {
  const { idp, ctrl } = await stack(t, { jwksCacheMs: 300 });
  const before = (await deviceFlowTokens(idp.issuer, CLI_CLIENT_ID, "alice", "alice")).id_token;
  assert.equal((await whoAmI(ctrl, before)).subject, "alice");
  idp.rotateKey();
  const after = (await deviceFlowTokens(idp.issuer, CLI_CLIENT_ID, "bob", "bob")).id_token;
  assert.notEqual(
    JSON.parse(Buffer.from(after.split(".")[0]!, "base64url").toString()).kid,
    JSON.parse(Buffer.from(before.split(".")[0]!, "base64url").toString()).kid,
  );
  assert.equal((await whoAmI(ctrl, after)).subject, "bob", "the new key id made ctrl fetch the keys again");

  await idp.stop();
  // Longer than the JWKS cache time: ctrl tries to fetch again, fails, keeps the keys it has.
  await new Promise((resolve) => setTimeout(resolve, 400));
  assert.equal((await whoAmI(ctrl, after)).subject, "bob");
  assert.equal((await whoAmI(ctrl, before)).subject, "alice");
  const login = await fetch(`${ctrl.url}/auth/login`, { redirect: "manual" });
  assert.equal(login.status, 503);
  assert.match(await login.text(), /Sign-in is not possible now: the identity provider .* is unreachable/);
});

test("the JWKS cache time: a key the provider dropped is refused once the cached keys are older than it, not before, also for a token verified (and cached) before", async (t) => {
  const { idp, ctrl } = await stack(t, { jwksCacheMs: 1000 });
  const dropped = idp.signingKeys[0]! as JWK;
  assert.equal((await whoAmI(ctrl, await forged(idp, { sub: "alice" }, dropped))).subject, "alice");
  idp.rotateKey(true);
  // Within the cache time ctrl still has the dropped key (each token new: none is in ctrl's token cache).
  assert.equal((await whoAmI(ctrl, await forged(idp, { sub: "carol" }, dropped))).subject, "carol");
  const cached = await forged(idp, { sub: "erin" }, dropped);
  assert.equal((await whoAmI(ctrl, cached)).subject, "erin");
  await new Promise((resolve) => setTimeout(resolve, 1100));
  await assert.rejects(whoAmI(ctrl, await forged(idp, { sub: "dave" }, dropped)), refused(Code.Unauthenticated, /not one of the issuer's/));
  // A verified token is cached (not verified on every call), but not past the keys it was verified with.
  await assert.rejects(whoAmI(ctrl, cached), refused(Code.Unauthenticated, /not one of the issuer's/));
});

test("--oidc-groups-claim: the groups come from the claim named; a claim that is not a list of strings is refused", async (t) => {
  const { idp, ctrl } = await stack(t, { groupsClaim: "roles" });
  const me = await whoAmI(ctrl, await forged(idp, { groups: ["team-b"], roles: ["team-a"] }));
  assert.deepEqual(me.groups, ["team-a"]);
  assert.deepEqual(
    me.projectRoles.map((r) => r.project),
    ["team-a"],
  );
  await assert.rejects(whoAmI(ctrl, await forged(idp, { roles: "team-a" })), refused(Code.Unauthenticated, /"roles" claim is not a list of strings/));
});

test("a removed group: its access ends when the token does", async (t) => {
  const { idp, ctrl } = await stack(t, { clockSkewMs: 0 }, { idTokenTtlSeconds: 3 });
  const old = (await deviceFlowTokens(idp.issuer, CLI_CLIENT_ID, "alice", "alice")).id_token;
  idp.setGroups("alice", []);
  await ctrl.client(DeploymentService, { token: old }).createDeployment(deployment("team-a", "a-one", "one"));
  // Her status stream, opened with the token, ends when the token does.
  const streamEnded = (async () => {
    try {
      for await (const _ of ctrl.client(StatusService, { token: old }).watchStatus({})) void _;
    } catch {
      // Reset by ctrl: as good as an end.
    }
    return Date.now();
  })();
  const exp = JSON.parse(Buffer.from(old.split(".")[1]!, "base64url").toString()).exp * 1000;
  await new Promise((resolve) => setTimeout(resolve, 3100));
  const ended = await Promise.race([streamEnded, new Promise<number>((resolve) => setTimeout(resolve, 2000, Infinity))]);
  assert.ok(ended >= exp - 50 && ended < exp + 1000, `the stream ended at its token's expiry (${ended - exp} ms after)`);
  await assert.rejects(whoAmI(ctrl, old), refused(Code.Unauthenticated, /expired/));
  const fresh = (await deviceFlowTokens(idp.issuer, CLI_CLIENT_ID, "alice", "alice")).id_token;
  assert.deepEqual((await whoAmI(ctrl, fresh)).groups, []);
  await assert.rejects(
    ctrl.client(DeploymentService, { token: fresh }).createDeployment(deployment("team-a", "a-two", "two")),
    refused(Code.PermissionDenied, /needs role deployer/),
  );
});

test("the console's session: code flow with PKCE sets an HttpOnly Secure SameSite=Strict cookie; a call with it but without the CSRF token is refused; it ends after --session-max-age", async (t) => {
  const { ctrl } = await stack(t, { sessionMaxAgeMs: 2500 });
  const login = await fetch(`${ctrl.url}/auth/login`, { redirect: "manual" });
  assert.equal(login.status, 302);
  const authorize = new URL(login.headers.get("location")!);
  assert.equal(authorize.searchParams.get("code_challenge_method"), "S256");
  const loginCookie = login.headers.getSetCookie()[0]!.split(";", 1)[0]!;
  const back = await signInHeadless(authorize.toString(), "bob", "bob", { stopOutside: ctrl.url });
  assert.ok(back.left && back.url.startsWith(`${ctrl.url}/auth/callback?`), back.url);
  const callback = await fetch(back.url, { redirect: "manual", headers: { cookie: loginCookie } });
  assert.equal(callback.status, 303);
  const setCookie = callback.headers.getSetCookie().find((c) => c.startsWith("flotilla_session="))!;
  assert.match(setCookie, /HttpOnly/);
  assert.match(setCookie, /Secure/);
  assert.match(setCookie, /SameSite=Strict/);
  const cookie = setCookie.split(";", 1)[0]!;
  const session = (await (await fetch(`${ctrl.url}/auth/session`, { headers: { cookie } })).json()) as { subject: string; csrf: string; groups: string[] };
  assert.equal(session.subject, "bob");
  assert.deepEqual(session.groups, ["team-b"]);
  const call = (headers: Record<string, string>) =>
    fetch(`${ctrl.url}/ctrl.v1.OperatorService/WhoAmI`, { method: "POST", headers: { "content-type": "application/json", cookie, ...headers }, body: "{}" });
  const without = await call({});
  assert.equal(without.status, 401);
  assert.match(await without.text(), /CSRF/);
  const wrong = await call({ "x-flotilla-csrf": "not-the-token" });
  assert.equal(wrong.status, 401);
  const withToken = await call({ "x-flotilla-csrf": session.csrf });
  assert.equal(withToken.status, 200);
  assert.equal(((await withToken.json()) as { actor: string }).actor, "oidc:bob");
  assert.match(setCookie, /Max-Age=[12];/, "the cookie lives no longer than the session");
  await new Promise((resolve) => setTimeout(resolve, 2600));
  const expired = await call({ "x-flotilla-csrf": session.csrf });
  assert.equal(expired.status, 401);
  assert.match(await expired.text(), /session has expired/);
  assert.equal((await fetch(`${ctrl.url}/auth/session`, { headers: { cookie } })).status, 401);
});

test("a key's algorithm: its alg, else its type's (RS256, ES256 by curve, EdDSA); never a symmetric one", () => {
  assert.equal(keyAlgorithm({ kty: "EC", crv: "P-256", alg: "ES256" }), "ES256");
  assert.equal(keyAlgorithm({ kty: "RSA", alg: "PS256" }), "PS256");
  assert.equal(keyAlgorithm({ kty: "RSA" }), "RS256");
  assert.equal(keyAlgorithm({ kty: "EC", crv: "P-384" }), "ES384");
  assert.equal(keyAlgorithm({ kty: "OKP", crv: "Ed25519" }), "EdDSA");
  assert.equal(keyAlgorithm({ kty: "oct", alg: "HS256" }), undefined);
  assert.equal(keyAlgorithm({ kty: "oct" }), undefined);
  assert.equal(keyAlgorithm({ kty: "RSA", alg: "none" }), undefined);
});

test("bounds and flags: JWKS cache time, clock skew, session lifetime have defaults and flags; a missing secret file is a clear error", () => {
  const dir = mkdtempSync(join(tmpdir(), "flotilla-sso-"));
  const secretFile = join(dir, "secret");
  writeFileSync(secretFile, `${SECRET}\n`, { mode: 0o600 });
  const parse = (...argv: string[]) => {
    const parsed = parseConfig(argv, {});
    assert.notEqual(parsed, "help");
    return ssoOptions((parsed as Exclude<typeof parsed, "help">).config);
  };
  assert.equal(parse(), undefined);
  const defaults = parse("--oidc-issuer", "http://127.0.0.1:7075", "--oidc-client-secret-file", secretFile)!;
  assert.equal(defaults.jwksCacheMs, 10 * 60_000);
  assert.equal(defaults.clockSkewMs, 30_000);
  assert.equal(defaults.sessionMaxAgeMs, 8 * 3600_000);
  assert.equal(defaults.clientSecret, SECRET);
  const set = parse(
    "--oidc-issuer=http://127.0.0.1:7075",
    `--oidc-client-secret-file=${secretFile}`,
    "--oidc-jwks-cache=1m",
    "--oidc-clock-skew=5s",
    "--session-max-age=1h",
    "--oidc-groups-claim=roles",
  )!;
  assert.deepEqual([set.jwksCacheMs, set.clockSkewMs, set.sessionMaxAgeMs, set.groupsClaim], [60_000, 5000, 3600_000, "roles"]);
  assert.throws(() => parse("--oidc-issuer=http://127.0.0.1:7075"), /needs --oidc-client-secret-file/);
  assert.throws(() => parse("--oidc-issuer=http://127.0.0.1:7075", `--oidc-client-secret-file=${join(dir, "nope")}`), /cannot read it \(ENOENT\)/);
  assert.throws(() => parse("--oidc-issuer=http://idp.example.com", `--oidc-client-secret-file=${secretFile}`), /must be https/);
  assert.throws(() => parse("--oidc-issuer=http://127.0.0.1:7075", `--oidc-client-secret-file=${secretFile}`, "--oidc-clock-skew=1h"), /0s to 10m/);
});
