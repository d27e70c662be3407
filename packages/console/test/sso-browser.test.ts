// The console's single sign-on in headless Chromium, through the real provider's login form
// (packages/dev-idp, oidc-provider): "Sign in with single sign-on", a wrong password refused
// at the provider, alice signed in sees team-a's deployment and not team-b's, and bob the
// other way round; the session cookie is invisible to the page's scripts and nothing is in
// its storage; a call with the cookie but without the CSRF token is refused; sign out ends it.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import type { Browser, Page } from "playwright-core";
import { CHROMIUM, launchChromium, signInWithSso } from "@flotilla/testkit/browser";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { ProjectService } from "@flotilla/proto/ctrl/v1/project_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { CLI_CLIENT_ID, CONSOLE_CLIENT_ID, DevIdp } from "@flotilla/dev-idp";
import { testDatabases } from "@flotilla/testkit/databases";
import { startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";

const missing = !existsSync(CHROMIUM);
if (missing && process.env.CI) throw new Error(`no browser at ${CHROMIUM}: .ci/run installs Debian's chromium`);
const [{ db }] = await testDatabases();
const SECRET = "console-secret-for-tests-0123456789";

describe("single sign-on in the console, in headless Chromium", { skip: missing ? `no browser at ${CHROMIUM} (apt-get install chromium)` : false }, () => {
  let idp: DevIdp;
  let ctrl: TestCtrl;
  let browser: Browser;

  before(async () => {
    idp = await new DevIdp({ port: 0, consoleSecret: SECRET }).start();
    ctrl = await startTestCtrl(db, { sso: { issuer: idp.issuer, clientId: CONSOLE_CLIENT_ID, clientSecret: SECRET, cliClientId: CLI_CLIENT_ID } });
    idp.allowRedirectUri(`${ctrl.url}/auth/callback`);
    await ctrl.client(RegionService).createRegion({ region: { name: "east" } });
    for (const team of ["a", "b"]) {
      await ctrl.client(ProjectService).createProject({
        project: { name: `team-${team}`, namespaces: [`${team}-*`], regions: { names: ["*"] }, roles: [{ role: Role.DEPLOYER, groups: [`team-${team}`] }] },
      });
      await ctrl.client(DeploymentService).createDeployment({
        deployment: { id: `${team}-web`, project: `team-${team}`, namespace: `${team}-shop`, image: "nginx:1", regions: [{ region: "east", replicas: 1 }] },
      });
    }
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await ctrl?.close();
    await idp?.stop();
  });

  const signIn = (page: Page, user: string, password: string) => signInWithSso(page, ctrl.url, idp.issuer, user, password);

  test("a wrong password is refused at the provider's form", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await signIn(page, "alice", "not-her-password");
    await page.getByRole("alert").filter({ hasText: "Wrong user name or password." }).waitFor();
    assert.ok(page.url().startsWith(idp.issuer));
    await context.close();
  });

  for (const [user, own, other] of [
    ["alice", "a-web", "b-web"],
    ["bob", "b-web", "a-web"],
  ] as const) {
    test(`${user} signs in and sees ${own}, not ${other}; the cookie is HttpOnly, a call without the CSRF token is refused; sign out ends the session`, async () => {
      const context = await browser.newContext();
      const page = await context.newPage();
      await signIn(page, user, user);
      await page.waitForURL(`${ctrl.url}/**`);
      await page.getByText(`oidc:${user}`).waitFor();
      await page.goto(`${ctrl.url}/#/deployments`);
      await page.getByRole("link", { name: own, exact: true }).waitFor();
      assert.equal(await page.getByRole("link", { name: other, exact: true }).count(), 0);
      const cookies = await context.cookies();
      const session = cookies.find((c) => c.name === "flotilla_session");
      assert.ok(session, "the session cookie is set");
      assert.equal(session.httpOnly, true);
      assert.equal(session.secure, true);
      assert.equal(session.sameSite, "Strict");
      const seen = (await page.evaluate(
        "JSON.stringify({ cookie: document.cookie, local: Object.keys(localStorage), session: Object.keys(sessionStorage) })",
      )) as string;
      assert.deepEqual(JSON.parse(seen), { cookie: "", local: [], session: [] }, "no token where the page's scripts can read it");
      const forged = (await page.evaluate(
        `fetch("/ctrl.v1.OperatorService/WhoAmI", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" }).then(async (r) => r.status + " " + (await r.text()))`,
      )) as string;
      assert.match(forged, /^401 .*CSRF/);
      await page.getByRole("button", { name: "Sign out" }).click();
      await page.getByRole("link", { name: "Sign in with single sign-on" }).waitFor();
      await page.reload();
      await page.getByRole("link", { name: "Sign in with single sign-on" }).waitFor();
      assert.equal(
        (await context.cookies()).find((c) => c.name === "flotilla_session"),
        undefined,
      );
      await context.close();
    });
  }
});
