// A deployment's disruption budget, rolling-update parameters, termination grace, pod labels and
// annotations and env from existing Secrets and ConfigMaps: every mistake
// is INVALID_ARGUMENT naming the field (or the key), with nothing written; valid values travel in
// the desired state to the agent and read back as written.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { fromBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { DesiredResourceSchema } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { rowCounts, startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";

const [{ db: sqlite }] = await testDatabases();

const secretKey = (name: string, key: string) => ({ source: { case: "secretKeyRef", value: { name, key } } });

describe("pod parameters", () => {
  let t: TestCtrl;
  before(async () => {
    t = await startTestCtrl(sqlite);
    await t.store.regions.create("local");
  });
  after(() => t.close());

  const deployment = (fields: object) => ({
    deployment: { id: "api", namespace: "demo", image: "api:1", regions: [{ region: "local", replicas: 1 }], ...fields },
  });

  test("a mistake names its field and writes nothing", async () => {
    const bad: [object, RegExp][] = [
      [{ disruptionBudget: {} }, /deployment\.disruption_budget: needs one of min_available and max_unavailable/],
      [{ disruptionBudget: { budget: { case: "minAvailable", value: "one" } } }, /deployment\.disruption_budget\.min_available: must be a count/],
      [{ disruptionBudget: { budget: { case: "maxUnavailable", value: "150%" } } }, /deployment\.disruption_budget\.max_unavailable: .*at most 100%/],
      [{ maxSurge: "-1" }, /deployment\.max_surge: must be a count \("1"\) or a percentage/],
      [{ maxUnavailable: "101%" }, /deployment\.max_unavailable: .*at most 100%/],
      [{ maxSurge: "0", maxUnavailable: "0%" }, /deployment\.max_unavailable: may not be 0 when max_surge is 0 too/],
      [{ terminationGracePeriodSeconds: -1n }, /deployment\.termination_grace_period_seconds: must be from 0 to 86400/],
      [{ podLabels: { "flotilla.dev/resource-id": "other" } }, /deployment\.pod_labels\["flotilla\.dev\/resource-id"\]: is reserved/],
      [{ podLabels: { "app.kubernetes.io/managed-by": "helm" } }, /deployment\.pod_labels\["app\.kubernetes\.io\/managed-by"\]: is reserved/],
      [{ podLabels: { "bad key": "x" } }, /deployment\.pod_labels\["bad key"\]: name part must consist of/],
      [{ podLabels: { tier: "not valid!" } }, /deployment\.pod_labels\["tier"\]: a valid label must be/],
      [{ podAnnotations: { "flotilla.dev/region": "x" } }, /deployment\.pod_annotations\["flotilla\.dev\/region"\]: is reserved/],
      [{ envFrom: [{}] }, /deployment\.env_from\[0\]: needs one of secret_name and config_map_name/],
      [
        { envFrom: [{ source: { case: "secretName", value: "Bad_Name" } }] },
        /deployment\.env_from\[0\]\.secret_name: "Bad_Name": a lowercase RFC 1123 subdomain/,
      ],
      [{ envFrom: [{ source: { case: "configMapName", value: "cfg" }, prefix: "1X" }] }, /deployment\.env_from\[0\]\.prefix: "1X" is not a C identifier/],
      [{ env: [{ name: "A", valueFrom: {} }] }, /deployment\.env\[0\]\.value_from: needs one of secret_key_ref and config_map_key_ref/],
      [{ env: [{ name: "A", value: "x", valueFrom: secretKey("db", "password") }] }, /deployment\.env\[0\]\.value: must be empty when value_from is set/],
      [{ env: [{ name: "A", valueFrom: secretKey("", "password") }] }, /deployment\.env\[0\]\.value_from\.secret_key_ref\.name: is required/],
      [
        { env: [{ name: "A", valueFrom: { source: { case: "configMapKeyRef", value: { name: "cfg", key: "a/b" } } } }] },
        /deployment\.env\[0\]\.value_from\.config_map_key_ref\.key: "a\/b" is not a valid key/,
      ],
    ];
    const before = await rowCounts(t.store);
    for (const [fields, message] of bad) {
      await assert.rejects(
        t.client(DeploymentService).createDeployment(deployment(fields) as never),
        (e) => ConnectError.from(e).code === Code.InvalidArgument && message.test(ConnectError.from(e).message),
        JSON.stringify(fields, (_, v) => (typeof v === "bigint" ? String(v) : v)),
      );
    }
    assert.deepEqual(await rowCounts(t.store), before);
  });

  test("valid parameters reach the desired state and read back as written", async () => {
    const fields = {
      disruptionBudget: { budget: { case: "maxUnavailable" as const, value: "50%" } },
      maxSurge: "2",
      maxUnavailable: "0",
      terminationGracePeriodSeconds: 0n,
      podLabels: { tier: "api" },
      podAnnotations: { "example.com/note": "any value, even spaces" },
      envFrom: [{ source: { case: "secretName" as const, value: "api-env" }, prefix: "API_" }],
      env: [{ name: "DB_PASSWORD", valueFrom: { source: { case: "secretKeyRef" as const, value: { name: "db", key: "password" } } } }],
    };
    await t.client(DeploymentService).createDeployment(deployment(fields));
    const [row] = await t.store.database.db.selectFrom("desired_resources").select("body").where("resource_id", "=", "api").execute();
    const spec = fromBinary(DesiredResourceSchema, row!.body).spec;
    const workload = spec.case === "deployment" ? spec.value.workload : undefined;
    assert.deepEqual(workload?.disruptionBudget?.budget, { case: "maxUnavailable", value: "50%" });
    assert.equal(workload?.terminationGracePeriodSeconds, 0n, "an explicit 0 is kept (optional)");
    assert.deepEqual(workload?.podLabels, { tier: "api" });
    assert.equal(workload?.envFrom[0]?.prefix, "API_");
    const { deployment: read } = await t.client(DeploymentService).getDeployment({ id: "api" });
    assert.equal(read!.maxSurge, "2");
    assert.equal(read!.maxUnavailable, "0");
    assert.deepEqual(read!.podAnnotations, fields.podAnnotations);
    const source = read!.env[0]?.valueFrom?.source;
    assert.deepEqual(source?.case === "secretKeyRef" && { name: source.value.name, key: source.value.key }, { name: "db", key: "password" });
  });
});
