// The web console in a real headless browser (Debian's chromium driven by playwright-core),
// against a real stack (ctrl, the Kubernetes emulator, an agent), with the CLI as a user runs
// it: sign in; a deployment applied by the CLI appears without reload and goes to RUNNING; an
// image that never becomes ready shows FAILED with its reason; rollback from the detail page
// changes the cluster; a viewer sees no Rollback and its write is refused; ctrl restarted under
// the open page: the banner shows, then the page catches up; the Deployments table's last row
// whole inside its frame, and the frame inside the window, at several window heights; a staged
// rollout (scripted agents) live in the Rollouts view and on the deployment page, its waves left
// to right, the bake counting down in the page, Pause refused with the reason, Resume, Approve
// by a deployer, Abort, and no controls for a viewer; a wave's analysis charted per region
// against its threshold as measurements arrive, and a region its analysis rolled back shown with
// the revision it runs now; the Fleet view's region labels; a deployment's service fields read-only
// (probes, budget, autoscaling, secret env by fingerprint: a value written through the API is
// nowhere in the page).
// axe-core on every view; the security headers; a screenshot of each view (test/screenshots/).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Browser, Locator, Page } from "playwright-core";
import { CHROMIUM, launchChromium } from "@flotilla/testkit/browser";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { NotifierFormat, NotifierService } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import { OperatorService, Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { ResourceType, RolloutState } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { RolloutService } from "@flotilla/proto/ctrl/v1/rollout_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN, startTestCtrl, testSecretKeyRing } from "@flotilla/testkit/ctrl";
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
  /** Scripted agents of `regions` report `id` RUNNING at what each is to run now. */
  const agentsRun = async (id: string, regions: string[]) => {
    const { deployment } = await stack.t.client(DeploymentService).getDeployment({ id });
    for (const s of deployment!.status.filter((s) => regions.includes(s.region) && s.desiredVersion > 0n)) {
      await stack.t.client(ClusterService).reportObservedState({
        region: s.region,
        appliedVersion: s.desiredVersion,
        observations: [
          {
            type: ResourceType.DEPLOYMENT,
            id,
            appliedVersion: s.desiredVersion,
            observedImage: deployment!.image,
            desiredReplicas: 2,
            readyReplicas: 2,
            updatedReplicas: 2,
          },
        ],
      });
    }
  };

  before(async () => {
    // Rollouts slow enough to see PROGRESSING on the page.
    stack = await startStack(db, { emulator: { rolloutDelayMs: 700 }, store: { secrets: testSecretKeyRing() } });
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

    // A notifier and a delivery of it: the Notifications view shows them.
    const notifiers = stack.t.client(NotifierService);
    await notifiers.createNotifier({ notifier: { name: "chat", url: "https://hooks.example.com/flotilla", format: NotifierFormat.SLACK } });
    await notifiers.testNotifier({ name: "chat" });
    for (const [link, name] of [
      ["Sentinels", "sentinels"],
      ["Network policies", "networkpolicies"],
      ["Audit", "audit"],
      ["Notifications", "notifications"],
    ] as const) {
      await page.getByRole("link", { name: link }).click();
      await page.getByRole("heading", { level: 2, name: link }).waitFor();
      await axe(page, name);
      await shot(page, name);
    }
    // Each view loads its rows after its heading: waited for (a busy machine answers slowly), then asserted.
    const shows = (cell: string) =>
      page
        .getByRole("cell", { name: cell })
        .first()
        .waitFor({ timeout: 15_000 })
        .then(
          () => true,
          () => false,
        );
    assert.ok(await shows("notifier.test"), "the Notifications view shows the delivery");
    await page.getByRole("link", { name: "Audit" }).click();
    await page.getByRole("heading", { level: 2, name: "Audit" }).waitFor();
    assert.ok(await shows("RollbackDeployment"), "the audit trail shows the rollback");
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

  test("the deployment page shows the service fields read-only: probes, budget, region env, autoscaling, secret env by fingerprint, never a value", async () => {
    const value = `s3cret-${randomBytes(12).toString("hex")}`;
    const deployments = stack.t.client(DeploymentService);
    const { deployment } = await deployments.createDeployment({
      deployment: {
        id: "svc",
        namespace: "shop",
        image: "shop:1",
        port: 8080,
        regions: [
          { region: REGION, autoscaling: { minReplicas: 2, maxReplicas: 6, targetCpuUtilizationPercent: 70 }, env: [{ name: "LOG_LEVEL", value: "debug" }] },
        ],
        readinessProbe: { handler: { case: "httpGet", value: { path: "/healthz", port: 8080 } }, initialDelaySeconds: 1 },
        disruptionBudget: { budget: { case: "minAvailable", value: "1" } },
        env: [{ name: "DB_URL", valueFrom: { source: { case: "secretKeyRef", value: { name: "db", key: "url" } } } }],
        secretEnv: [{ name: "API_TOKEN", value }],
      },
    });
    const fingerprint = deployment!.secretEnv[0]!.fingerprint;
    assert.match(fingerprint, /^[0-9a-f]{16}$/);
    const page = await browser.newPage();
    await signIn(page, viewerToken);
    await page.goto(`${stack.t.url}/#/deployments/svc`);
    const secret = page.locator('tr[data-secret="API_TOKEN"]');
    await secret.waitFor();
    assert.equal(await secret.innerText(), `API_TOKEN\tset, fingerprint ${fingerprint}`);
    assert.match(
      await page.locator('tr[data-probe="readiness"]').innerText(),
      /http-get http:\/\/:8080\/healthz delay=1s timeout=1s period=10s #success=1 #failure=3/,
    );
    assert.match(await page.locator("tr[data-autoscaling]").innerText(), /2–6 replicas, cpu 70%/);
    assert.equal(await page.locator(`tr[data-region-env="${REGION}"]`).innerText(), `${REGION}\tLOG_LEVEL=debug`);
    const facts = await page.locator("dl.facts").innerText();
    assert.match(facts, /Disruption budget\s+min available 1/);
    assert.match(facts, /DB_URL from secret db key url/);
    assert.ok(!(await page.locator("body").innerText()).includes(value), "no secret value in the page's text");
    assert.ok(!(await page.content()).includes(value), "no secret value in the page's HTML");
    await axe(page, "deployment page with service fields");
    await shot(page, "deployment-service");
    await page.close();
    await deployments.deleteDeployment({ id: "svc" });
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

  test("staged rollouts: waves left to right with region tiles, live; the bake's countdown; controls confirmed, an error shown; Approve by a deployer starts the waiting wave; a viewer sees no controls", async () => {
    for (const [name, tier] of [
      ["canary", "canary"],
      ["eu", "prod"],
      ["us", "prod"],
    ] as const)
      await stack.t.client(RegionService).createRegion({ region: { name, labels: { tier } } });
    /** Clicks `button` of `card`, answering its confirmation (checked against `question`) with `answer` first. */
    const confirmed = async (card: Locator, button: string, question: RegExp, answer: () => Promise<unknown> = async () => {}) => {
      card.page().once("dialog", async (dialog) => {
        assert.match(dialog.message(), question);
        await answer();
        await dialog.accept();
      });
      await card.getByRole("button", { name: button }).click();
    };
    const { token: deployerToken } = await stack.t.client(OperatorService).createOperator({ name: "dee", role: Role.DEPLOYER });
    const page = await browser.newPage();
    await signIn(page, deployerToken);
    await page.getByRole("link", { name: "Rollouts" }).click();
    await page.getByRole("heading", { level: 2, name: "Rollouts" }).waitFor();
    await stack.t.client(DeploymentService).createDeployment({
      deployment: {
        id: "staged",
        namespace: "shop",
        image: "shop:1",
        port: 8080,
        regions: ["canary", "eu", "us"].map((region) => ({ region, replicas: 2 })),
        strategy: {
          waves: [
            { name: "canary", selector: "tier=canary", bake: { seconds: 6n } },
            { name: "rest", approval: true },
          ],
        },
      },
    });
    const card = page.locator('article[data-rollout="staged-1"]');
    const tile = (card: Locator, region: string) => card.locator(`li[data-region="${region}"]`);
    // Without reload: the status stream brings the rollout.
    await card.locator(".state", { hasText: "PROGRESSING" }).waitFor({ timeout: 20_000 });
    const [first, second] = [await card.locator('li[data-wave="canary"]').boundingBox(), await card.locator('li[data-wave="rest"]').boundingBox()];
    assert.ok(first && second && first.x + first.width <= second.x && first.y === second.y, `the waves left to right: ${JSON.stringify({ first, second })}`);
    assert.match(await tile(card, "canary").innerText(), /^canary\s+(PENDING|PROGRESSING)\s+revision 1$/);
    assert.match(await tile(card, "eu").innerText(), /^eu\s+\S+\s+no revision yet$/);
    assert.match(await card.locator('li[data-wave="rest"]').innerText(), /not started, needs approval/);

    await agentsRun("staged", ["canary"]);
    await tile(card, "canary").getByText("RUNNING").waitFor();
    const countdown = card.getByRole("timer");
    const left = async () => Number(/(\d+)s left of 6s/.exec(await countdown.innerText())?.[1]);
    await countdown.waitFor();
    const calls: string[] = [];
    page.on("request", (r) => calls.push(r.url()));
    const before = await left();
    await page.waitForTimeout(2200);
    assert.ok((await left()) <= before - 2, `the countdown ticks: ${before}s left, then ${await left()}s`);
    assert.deepEqual(calls, [], "the countdown ticks in the page, without a call");
    await axe(page, "rollouts");
    await shot(page, "rollouts");

    // Someone else pauses it while the confirmation is open: the console's Pause is refused, and says why.
    await confirmed(card, "Pause", /^Pause rollout staged-1 at wave canary\?/, () => stack.t.client(RolloutService).pauseRollout({ id: "staged-1" }));
    await card
      .getByRole("alert")
      .filter({ hasText: /Pause refused: FailedPrecondition: rollout staged-1 is PAUSED/ })
      .waitFor();
    await card.locator(".state", { hasText: "PAUSED" }).waitFor();
    await confirmed(card, "Resume", /^Resume rollout staged-1 at wave canary\?/);
    await card.getByRole("status").filter({ hasText: "Resume: rollout staged-1 is PROGRESSING" }).waitFor();
    await card.getByRole("timer").waitFor();

    // The deployment page shows its newest rollout, and links to its rollouts.
    await card.getByRole("link", { name: "staged" }).click();
    const detail = page.locator('article[data-rollout="staged-1"]');
    await detail.getByRole("timer").waitFor();
    await axe(page, "deployment page with a rollout");
    await shot(page, "deployment-rollout");

    const viewer = await browser.newPage();
    await signIn(viewer, viewerToken);
    await viewer.goto(`${stack.t.url}/#/deployments/staged`);
    const watched = viewer.locator('article[data-rollout="staged-1"]');
    await watched.locator(".state", { hasText: "WAITING_APPROVAL" }).waitFor({ timeout: 20_000 });
    await detail.locator(".state", { hasText: "WAITING_APPROVAL" }).waitFor();
    assert.match(await detail.locator('li[data-wave="rest"]').innerText(), /waiting for approval/);
    assert.equal(await watched.getByRole("button").count(), 0, "a viewer sees no controls");
    assert.deepEqual(await detail.getByRole("button").allInnerTexts(), ["Approve", "Pause", "Abort"]);

    await confirmed(detail, "Approve", /^Approve wave rest of rollout staged-1\? Its regions move to revision 1\.$/);
    for (const region of ["eu", "us"]) await tile(watched, region).getByText("revision 1").waitFor();
    await agentsRun("staged", ["eu", "us"]);
    for (const p of [detail, watched]) await p.locator(".state", { hasText: "SUCCEEDED" }).waitFor();
    assert.match(await tile(watched, "us").innerText(), /^us\s+RUNNING\s+revision 1$/);
    assert.equal(await detail.getByRole("button").count(), 0, "an ended rollout has no controls");

    // A newer rollout: live at the top of the Rollouts view, the ended one listed below it; the state filter; Abort.
    await detail.page().getByRole("link", { name: "Every rollout of staged" }).click();
    await page.getByRole("heading", { level: 2, name: "Rollouts of staged" }).waitFor();
    const { deployment: staged } = await stack.t.client(DeploymentService).getDeployment({ id: "staged" });
    await stack.t.client(DeploymentService).updateDeployment({
      deployment: { ...staged!, image: "shop:2" },
      expectedRevision: 1n,
    });
    const newer = page.locator('article[data-rollout="staged-2"]');
    await newer.locator(".state", { hasText: "PROGRESSING" }).waitFor();
    assert.deepEqual(await page.locator("article[data-rollout]").evaluateAll((cards) => cards.map((c) => c.getAttribute("data-rollout"))), [
      "staged-2",
      "staged-1",
    ]);
    assert.match(
      await tile(page.locator('article[data-rollout="staged-1"]'), "eu").innerText(),
      /^eu\s+revision 1$/,
      "an older rollout's tiles show no phase: its regions moved on",
    );
    await agentsRun("staged", ["canary"]);
    await newer.getByRole("timer").waitFor();
    // (The README's picture, docs/console-rollouts.png: the window as it is.)
    await page.screenshot({ path: join(SHOTS, "rollouts-baking.png") });
    await page.getByLabel("State").selectOption("SUCCEEDED");
    await page.locator("article[data-rollout]").first().waitFor();
    assert.deepEqual(await page.locator("article[data-rollout]").evaluateAll((cards) => cards.map((c) => c.getAttribute("data-rollout"))), ["staged-1"]);
    await page.getByLabel("State").selectOption("");
    await confirmed(newer, "Abort", /^Abort rollout staged-2\? The regions it moved get their previous revision back\.$/);
    await newer.locator(".state", { hasText: "ABORTED" }).waitFor();
    await axe(page, "rollouts of a deployment");
    await viewer.close();
    await page.close();
  });

  test("analysis: each region's measurements charted over the bake against the threshold, live; a region rolled back shows the revision it runs now, never the failed one as RUNNING; the Fleet view shows region labels", async () => {
    const regions = stack.t.client(RegionService);
    await regions.createRegion({
      region: { name: "north", labels: { tier: "canary", geo: "eu" }, metrics: { prometheus: { address: "http://prometheus.north:9090" } } },
    });
    await regions.createRegion({ region: { name: "south", labels: { tier: "prod" }, metrics: { prometheus: { address: "http://prometheus.south:9090" } } } });
    const page = await browser.newPage();
    await page.setViewportSize({ width: 1100, height: 900 });
    await signIn(page, ADMIN_TOKEN);

    // The Fleet view: each region with its labels.
    await page.getByRole("link", { name: "Fleet" }).click();
    const north = page.locator("tr", { has: page.getByRole("rowheader", { name: "north", exact: true }) });
    await north.waitFor();
    assert.equal(await north.locator("td.labels").innerText(), "geo=eu tier=canary");

    // Revision 1 rolls out without analysis; revision 2 is judged by an error rate per region.
    const waves = [{ name: "canary", selector: "tier=canary", bake: { seconds: 30n } }, { name: "rest" }];
    const spec = { id: "checkout", namespace: "shop", image: "shop:1", port: 8080, regions: ["north", "south"].map((region) => ({ region, replicas: 2 })) };
    await stack.t
      .client(DeploymentService)
      .createDeployment({ deployment: { ...spec, strategy: { waves: [{ name: "canary", selector: "tier=canary" }, { name: "rest" }] } } });
    await agentsRun("checkout", ["north"]);
    await waitFor(async () => (await stack.t.client(RolloutService).getRollout({ id: "checkout-1" })).rollout!.currentWave === 1, "wave rest of checkout-1");
    await agentsRun("checkout", ["south"]);
    await waitFor(
      async () => (await stack.t.client(RolloutService).getRollout({ id: "checkout-1" })).rollout!.state === RolloutState.SUCCEEDED,
      "checkout-1 SUCCEEDED",
    );
    await stack.t.client(DeploymentService).updateDeployment({
      deployment: {
        ...spec,
        image: "shop:2",
        strategy: {
          waves,
          analysis: [
            {
              name: "error-rate",
              provider: {
                case: "prometheus",
                value: { query: 'sum(rate(http_requests_total{deployment="{{deployment}}",revision="{{revision}}",code="500"}[1m]))' },
              },
              count: 6,
              interval: { seconds: 1n },
              failureCondition: "result > 0.05",
            },
          ],
        },
      },
      expectedRevision: 1n,
    });
    await page.goto(`${stack.t.url}/#/deployments/checkout`);
    const card = page.locator('article[data-rollout="checkout-2"]');
    await agentsRun("checkout", ["north"]);
    await card.getByRole("timer").waitFor({ timeout: 20_000 });
    const task = async () => {
      for (;;) {
        const [found] = (await stack.t.client(ClusterService).reportMeasurements({ region: "north" })).tasks.filter((x) => x.deployment === "checkout");
        if (found) return found;
        await page.waitForTimeout(50);
      }
    };
    const { id, revision, startTime } = await task();
    const measure = (index: number, result: { case: "value"; value: number } | { case: "error"; value: string }) =>
      stack.t.client(ClusterService).reportMeasurements({
        region: "north",
        measurements: [{ task: id, index, revision, takenAt: { seconds: startTime!.seconds + BigInt(5 * index + 2), nanos: 0 }, result }],
      });
    const chart = card.locator('figure[data-analysis="error-rate"][data-region="north"]');
    await measure(0, { case: "value", value: 0.012 });
    await measure(1, { case: "value", value: 0.018 });
    await measure(2, { case: "error", value: "Get http://prometheus.north:9090: connection refused" });
    await measure(3, { case: "value", value: 0.021 });
    // Live: the chart grows as measurements arrive, each a point against the dashed threshold.
    await chart.locator("circle.point-successful").nth(2).waitFor();
    assert.equal(await chart.locator(".point-error").count(), 1, "the error is a mark on the time axis");
    assert.equal(await chart.locator("line.threshold").getAttribute("data-threshold"), "0.05");
    assert.match(
      (await chart.getByRole("img").getAttribute("aria-label")) ?? "",
      /^error-rate in north: RUNNING, 4 measurements, last 0\.021 SUCCESSFUL; threshold > 0\.05$/,
    );
    const thresholdY = Number(await chart.locator("line.threshold").getAttribute("y1"));
    for (const cy of await chart.locator("circle").evaluateAll((cs) => cs.map((c) => Number(c.getAttribute("cy")))))
      assert.ok(cy > thresholdY, "values under the threshold are drawn below its line");
    assert.equal(await card.locator('figure[data-region="south"]').count(), 0, "only the current wave's regions are measured");
    await axe(page, "deployment page with analyses");

    await measure(4, { case: "value", value: 0.2 });
    await card.locator(".state", { hasText: "ROLLED_BACK" }).waitFor({ timeout: 20_000 });
    await chart.locator("circle.point-failed").waitFor();
    // (The scale grew to the new value: the threshold's line is read again.)
    const rescaled = Number(await chart.locator("line.threshold").getAttribute("y1"));
    assert.ok(Number(await chart.locator("circle.point-failed").getAttribute("cy")) < rescaled, "the failing value is drawn above the threshold");
    await agentsRun("checkout", ["north"]);
    const tile = card.locator('li[data-region="north"]');
    // north got revision 1's spec back as revision 3: that is what it runs, said so, never revision 2 RUNNING.
    await tile.getByText("revision 3 RUNNING").waitFor();
    assert.match(await tile.innerText(), /^north\s+rolled back\s+revision 3 RUNNING\s+not revision 2$/);
    assert.equal(await tile.getAttribute("class"), "tile rolled-back");
    assert.match(await card.locator('li[data-region="south"]').innerText(), /^south\s+RUNNING\s+revision 1$/);
    await shot(page, "deployment-analysis");
    await axe(page, "deployment page with a rollout rolled back by its analysis");
    // (docs/console-analysis.png: the rollout card as the analysis left it.)
    await card.screenshot({ path: join(SHOTS, "rollout-analysis.png") });
    await page.close();
  });
});
