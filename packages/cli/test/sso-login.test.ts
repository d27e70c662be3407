// `flotilla login` against a real OpenID provider (packages/dev-idp) and a real ctrl: the CLI
// prints the verification URL and the user code and waits; the person signs in (headless,
// through the provider's own pages); the tokens land in the config file with mode 0600;
// `flotilla whoami` shows the subject, groups and project roles; an expired ID token is
// renewed with the refresh token; nobody signing in within --timeout saves nothing; the
// provider down is a clear error.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, statSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { ProjectService } from "@flotilla/proto/ctrl/v1/project_pb.js";
import { CLI_CLIENT_ID, CONSOLE_CLIENT_ID, DevIdp } from "@flotilla/dev-idp";
import { signInHeadless } from "@flotilla/dev-idp/headless";
import { testDatabases } from "@flotilla/testkit/databases";
import { startTestCtrl } from "@flotilla/testkit/ctrl";
import { runCli } from "./cli-harness.ts";

const [{ db }] = await testDatabases();
const SECRET = "console-secret-for-tests-0123456789";
const CLI = new URL("../src/main.ts", import.meta.url).pathname;

async function stack(t: { after(fn: () => Promise<void>): void }, idTokenTtlSeconds = 3600) {
  const idp = await new DevIdp({ port: 0, consoleSecret: SECRET, idTokenTtlSeconds }).start();
  const ctrl = await startTestCtrl(db, {
    sso: { issuer: idp.issuer, clientId: CONSOLE_CLIENT_ID, clientSecret: SECRET, cliClientId: CLI_CLIENT_ID, clockSkewMs: 0 },
  });
  t.after(async () => {
    await ctrl.close();
    await idp.stop();
  });
  await ctrl
    .client(ProjectService)
    .createProject({ project: { name: "team-a", namespaces: ["a-*"], regions: { names: ["*"] }, roles: [{ role: Role.DEPLOYER, groups: ["team-a"] }] } });
  const home = mkdtempSync(join(tmpdir(), "flotilla-login-"));
  const env = { PATH: process.env.PATH, FLOTILLA_CONFIG: join(home, "config.yaml"), FLOTILLA_SERVER: ctrl.url };
  return { idp, ctrl, env, config: env.FLOTILLA_CONFIG };
}

/** Runs `flotilla login`; when it prints its code, signs in as `user` at the provider. */
function loginAs(env: NodeJS.ProcessEnv, user: string | undefined, args: string[] = []): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, "login", ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    let signing = false;
    child.stdout.on("data", (d) => {
      stdout += d;
      const printed = /open (\S+) and enter the code (\S+)/.exec(stdout);
      if (printed && user && !signing) {
        signing = true;
        signInHeadless(`${printed[1]}?user_code=${printed[2]}`, user, user).catch(reject);
      }
    });
    child.stderr.on("data", (d) => (stderr += d));
    child.on("close", (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

test("flotilla login prints the URL and code, waits, keeps the tokens (0600); whoami shows subject, groups and roles; an expired token is refreshed", async (t) => {
  const { env, config } = await stack(t, 4);
  const login = await loginAs(env, "alice");
  assert.equal(login.code, 0, login.stderr);
  assert.match(login.stdout, /To sign in, open http:\/\/127\.0\.0\.1:\d+\/device and enter the code [A-Z]{4}-[A-Z]{4}/);
  assert.match(login.stdout, /signed in as alice \(groups team-a\)/);
  assert.equal(statSync(config).mode & 0o777, 0o600);
  const saved = readFileSync(config, "utf8");
  assert.match(saved, /id-token: eyJ/);
  assert.match(saved, /refresh-token: /);
  const who = await runCli(env, ["whoami"]);
  assert.equal(who.code, 0, who.stderr);
  assert.match(who.stdout, /subject: alice/);
  assert.match(who.stdout, /groups: {2}team-a/);
  assert.match(who.stdout, /team-a +deployer/);
  // The ID token lives 4 s: after it, the CLI renews it with the refresh token, and saves it.
  await new Promise((resolve) => setTimeout(resolve, 4200));
  const again = await runCli(env, ["whoami", "-o", "json"]);
  assert.equal(again.code, 0, again.stderr);
  assert.equal(JSON.parse(again.stdout).subject, "alice");
  assert.notEqual(readFileSync(config, "utf8"), saved, "the renewed tokens are saved");
  assert.equal(statSync(config).mode & 0o777, 0o600);
  const out = await runCli(env, ["logout"]);
  assert.equal(out.code, 0, out.stderr);
  assert.doesNotMatch(readFileSync(config, "utf8"), /id-token/);
});

test("flotilla login: nobody signs in within --timeout, nothing saved; the provider down, a clear error", async (t) => {
  const { idp, env, config } = await stack(t);
  const waited = await loginAs(env, undefined, ["--timeout", "2s"]);
  assert.notEqual(waited.code, 0);
  assert.match(waited.stderr, /nobody signed in with code .* within 2 s \(--timeout\): nothing saved/);
  assert.equal(existsSync(config), false);
  await idp.stop();
  const down = await loginAs(env, undefined, ["--timeout", "2s"]);
  assert.notEqual(down.code, 0);
  assert.match(down.stderr, /the identity provider at http:\/\/127\.0\.0\.1:\d+ is unreachable/);
  assert.equal(existsSync(config), false);
});
