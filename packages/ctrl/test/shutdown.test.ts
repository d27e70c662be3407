// ctrl as a process on SIGTERM with work in flight: a unary call held up by the database
// completes, an open watch stream ends with UNAVAILABLE (a status, not a reset), the process
// exits 0; its JSON log lines parse, carry a level, and never contain a token. A call whose
// client left still finishes before the store closes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { sql } from "kysely";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { Store } from "@flotilla/store";
import { testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN } from "@flotilla/testkit/ctrl";
import { spawnCtrl } from "@flotilla/testkit/ctrl-process";
import { Follower } from "@flotilla/testkit/follower";

const mysql = (await testDatabases()).find((d) => d.db.name === "mysql")!;

function adminTransport(baseUrl: string) {
  return createGrpcTransport({
    baseUrl,
    interceptors: [
      (next) => (req) => {
        req.header.set("authorization", `Bearer ${ADMIN_TOKEN}`);
        return next(req);
      },
    ],
  });
}

/** Locks the region's row in a transaction of the test's own, so that ctrl's writes to the region wait; `release()` ends it. */
async function holdRegionRow(store: Store, region: string): Promise<{ release: () => void; holding: Promise<void> }> {
  const released = Promise.withResolvers<void>();
  const locked = Promise.withResolvers<void>();
  const holding = store.database.db.transaction().execute(async (tx) => {
    await sql`select id from regions where name = ${region} for update`.execute(tx);
    locked.resolve();
    await released.promise;
  });
  await locked.promise;
  return { release: () => released.resolve(), holding };
}

test("SIGTERM: the unary call in flight completes, the watch ends with UNAVAILABLE, exit 0; JSON logs without tokens (mysql)", {
  skip: mysql.skip,
}, async () => {
  const { url, drop } = await mysql.db.create();
  const store = await Store.open(url);
  try {
    await store.regions.create("s");
    const child = await spawnCtrl(url, ADMIN_TOKEN, ["--log-format", "json", "--log-level", "debug"]);
    try {
      const transport = adminTransport(child.url);
      const { token: agentToken } = await createClient(RegionService, transport).createAgentToken({ region: "s" });
      const follower = new Follower(createClient(ClusterService, transport), "s");
      await follower.snapshot();
      follower.watch();
      // Hold the region's row: the write below waits for it inside ctrl.
      const { release, holding } = await holdRegionRow(store, "s");
      const write = createClient(DeploymentService, transport).createDeployment({
        deployment: { id: "late", namespace: "x", image: "x:1", regions: [{ region: "s", replicas: 1 }] },
      });
      await sleep(300);
      const exited = child.kill("SIGTERM");
      await sleep(300);
      release();
      await holding;
      const written = await write;
      assert.ok(written.deployment, "the call in flight completed");
      assert.equal(await exited, 0, child.log());
      assert.equal(ConnectError.from(follower.error).code, Code.Unavailable, String(follower.error));
      assert.ok(await store.deployments.get("late"), "and its write is in the database");

      const lines = child
        .log()
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      for (const line of lines) assert.ok(["debug", "info", "warn", "error"].includes(line.level as string), JSON.stringify(line));
      assert.ok(
        lines.some(
          (line) =>
            line.level === "info" &&
            line.msg === "ctrl.v1.DeploymentService/CreateDeployment" &&
            line.code === "ok" &&
            line.resource === "late" &&
            typeof line.version === "number",
        ),
        child.log(),
      );
      assert.ok(
        lines.some((line) => line.msg === "ctrl.v1.RegionService/CreateAgentToken" && line.region === "s"),
        child.log(),
      );
      assert.equal(lines.at(-1)!.msg, "stopped");
      assert.ok(!child.log().includes(ADMIN_TOKEN) && !child.log().includes(agentToken), "no token in the log");
    } finally {
      await child.kill("SIGKILL");
    }
  } finally {
    await store.close();
    await drop();
  }
});

test("SIGTERM: a unary call whose client left is still finished before the store closes (mysql)", { skip: mysql.skip }, async () => {
  const { url, drop } = await mysql.db.create();
  const store = await Store.open(url);
  try {
    await store.regions.create("s");
    const child = await spawnCtrl(url, ADMIN_TOKEN, ["--log-format", "json"]);
    try {
      const transport = adminTransport(child.url);
      const { release, holding } = await holdRegionRow(store, "s");
      const leaving = new AbortController();
      const write = createClient(DeploymentService, transport).createDeployment(
        { deployment: { id: "abandoned", namespace: "x", image: "x:1", regions: [{ region: "s", replicas: 1 }] } },
        { signal: leaving.signal },
      );
      await sleep(300);
      leaving.abort();
      await assert.rejects(write, (error) => ConnectError.from(error).code === Code.Canceled);
      const exited = child.kill("SIGTERM");
      await sleep(300);
      release();
      await holding;
      assert.equal(await exited, 0, child.log());
      assert.ok(await store.deployments.get("abandoned"), "the handler finished its write before ctrl closed the store");
      const errors = child
        .log()
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .filter((line) => line.level === "error");
      assert.deepEqual(errors, [], "no query ran into a closed store");
    } finally {
      await child.kill("SIGKILL");
    }
  } finally {
    await store.close();
    await drop();
  }
});
