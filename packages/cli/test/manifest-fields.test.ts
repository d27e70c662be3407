// A Deployment manifest's service fields as the issue writes them (probes, a disruption budget as
// a YAML number or a percentage, surge parameters, termination grace, pod labels and
// annotations, env from existing Secrets and ConfigMaps) read into the protocol and written
// back as a manifest that reads into the same resource.
import { test } from "node:test";
import assert from "node:assert/strict";
import { equals } from "@bufbuild/protobuf";
import { DeploymentSchema, type Deployment } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { stringify } from "yaml";
import { specOf } from "../src/kinds.ts";
import { loadManifests, type ResourceManifest } from "../src/manifests.ts";

const MANIFEST = `
apiVersion: flotilla.dev/v1
kind: Deployment
metadata: {name: api}
spec:
  namespace: demo
  image: nginx:1.27
  port: 80
  readinessProbe: {httpGet: {path: /healthz, port: 80}, periodSeconds: 5}
  livenessProbe: {tcpSocket: {port: 80}}
  startupProbe: {exec: {command: [cat, /tmp/ready]}}
  disruptionBudget: {minAvailable: 1}
  maxSurge: 1
  maxUnavailable: "25%"
  terminationGracePeriodSeconds: 45
  podLabels: {tier: api}
  podAnnotations: {prometheus.io/scrape: "true"}
  envFrom: [{secretName: api-env, prefix: API_}, {configMapName: api-config}]
  env:
    - {name: DB_PASSWORD, valueFrom: {secretKeyRef: {name: db, key: password}}}
    - {name: MODE, valueFrom: {configMapKeyRef: {name: cfg, key: mode}}}
  regions: [{region: local, replicas: 2}]
`;

const read = (text: string) => (loadManifests(["-"], () => text)[0] as ResourceManifest).resource as Deployment;

test("the service fields read as the issue writes them and round-trip through get -o yaml's form", () => {
  const d = read(MANIFEST);
  assert.equal(d.readinessProbe?.handler.case, "httpGet");
  assert.equal(d.readinessProbe?.periodSeconds, 5);
  assert.equal(d.livenessProbe?.handler.case, "tcpSocket");
  assert.deepEqual(d.disruptionBudget?.budget, { case: "minAvailable", value: "1" }, "a YAML number is a count");
  assert.equal(d.maxSurge, "1");
  assert.equal(d.maxUnavailable, "25%");
  assert.equal(d.terminationGracePeriodSeconds, 45n);
  assert.deepEqual(d.podAnnotations, { "prometheus.io/scrape": "true" });
  assert.equal(d.envFrom[1]?.source.case, "configMapName");
  assert.equal(d.env[0]?.valueFrom?.source.case, "secretKeyRef");

  const written = stringify({ apiVersion: "flotilla.dev/v1", kind: "Deployment", metadata: { name: "api" }, spec: specOf(DeploymentSchema, d) });
  assert.ok(equals(DeploymentSchema, read(written), d), written);
  const other = read(MANIFEST.replace("{minAvailable: 1}", '{maxUnavailable: "50%"}'));
  assert.deepEqual(other.disruptionBudget?.budget, { case: "maxUnavailable", value: "50%" }, "a percentage string");
});

test("a region's autoscaling and env values read as the issue writes them and round-trip", () => {
  const d = read(`
apiVersion: flotilla.dev/v1
kind: Deployment
metadata: {name: api}
spec:
  namespace: demo
  image: nginx:1.27
  port: 80
  env: [{name: MODE, value: shared}]
  regions:
    - region: local
      autoscaling: {minReplicas: 2, maxReplicas: 5, targetCpuUtilizationPercent: 70}
      env: [{name: MODE, value: local}]
    - {region: eu, replicas: 3}
`);
  const [local, eu] = d.regions;
  assert.deepEqual(
    { min: local?.autoscaling?.minReplicas, max: local?.autoscaling?.maxReplicas, cpu: local?.autoscaling?.targetCpuUtilizationPercent },
    { min: 2, max: 5, cpu: 70 },
  );
  assert.equal(local?.env[0]?.value, "local");
  assert.equal(eu?.autoscaling, undefined);
  const written = stringify({ apiVersion: "flotilla.dev/v1", kind: "Deployment", metadata: { name: "api" }, spec: specOf(DeploymentSchema, d) });
  assert.ok(equals(DeploymentSchema, read(written), d), written);
});
