// A deposed leader sends no write, with real processes: two agents electing a leader on a
// Lease, each with credentials of its own so that the emulator's request log names who sent
// what. Each round, GETs are slowed, a change arrives, and the leader is paused (SIGSTOP) while
// its reconcile waits on a GET; the standby takes the Lease and applies; the old leader is
// resumed (SIGCONT). The request log must show no write of the old leader after the Lease moved.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { leaderElectingAgentArgs, spawnAgent, type AgentProcess } from "@flotilla/testkit/agent-process";
import { testDatabases } from "@flotilla/testkit/databases";
import { serviceAccountToken } from "@flotilla/testkit/emulator";
import { BOOKMARK_MS, deploymentOf, imageOf, REGION, serviceOf, startStack, waitFor, type Stack } from "@flotilla/testkit/stack";

const LEASE_SECONDS = 4;
const STATUS = `leader_election_master_status{name="flotilla-agent-${REGION}"}`;
const NAMESPACE = "fenced";
const GET_DELAY_MS = 2000;
const ROUNDS = 4;
const WRITES = new Set(["create", "apply", "update", "patch", "delete"]);

const [sqlite] = await testDatabases();

describe("a deposed leader writes nothing (processes, GETs delayed)", () => {
  let stack: Stack;
  let dir: string;
  const agents: { process: AgentProcess; user: string }[] = [];

  before(async () => {
    stack = await startStack(sqlite!.db);
    dir = await mkdtemp(join(tmpdir(), "flotilla-fence-"));
    for (const name of ["agent-a", "agent-b"]) {
      const { token, user } = await serviceAccountToken(stack.emulator, name);
      const kubeconfig = join(dir, `${name}.kubeconfig`);
      await writeFile(kubeconfig, stack.emulator.kubeconfigYaml(token));
      const process = await spawnAgent(stack.token, leaderElectingAgentArgs(stack.t.url, REGION, kubeconfig, LEASE_SECONDS, BOOKMARK_MS));
      agents.push({ process, user });
    }
  });
  after(async () => {
    for (const { process } of agents) {
      process.signal("SIGCONT");
      await process.kill("SIGKILL");
    }
    await stack?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const leading = async (agent: (typeof agents)[number]) => (await agent.process.metric(STATUS)) === 1;

  test(`${ROUNDS} rounds of a leader paused mid-reconcile past its lease and resumed: no write of it after the Lease moved`, async () => {
    const deployments = stack.t.client(DeploymentService);
    // A port: each reconcile writes a Deployment and a Service, and a port of 0 deletes the Service.
    const app = (round: number) => ({
      id: "web",
      namespace: NAMESPACE,
      image: `app:${round}`,
      port: round % 2 === 0 ? 80 : 0,
      regions: [{ region: REGION, replicas: 1 }],
    });
    await deployments.createDeployment({ deployment: app(0) });
    await waitFor(() => imageOf(deploymentOf(stack.emulator, NAMESPACE, "web")) === "app:0", "app:0 applied");

    for (let round = 1; round <= ROUNDS; round++) {
      await waitFor(async () => (await Promise.all(agents.map(leading))).filter(Boolean).length === 1, "one leader");
      const [leader, standby] = (await leading(agents[0]!)) ? [agents[0]!, agents[1]!] : [agents[1]!, agents[0]!];
      const roundStart = new Date().toISOString();
      // Reads of what it applies are slow; the Lease is not (its renewals stay in time).
      stack.emulator.faults.configure({ latency: ["deployments", "services"].map((resource) => ({ verb: "get", ms: GET_DELAY_MS, resource })) }, true);
      await deployments.updateDeployment({ deployment: app(round) });
      await sleep(400); // the leader's reconcile now waits on its GET
      leader.process.signal("SIGSTOP");
      await waitFor(() => leading(standby), "the standby takes the Lease", (LEASE_SECONDS + 5) * 1000);
      await waitFor(
        () =>
          imageOf(deploymentOf(stack.emulator, NAMESPACE, "web")) === `app:${round}` &&
          (serviceOf(stack.emulator, NAMESPACE, "web") !== undefined) === (round % 2 === 0),
        `app:${round} applied by the new leader`,
        30_000,
      );
      leader.process.signal("SIGCONT");
      await waitFor(async () => (await leader.process.metric(STATUS)) === 0, "the old leader stands by");
      // Whatever it still had in flight answers or is dropped meanwhile.
      await sleep(GET_DELAY_MS + 1000);
      stack.emulator.faults.configure({}, true);

      const log = stack.emulator.requestLog.filter((entry) => entry.time >= roundStart);
      const moved = log.find((entry) => entry.user === standby.user && entry.resource === "leases" && WRITES.has(entry.verb ?? "") && entry.status < 300);
      assert.ok(moved, `round ${round}: the standby's acquisition of the Lease is in the log`);
      const late = log.filter((entry) => entry.user === leader.user && entry.resource !== "leases" && WRITES.has(entry.verb ?? "") && entry.time >= moved.time);
      assert.deepEqual(
        late.map((entry) => `${entry.time} ${entry.verb} ${entry.path} → ${entry.status}`),
        [],
        `round ${round}: writes of the deposed leader after the Lease moved at ${moved.time}`,
      );
      assert.ok(
        log.some((entry) => entry.user === leader.user && entry.verb === "get" && entry.time < moved.time),
        `round ${round}: the old leader was reading when it was paused`,
      );
    }
    // Converged on the last state, with the last round's Service.
    assert.equal(imageOf(deploymentOf(stack.emulator, NAMESPACE, "web")), `app:${ROUNDS}`);
  });
});
