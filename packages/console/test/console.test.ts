// The web console in a real headless browser (Debian's chromium driven by playwright-core),
// against a real stack (ctrl, the Kubernetes emulator, an agent), with the CLI as a user runs
// it: sign in; a deployment applied by the CLI appears without reload and goes to RUNNING; an
// image that never becomes ready shows FAILED with its reason; rollback from the detail page
// changes the cluster; a viewer sees no Rollback and its write is refused; ctrl restarted under
// the open page: the banner shows, then the page catches up; the Deployments table's last row
// whole inside its frame, and the frame inside the window, at several window heights.
// axe-core on every view; the security headers; a screenshot of each view (test/screenshots/).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Browser, Page } from "playwright-core";
import { CHROMIUM, launchChromium } from "@flotilla/testkit/browser";
import { OperatorService, Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN, startTestCtrl } from "@flotilla/testkit/ctrl";
import { deploymentOf, imageOf, REGION, startStack, waitFor, type Stack } from "@flotilla/testkit/stack";

const CLI = fileURLToPath(import.meta.resolve("@flotilla/cli/main"));
const AXE = readFileSync(fileURLToPath(import.meta.resolve("axe-core/axe.min.js")), "utf8");
const SHOTS = fileURLToPath(new URL("./screenshots/", import.meta.url));
const missing = !existsSync(CHROMIUM);
if (missing && process.env.CI) throw new Error(`no browser at ${CHROMIUM}: .ci/run installs Debian's chromium`);

const [{ db }] = await testDatabases();

describe("the web console in headless Chromium", { skip: missing ? `no browser at ${CHROMIUM} (apt-get install chromium)` : false }, () => {
  let stack: Stack;
  let browser: Browser;
  let dir: string;
  let viewerToken: string;

  /** The CLI as a process (asynchronously: ctrl runs in this process and must go on serving). */
  const cli = async (args: string[], input?: string) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: { PATH: process.env.PATH, FLOTILLA_SERVER: stack.t.url, FLOTILLA_TOKEN: ADMIN_TOKEN, FLOTILLA_CONFIG: join(dir, "config.yaml") },
    });
    let output = "";
    child.stdout.on("data", (d) => (output += d));
    child.stderr.on("data", (d) => (output += d));
    child.stdin.end(input ?? "");
    const [code] = (await once(child, "close")) as [number];
    assert.equal(code, 0, `flotilla ${args.join(" ")}: ${output}`);
    return output;
  };
  const manifest = (name: string, image: string) =>
    `apiVersion: flotilla.dev/v1\nkind: Deployment\nmetadata:\n  name: ${name}\nspec:\n  namespace: shop\n  image: ${image}\n  port: 8080\n  regions:\n    - region: ${REGION}\n      replicas: 2\n`;

  /** axe-core in the page (evaluated over the DevTools protocol: the page's CSP forbids injected scripts); serious and critical violations. */
  const axe = async (page: Page, view: string) => {
    // (Once per page: the views are one page, and a second copy of axe-core never settles its run.)
    const violations = (await page.evaluate(
      `if (!window.axe) {\n${AXE}\n}\naxe.run(document, { resultTypes: ["violations"] }).then((r) => r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length })))`,
    )) as {
      id: string;
      impact: string;
      nodes: number;
    }[];
    assert.deepEqual(
      violations.filter((v) => v.impact === "serious" || v.impact === "critical"),
      [],
      `axe on the ${view} view`,
    );
  };
  const shot = (page: Page, name: string) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  const signIn = async (page: Page, token: string) => {
    await page.goto(stack.t.url);
    await page.getByLabel("Operator token").fill(token);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("navigation", { name: "Views" }).waitFor();
  };
  const row = (page: Page, id: string) => page.locator(`tr[data-row="${id}/${REGION}"]`);

  before(async () => {
    // Rollouts slow enough to see PROGRESSING on the page.
    stack = await startStack(db, { emulator: { rolloutDelayMs: 700 } });
    await stack.agent();
    dir = mkdtempSync(join(tmpdir(), "flotilla-console-"));
    mkdirSync(SHOTS, { recursive: true });
    viewerToken = (await stack.t.client(OperatorService).createOperator({ name: "vic", role: Role.VIEWER })).token;
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await stack?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("served safely: CSP without inline script, no sniffing, no referrer, no framing; --console=false turns it off", async () => {
    const response = await fetch(`${stack.t.url}/`);
    assert.equal(response.status, 200);
    const csp = response.headers.get("content-security-policy") ?? "";
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|https?:/);
    assert.equal(response.headers.get("x-content-type-options"), "nosniff");
    assert.equal(response.headers.get("referrer-policy"), "no-referrer");
    const html = await response.text();
    assert.doesNotMatch(html, /<script>|<script [^>]*>[^<]|https?:\/\//, "no inline script, nothing from another origin");
    const off = await startTestCtrl(db, { console: false });
    try {
      assert.equal((await fetch(`${off.url}/`)).status, 404, "--console=false serves no console");
    } finally {
      await off.close();
    }
  });

  test("sign in, the fleet, a deployment going live, a failing one, rollback from the detail page, every view accessible", async () => {
    const page = await browser.newPage();
    const external: string[] = [];
    page.on("request", (r) => {
      if (!r.url().startsWith(stack.t.url)) external.push(r.url());
    });
    await page.goto(stack.t.url);
    await axe(page, "sign-in");
    await shot(page, "sign-in");
    await signIn(page, ADMIN_TOKEN);
    assert.ok(!(await page.content()).includes(ADMIN_TOKEN), "the token is not in the DOM");
    await page.locator("tr", { hasText: REGION }).getByText("connected").waitFor();
    await axe(page, "fleet");
    await shot(page, "fleet");

    await page.getByRole("link", { name: "Deployments" }).click();
    await cli(["apply", "-f", "-"], manifest("shop", "shop:1"));
    // No reload: the status stream brings it, through its rollout.
    await row(page, "shop").locator(".phase-progressing, .phase-pending").waitFor({ timeout: 20_000 });
    await row(page, "shop").locator(".phase-running").waitFor({ timeout: 30_000 });
    await cli(["apply", "-f", "-"], manifest("broken", "shop:fail"));
    await row(page, "broken").locator(".phase-failed").waitFor({ timeout: 30_000 });
    assert.match(await row(page, "broken").locator(".reason").innerText(), /\S/, "FAILED shows its reason");
    await page.getByLabel("Phase").selectOption("FAILED");
    assert.equal(await page.locator("tr[data-row]").count(), 1, "the phase filter");
    await page.getByLabel("Phase").selectOption("");
    await axe(page, "deployments");
    await shot(page, "deployments");

    await cli(["apply", "-f", "-", "--wait", "--timeout", "60s"], manifest("shop", "shop:2"));
    await page.getByRole("link", { name: "shop", exact: true }).click();
    await page.locator('tr[data-revision="2"]').waitFor();
    await page.getByLabel("Compare").selectOption("1");
    await page.getByLabel("with").selectOption("2");
    await page.locator("table.diff", { hasText: "shop:2" }).waitFor();
    await axe(page, "deployment detail");
    await shot(page, "deployment");
    page.once("dialog", (dialog) => {
      assert.match(dialog.message(), /revision 1/);
      void dialog.accept();
    });
    await page.getByRole("button", { name: "Roll back to 1" }).click();
    await page.getByRole("status").filter({ hasText: "now revision 3" }).waitFor();
    await waitFor(() => imageOf(deploymentOf(stack.emulator, "shop", "shop")) === "shop:1", "the rollback in the cluster");
    await page.locator('tr[data-revision="3"]').waitFor();

    for (const [link, name] of [
      ["Sentinels", "sentinels"],
      ["Network policies", "networkpolicies"],
      ["Audit", "audit"],
    ] as const) {
      await page.getByRole("link", { name: link }).click();
      await page.getByRole("heading", { level: 2, name: link }).waitFor();
      await axe(page, name);
      await shot(page, name);
    }
    assert.ok(await page.getByRole("cell", { name: "RollbackDeployment" }).first().isVisible(), "the audit trail shows the rollback");
    assert.deepEqual(external, [], "nothing is loaded from another origin");
    await page.close();
  });

  test("the Deployments table shows its last row whole at every window height, scrolled to its end", async () => {
    // 40 rows to scroll through, the last one FAILED with a long reason; and 9 that need no scrolling.
    const names = Array.from({ length: 40 }, (_, i) => `fill-${String(i + 1).padStart(2, "0")}`);
    await cli(["apply", "-f", "-"], names.map((n) => manifest(n, n === "fill-40" ? "shop:fail" : "shop:1")).join("---\n"));
    const page = await browser.newPage();
    await signIn(page, ADMIN_TOKEN);
    await page.getByRole("link", { name: "Deployments" }).click();
    await page.getByLabel("Search").fill("fill-40");
    await row(page, "fill-40").locator(".phase-failed").waitFor({ timeout: 30_000 });
    for (const [search, last] of [
      ["fill", "fill-40"],
      ["fill-0", "fill-09"],
    ] as const) {
      await page.getByLabel("Search").fill(search);
      for (const height of [320, 480, 700, 1000, 1400]) {
        await page.setViewportSize({ width: 1280, height });
        const scroller = page.locator(".scroller");
        await scroller.evaluate((e) => e.scrollTo(0, e.scrollHeight));
        await row(page, last).waitFor();
        // (Two frames: the scroll event's render, then its layout.)
        await page.evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))");
        const box = await scroller.evaluate((e) => {
          const frame = e.getBoundingClientRect();
          const rows = e.querySelectorAll("tr[data-row]");
          const row = rows[rows.length - 1]!;
          const top = frame.top + e.clientTop;
          const scrolls = e.scrollHeight > e.clientHeight;
          return { id: row.getAttribute("data-row"), top, bottom: top + e.clientHeight, scrolls, row: row.getBoundingClientRect() };
        });
        const at = `searching ${search} in a window ${height} px high: ${JSON.stringify(box)}`;
        assert.equal(box.id, `${last}/${REGION}`, `the last row is rendered, ${at}`);
        assert.ok(box.row.top >= box.top && box.row.bottom <= box.bottom, `the last row lies inside the frame, ${at}`);
        assert.ok(box.bottom <= height, `the frame ends inside the window, ${at}`);
        assert.ok(!box.scrolls || box.bottom > height - 36, `a frame that scrolls reaches down to the window's bottom, ${at}`);
        await page.screenshot({ path: join(SHOTS, `deployments-end-${search}-${height}.png`) });
      }
    }
    await cli(["delete", "-f", "-"], names.map((n) => manifest(n, "shop:1")).join("---\n"));
    await page.close();
  });

  test("a viewer sees no Rollback, and a write with its token is refused", async () => {
    const page = await browser.newPage();
    await signIn(page, viewerToken);
    await page.goto(`${stack.t.url}/#/deployments/shop`);
    await page.locator('tr[data-revision="1"]').waitFor();
    assert.equal(await page.getByRole("button", { name: /Roll back/ }).count(), 0);
    const refused = await page.evaluate(async (token) => {
      const r = await fetch("/ctrl.v1.HistoryService/Rollback", {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        body: JSON.stringify({ resourceType: "RESOURCE_TYPE_DEPLOYMENT", id: "shop", toRevision: "2" }),
      });
      return { status: r.status, body: await r.text() };
    }, viewerToken);
    assert.equal(refused.status, 403);
    assert.match(refused.body, /Rollback needs role deployer/);
    await page.close();
  });

  test("ctrl restarted under an open page: the banner shows, then the page catches up without reload", async () => {
    const page = await browser.newPage();
    await signIn(page, ADMIN_TOKEN);
    await page.getByRole("link", { name: "Deployments" }).click();
    await row(page, "shop").waitFor();
    let navigations = 0;
    page.on("framenavigated", () => navigations++);
    await stack.t.ctrl.shutdown();
    await page.getByRole("status").filter({ hasText: "Reconnecting to ctrl" }).waitFor({ timeout: 20_000 });
    await shot(page, "reconnecting");
    await stack.t.restart();
    await cli(["apply", "-f", "-"], manifest("after-restart", "shop:1"));
    await row(page, "after-restart").waitFor({ timeout: 30_000 });
    await page.getByRole("status").filter({ hasText: "Reconnecting" }).waitFor({ state: "detached", timeout: 20_000 });
    assert.equal(navigations, 0, "no reload");
    await page.close();
  });

  test("a revoked token brings back the sign-in page with the reason", async () => {
    const { token } = await stack.t.client(OperatorService).createOperator({ name: "tmp", role: Role.VIEWER });
    const page = await browser.newPage();
    await signIn(page, token);
    await stack.t.client(OperatorService).revokeOperator({ name: "tmp" });
    await page.reload();
    await page
      .getByRole("alert")
      .filter({ hasText: /refused/ })
      .waitFor();
    assert.ok(await page.getByLabel("Operator token").isVisible());
    await page.close();
    writeFileSync(join(dir, "done"), "");
  });
});
