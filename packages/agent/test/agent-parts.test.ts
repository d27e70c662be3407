// The agent's parts, each built alone: the configuration and its defaults, the CLI's mapping of
// flags onto it (leader election included), start in order / stop in reverse, the Reconciler against a scripted target, the
// drift corrector on a table, the observer against the emulator.
import { describe, test } from "node:test";
import { silentLogger } from "@flotilla/runtime";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { DesiredResourceSchema, ResourceType, type DesiredResource, type ResourceTombstone } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { startCluster, waitFor } from "@flotilla/testkit/emulator";
import { startAgent } from "../src/agent.ts";
import { AGENT_DEFAULTS, resolveConfig } from "../src/config.ts";
import { DesiredTable } from "../src/desired-table.ts";
import { DriftCorrector } from "../src/drift.ts";
import { contentDigest } from "../src/held.ts";
import { startInOrder, type Runnable } from "../src/lifecycle.ts";
import { Listeners } from "../src/listeners.ts";
import { agentConfig } from "../src/main.ts";
import { buildManifests, describeObject, type KubeObject } from "../src/manifests.ts";
import { AgentMetrics } from "../src/metrics.ts";
import { Observer, type ObjectChange } from "../src/observer.ts";
import { KeyQueue } from "../src/queue/key-queue.ts";
import { RateLimitingQueue } from "../src/queue/rate-limiting-queue.ts";
import { newReconciler } from "../src/reconciler.ts";
import { TargetError, type ManagedObject, type Target } from "../src/target.ts";
import { KubernetesTarget } from "../src/targets/kubernetes.ts";
import { RenderTarget } from "../src/targets/render.ts";
import { APPLIED_KINDS } from "../src/watched-kinds.ts";

const identity = { ctrlUrl: "http://127.0.0.1:1", region: "east", token: "t", target: {} as Target };

describe("AgentConfig", () => {
  test("every absent field takes its default; given fields (and partial prune options) win", () => {
    const resolved = resolveConfig({ ...identity, concurrency: 3, listen: undefined, prune: { force: true } });
    assert.equal(resolved.concurrency, 3);
    assert.equal(resolved.fullSyncIntervalMs, AGENT_DEFAULTS.fullSyncIntervalMs);
    assert.deepEqual(resolved.retryBackoff, AGENT_DEFAULTS.retryBackoff);
    assert.deepEqual(resolved.prune, { maxFraction: AGENT_DEFAULTS.prune.maxFraction, force: true });
    assert.equal(resolved.listen, undefined);
    assert.equal(typeof resolved.log.warn, "function");
    for (const field of Object.keys(AGENT_DEFAULTS)) assert.ok(field in resolved, `${field} resolved`);
  });

  test("the CLI maps flags, then FLOTILLA_AGENT_* variables, onto it; invalid values name their flag", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agent-config-"));
    try {
      const config = await agentConfig(
        [
          "--region",
          "east",
          "--target",
          "render",
          "--render-dir",
          dir,
          "--full-sync-interval",
          "90s",
          "--settle",
          "250ms",
          "--bookmark-interval",
          "2s",
          "--force-prune",
        ],
        {
          FLOTILLA_AGENT_TOKEN: "secret",
          FLOTILLA_AGENT_CONCURRENCY: "4",
          FLOTILLA_AGENT_MEMORY_RELEASE_AFTER: "0",
          FLOTILLA_AGENT_BURST_HOLD: "100ms",
          FLOTILLA_AGENT_REGION: "ignored: the flag wins",
        },
      );
      assert.ok(config !== "help");
      assert.equal(config.region, "east");
      assert.equal(config.token, "secret");
      assert.equal(config.concurrency, 4);
      assert.equal(config.fullSyncIntervalMs, 90_000);
      assert.equal(config.settleMs, 250);
      assert.equal(config.bookmarkIntervalMs, 2000);
      assert.equal(config.reportIntervalMs, AGENT_DEFAULTS.reportIntervalMs);
      assert.equal(config.maxHoldMs, AGENT_DEFAULTS.maxHoldMs);
      assert.equal(config.burstHoldMs, 100);
      assert.equal(config.burstKeys, AGENT_DEFAULTS.burstKeys);
      assert.equal(config.refreshIntervalMs, AGENT_DEFAULTS.refreshIntervalMs, "flag defaults are AGENT_DEFAULTS");
      assert.equal(config.memoryReleaseAfterReconciles, 0);
      assert.equal(config.memoryReleaseIdleMs, AGENT_DEFAULTS.memoryReleaseIdleMs);
      assert.deepEqual(config.prune, { maxFraction: AGENT_DEFAULTS.prune.maxFraction, force: true });
      assert.ok(config.target instanceof RenderTarget);
      assert.equal(await agentConfig(["--help"], {}), "help");
      await assert.rejects(agentConfig(["--region", "east", "--token", "t", "--concurrency", "0"], {}), /--concurrency/);
      await assert.rejects(agentConfig(["--token", "t"], {}), /--region is required/);
      await assert.rejects(agentConfig(["--region", "east", "--token", "t", "--burst-keys", "0"], {}), /--burst-keys must be a positive integer/);
      await assert.rejects(
        agentConfig(["--region", "east", "--token", "t", "--target", "render", "--render-dir", dir, "--burst-hold", "soon"], {}),
        /--burst-hold/,
      );
      await assert.rejects(agentConfig(["--region", "east", "--token", "t", "--memory-release-after", "-1"], {}), /--memory-release-after/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("leader election: off by default; its flags map onto leaderElection; a render target or bad timings are refused", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agent-config-"));
    try {
      const kubeconfig = join(dir, "kubeconfig");
      writeFileSync(
        kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
      );
      const plain = await agentConfig(["--region", "east", "--token", "t", "--kubeconfig", kubeconfig], {});
      assert.ok(plain !== "help");
      assert.equal(plain.leaderElect, false);
      assert.equal(resolveConfig(plain).leaderElection.leaseDurationMs, 15_000, "client-go's defaults");
      const elected = await agentConfig(
        ["--region", "east", "--token", "t", "--kubeconfig", kubeconfig, "--leader-elect-renew-deadline", "4s", "--leader-elect-resource-name", "agents"],
        {
          FLOTILLA_AGENT_LEADER_ELECT: "true",
          FLOTILLA_AGENT_LEADER_ELECT_RETRY_PERIOD: "1s",
        },
      );
      assert.ok(elected !== "help");
      assert.equal(elected.leaderElect, true);
      assert.deepEqual(elected.leaderElection, { leaseDurationMs: 15_000, renewDeadlineMs: 4000, retryPeriodMs: 1000, namespace: undefined, name: "agents" });
      await assert.rejects(
        agentConfig(["--region", "east", "--token", "t", "--target", "render", "--render-dir", dir, "--leader-elect"], {}),
        /--leader-elect needs --target kubernetes/,
      );
      await assert.rejects(
        agentConfig(["--region", "east", "--token", "t", "--kubeconfig", kubeconfig, "--leader-elect", "--leader-elect-renew-deadline", "15s"], {}),
        /--leader-elect-\*: .*greater than the renew deadline/,
      );
      // The library refuses it as well, before starting anything.
      await assert.rejects(
        startAgent({ ...identity, target: new RenderTarget({ dir, region: "east" }), leaderElect: true }),
        /leader election needs the kubernetes target/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("startInOrder", () => {
  const part = (name: string, events: string[], failStart = false): Runnable => ({
    name,
    async start() {
      if (failStart) throw new Error(`${name} failed`);
      events.push(`start ${name}`);
    },
    async stop() {
      events.push(`stop ${name}`);
    },
  });

  test("starts in order, stops in reverse, once", async () => {
    const events: string[] = [];
    const stop = await startInOrder(["a", "b", "c"].map((name) => part(name, events)));
    await Promise.all([stop(), stop()]);
    assert.deepEqual(events, ["start a", "start b", "start c", "stop c", "stop b", "stop a"]);
  });

  test("a part that fails to start stops the ones started before it, in reverse", async () => {
    const events: string[] = [];
    await assert.rejects(startInOrder([part("a", events), part("b", events), part("c", events, true), part("d", events)]), /c failed/);
    assert.deepEqual(events, ["start a", "start b", "stop b", "stop a"]);
  });
});

describe("Listeners", () => {
  test("emit (passed on as a bare callback before anyone listens) reaches every listener added later, in order", () => {
    const listeners = new Listeners<string>();
    const emit = listeners.emit;
    const heard: string[] = [];
    emit("nobody yet");
    listeners.add((key) => heard.push(`a ${key}`));
    listeners.add((key) => heard.push(`b ${key}`));
    emit("k");
    assert.deepEqual(heard, ["a k", "b k"]);
  });
});

describe("Reconciler", () => {
  const resource = (id: string, version: number): DesiredResource =>
    create(DesiredResourceSchema, {
      type: ResourceType.DEPLOYMENT,
      id,
      version: BigInt(version),
      namespace: "n",
      spec: { case: "deployment", value: { workload: { image: "app:1", port: 80 }, replicas: 1 } },
    });

  /** A target that records calls, fails as told, and manages `managed`. */
  function scriptedTarget(managed: ManagedObject[] = []) {
    const calls: string[] = [];
    let failure: TargetError | undefined;
    const target: Target = {
      async apply(r: DesiredResource) {
        calls.push(`apply ${r.id}@${r.version}`);
        if (failure) throw failure;
      },
      async delete(t: ResourceTombstone) {
        calls.push(`delete ${t.id}`);
      },
      async listManaged() {
        return managed;
      },
    };
    return { target, calls, fail: (error: TargetError | undefined) => (failure = error) };
  }

  function build(target: Target) {
    const table = new DesiredTable(() => {});
    const queue = new RateLimitingQueue(new KeyQueue(), { backoff: { minMs: 1000, maxMs: 1000 }, random: () => 1 });
    const reconciler = newReconciler({
      table,
      queue,
      target,
      metrics: new AgentMetrics(),
      log: silentLogger,
      prune: AGENT_DEFAULTS.prune,
      namespaces: AGENT_DEFAULTS.namespaces,
      ownershipRecheckMs: AGENT_DEFAULTS.ownershipRecheckMs,
    });
    return { table, queue, reconciler };
  }

  test("reconcile(): applies once, skips an applied version (idempotent), retries a failure with backoff", async () => {
    const { target, calls, fail } = scriptedTarget();
    const { table, queue, reconciler } = build(target);
    table.upsert(resource("web", 2), 2);
    await reconciler.reconcile("deployment/web");
    await reconciler.reconcile("deployment/web");
    assert.deepEqual(calls, ["apply web@2"], "a second run of an applied version changes nothing");
    assert.equal(table.get("deployment/web")?.status, "done");
    table.upsert(resource("web", 3), 3);
    fail(new TargetError("unavailable", 503));
    await reconciler.reconcile("deployment/web");
    assert.equal(table.get("deployment/web")?.status, "error");
    assert.equal(queue.failures("deployment/web"), 1);
    assert.equal(queue.delayed, 1, "retried after its backoff");
    queue.shutDown();
  });

  test("reconcile(): an object the run wrote and someone deleted before the run ended is applied again, not lost", async () => {
    // The observer reports the delete while the apply is in flight (the entry is not done yet).
    let drift: DriftCorrector | undefined;
    const deployment = buildManifests(resource("web", 2), "east").apply.find((object) => object.kind === "Deployment")!;
    const target: Target = {
      async apply() {
        drift!.onChange({
          kind: APPLIED_KINDS.find((k) => k.kind === "Deployment")!,
          key: "deployment/web",
          object: undefined,
          previous: deployment,
          held: undefined,
        });
        return new Map([[describeObject(deployment), "7"]]);
      },
      async delete() {},
      async listManaged() {
        return [];
      },
    };
    const { table, queue, reconciler } = build(target);
    drift = new DriftCorrector({ table, region: "east", metrics: new AgentMetrics(), refreshIntervalMs: 60_000, refreshPerSecond: 1 });
    table.upsert(resource("web", 2), 2);
    await reconciler.reconcile("deployment/web");
    assert.equal(table.get("deployment/web")?.appliedVersion, 2);
    assert.equal(table.get("deployment/web")?.status, "pending", "a run is due again");
    assert.equal(table.get("deployment/web")?.reapply, "deleted");
    queue.shutDown();
  });

  test("prune(): deletes what nothing desires, refuses beyond the safety valve", async () => {
    const orphan = (id: string): ManagedObject => ({
      type: ResourceType.DEPLOYMENT,
      id,
      key: `deployment/${id}`,
      apiVersion: "apps/v1",
      kind: "Deployment",
      namespace: "n",
      name: id,
    });
    const { target } = scriptedTarget([orphan("web"), orphan("old")]);
    const { table, reconciler, queue } = build(target);
    table.upsert(resource("web", 1), 1);
    assert.deepEqual(await reconciler.prune(1), { pruned: 1, refused: false });
    assert.equal(table.get("deployment/old")?.desired.kind, "delete", "the orphan's delete goes through the table and the queue");
    const { target: mostlyOrphans } = scriptedTarget([orphan("a"), orphan("b"), orphan("web")]);
    const other = build(mostlyOrphans);
    other.table.upsert(resource("web", 1), 1);
    assert.deepEqual(await other.reconciler.prune(1), { pruned: 0, refused: true });
    queue.shutDown();
    other.queue.shutDown();
  });
});

describe("DriftCorrector", () => {
  test("alone: a deleted or edited managed object requests a re-apply of its applied resource; status-only writes and objects holding the manifest do not", () => {
    const changed: string[] = [];
    const table = new DesiredTable((key) => changed.push(key));
    const drift = new DriftCorrector({ table, region: "east", metrics: new AgentMetrics(), refreshIntervalMs: 60_000, refreshPerSecond: 1 });
    const web = create(DesiredResourceSchema, {
      type: ResourceType.DEPLOYMENT,
      id: "web",
      version: 1n,
      namespace: "n",
      spec: { case: "deployment", value: { workload: { image: "app:1", port: 0 }, replicas: 1 } },
    });
    table.upsert(web, 1);
    table.markDone("deployment/web", 1);
    const applied = buildManifests(web, "east").apply.find((object) => object.kind === "Deployment")!;
    const live = { ...applied, metadata: { ...applied.metadata, generation: 1 } } as KubeObject;
    // As the observer makes them: the held digest from the hook, the previous object's from its own check.
    const change = (object: KubeObject | undefined, previous: KubeObject | undefined): ObjectChange => ({
      kind: APPLIED_KINDS.find((k) => k.kind === "Deployment")!,
      key: "deployment/web",
      object,
      previous,
      held: object && drift.held(object, "deployment/web", previous && { object: previous, held: drift.held(previous, "deployment/web", undefined) }),
    });
    assert.equal(drift.held(live, "deployment/web", undefined), contentDigest(applied), "the applied object holds its manifest");
    changed.length = 0;
    drift.onChange(change({ ...live, status: { readyReplicas: 1 } } as KubeObject, live));
    assert.deepEqual(changed, [], "a status-only write is not drift");
    const relabelled = { ...live, metadata: { ...live.metadata, generation: 2, labels: { ...live.metadata.labels, team: "a" } } } as KubeObject;
    drift.onChange(change(relabelled, live));
    assert.deepEqual(changed, [], "another manager's label: the object still holds the manifest");
    const edited = { ...live, metadata: { ...live.metadata, generation: 2 }, spec: { ...(live.spec as object), replicas: 5 } } as KubeObject;
    assert.equal(drift.held(edited, "deployment/web", { object: live, held: contentDigest(applied) }), undefined, "an edited object holds nothing");
    drift.onChange(change(edited, live));
    assert.deepEqual(changed, ["deployment/web"], "an edited object is re-applied");
    assert.equal(table.get("deployment/web")?.reapply, "modified");
    table.markDone("deployment/web", 1);
    changed.length = 0;
    drift.onChange(change(undefined, live));
    assert.deepEqual(changed, ["deployment/web"], "a deleted object is re-applied");
    assert.equal(table.get("deployment/web")?.reapply, "deleted");
  });
});

describe("Observer", () => {
  test("alone, against the emulator: lists, then reports a managed object's changes by resource key", async () => {
    const cluster = await startCluster();
    const stopping = new AbortController();
    const changes: (string | undefined)[] = [];
    const observer = new Observer({
      kubeClient: cluster.kube,
      region: "east",
      kinds: APPLIED_KINDS,
      bookmarkIntervalMs: 1000,
      watchTimeoutSeconds: 30,
      backoff: { minMs: 10, maxMs: 100 },
      onChange: (change) => changes.push(change.key),
      onRestart: () => {},
      log: silentLogger,
    });
    const running = observer.run(stopping.signal);
    try {
      await waitFor(() => APPLIED_KINDS.every((kind) => observer.isSynced(kind)), 5000, "every kind listed");
      const web = create(DesiredResourceSchema, {
        type: ResourceType.DEPLOYMENT,
        id: "web",
        version: 1n,
        namespace: "default",
        spec: { case: "deployment", value: { workload: { image: "app:1", port: 0 }, replicas: 1 } },
      });
      const deployment = buildManifests(web, "east").apply.find((object) => object.kind === "Deployment")!;
      await cluster.apply(deployment as never);
      await waitFor(() => changes.includes("deployment/web"), 5000, "the change observed");
      assert.equal(observer.liveObjects("deployment/web")?.size, 1, "its live resourceVersion is known");
      // What the prune reads instead of listing: what the target would list.
      const byPlace = (objects: ManagedObject[]) => objects.map((o) => JSON.stringify(o)).sort();
      const listed = await new KubernetesTarget({ kubeClient: cluster.kube, region: "east" }).listManaged();
      assert.equal(listed.length, 1);
      assert.deepEqual(byPlace([...observer.managedObjects()!]), byPlace(listed));
    } finally {
      stopping.abort();
      await running;
      await cluster.emu.stop();
    }
  });

  test("firstListed: resolves once every kind's first list has finished, also when a list fails (the workers that wait for it are not held)", async () => {
    const cluster = await startCluster();
    // As a cluster without the Cilium CRDs (404) or an agent refused the list (403) answers.
    cluster.emu.faults.setErrorRate("list", 1, 403);
    const stopping = new AbortController();
    const observer = new Observer({
      kubeClient: cluster.kube,
      region: "east",
      kinds: APPLIED_KINDS,
      bookmarkIntervalMs: 1000,
      watchTimeoutSeconds: 30,
      backoff: { minMs: 10, maxMs: 100 },
      onChange: () => {},
      onRestart: () => {},
      log: silentLogger,
    });
    let listed = false;
    void observer.firstListed.then(() => (listed = true));
    const running = observer.run(stopping.signal);
    try {
      await waitFor(() => listed, 5000, "firstListed resolved");
      assert.ok(
        APPLIED_KINDS.every((kind) => !observer.isSynced(kind)),
        "no kind is synced: every list failed",
      );
      assert.equal(observer.managedObjects(), undefined, "unknown, not empty: the prune lists for itself");
      cluster.emu.faults.clear();
      await waitFor(() => APPLIED_KINDS.every((kind) => observer.isSynced(kind)), 5000, "listed on a retry");
    } finally {
      stopping.abort();
      await running;
      await cluster.emu.stop();
    }
  });
});
