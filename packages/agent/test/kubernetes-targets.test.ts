// The agent's Kubernetes-facing behaviour, written once and run on both targets: the emulator
// and flotilla-kube (a real kube-apiserver, controller manager, scheduler and kwok). On both the
// agent runs under the ServiceAccount and RBAC of deploy/kubernetes, never as an admin; the test
// acts as a person with the admin kubeconfig and reads only what the API serves, so the same
// assertions hold on each. In CI (CI=true) the real target never skips.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { ResourceType, RolloutFailurePolicy, RolloutState, type Rollout } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { RolloutService } from "@flotilla/proto/ctrl/v1/rollout_pb.js";
import { KubernetesEmulator } from "@flotilla/k8s-emulator";
import { silentLogger, startAgent } from "@flotilla/agent";
import { KubeClient, KubernetesTarget, kubeconfigConnectionFromString, resourcePath, statusCodeOf, type ApiObject } from "@flotilla/agent/kubernetes";
import { testSecretKeyRing } from "@flotilla/testkit/ctrl";
import { testDatabases } from "@flotilla/testkit/databases";
import { kubeTargets, AGENT_SERVICE_ACCOUNT, type KubeCluster } from "@flotilla/testkit/kube-target";
import { BOOKMARK_MS, OTHER_REGION, REGION, startTargetStack, waitFor, waitForPhase, type TargetStack } from "@flotilla/testkit/stack";
import type { Agent } from "../src/agent.ts";

const [sqlite] = await testDatabases();
const OVERLAYS = fileURLToPath(new URL("../../../deploy/kubernetes/overlays", import.meta.url));

/** An object as the API serves it, loosely typed for assertions. */
interface Live {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    generation?: number;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    managedFields?: { manager?: string; operation?: string; fieldsV1?: unknown }[];
  };
  spec?: Record<string, any>;
  status?: Record<string, any>;
  data?: Record<string, string>;
}
type Manifest = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string> } };

const app = (id: string, namespace: string, image = "app:1", fields: object = {}, placement: object = {}) => ({
  id,
  namespace,
  image,
  port: 80,
  cpuMillicores: 100,
  regions: [{ region: REGION, replicas: 2, ...placement }],
  ...fields,
});

const imageOf = (d: Live | undefined): string | undefined => d?.spec?.template?.spec?.containers?.[0]?.image;
const managers = (o: Live | undefined) => (o?.metadata.managedFields ?? []).map((e) => `${e.manager}/${e.operation}`);
const ownsField = (o: Live | undefined, manager: string, field: string) =>
  (o?.metadata.managedFields ?? []).some((e) => e.manager === manager && JSON.stringify(e.fieldsV1).includes(`"f:${field}"`));

for (const target of kubeTargets) {
  describe(`the agent on Kubernetes: ${target.name}`, { skip: target.skip }, () => {
    let cluster: KubeCluster;
    let stack: TargetStack;
    let agent: Agent;
    before(
      async () => {
        cluster = await target.start();
        // ctrl lets kube-system through, so that the agent's own namespace guard is what refuses it.
        stack = await startTargetStack(sqlite!.db, cluster, { allowedSystemNamespaces: ["kube-system"] }, { secrets: testSecretKeyRing() });
        agent = await stack.agent({ ownershipRecheckMs: 500 });
        await agent.ready;
      },
      { timeout: 240_000 },
    );
    after(async () => {
      await stack?.close();
      await cluster?.stop();
    });

    const deployments = () => stack.t.client(DeploymentService);
    const get = (apiVersion: string, kind: string, namespace: string, name: string) =>
      cluster.get(apiVersion, kind, namespace, name) as Promise<unknown> as Promise<Live | undefined>;
    const deploymentIn = (namespace: string, name: string) => get("apps/v1", "Deployment", namespace, name);
    const asPerson = (manager: string, force: boolean, object: Manifest & Record<string, unknown>) =>
      cluster.admin.apply(resourcePathOf(object), object as ApiObject, { fieldManager: manager, force });

    test("apply and re-apply: our marks, the agent's field manager, a new image rolls out to RUNNING", async () => {
      await deployments().createDeployment({ deployment: app("web", "t-apply") });
      await waitForPhase(stack, "web", "RUNNING", /^2\/2 replicas ready$/, [], 60_000);
      const live = (await deploymentIn("t-apply", "web"))!;
      assert.equal(live.metadata.labels?.["app.kubernetes.io/managed-by"], "flotilla");
      assert.equal(live.metadata.labels?.["flotilla.dev/region"], REGION);
      assert.ok(live.metadata.annotations?.["flotilla.dev/desired-version"], "the desired version it was applied from");
      assert.ok(managers(live).includes("flotilla-agent/Apply"), `managers: ${managers(live)}`);
      const service = await get("v1", "Service", "t-apply", "web");
      assert.equal(service?.spec?.ports?.[0]?.port, 80);
      const namespace = await get("v1", "Namespace", "", "t-apply");
      assert.equal(namespace?.metadata.labels?.["app.kubernetes.io/managed-by"], "flotilla", "the namespace it created carries our marks");

      await deployments().updateDeployment({ deployment: app("web", "t-apply", "app:2") });
      await waitFor(async () => imageOf(await deploymentIn("t-apply", "web")) === "app:2", "the new image applied", 30_000);
      await waitForPhase(stack, "web", "RUNNING", /^2\/2 replicas ready$/, [], 60_000);
      const updated = (await deploymentIn("t-apply", "web"))!;
      assert.ok(Number(updated.metadata.generation) > Number(live.metadata.generation), "the spec changed: a new generation");
      assert.equal(updated.status?.observedGeneration, updated.metadata.generation);
      assert.equal(updated.status?.updatedReplicas, 2);
    });

    test("server-side apply: another manager's apply of our field conflicts without force; forced, the agent takes it back", async () => {
      const edit = {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "web", namespace: "t-apply" },
        spec: { replicas: 5, template: { spec: { containers: [{ name: "app", image: "hacked:1" }] } } },
      };
      const conflict = await asPerson("someone-else", false, edit).then(
        () => undefined,
        (err) => err,
      );
      assert.equal(statusCodeOf(conflict), 409, String(conflict));
      assert.match(String(conflict), /conflict.*flotilla-agent/i);
      await asPerson("someone-else", true, edit);
      await waitFor(
        async () => {
          const live = await deploymentIn("t-apply", "web");
          return imageOf(live) === "app:2" && live?.spec?.replicas === 2;
        },
        "image and replicas restored",
        30_000,
      );
      assert.ok(ownsField(await deploymentIn("t-apply", "web"), "flotilla-agent", "replicas"), "spec.replicas is the agent's again");
    });

    test("drift undone: a deleted Deployment is recreated; a scale through the scale subresource is restored", async () => {
      const uid = (await deploymentIn("t-apply", "web"))!.metadata.uid;
      await cluster.admin.delete(resourcePathOf({ apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "web", namespace: "t-apply" } }));
      await waitFor(async () => ((await deploymentIn("t-apply", "web"))?.metadata.uid ?? uid) !== uid, "recreated with a new uid", 30_000);
      // kubectl scale patches the scale subresource.
      await cluster.kubectl(["scale", "deployment/web", "-n", "t-apply", "--replicas=4"]);
      await waitFor(async () => (await deploymentIn("t-apply", "web"))?.spec?.replicas === 2, "replicas restored", 30_000);
    });

    test("a foreign object of the name is refused, never written; prune removes ours and leaves it", async () => {
      // A namespace an operator made and handed over to flotilla by its label (the admission
      // policy of deploy/kubernetes lets the agent write only in such namespaces).
      const handedOver = { "app.kubernetes.io/managed-by": "flotilla" };
      await cluster.admin.create("/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "t-owned", labels: handedOver } } as ApiObject);
      const foreign = {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "theirs", namespace: "t-owned", labels: { app: "theirs" } },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: "theirs" } },
          template: { metadata: { labels: { app: "theirs" } }, spec: { containers: [{ name: "app", image: "theirs:1" }] } },
        },
      };
      await cluster.admin.create("/apis/apps/v1/namespaces/t-owned/deployments", foreign as ApiObject);
      /** What a write by the agent would change: the spec (generation), labels, appliers (controllers' status updates aside). */
      const theirs = async () => {
        const live = (await deploymentIn("t-owned", "theirs"))!;
        return JSON.stringify([live.metadata.generation, live.metadata.labels, live.spec, managers(live).filter((m) => m.endsWith("/Apply"))]);
      };
      const before = await theirs();
      await deployments().createDeployment({ deployment: app("theirs", "t-owned") });
      await deployments().createDeployment({ deployment: app("mine", "t-owned") });
      await waitForPhase(stack, "theirs", "FAILED", /deployment t-owned\/theirs exists and is not managed by flotilla/, [], 30_000);
      await waitForPhase(stack, "mine", "RUNNING", undefined, [], 60_000);
      await sleep(1_000);
      assert.equal(await theirs(), before, "never written");
      assert.deepEqual(
        (await get("v1", "Namespace", "", "t-owned"))?.metadata.labels,
        { ...handedOver, "kubernetes.io/metadata.name": "t-owned" },
        "their namespace left as it was",
      );

      await deployments().deleteDeployment({ id: "mine" });
      await deployments().deleteDeployment({ id: "theirs" });
      await waitFor(async () => (await deploymentIn("t-owned", "mine")) === undefined, "ours pruned", 30_000);
      await waitFor(async () => (await get("v1", "Service", "t-owned", "mine")) === undefined, "our Service pruned", 30_000);
      await sleep(500);
      assert.ok(await deploymentIn("t-owned", "theirs"), "theirs survives");
    });

    test("the namespace guard: kube-system is refused by the agent, nothing written there", async () => {
      const before = await get("v1", "Namespace", "", "kube-system");
      await deployments().createDeployment({ deployment: app("sys", "kube-system") });
      await waitForPhase(stack, "sys", "FAILED", /namespace kube-system is refused by this agent/, [], 30_000);
      assert.equal(await deploymentIn("kube-system", "sys"), undefined);
      assert.deepEqual((await get("v1", "Namespace", "", "kube-system"))?.metadata.labels, before?.metadata.labels);
      await deployments().deleteDeployment({ id: "sys" });
    });

    test("status as kstatus means it: generation and replica counts reported; a failing image ends FAILED past the progress deadline", async () => {
      await deployments().createDeployment({ deployment: app("status", "t-status", "app:1", {}, { replicas: 3 }) });
      await waitForPhase(stack, "status", "RUNNING", /^3\/3 replicas ready$/, [], 60_000);
      const [input] = await stack.t.store.observations.inputs(ResourceType.DEPLOYMENT, ["status"]);
      const observation = input!.stored!.observation;
      const live = (await deploymentIn("t-status", "status"))!;
      assert.equal(observation.generation, BigInt(live.metadata.generation as number));
      assert.equal(observation.observedGeneration, observation.generation);
      assert.deepEqual([observation.replicas, observation.updatedReplicas, observation.readyReplicas, observation.availableReplicas], [3, 3, 3, 3]);
      assert.equal(observation.conditions.find((c) => c.type === "Progressing")?.reason, "NewReplicaSetAvailable");

      // An operator's shorter deadline (another field manager; the agent leaves the field alone).
      await asPerson("sre", false, {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "status", namespace: "t-status" },
        spec: { progressDeadlineSeconds: 5 },
      });
      await deployments().updateDeployment({ deployment: app("status", "t-status", "app:fail-2", {}, { replicas: 3 }) });
      const pods = await waitFor(
        async () => {
          const list = await cluster.admin.get<{ items: Live[] }>("/api/v1/namespaces/t-status/pods");
          return list.items.find((p) => p.spec?.containers?.[0]?.image === "app:fail-2");
        },
        "a pod of the failing image",
        30_000,
      );
      const waiting = await waitFor(
        async () =>
          (await cluster.admin.get<Live>(`/api/v1/namespaces/t-status/pods/${pods.metadata.name}`)).status?.containerStatuses?.[0]?.state?.waiting?.reason,
        "the pod's container waiting",
        30_000,
      );
      assert.equal(waiting, "ImagePullBackOff");
      const failed = await waitForPhase(stack, "status", "FAILED", undefined, [], 60_000);
      assert.match(failed.reason, /rollout deadline exceeded: ReplicaSet "status-[a-z0-9]+" has timed out progressing/);
      await deployments().deleteDeployment({ id: "status" });
    });

    test("the HPA owns the replicas; the PDB covers the pods; both pruned when removed", async () => {
      const autoscaling = { autoscaling: { minReplicas: 2, maxReplicas: 5, targetCpuUtilizationPercent: 70 } };
      const budget = { disruptionBudget: { budget: { case: "minAvailable" as const, value: "1" } } };
      await deployments().createDeployment({ deployment: app("scaled", "t-scaled", "app:1", budget, autoscaling) });
      const hpa = await waitFor(() => get("autoscaling/v2", "HorizontalPodAutoscaler", "t-scaled", "scaled"), "the HorizontalPodAutoscaler", 30_000);
      assert.deepEqual(hpa.spec?.scaleTargetRef, { apiVersion: "apps/v1", kind: "Deployment", name: "scaled" });
      await waitFor(async () => (await deploymentIn("t-scaled", "scaled"))?.spec?.replicas === 2, "the HPA's minimum", 60_000);
      assert.ok(!ownsField(await deploymentIn("t-scaled", "scaled"), "flotilla-agent", "replicas"), "the agent does not own spec.replicas");
      const pdb = await waitFor(() => get("policy/v1", "PodDisruptionBudget", "t-scaled", "scaled"), "the PodDisruptionBudget", 30_000);
      assert.equal(pdb.spec?.minAvailable, 1);
      await waitFor(
        async () => (await get("policy/v1", "PodDisruptionBudget", "t-scaled", "scaled"))?.status?.expectedPods === 2,
        "the budget sees the pods",
        60_000,
      );

      await deployments().updateDeployment({ deployment: app("scaled", "t-scaled", "app:1", {}, { replicas: 3 }) });
      await waitFor(async () => (await get("autoscaling/v2", "HorizontalPodAutoscaler", "t-scaled", "scaled")) === undefined, "the HPA pruned", 30_000);
      await waitFor(async () => (await get("policy/v1", "PodDisruptionBudget", "t-scaled", "scaled")) === undefined, "the PDB pruned", 30_000);
      await waitFor(async () => (await deploymentIn("t-scaled", "scaled"))?.spec?.replicas === 3, "the placement's replicas", 30_000);
      assert.ok(ownsField(await deploymentIn("t-scaled", "scaled"), "flotilla-agent", "replicas"), "the field is the agent's again");
    });

    test("secret env: the Secret behind secretKeyRef, with probes on the container", async () => {
      const value = `v-${Math.random().toString(36).slice(2)}`;
      const probes = {
        readinessProbe: { handler: { case: "httpGet" as const, value: { path: "/healthz", port: 80 } }, periodSeconds: 5 },
        livenessProbe: { handler: { case: "tcpSocket" as const, value: { port: 80 } } },
      };
      await deployments().createDeployment({ deployment: app("api", "t-secret", "app:1", { ...probes, secretEnv: [{ name: "DB_PASSWORD", value }] }) });
      await waitForPhase(stack, "api", "RUNNING", undefined, [], 60_000);
      const secret = (await get("v1", "Secret", "t-secret", "api-env"))!;
      assert.equal(Buffer.from(secret.data!.DB_PASSWORD!, "base64").toString(), value);
      const container = (await deploymentIn("t-secret", "api"))!.spec!.template.spec.containers[0];
      assert.deepEqual(container.env, [{ name: "DB_PASSWORD", valueFrom: { secretKeyRef: { name: "api-env", key: "DB_PASSWORD" } } }]);
      assert.deepEqual(container.readinessProbe, {
        httpGet: { path: "/healthz", port: 80, scheme: "HTTP" },
        timeoutSeconds: 1,
        periodSeconds: 5,
        successThreshold: 1,
        failureThreshold: 3,
      });
    });

    test("the watch as the observer uses it: bookmarks with allowWatchBookmarks, carrying the resourceVersion reached", async () => {
      const asAgent = new KubeClient(await kubeconfigConnectionFromString(cluster.agentKubeconfig));
      /** A Deployment another manager relabels: one event each round. */
      const churn = (i: number) => ({
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "churn", namespace: "t-apply", labels: { round: String(i) } },
        spec: {
          replicas: 0,
          selector: { matchLabels: { app: "churn" } },
          template: { metadata: { labels: { app: "churn" } }, spec: { containers: [{ name: "app", image: "churn:1" }] } },
        },
      });
      const events: { type: string; object: Live }[] = [];
      const abort = new AbortController();
      // A real server sends a bookmark 2 s before the watch's timeout at the latest.
      const watching = asAgent.watch(
        "/apis/apps/v1/deployments",
        { allowWatchBookmarks: true, timeoutSeconds: 5, resourceVersion: (await deploymentIn("t-apply", "web"))!.metadata.resourceVersion },
        (event) => events.push(event as unknown as { type: string; object: Live }),
        abort.signal,
      );
      // Changes while it watches: the bookmark then carries a newer resourceVersion.
      for (let i = 0; i < 3; i++) await asPerson("churn", true, churn(i));
      const bookmark = await waitFor(() => events.find((e) => e.type === "BOOKMARK"), "a BOOKMARK event", 15_000);
      abort.abort();
      await watching;
      assert.equal(bookmark.object.kind, "Deployment");
      assert.match(bookmark.object.metadata.resourceVersion ?? "", /^\d+$/);
    });

    test("an API server restart: the resumed watch gets 410 Gone, the agent relists, and its watches see changes again", async () => {
      const gone = async () =>
        (await agent.metrics.observerRestarts.get()).values.filter((v) => v.labels.reason === "gone").reduce((sum, v) => sum + v.value, 0);
      const before = await gone();
      await cluster.restartApiServer();
      await waitFor(async () => (await gone()) > before, "a watch restarted by 410 Gone", 90_000);
      // The relisted cache is live: a Deployment deleted now is seen and recreated.
      await waitForPhase(stack, "web", "RUNNING", /^2\/2 replicas ready$/, [], 60_000);
      const uid = (await deploymentIn("t-apply", "web"))!.metadata.uid;
      await cluster.admin.delete(resourcePathOf({ apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "web", namespace: "t-apply" } }));
      await waitFor(async () => ((await deploymentIn("t-apply", "web"))?.metadata.uid ?? uid) !== uid, "recreated with a new uid", 60_000);
      await waitForPhase(stack, "web", "RUNNING", /^2\/2 replicas ready$/, [], 60_000);
    });

    test("a staged rollout whose canary fails on this cluster is rolled back there; the next wave's region is never touched", async () => {
      // Region west: its own emulator and agent; east, the canary, is the cluster under test.
      const west = await KubernetesEmulator.start({ rolloutDelayMs: 20 });
      const { token } = await stack.t.client(RegionService).createAgentToken({ region: OTHER_REGION });
      const westAgent = await startAgent({
        ctrlUrl: stack.t.url,
        region: OTHER_REGION,
        token,
        target: new KubernetesTarget({ kubeClient: new KubeClient(await kubeconfigConnectionFromString(west.kubeconfigYaml())), region: OTHER_REGION }),
        bookmarkIntervalMs: BOOKMARK_MS,
        reportIntervalMs: 50,
        log: silentLogger,
      });
      try {
        const secs = (s: number) => ({ seconds: BigInt(s), nanos: 0 });
        const strategy = {
          waves: [{ name: "canary", regions: [REGION], progressDeadline: secs(20) }, { name: "rest" }],
          onFailure: RolloutFailurePolicy.ROLLBACK,
        };
        const shop = (image: string) => ({
          deployment: { id: "shop", namespace: "t-rollout", image, regions: [REGION, OTHER_REGION].map((region) => ({ region, replicas: 1 })), strategy },
        });
        const rollout = async (state: RolloutState) => {
          let last: Rollout | undefined;
          await waitFor(
            async () => (last = (await stack.t.client(RolloutService).getRollout({ id: "shop" })).rollout)?.state === state,
            `rollout ${RolloutState[state]}`,
            90_000,
            () => last && `${RolloutState[last.state]}: ${last.reason}`,
          );
          return last!;
        };
        await deployments().createDeployment(shop("app:1"));
        await rollout(RolloutState.SUCCEEDED);
        west.clearRequestLog();
        await deployments().updateDeployment(shop("app:fail-2"));
        await waitFor(async () => imageOf(await deploymentIn("t-rollout", "shop")) === "app:fail-2", "the canary gets the new image", 30_000);
        const rolledBack = await rollout(RolloutState.ROLLED_BACK);
        assert.match(rolledBack.reason, new RegExp(REGION));
        await waitFor(async () => imageOf(await deploymentIn("t-rollout", "shop")) === "app:1", "the canary runs the previous image again", 30_000);
        await waitForPhase(stack, "shop", "RUNNING", undefined, [], 60_000);
        assert.equal(imageOf(west.get("apps/v1", "Deployment", "t-rollout", "shop") as Live), "app:1");
        const westWrites = west.requestLog.filter((e) => e.verb !== "get" && e.verb !== "list" && e.verb !== "watch" && e.resource === "deployments");
        assert.deepEqual(westWrites, [], "the second wave's cluster received no write");
      } finally {
        await westAgent.stop();
        await west.stop();
      }
    });

    test("every overlay of deploy/kubernetes passes the server's validation and admission (kubectl apply --dry-run=server -k)", async () => {
      for (const overlay of readdirSync(OVERLAYS)) {
        const out = await cluster.kubectl(["apply", "--dry-run=server", "-k", join(OVERLAYS, overlay)]);
        assert.match(out, /\(server dry run\)/, `${overlay}: ${out}`);
      }
    });

    test("least privilege, by admission: the API server refuses the agent's ServiceAccount a Deployment in kube-system and a Secret in a namespace not handed to flotilla, and it cannot hand one over itself", {
      skip: target.name === "emulator" && "the emulator stores ValidatingAdmissionPolicies but evaluates no CEL (docs/emulator-differences.md)",
    }, async () => {
      const asAgent = new KubeClient(await kubeconfigConnectionFromString(cluster.agentKubeconfig));
      await cluster.admin.create("/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "t-foreign" } } as ApiObject);
      const apply = (object: Manifest & Record<string, unknown>) =>
        asAgent.apply(resourcePathOf(object), object as ApiObject, { fieldManager: "flotilla-agent" });
      const refusal = (request: Promise<unknown>) =>
        request.then(
          () => undefined,
          (e) => e,
        );
      const deployment = {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "x", namespace: "kube-system" },
        spec: {
          selector: { matchLabels: { app: "x" } },
          template: { metadata: { labels: { app: "x" } }, spec: { containers: [{ name: "x", image: "x:1" }] } },
        },
      };
      // RBAC grants Deployment writes cluster-wide (the agent makes its namespaces); the policy
      // narrows them (kubeTargets waits for it to be in force).
      const inKubeSystem = await refusal(apply(deployment));
      assert.equal(statusCodeOf(inKubeSystem), 403, String(inKubeSystem));
      assert.match(String(inKubeSystem), /ValidatingAdmissionPolicy 'flotilla-agent-managed-namespaces'.*namespace kube-system is not/);
      const secret = await refusal(apply({ apiVersion: "v1", kind: "Secret", metadata: { name: "x", namespace: "t-foreign" }, data: { k: "eA==" } }));
      assert.equal(statusCodeOf(secret), 403, String(secret));
      assert.match(String(secret), /namespace t-foreign is not/);
      const label = await refusal(
        apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: "t-foreign", labels: { "app.kubernetes.io/managed-by": "flotilla" } } }),
      );
      assert.equal(statusCodeOf(label), 403, String(label));
      assert.match(String(label), /cannot patch resource "namespaces"/);
      assert.equal(await get("apps/v1", "Deployment", "kube-system", "x"), undefined);
      assert.equal(await get("v1", "Secret", "t-foreign", "x"), undefined);
      // Through ctrl: a workload placed in that namespace ends FAILED with the server's reason.
      await deployments().createDeployment({ deployment: app("stranger", "t-foreign") });
      await waitForPhase(stack, "stranger", "FAILED", /flotilla-agent-managed-namespaces/, [], 60_000);
      assert.equal(await deploymentIn("t-foreign", "stranger"), undefined);
      await deployments().deleteDeployment({ id: "stranger" });
    });

    test("least privilege: the authorizer refuses the agent's ServiceAccount a write in kube-system, a list of Secrets, a Role", async () => {
      const asAgent = new KubeClient(await kubeconfigConnectionFromString(cluster.agentKubeconfig));
      const refused = async (what: string, request: Promise<unknown>) => {
        const err = await request.then(
          () => undefined,
          (e) => e,
        );
        assert.equal(statusCodeOf(err), 403, `${what}: ${String(err)}`);
        assert.match(String(err), new RegExp(AGENT_SERVICE_ACCOUNT.replaceAll(":", "\\:")));
      };
      await refused(
        "a ConfigMap in kube-system",
        asAgent.create("/api/v1/namespaces/kube-system/configmaps", { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "x" } } as ApiObject),
      );
      await refused("a list of Secrets", asAgent.get("/api/v1/namespaces/kube-system/secrets"));
      await refused(
        "a Role",
        asAgent.create("/apis/rbac.authorization.k8s.io/v1/namespaces/t-secret/roles", {
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "Role",
          metadata: { name: "x" },
          rules: [],
        } as ApiObject),
      );
    });
  });
}

/** The path of an object of the kinds the agent applies. */
const resourcePathOf = ({ apiVersion, kind, metadata }: Manifest) => resourcePath({ apiVersion, kind, namespace: metadata.namespace, name: metadata.name });
