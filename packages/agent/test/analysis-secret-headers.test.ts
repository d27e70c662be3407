// A web analysis' secret header, end to end: the header names one of the deployment's secret env
// variables; the region's agent reads its value from the deployment's Secret in the cluster when
// it measures, and the endpoint receives it. The value is in no read of the deployment or the
// rollout, and in no task ctrl hands the agent. A header naming no secret env variable is
// refused, writing nothing.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { toJsonString } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { DeploymentService, GetDeploymentResponseSchema } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { ClusterService, ReportMeasurementsResponseSchema } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { RolloutState } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { GetRolloutResponseSchema, RolloutService } from "@flotilla/proto/ctrl/v1/rollout_pb.js";
import { rowCounts, testSecretKeyRing } from "@flotilla/testkit/ctrl";
import { testDatabases } from "@flotilla/testkit/databases";
import { REGION, startStack, waitFor, type Stack } from "@flotilla/testkit/stack";

const secs = (s: number) => ({ seconds: BigInt(s), nanos: 0 });
const [{ db, skip }] = await testDatabases();

describe("a web analysis' secret header", { skip }, () => {
  let stack: Stack;
  let endpoint: Server;
  const seen: (string | undefined)[] = [];
  const key = `k-${randomBytes(12).toString("hex")}`;
  before(async () => {
    stack = await startStack(db, { store: { secrets: testSecretKeyRing() } });
    // Answers the error rate only to a request with the key.
    endpoint = createServer((req, res) => {
      const sent = req.headers["x-api-key"];
      seen.push(typeof sent === "string" ? sent : undefined);
      if (sent !== key) return void res.writeHead(401).end();
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ errorRate: 0.001 }));
    });
    await new Promise<void>((resolve) => endpoint.listen(0, "127.0.0.1", resolve));
    await stack.agent({ analysisPollIntervalMs: 100 });
  });
  after(async () => {
    await stack.close();
    endpoint.closeAllConnections();
    await new Promise((resolve) => endpoint.close(resolve));
  });

  const deployment = (secretHeaders: Record<string, string>) => ({
    id: "shop",
    namespace: "demo",
    image: "nginx:1.27",
    regions: [{ region: REGION, replicas: 1 }],
    secretEnv: [{ name: "METRICS_KEY", value: key }],
    strategy: {
      waves: [{ name: "only", regions: [REGION], bake: secs(1) }],
      analysis: [
        {
          name: "errors",
          provider: {
            case: "web" as const,
            value: {
              url: `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/rate?deployment={{deployment}}`,
              jsonPath: "$.errorRate",
              headers: { accept: "application/json" },
              secretHeaders,
            },
          },
          interval: secs(1),
          count: 2,
          successCondition: "result < 0.05",
        },
      ],
    },
  });

  test("naming no secret env variable is refused, nothing written", async () => {
    const before = await rowCounts(stack.t.store);
    const refused = await stack.t
      .client(DeploymentService)
      .createDeployment({ deployment: deployment({ "x-api-key": "NO_SUCH" }) })
      .then(
        () => undefined,
        (e) => ConnectError.from(e),
      );
    assert.equal(refused?.code, Code.InvalidArgument);
    assert.match(refused!.rawMessage, /web\.secret_headers\[x-api-key\]: "NO_SUCH" is not one of the deployment's secret env variables/);
    assert.deepEqual(await rowCounts(stack.t.store), before);
  });

  test("the agent sends the value it reads from the deployment's Secret; no read or task carries it", async () => {
    await stack.t.client(DeploymentService).createDeployment({ deployment: deployment({ "x-api-key": "METRICS_KEY" }) });
    // The tasks ctrl hands the region's agent meanwhile: the variable's name, never its value.
    const tasks: string[] = [];
    const rollout = await waitFor(
      async () => {
        const listed = await stack.t.client(ClusterService).reportMeasurements({ region: REGION, measurements: [] });
        if (listed.tasks.length > 0) tasks.push(toJsonString(ReportMeasurementsResponseSchema, listed));
        const r = (await stack.t.client(RolloutService).getRollout({ id: "shop" })).rollout!;
        return r.state !== RolloutState.PROGRESSING && r;
      },
      "the rollout judged",
      60_000,
    );
    assert.equal(rollout.state, RolloutState.SUCCEEDED, rollout.reason);
    assert.ok(seen.length >= 2 && seen.every((sent) => sent === key), "every measurement carried the key");

    const shown = [
      toJsonString(GetDeploymentResponseSchema, await stack.t.client(DeploymentService).getDeployment({ id: "shop" })),
      toJsonString(GetRolloutResponseSchema, await stack.t.client(RolloutService).getRollout({ id: "shop" })),
    ];
    assert.match(shown[0]!, /"secretHeaders":\{"x-api-key":"METRICS_KEY"\}/, "the header names its variable");
    for (const text of shown) assert.ok(!text.includes(key), "no read carries the value");
    assert.ok(tasks.length > 0 && tasks.every((t) => t.includes('"secretHeaders":{"x-api-key":"METRICS_KEY"}') && !t.includes(key)), "no task carries it");
  });
});
