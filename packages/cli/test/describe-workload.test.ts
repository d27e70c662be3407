// describe's service fields in words: each probe on one line with Kubernetes' defaults written
// out, the budget, surge, grace, pod labels and annotations, env references, each region's env
// values, autoscaling per region with the autoscaler's replicas once reported, secret env by
// fingerprint (a value the message holds is never shown).
import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { DeploymentSchema } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { workloadBlocks, workloadFields } from "../src/describe-workload.ts";

test("a deployment's service fields as describe prints them, never a secret value", () => {
  const d = create(DeploymentSchema, {
    readinessProbe: { handler: { case: "httpGet", value: { path: "/healthz", port: 8080 } }, initialDelaySeconds: 5 },
    livenessProbe: { handler: { case: "tcpSocket", value: { port: 8080 } }, periodSeconds: 20, failureThreshold: 6 },
    startupProbe: { handler: { case: "exec", value: { command: ["cat", "/tmp/ready"] } } },
    disruptionBudget: { budget: { case: "minAvailable", value: "50%" } },
    maxSurge: "1",
    terminationGracePeriodSeconds: 45n,
    podLabels: { tier: "api" },
    podAnnotations: { "example.com/owner": "shop" },
    envFrom: [{ source: { case: "secretName", value: "api-env" }, prefix: "API_" }, { source: { case: "configMapName", value: "api-config" } }],
    env: [
      { name: "MODE", value: "fast" },
      { name: "DB_PASSWORD", valueFrom: { source: { case: "secretKeyRef", value: { name: "db", key: "password" } } } },
      { name: "LEVEL", valueFrom: { source: { case: "configMapKeyRef", value: { name: "cfg", key: "level" } } } },
    ],
    secretEnv: [
      { name: "TOKEN", value: "never-shown", set: true, fingerprint: "0123456789abcdef" },
      { name: "EMPTY", set: false },
    ],
    regions: [
      { region: "eu", autoscaling: { minReplicas: 2, maxReplicas: 10, targetCpuUtilizationPercent: 70, targetMemoryUtilizationPercent: 80 } },
      { region: "us", autoscaling: { minReplicas: 1, maxReplicas: 3, targetCpuUtilizationPercent: 60 } },
      {
        region: "ap",
        replicas: 2,
        env: [
          { name: "MODE", value: "slow" },
          { name: "REGION_NAME", value: "asia pacific" },
        ],
      },
    ],
    status: [
      { region: "eu", autoscalerCurrentReplicas: 3, autoscalerDesiredReplicas: 4 },
      { region: "us", readyReplicas: 1 },
    ],
  });
  assert.deepEqual(workloadFields(d), [
    ["Disruption budget", "min available 50%"],
    ["Rolling update", "max surge 1, max unavailable 25%"],
    ["Termination grace", "45s"],
  ]);
  const text = workloadBlocks(d)
    .map(([heading, lines]) => [`${heading}:`, ...lines.map((l) => `  ${l}`)].join("\n"))
    .join("\n");
  assert.equal(
    text,
    `Probes:
  PROBE       CHECK
  readiness   http-get http://:8080/healthz delay=5s timeout=1s period=10s #success=1 #failure=3
  liveness    tcp-socket :8080 delay=0s timeout=1s period=20s #success=1 #failure=6
  startup     exec [cat /tmp/ready] delay=0s timeout=1s period=10s #success=1 #failure=3
Pod labels:
  tier=api
Pod annotations:
  example.com/owner=shop
Env from:
  every key of secret api-env, prefixed API_
  every key of configmap api-config
Env:
  MODE=fast
  DB_PASSWORD from secret db key password
  LEVEL from configmap cfg key level
Env by region:
  ap: MODE=slow
  ap: REGION_NAME=asia pacific
Secret env:
  TOKEN: set, fingerprint 0123456789abcdef
  EMPTY: not set
Autoscaling:
  REGION   AUTOSCALER                           REPLICAS
  eu       2–10 replicas, cpu 70%, memory 80%   current 3, desired 4
  us       1–3 replicas, cpu 60%                not reported yet`,
  );
  assert.ok(!text.includes("never-shown"), "no secret value");
});

test("a deployment without service fields adds nothing but its env", () => {
  const d = create(DeploymentSchema, { env: [{ name: "A", value: "line\nbreak" }] });
  assert.deepEqual(workloadFields(d), []);
  assert.deepEqual(workloadBlocks(d), [["Env", ['A="line\\nbreak"']]]);
});
