// The comparison behind drift detection and the "already applied" check: a live object read back
// in the API server's canonical form still contains what the agent applied; real changes do not.
import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { DesiredResourceSchema, ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { containsCanonical, parseQuantity } from "../src/compare.ts";
import { buildManifests } from "../src/manifests.ts";

const container = (fields: Record<string, unknown>) => ({ spec: { template: { spec: { containers: [{ name: "app", ...fields }] } } } });

test("quantities compare by value: live canonical forms contain the desired raw ones", () => {
  const cases: [live: string | number, desired: string][] = [
    ["1", "1000m"],
    [1, "1000m"],
    ["1Gi", "1024Mi"],
    ["500m", "0.5"],
    ["1k", "1000"],
    ["1e3", "1k"],
    ["129M", "129e6"],
    ["1M", "1000k"],
    ["2Ki", "2048"],
    ["100n", "0.1u"],
  ];
  for (const [live, desired] of cases) {
    assert.ok(
      containsCanonical(container({ resources: { requests: { cpu: live } } }), container({ resources: { requests: { cpu: desired } } })),
      `${live} holds ${desired}`,
    );
    assert.ok(
      containsCanonical({ resources: { limits: { memory: live } } }, { resources: { limits: { memory: desired } } }),
      `limits: ${live} holds ${desired}`,
    );
  }
});

test("different quantities, and quantities outside resources, are different", () => {
  assert.ok(!containsCanonical(container({ resources: { requests: { cpu: "1" } } }), container({ resources: { requests: { cpu: "999m" } } })));
  assert.ok(!containsCanonical(container({ resources: { requests: { memory: "1G" } } }), container({ resources: { requests: { memory: "1Gi" } } })));
  assert.ok(
    !containsCanonical({ metadata: { annotations: { size: "1" } } }, { metadata: { annotations: { size: "1000m" } } }),
    "an annotation is a plain string",
  );
  assert.equal(parseQuantity("1.5.2"), undefined);
  assert.equal(parseQuantity("Mi"), undefined);
});

test("an empty value we apply matches the field the server dropped", () => {
  const desired = container({
    env: [
      { name: "EMPTY", value: "" },
      { name: "SET", value: "x" },
    ],
    command: ["run"],
  });
  const live = container({
    env: [{ name: "EMPTY" }, { name: "SET", value: "x" }],
    command: ["run"],
    imagePullPolicy: "IfNotPresent",
    terminationMessagePath: "/dev/termination-log",
  });
  assert.ok(containsCanonical(live, desired));
  assert.ok(containsCanonical({ spec: {} }, { spec: { args: [], selector: {} } }));
  assert.ok(
    !containsCanonical(container({ env: [{ name: "EMPTY", value: "y" }] }), container({ env: [{ name: "EMPTY", value: "" }] })),
    "a value someone set is drift",
  );
  assert.ok(!containsCanonical(container({ env: [{ name: "SET" }] }), container({ env: [{ name: "SET", value: "x" }] })), "a dropped value we set is drift");
  assert.ok(
    !containsCanonical(container({ command: ["run", "--debug"].slice(0, 1) }), container({ command: ["run", "--debug"] })),
    "a shortened command is drift",
  );
});

test("int-or-string fields compare an integer with its decimal string", () => {
  assert.ok(containsCanonical({ spec: { ports: [{ port: 80, targetPort: "8080" }] } }, { spec: { ports: [{ port: 80, targetPort: 8080 }] } }));
  assert.ok(!containsCanonical({ spec: { ports: [{ targetPort: "http" }] } }, { spec: { ports: [{ targetPort: 8080 }] } }));
  assert.ok(!containsCanonical({ spec: { replicas: "2" } }, { spec: { replicas: 2 } }), "replicas is an integer, not int-or-string");
});

test("the agent's own manifest of a workload with canonicalizable values is contained in its canonical read-back", () => {
  const resource = create(DesiredResourceSchema, {
    type: ResourceType.DEPLOYMENT,
    id: "web",
    namespace: "demo",
    version: 3n,
    spec: {
      case: "deployment",
      value: {
        replicas: 2,
        workload: {
          image: "nginx:1",
          port: 80,
          cpuMillicores: 1000,
          memoryMib: 1024,
          command: ["nginx", "-g", "daemon off;"],
          env: [{ name: "EMPTY", value: "" }],
        },
      },
    },
  });
  const deployment = buildManifests(resource, "east").apply.find((o) => o.kind === "Deployment")!;
  // What a real API server returns: canonical quantities, the empty value dropped, defaults added.
  const live = structuredClone(deployment) as any;
  const app = live.spec.template.spec.containers[0];
  app.resources.requests = { cpu: "1", memory: "1Gi" };
  app.env = [{ name: "EMPTY" }];
  app.imagePullPolicy = "IfNotPresent";
  live.spec.strategy = { type: "RollingUpdate", rollingUpdate: { maxSurge: "25%", maxUnavailable: "25%" } };
  live.metadata.generation = 1;
  assert.ok(containsCanonical(live, deployment));
  app.image = "nginx:2";
  assert.ok(!containsCanonical(live, deployment), "a changed image is drift");
});
