// A deposed leader sends no write: every request that changes the cluster checks leadership as
// it goes out (KubeClient's write fence), so a reconcile whose term ended while it read sends
// nothing more; a term's end aborts a write in flight; the Lease's own requests pass.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { DesiredResourceSchema, ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { KubernetesEmulator } from "@flotilla/k8s-emulator";
import { KubeClient, KubernetesTarget, kubeconfigConnectionFromString } from "../src/kubernetes.ts";
import { NotLeadingError } from "../src/leadership.ts";

const WRITES = new Set(["create", "apply", "update", "patch", "delete"]);

const deployment = (id: string) =>
  create(DesiredResourceSchema, {
    type: ResourceType.DEPLOYMENT,
    id,
    namespace: "fenced",
    version: 1n,
    spec: { case: "deployment", value: { workload: { image: "app:1" }, replicas: 1 } },
  });

describe("the write fence", () => {
  let emulator: KubernetesEmulator;
  let target: KubernetesTarget;
  let kubeClient: KubeClient;
  let leading = true;
  let term = new AbortController();
  before(async () => {
    emulator = await KubernetesEmulator.start({ rolloutDelayMs: 10 });
    kubeClient = new KubeClient(await kubeconfigConnectionFromString(emulator.kubeconfigYaml()));
    kubeClient.writeFence = () => {
      if (!leading) throw new NotLeadingError();
      return term.signal;
    };
    target = new KubernetesTarget({ kubeClient, region: "east" });
  });
  after(() => emulator?.stop());

  const writesOf = (name: string, since: number) =>
    emulator.requestLog.slice(since).filter((e) => e.name === name && e.verb !== undefined && WRITES.has(e.verb));

  test("a leader writes", async () => {
    const since = emulator.requestLog.length;
    await target.apply(deployment("first"));
    assert.ok(writesOf("first", since).length > 0);
  });

  test("a term that ends while a reconcile reads: nothing of it is written after", async () => {
    const release = emulator.faults.hold("get");
    const since = emulator.requestLog.length;
    const applying = target.apply(deployment("second"));
    await new Promise((resolve) => setTimeout(resolve, 100));
    leading = false;
    term.abort();
    release();
    try {
      await assert.rejects(applying, /not the leader: writes to the cluster are refused/);
      assert.deepEqual(writesOf("second", since), [], "no write after the term ended");
    } finally {
      leading = true;
      term = new AbortController();
    }
  });

  test("a term's end aborts a write in flight", async () => {
    await target.apply(deployment("third"));
    const release = emulator.faults.hold("apply");
    const applying = target.apply(deployment("third-b"));
    await new Promise((resolve) => setTimeout(resolve, 100));
    const aborted = Date.now();
    term.abort();
    try {
      await assert.rejects(applying, /aborted/);
      assert.ok(Date.now() - aborted < 1000, "aborted at once, not when the server answers");
    } finally {
      release();
      term = new AbortController();
    }
  });

  test("the Lease's own requests pass the fence", async () => {
    leading = false;
    try {
      const lease = { apiVersion: "coordination.k8s.io/v1", kind: "Lease", metadata: { name: "l", namespace: "default" }, spec: { holderIdentity: "me" } };
      const created = await kubeClient.create("/apis/coordination.k8s.io/v1/namespaces/default/leases", lease);
      assert.equal(created.metadata?.name, "l");
    } finally {
      leading = true;
    }
  });
});
