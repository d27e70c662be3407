// The agent as operators see it: /readyz follows its conditions (connected to ctrl, first sync
// done, cluster reachable) both ways, and /metrics carries client-go's and prom-client's names.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { startTcpProxy, type TcpProxy } from "@flotilla/testkit/tcp-proxy";
import { deploymentOf, REGION, startStack, waitFor, type Stack } from "@flotilla/testkit/stack";
import type { Agent } from "../src/agent.ts";
import { KubeClient } from "../src/kube-api.ts";
import { kubeconfigConnectionFromString } from "../src/kube-connection.ts";
import { KubernetesTarget } from "../src/targets/kubernetes.ts";

const [{ db }] = await testDatabases();

describe("agent operations: readiness and metrics", () => {
  let stack: Stack;
  let agent: Agent;
  let toCtrl: TcpProxy;
  let toCluster: TcpProxy;
  before(async () => {
    stack = await startStack(db);
    const ctrlUrl = new URL(stack.t.url);
    toCtrl = await startTcpProxy(ctrlUrl.hostname, Number(ctrlUrl.port));
    const clusterUrl = new URL(stack.emulator.url);
    toCluster = await startTcpProxy(clusterUrl.hostname, Number(clusterUrl.port));
    // The agent reaches ctrl and the cluster through proxies the test can cut.
    const kubeClient = new KubeClient(
      await kubeconfigConnectionFromString(stack.emulator.kubeconfigYaml().replace(clusterUrl.host, `127.0.0.1:${toCluster.port}`)),
    );
    agent = await stack.agent({
      listen: "127.0.0.1:0",
      ctrlUrl: `http://127.0.0.1:${toCtrl.port}`,
      target: new KubernetesTarget({ kubeClient, region: REGION }),
    });
    await agent.ready;
  });
  after(async () => {
    await stack?.close();
    await Promise.all([toCtrl?.close(), toCluster?.close()]);
  });

  const readyz = async () => {
    const response = await fetch(`${agent.url}/readyz`);
    return { status: response.status, text: await response.text() };
  };
  const metrics = async () => (await fetch(`${agent.url}/metrics`)).text();

  test("/metrics: the work queue, the Kubernetes client, readiness and the process under their standard names", async () => {
    await stack.t
      .client(DeploymentService)
      .createDeployment({ deployment: { id: "web", namespace: "demo", image: "nginx:1.27", port: 80, regions: [{ region: REGION, replicas: 1 }] } });
    await waitFor(() => deploymentOf(stack.emulator, "demo", "web"), "Deployment demo/web");
    const text = await waitFor(async () => {
      const text = await metrics();
      return /^workqueue_work_duration_seconds_count\{name="agent"\} [1-9]/m.test(text) && text;
    }, "a finished reconcile in the metrics");
    for (const sample of [
      /^workqueue_depth\{name="agent"\} \d+$/m,
      /^workqueue_adds_total\{name="agent"\} [1-9]\d*$/m,
      /^workqueue_queue_duration_seconds_bucket\{le="1e-8",name="agent"\} \d+$/m,
      /^workqueue_work_duration_seconds_sum\{name="agent"\} /m,
      /^# TYPE workqueue_retries_total counter$/m,
      /^rest_client_requests_total\{code="200",method="GET",host="127\.0\.0\.1:\d+"\} [1-9]/m,
      /^rest_client_requests_total\{code="201",method="PATCH",host="127\.0\.0\.1:\d+"\} [1-9]/m,
      /^flotilla_agent_ready\{condition="all"\} 1$/m,
      /^flotilla_agent_ready\{condition="cluster"\} 1$/m,
      /^process_cpu_user_seconds_total /m,
      /^process_resident_memory_bytes /m,
      /^nodejs_heap_size_used_bytes /m,
      /^nodejs_eventloop_lag_seconds /m,
      /^flotilla_agent_version_last_seen /m,
    ]) {
      assert.match(text, sample);
    }
  });

  test("/readyz: not ready while the cluster does not answer, ready again once it does", async () => {
    assert.deepEqual(await readyz(), { status: 200, text: "ok\n" });
    toCluster.cut();
    const down = await waitFor(async () => {
      const answer = await readyz();
      return answer.status === 503 && answer;
    }, "readyz 503 with the cluster cut");
    assert.match(down.text, /^cluster: the Kubernetes API at 127\.0\.0\.1:\d+ does not answer\n$/);
    assert.match(await metrics(), /^flotilla_agent_ready\{condition="all"\} 0$/m);
    toCluster.restore();
    await waitFor(async () => (await readyz()).status === 200, "readyz 200 with the cluster back");
  });

  test("/readyz: not ready while the stream to ctrl is down, ready again once reconnected", async () => {
    toCtrl.cut();
    const down = await waitFor(async () => {
      const answer = await readyz();
      return answer.status === 503 && answer;
    }, "readyz 503 with ctrl cut");
    assert.match(down.text, /connected: no open watch stream to ctrl/);
    assert.match(await metrics(), /^flotilla_agent_ready\{condition="connected"\} 0$/m);
    toCtrl.restore();
    await waitFor(async () => (await readyz()).status === 200, "readyz 200 with ctrl back");
  });
});
