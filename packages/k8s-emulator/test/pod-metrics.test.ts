// The pods' traffic metrics (/_emulator/metrics): a ready pod's http_requests_total rises
// steadily with its revision label; a pod of an erroring image is ready all the same and answers
// one request in five with 500; --erroring-image-pattern moves that line.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";
import { deployment, startCluster, waitFor, type Cluster } from "@flotilla/testkit/emulator";

const MAIN = fileURLToPath(new URL("../src/main.ts", import.meta.url));

/** Samples of http_requests_total by their label set (as written). */
function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    const m = /^http_requests_total\{(.*)\} (\d+)$/.exec(line);
    if (m) out.set(m[1]!, Number(m[2]));
  }
  return out;
}

const sum = (s: Map<string, number>, code: string) => [...s].filter(([labels]) => labels.endsWith(`code="${code}"`)).reduce((a, [, v]) => a + v, 0);

function withRevision(name: string, image: string, revision: string) {
  const d: any = deployment(name, { replicas: 2, image });
  d.spec.template.metadata.labels["flotilla.dev/revision"] = revision;
  return d;
}

describe("pod metrics", () => {
  let c: Cluster;
  before(async () => {
    c = await startCluster({ rolloutDelayMs: 50 });
  });
  after(() => c.emu.stop());

  const scrape = async () => {
    const res = await fetch(`${c.emu.url}/_emulator/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
    return res.text();
  };

  it("counts a ready pod's requests, rising, with namespace, deployment, pod and revision; an erroring image answers 20% with 500", async () => {
    await c.apply(withRevision("good", "nginx:1.27", "3"));
    await c.apply(withRevision("bad", "nginx:err", "4"));
    await waitFor(() => (c.emu.get("apps/v1", "Deployment", "default", "bad") as any)?.status?.readyReplicas === 2, 5000, "the erroring pods ready");
    await waitFor(() => (c.emu.get("apps/v1", "Deployment", "default", "good") as any)?.status?.readyReplicas === 2, 5000, "the good pods ready");
    await new Promise((r) => setTimeout(r, 2100));
    const first = samples(await scrape());
    const good = new Map([...first].filter(([l]) => l.includes('deployment="good"')));
    const bad = new Map([...first].filter(([l]) => l.includes('deployment="bad"')));
    assert.equal(good.size, 4, "two pods, codes 200 and 500 each");
    for (const labels of good.keys())
      assert.match(labels, /^namespace="default",deployment="good",pod="good-[a-z0-9]+-[a-z0-9]+",revision="3",code="(200|500)"$/);
    assert.equal(sum(good, "500"), 0, "a healthy pod answers no 500");
    assert.ok(sum(good, "200") >= 2 * 10, `about 10 requests a second per pod: ${sum(good, "200")}`);
    const badTotal = sum(bad, "200") + sum(bad, "500");
    assert.ok(badTotal >= 20);
    assert.ok(Math.abs(sum(bad, "500") / badTotal - 0.2) < 0.05, `one in five is a 500: ${sum(bad, "500")}/${badTotal}`);
    for (const labels of bad.keys()) assert.match(labels, /revision="4"/);

    await new Promise((r) => setTimeout(r, 1100));
    const second = samples(await scrape());
    for (const [labels, value] of first) if (labels.endsWith('code="200"')) assert.ok(second.get(labels)! > value, `${labels} rose`);
  });

  it("leaves out pods that are not ready (a failing image)", async () => {
    await c.apply(withRevision("never", "nginx:fail", "1"));
    await new Promise((r) => setTimeout(r, 300));
    assert.doesNotMatch(await scrape(), /deployment="never"/);
  });
});

describe("--erroring-image-pattern", () => {
  it("takes a regexp (flag or FLOTILLA_EMULATOR_ERRORING_IMAGE_PATTERN): its pods answer with 500, others do not", async () => {
    const child = spawn(process.execPath, [MAIN, "--listen", "127.0.0.1:0", "--rollout-delay-ms", "20"], {
      env: { ...process.env, FLOTILLA_EMULATOR_ERRORING_IMAGE_PATTERN: "canary-bug" },
      stdio: ["ignore", "pipe", "inherit"],
    });
    try {
      let out = "";
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => (out += chunk));
      const url = await waitFor(() => /listening on (\S+)/.exec(out)?.[1], 20_000, "the emulator listening");
      for (const [name, image] of [
        ["bugged", "app:canary-bug"],
        ["err", "app:err"],
      ]) {
        const res = await fetch(`${url}/apis/apps/v1/namespaces/default/deployments`, {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify(withRevision(name!, image!, "1")),
        });
        assert.equal(res.status, 201);
      }
      let text = "";
      for (const deadline = Date.now() + 10_000; ; ) {
        text = await (await fetch(`${url}/_emulator/metrics`)).text();
        const s = samples(text);
        if (sum(new Map([...s].filter(([l]) => l.includes('deployment="bugged"'))), "500") > 0 && s.size === 8) break;
        assert.ok(Date.now() < deadline, "timed out waiting for 500s of the pattern's pods");
        await new Promise((r) => setTimeout(r, 100));
      }
      const s = samples(text);
      assert.equal(sum(new Map([...s].filter(([l]) => l.includes('deployment="err"'))), "500"), 0, "the default pattern no longer applies");
    } finally {
      child.kill("SIGTERM");
      await once(child, "exit");
    }
  });
});
