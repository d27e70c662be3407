import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { collectWatch, deployment, startCluster, waitFor, type Cluster } from "@flotilla/testkit/emulator";
import { KubernetesEmulator } from "../src/index.ts";

function condition(d: any, type: string) {
  return d?.status?.conditions?.find((c: any) => c.type === type);
}

const counts = (d: any) => {
  const { conditions: _c, ...rest } = d.status;
  return rest;
};

describe("rollout controller", () => {
  let c: Cluster;
  // A 600 s progress deadline lasts 600 ms here; pods are ready 100 ms after creation.
  before(async () => {
    c = await startCluster({ rolloutDelayMs: 100, progressDeadlineSecondMs: 1 });
  });
  after(() => c.emu.stop());

  const get = (name: string) => c.emu.get("apps/v1", "Deployment", "default", name) as any;
  const waitReason = (name: string, reason: string, ms = 5000) =>
    waitFor(() => condition(get(name), "Progressing")?.reason === reason && get(name), ms, `${name}: ${reason}`);

  it("reports progress, then availability, through MODIFIED events", async () => {
    const w = await collectWatch(c, "/apis/apps/v1/namespaces/default/deployments", {
      fieldSelector: "metadata.name=ok",
      resourceVersion: c.emu.resourceVersion,
    });
    const created = await c.apply(deployment("ok", { replicas: 3 }));
    const progressing = await waitReason("ok", "ReplicaSetUpdated");
    assert.deepEqual(counts(progressing), { observedGeneration: 1, replicas: 3, updatedReplicas: 3, unavailableReplicas: 3 }, "zero counts are omitted");
    assert.match(condition(progressing, "Progressing").message, /^ReplicaSet "ok-[b-df-hj-np-tv-xz2-9]{1,10}" is progressing\.$/);
    assert.equal(condition(progressing, "Available").reason, "MinimumReplicasUnavailable");

    const done = await waitReason("ok", "NewReplicaSetAvailable");
    assert.deepEqual(counts(done), { observedGeneration: 1, replicas: 3, updatedReplicas: 3, readyReplicas: 3, availableReplicas: 3 });
    assert.match(condition(done, "Progressing").message, /^ReplicaSet "ok-[b-df-hj-np-tv-xz2-9]{1,10}" has successfully progressed\.$/);
    assert.equal(condition(done, "Available").status, "True");
    assert.equal(condition(done, "Available").reason, "MinimumReplicasAvailable");
    assert.equal(done.metadata.annotations["deployment.kubernetes.io/revision"], "1");
    assert.equal(done.metadata.generation, created.metadata?.generation, "status writes do not bump generation");

    const typed = await c.apps.readNamespacedDeploymentStatus({ name: "ok", namespace: "default" });
    assert.equal(typed.status?.availableReplicas, 3);
    await waitFor(() => w.events.filter((e) => e.type === "MODIFIED").length >= 2, 1000, "MODIFIED events");
    w.abort();
  });

  for (const [surge, unavailable] of [
    [1, 0],
    [0, 2],
    ["50%", "25%"],
  ] as const) {
    it(`rolls out in steps within maxSurge ${surge} / maxUnavailable ${unavailable}, counting old pods`, async () => {
      const name = `steps-${String(surge).replace("%", "p")}-${String(unavailable).replace("%", "p")}`;
      const make = (image: string) => {
        const d: any = deployment(name, { replicas: 4, image });
        d.spec.strategy = { type: "RollingUpdate", rollingUpdate: { maxSurge: surge, maxUnavailable: unavailable } };
        return d;
      };
      await c.apply(make("registry.example/app:1"));
      await waitReason(name, "NewReplicaSetAvailable");
      const w = await collectWatch(c, "/apis/apps/v1/namespaces/default/deployments", {
        fieldSelector: `metadata.name=${name}`,
        resourceVersion: c.emu.resourceVersion,
      });
      await c.apply(make("registry.example/app:2"));
      const done = await waitFor(
        () => {
          const d = get(name);
          return d.status.observedGeneration === 2 && condition(d, "Progressing")?.reason === "NewReplicaSetAvailable" && d;
        },
        5000,
        "rollout of generation 2",
      );
      await waitFor(() => w.events.some((e) => e.object.metadata.resourceVersion === done.metadata.resourceVersion), 1000, "last event");
      w.abort();
      // Fenceposts for 4 replicas: surge rounds up, unavailable rounds down.
      const maxSurge = typeof surge === "number" ? surge : 2;
      const maxUnavailable = typeof unavailable === "number" ? unavailable : 1;
      const statuses = w.events.map((e) => e.object.status).filter((s) => s.observedGeneration === 2);
      for (const s of statuses) {
        assert.ok((s.replicas ?? 0) <= 4 + maxSurge, `at most ${4 + maxSurge} pods: ${JSON.stringify(s)}`);
        assert.ok((s.availableReplicas ?? 0) >= 4 - maxUnavailable, `at least ${4 - maxUnavailable} available: ${JSON.stringify(s)}`);
      }
      const midway = statuses.filter((s) => (s.updatedReplicas ?? 0) > 0 && (s.updatedReplicas ?? 0) < 4);
      assert.ok(midway.length > 0, "intermediate steps were observed");
      assert.ok(
        midway.some((s) => s.replicas > s.updatedReplicas),
        "old pods count in status.replicas during the rollout",
      );
      assert.deepEqual(counts(done), { observedGeneration: 2, replicas: 4, updatedReplicas: 4, readyReplicas: 4, availableReplicas: 4 });
      assert.equal(done.metadata.annotations["deployment.kubernetes.io/revision"], "2");
    });
  }

  it("held: pods stay unready and no deadline passes until release, then the rollout completes", async () => {
    const release = c.emu.holdRollouts();
    try {
      await c.apply(deployment("held", { replicas: 2 }));
      await waitReason("held", "ReplicaSetUpdated");
      // Longer than the 600 ms deadline and many times the 100 ms readiness delay.
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const held = get("held");
      assert.equal(condition(held, "Progressing").reason, "ReplicaSetUpdated");
      assert.deepEqual(counts(held), { observedGeneration: 1, replicas: 2, updatedReplicas: 2, unavailableReplicas: 2 });
    } finally {
      release();
    }
    const done = await waitReason("held", "NewReplicaSetAvailable");
    assert.equal(done.status.readyReplicas, 2);
  });

  it("never makes a failing image available and ends in ProgressDeadlineExceeded", async () => {
    await c.apply(deployment("bad", { image: "registry.example/app:fail-1" }));
    const d = await waitFor(() => condition(get("bad"), "Progressing")?.status === "False" && get("bad"), 5000, "deadline exceeded");
    assert.equal(condition(d, "Progressing").reason, "ProgressDeadlineExceeded");
    assert.match(condition(d, "Progressing").message, /^ReplicaSet "bad-[b-df-hj-np-tv-xz2-9]{1,10}" has timed out progressing\.$/);
    assert.equal(condition(d, "Available").status, "False");
    assert.deepEqual(counts(d), { observedGeneration: 1, replicas: 2, updatedReplicas: 2, unavailableReplicas: 2 });

    // Fixing the image rolls out a new revision that succeeds.
    await c.apply(deployment("bad", { image: "registry.example/app:2.0" }));
    const fixed = await waitReason("bad", "NewReplicaSetAvailable");
    assert.equal(fixed.status.observedGeneration, 2);
    assert.equal(fixed.metadata.annotations["deployment.kubernetes.io/revision"], "2");
  });

  it("an update to a failing image keeps the old pods serving until the deadline", async () => {
    await c.apply(deployment("upd", { image: "registry.example/app:1" }));
    await waitReason("upd", "NewReplicaSetAvailable");
    await c.apply(deployment("upd", { image: "registry.example/app:fail-2" }));
    const d = await waitReason("upd", "ProgressDeadlineExceeded");
    // 2 replicas: surge 1, unavailable 0: one new pod that never gets ready, both old pods stay.
    assert.deepEqual(counts(d), { observedGeneration: 2, replicas: 3, updatedReplicas: 1, readyReplicas: 2, availableReplicas: 2 });
    assert.equal(condition(d, "Available").status, "True");
    // Rolling back to the first template reuses its ReplicaSet with the next revision.
    await c.apply(deployment("upd", { image: "registry.example/app:1" }));
    const back = await waitReason("upd", "NewReplicaSetAvailable");
    assert.equal(back.metadata.annotations["deployment.kubernetes.io/revision"], "3");
    assert.deepEqual(counts(back), { observedGeneration: 3, replicas: 2, updatedReplicas: 2, readyReplicas: 2, availableReplicas: 2 });
  });

  it("Recreate: old pods go before new ones come", async () => {
    const make = (image: string) => {
      const d: any = deployment("rec", { replicas: 3, image });
      d.spec.strategy = { type: "Recreate" };
      return d;
    };
    await c.apply(make("registry.example/app:1"));
    await waitReason("rec", "NewReplicaSetAvailable");
    const w = await collectWatch(c, "/apis/apps/v1/namespaces/default/deployments", {
      fieldSelector: "metadata.name=rec",
      resourceVersion: c.emu.resourceVersion,
    });
    await c.apply(make("registry.example/app:2"));
    await waitFor(
      () => get("rec").status.observedGeneration === 2 && condition(get("rec"), "Progressing")?.reason === "NewReplicaSetAvailable",
      5000,
      "recreated",
    );
    w.abort();
    for (const e of w.events) {
      const s = e.object.status;
      if (s.observedGeneration === 2) assert.ok((s.replicas ?? 0) <= 3 && (s.updatedReplicas ?? 0) === (s.replicas ?? 0), JSON.stringify(s));
    }
  });

  it("scaled to zero: no counts and Available", async () => {
    await c.apply(deployment("zero", { replicas: 0 }));
    const d = await waitReason("zero", "NewReplicaSetAvailable");
    assert.deepEqual(counts(d), { observedGeneration: 1 });
    assert.equal(condition(d, "Available").status, "True");
  });

  it("publishes ReplicaSets and pods as the controllers make them, owned by what made them", async () => {
    await c.apply(deployment("objects", { replicas: 2 }));
    await waitReason("objects", "NewReplicaSetAvailable");
    const d = get("objects");
    const [rs, ...more] = c.emu
      .list("apps/v1", "ReplicaSet", "default")
      .filter((r) => (r.metadata as any).ownerReferences?.[0]?.uid === d.metadata.uid) as any[];
    assert.equal(more.length, 0);
    const hash = rs.metadata.labels["pod-template-hash"];
    assert.equal(rs.metadata.name, `objects-${hash}`);
    assert.deepEqual(rs.metadata.ownerReferences, [
      { apiVersion: "apps/v1", kind: "Deployment", name: "objects", uid: d.metadata.uid, controller: true, blockOwnerDeletion: true },
    ]);
    assert.equal(rs.metadata.annotations["deployment.kubernetes.io/revision"], "1");
    assert.equal(rs.spec.selector.matchLabels["pod-template-hash"], hash);
    assert.deepEqual(rs.status, { replicas: 2, fullyLabeledReplicas: 2, readyReplicas: 2, availableReplicas: 2, observedGeneration: 1 });
    const pods = c.emu.list("v1", "Pod", "default").filter((p) => (p.metadata as any).ownerReferences?.[0]?.uid === rs.metadata.uid) as any[];
    assert.equal(pods.length, 2);
    for (const pod of pods) {
      assert.match(pod.metadata.name, new RegExp(`^objects-${hash}-[b-df-hj-np-tv-xz2-9]{5}$`));
      assert.equal(pod.status.phase, "Running");
      assert.equal(pod.status.conditions.find((x: any) => x.type === "Ready").status, "True");
      assert.deepEqual(pod.spec.containers, d.spec.template.spec.containers);
    }
    // The API's field labels of each kind select them.
    const res = await fetch(`${c.emu.url}/api/v1/namespaces/default/events?fieldSelector=involvedObject.kind=Deployment,involvedObject.name=objects`);
    const events = (await res.json()) as any;
    assert.deepEqual(
      events.items.map((e: any) => `${e.reason}: ${e.message}`),
      [`ScalingReplicaSet: Scaled up replica set objects-${hash} from 0 to 2`],
    );
    const unsupported = await fetch(`${c.emu.url}/api/v1/namespaces/default/pods?fieldSelector=reason=x`);
    assert.equal(unsupported.status, 400);
    assert.match(((await unsupported.json()) as any).message, /field label not supported: reason/);
  });

  it("a ReplicaSet scaled by hand gets its pods, then the deployment controller scales it back", async () => {
    await c.apply(deployment("byhand", { replicas: 2 }));
    await waitReason("byhand", "NewReplicaSetAvailable");
    const [rs] = c.emu.list("apps/v1", "ReplicaSet", "default").filter((r) => r.metadata.labels?.app === "byhand") as any[];
    const name = rs.metadata.name;
    const pods = () => (c.emu.list("v1", "Pod", "default") as any[]).filter((p) => p.metadata.ownerReferences[0].name === name);
    const w = await collectWatch(c, "/apis/apps/v1/namespaces/default/replicasets", {
      fieldSelector: `metadata.name=${name}`,
      resourceVersion: c.emu.resourceVersion,
    });
    const scale = (replicas: number) =>
      fetch(`${c.emu.url}/apis/apps/v1/namespaces/default/replicasets/${name}/scale`, {
        method: "PATCH",
        headers: { "Content-Type": "application/merge-patch+json" },
        body: JSON.stringify({ spec: { replicas } }),
      });
    const settled = () =>
      waitFor(
        () => {
          const now = c.emu.get("apps/v1", "ReplicaSet", "default", name) as any;
          return now.spec.replicas === 2 && now.status.readyReplicas === 2 && pods().length === 2 && get("byhand").status.readyReplicas === 2;
        },
        5000,
        "scaled back",
      );
    const messages = (reason: string, object: string) =>
      (c.emu.list("v1", "Event", "default") as any[])
        .filter((e) => e.reason === reason && e.involvedObject.name === object)
        .map((e) => `${e.message} x${e.count}`)
        .sort();

    // Up: the ReplicaSet controller creates the three pods; the deployment controller scales the ReplicaSet back and they go.
    assert.equal((await scale(5)).status, 200);
    await settled();
    const seen = () => w.events.map((e) => e.object.spec.replicas).filter((n, i, all) => n !== all[i - 1]);
    await waitFor(() => seen().length >= 2, 1000, "the watch's MODIFIED events");
    assert.deepEqual(seen(), [5, 2]);
    assert.equal(messages("SuccessfulCreate", name).length, 5);
    assert.equal(messages("SuccessfulDelete", name).length, 3);
    assert.deepEqual(messages("ScalingReplicaSet", "byhand"), [
      `Scaled down replica set ${name} from 5 to 2 x1`,
      `Scaled up replica set ${name} from 0 to 2 x1`,
    ]);

    // Down to zero: both pods go, then come back with the deployment controller's scale-up, a repeat of its first event.
    assert.equal((await scale(0)).status, 200);
    await settled();
    assert.equal(messages("SuccessfulDelete", name).length, 5);
    assert.equal(messages("SuccessfulCreate", name).length, 7);
    assert.deepEqual(messages("ScalingReplicaSet", "byhand"), [
      `Scaled down replica set ${name} from 5 to 2 x1`,
      `Scaled up replica set ${name} from 0 to 2 x2`,
    ]);
    w.abort();
  });

  it("a repeated event updates its Event: count + 1, lastTimestamp moves, firstTimestamp stays", async () => {
    const scaleTo = async (replicas: number) => {
      await c.apply(deployment("again", { replicas }));
      await waitFor(() => get("again").status?.readyReplicas === replicas && get("again").status.replicas === replicas, 5000, `${replicas} ready`);
    };
    await scaleTo(1);
    await scaleTo(2);
    const scaledUp = () =>
      (c.emu.list("v1", "Event", "default") as any[]).filter(
        (e) => e.involvedObject.name === "again" && /^Scaled up replica set again-\S+ from 1 to 2$/.test(e.message),
      );
    const [first] = scaledUp();
    assert.equal(first.count, 1);
    await scaleTo(1);
    // Timestamps have whole seconds: the repeat comes in a later one.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    await scaleTo(2);
    const repeated = scaledUp();
    assert.equal(repeated.length, 1, "one Event for both occurrences");
    const [again] = repeated;
    assert.equal(again.metadata.name, first.metadata.name);
    assert.equal(again.metadata.uid, first.metadata.uid);
    assert.equal(again.count, 2);
    assert.equal(again.firstTimestamp, first.firstTimestamp);
    assert.ok(again.lastTimestamp > first.lastTimestamp, `${again.lastTimestamp} after ${first.lastTimestamp}`);
  });

  it("keeps at most eventLimit Events, the newest; none with 0", async () => {
    for (const eventLimit of [5, 0]) {
      const emu = await KubernetesEmulator.start({ rolloutDelayMs: 20, eventLimit });
      try {
        emu.apply(deployment("many", { replicas: 4 }) as any, { manager: "test" });
        await waitFor(() => (emu.get("apps/v1", "Deployment", "default", "many") as any)?.status?.readyReplicas === 4, 5000, "rolled out");
        const events = emu.list("v1", "Event", "default") as any[];
        assert.equal(events.length, eventLimit);
        // Four pods started last: the kept five are the last Started events and the one before.
        if (eventLimit > 0) assert.equal(events.filter((e) => e.reason === "Started").length, 4);
      } finally {
        await emu.stop();
      }
    }
  });
});
