// Agent high availability with real processes: three agents of one region against one ctrl and
// one emulator, electing a leader on a Lease (short timings). Exactly one applies; kill -9 of it
// hands over within the lease duration + 5 s; a leader paused (SIGSTOP) while a report of it is
// in flight is replaced, its late report is fenced by ctrl and, resumed (SIGCONT), it steps
// down; a graceful SIGTERM releases the Lease so a standby takes over at once.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { leaderElectingAgentArgs, spawnAgent, type AgentProcess } from "@flotilla/testkit/agent-process";
import { testDatabases } from "@flotilla/testkit/databases";
import { BOOKMARK_MS, deploymentOf, imageOf, REGION, startStack, waitFor, type Stack } from "@flotilla/testkit/stack";
import { startTcpProxy, type TcpProxy } from "@flotilla/testkit/tcp-proxy";

const LEASE_SECONDS = 4;
const LEASE = `flotilla-agent-${REGION}`;
const STATUS = `leader_election_master_status{name="${LEASE}"}`;
const NAMESPACE = "ha";

const [sqlite] = await testDatabases();

describe("agent leader election (processes)", () => {
  let stack: Stack;
  let dir: string;
  /** Each agent reaches ctrl through a proxy of its own, so one agent's calls can be held. */
  const agents: { process: AgentProcess; proxy: TcpProxy; identity: () => string | undefined }[] = [];
  const app = (image: string) => ({ id: "web", namespace: NAMESPACE, image, port: 0, regions: [{ region: REGION, replicas: 1 }] });

  before(async () => {
    stack = await startStack(sqlite!.db);
    dir = await mkdtemp(join(tmpdir(), "flotilla-ha-"));
    const kubeconfig = join(dir, "kubeconfig");
    await writeFile(kubeconfig, stack.emulator.kubeconfigYaml());
    const ctrlPort = Number(new URL(stack.t.url).port);
    for (let i = 0; i < 3; i++) {
      const proxy = await startTcpProxy("127.0.0.1", ctrlPort);
      const process = await spawnAgent(stack.token, leaderElectingAgentArgs(`http://127.0.0.1:${proxy.port}`, REGION, kubeconfig, LEASE_SECONDS, BOOKMARK_MS));
      const identity = () => /leader election: (\S+) became leader/.exec(process.log())?.[1];
      agents.push({ process, proxy, identity });
    }
  });
  after(async () => {
    for (const { process, proxy } of agents) {
      process.signal("SIGCONT");
      await process.kill("SIGKILL");
      await proxy.close();
    }
    await stack?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const deployments = () => stack.t.client(DeploymentService);
  const alive = () => agents.filter((a) => a.process.child.exitCode === null && a.process.child.signalCode === null);
  const statuses = () => Promise.all(alive().map(async (a) => ({ agent: a, status: await a.process.metric(STATUS) })));
  /** The one agent that reports itself leader while every other live one reports standby. */
  const soleLeader = async (among = alive()) => {
    const all = (await statuses()).filter((s) => among.includes(s.agent));
    const leaders = all.filter((s) => s.status === 1);
    return leaders.length === 1 && all.every((s) => s.status === 1 || s.status === 0) ? leaders[0]!.agent : undefined;
  };
  const applies = (a: (typeof agents)[number]) =>
    a.process.metric('flotilla_agent_reconcile_total{type="deployment",op="apply",result="success"}').then((v) => v ?? 0);
  const storedImage = async () => {
    const region = await stack.t.store.regions.resolve(REGION);
    const loaded = await stack.t.store.observations.load(region.id, [{ type: ResourceType.DEPLOYMENT, id: "web" }]);
    return loaded.get(`${ResourceType.DEPLOYMENT}/web`)?.stored?.observation.observedImage;
  };
  const storedLeader = async () => {
    const row = await stack.t.store.database.db.selectFrom("leader_epochs").selectAll().executeTakeFirst();
    return row && { epoch: Number(row.epoch), holder: row.holder_identity };
  };
  const fenced = async () => (await stack.t.ctrl.metrics.reportsFenced.get()).values.reduce((sum, v) => sum + v.value, 0);
  const appliedImage = () => imageOf(deploymentOf(stack.emulator, NAMESPACE, "web"));

  test("exactly one of three agents leads and applies; the others stand by, ready", async () => {
    const leader = await waitFor(() => soleLeader(), "one leader, two standbys");
    await deployments().createDeployment({ deployment: app("app:1") });
    await waitFor(() => appliedImage() === "app:1", "app:1 applied");
    await waitFor(async () => (await storedImage()) === "app:1", "app:1 reported");
    for (const a of agents) {
      assert.equal(await applies(a), a === leader ? 1 : 0, "only the leader applies");
      // A standby is ready once its own first sync and watch are up, which may follow the leader's apply.
      await waitFor(async () => (await fetch(`${a.process.url}/readyz`)).status === 200, "standbys are ready too");
    }
    assert.deepEqual(await storedLeader(), { epoch: 0, holder: leader.identity() });
    // What the console's fleet view and `flotilla get regions` show.
    const { region } = await stack.t.client(RegionService).getRegion({ name: REGION });
    assert.equal(region?.agent?.leaderIdentity, leader.identity());
    assert.ok(region?.agent?.leaderSince, "since when it leads");
  });

  test("kill -9 of the leader: a standby applies the next change within the lease duration + 5 s", async () => {
    const old = (await soleLeader())!;
    await old.process.kill("SIGKILL");
    const killedAt = performance.now();
    await deployments().updateDeployment({ deployment: app("app:2") });
    await waitFor(() => appliedImage() === "app:2", "app:2 applied by a new leader", (LEASE_SECONDS + 5) * 1000);
    const took = performance.now() - killedAt;
    assert.ok(took < (LEASE_SECONDS + 5) * 1000, `took ${Math.round(took)} ms`);
    const leader = await waitFor(() => soleLeader(), "one leader of the two left");
    // Counted when its run ends, after the Deployment's write (the run then checks the absent objects).
    await waitFor(async () => (await applies(leader)) >= 1, "the new leader's apply counted");
    assert.equal(await applies(leader), 1);
    await waitFor(async () => (await storedImage()) === "app:2", "app:2 reported");
    assert.deepEqual(await storedLeader(), { epoch: 1, holder: leader.identity() });
    assert.match(leader.process.log(), /became leader of lease default\/flotilla-agent-east \(epoch 1\)/);
  });

  test("a leader paused mid-report is replaced; its late report is fenced, and resumed it steps down", async () => {
    const paused = (await soleLeader())!;
    const other = alive().find((a) => a !== paused)!;
    // Its next report stays in flight: sent, not yet arrived.
    paused.proxy.hold();
    await new Promise((resolve) => setTimeout(resolve, 500));
    paused.process.signal("SIGSTOP");
    await waitFor(async () => (await other.process.metric(STATUS)) === 1, "the standby takes over", (LEASE_SECONDS + 5) * 1000);
    await deployments().updateDeployment({ deployment: app("app:3") });
    await waitFor(() => appliedImage() === "app:3", "app:3 applied by the new leader");
    await waitFor(async () => (await storedImage()) === "app:3", "app:3 reported by the new leader");
    const newLeader = { epoch: 2, holder: other.identity() };
    assert.deepEqual(await storedLeader(), newLeader);

    const fencedBefore = await fenced();
    paused.proxy.release(); // the old leader's report (app:2, epoch 1) arrives now
    await waitFor(async () => (await fenced()) > fencedBefore, "ctrl fences the late report");
    assert.equal(await storedImage(), "app:3", "the newer observation stays");

    paused.process.signal("SIGCONT");
    await waitFor(async () => (await paused.process.metric(STATUS)) === 0, "the old leader steps down");
    assert.match(paused.process.log(), /stopped leading lease default\/flotilla-agent-east \(epoch 1\)/);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    assert.equal(await storedImage(), "app:3");
    assert.deepEqual(await storedLeader(), newLeader);
    assert.equal(await applies(paused), 1, "nothing applied after resuming");
    assert.equal(await soleLeader(), other);
  });

  test("SIGTERM of the leader releases the Lease: the standby takes over well before the lease duration", async () => {
    const leader = (await soleLeader())!;
    const standby = alive().find((a) => a !== leader)!;
    assert.equal(await leader.process.kill("SIGTERM"), 0);
    const stoppedAt = performance.now();
    assert.match(leader.process.log(), /released lease default\/flotilla-agent-east/);
    await waitFor(async () => (await standby.process.metric(STATUS)) === 1, "the standby leads");
    const took = performance.now() - stoppedAt;
    assert.ok(took < LEASE_SECONDS * 1000, `took over ${Math.round(took)} ms after the release`);
    await deployments().updateDeployment({ deployment: app("app:4") });
    await waitFor(() => appliedImage() === "app:4", "app:4 applied");
    await waitFor(async () => (await storedImage()) === "app:4", "app:4 reported");
    assert.deepEqual(await storedLeader(), { epoch: 3, holder: standby.identity() });
    assert.equal(await standby.process.metric(`flotilla_agent_leader_transitions_total{name="${LEASE}",to="leader"}`), 2, "led before the pause, then again");
  });
});
