// The agent over mTLS: it syncs from a ctrl that requires client certificates, with its
// region's certificate; rotated certificate files are used by its next connection.
import { after, before, test } from "node:test";
import { createLogger } from "@flotilla/runtime";
import assert from "node:assert/strict";
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { initPki, issueAgent } from "@flotilla/ctrl/pki";
import { startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";
import { testDatabases } from "@flotilla/testkit/databases";
import { startAgent, type Agent } from "../src/agent.ts";
import { RenderTarget } from "../src/targets/render.ts";
import { REGION, OTHER_REGION, waitFor } from "@flotilla/testkit/stack";

const [{ db: sqlite }] = await testDatabases();

let dir: string;
let t: TestCtrl;
let agent: Agent | undefined;
let pki: ReturnType<typeof initPki>;
const logs: string[] = [];

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "flotilla-agent-mtls-"));
  pki = initPki(join(dir, "pki"));
  t = await startTestCtrl(sqlite, { pollIntervalMs: 50, tls: { certFile: pki.serverCert, keyFile: pki.serverKey, clientCaFile: pki.caCert } });
  await t.store.regions.create(REGION);
  await t.store.regions.create(OTHER_REGION);
});
after(async () => {
  await agent?.stop();
  await t.close();
  rmSync(dir, { recursive: true, force: true });
});

test("an agent holding another region's certificate is refused until its files are rotated to its own; then it syncs and applies", async () => {
  const wrong = issueAgent(join(dir, "pki"), OTHER_REGION);
  const right = issueAgent(join(dir, "pki"), REGION);
  // The files the agent is pointed at, first holding the wrong region's pair.
  const files = { caFile: pki.caCert, certFile: join(dir, "agent.pem"), keyFile: join(dir, "agent.key") };
  copyFileSync(wrong.cert, files.certFile);
  copyFileSync(wrong.key, files.keyFile);
  const { token } = await t.store.agentTokens.create(REGION);
  const renderDir = join(dir, "render");
  agent = await startAgent({
    ctrlUrl: t.url,
    region: REGION,
    token,
    tls: files,
    target: new RenderTarget({ dir: renderDir, region: REGION }),
    reconnectBackoff: { minMs: 50, maxMs: 200 },
    log: createLogger({ write: (line) => logs.push(line) }),
  });
  await waitFor(
    () => logs.some((m) => /permission_denied|certificate is for region/i.test(m)),
    "the wrong-region refusal",
    20_000,
    () => logs,
  );
  let ready = false;
  void agent.ready.then(() => (ready = true));
  assert.equal(ready, false);

  copyFileSync(right.key, files.keyFile);
  copyFileSync(right.cert, files.certFile);
  await agent.ready;
  assert.ok(
    logs.some((m) => /TLS files changed/.test(m)),
    logs.join("\n"),
  );

  const deployments = t.client(DeploymentService, { ca: readFileSync(pki.caCert) });
  await deployments.createDeployment({
    deployment: { id: "web", namespace: "demo", image: "nginx:1.27", port: 80, regions: [{ region: REGION, replicas: 1 }] },
  });
  await waitFor(() => existsSync(join(renderDir, "demo")), "the rendered deployment");
});

test("TLS files need an https ctrl URL", async () => {
  await assert.rejects(
    startAgent({ ctrlUrl: "http://127.0.0.1:1", region: REGION, token: "x", tls: { caFile: pki.caCert }, target: new RenderTarget({ dir, region: REGION }) }),
    /https/,
  );
});
