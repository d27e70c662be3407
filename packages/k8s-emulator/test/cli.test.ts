// The emulator as a process, as the local stack runs it: a bound given as a flag or as its
// environment variable takes effect, and a malformed one is refused before anything listens.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { describe, it } from "node:test";
import { waitFor } from "@flotilla/testkit/emulator";

const MAIN = fileURLToPath(new URL("../src/main.ts", import.meta.url));

/** Starts the emulator with `args` and `env`; resolves with its URL once it listens. */
async function start(args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [MAIN, "--listen", "127.0.0.1:0", ...args], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (out += chunk));
  const url = await waitFor(() => /listening on (\S+)/.exec(out)?.[1], 20_000, "the emulator listening");
  return {
    url,
    async stop() {
      child.kill("SIGTERM");
      await once(child, "exit");
    },
  };
}

async function eventsAfterRollout(url: string): Promise<number> {
  const body = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "web" },
    spec: {
      replicas: 3,
      selector: { matchLabels: { app: "web" } },
      template: { metadata: { labels: { app: "web" } }, spec: { containers: [{ name: "app", image: "app:1" }] } },
    },
  };
  const created = await fetch(`${url}/apis/apps/v1/namespaces/default/deployments`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  assert.equal(created.status, 201);
  // Three pods created, scheduled and started make nine Events, more than either bound.
  for (const deadline = Date.now() + 10_000; ; ) {
    const d = (await (await fetch(`${url}/apis/apps/v1/namespaces/default/deployments/web`)).json()) as { status?: { readyReplicas?: number } };
    if (d.status?.readyReplicas === 3) break;
    assert.ok(Date.now() < deadline, "timed out waiting for the rollout");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const events = (await (await fetch(`${url}/api/v1/namespaces/default/events`)).json()) as { items: unknown[] };
  return events.items.length;
}

describe("the emulator's command line", () => {
  it("--event-limit (and FLOTILLA_EMULATOR_EVENT_LIMIT) bounds the Events a rollout leaves", async () => {
    for (const [args, env, limit] of [
      [["--event-limit", "2", "--rollout-delay-ms", "20"], {}, 2],
      [["--rollout-delay-ms", "20"], { FLOTILLA_EMULATOR_EVENT_LIMIT: "0" }, 0],
    ] as const) {
      const emulator = await start([...args], env);
      try {
        assert.equal(await eventsAfterRollout(emulator.url), limit);
      } finally {
        await emulator.stop();
      }
    }
  });

  it("refuses a malformed --event-limit with its name, and exits 2", () => {
    const r = spawnSync(process.execPath, [MAIN, "--listen", "127.0.0.1:0", "--event-limit", "many"], { encoding: "utf8", timeout: 20_000 });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /--event-limit must be a non-negative integer, got "many"/);
  });
});
