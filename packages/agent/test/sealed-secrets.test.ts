// The desired table's form of a secret env: the values ctrl sealed for the region (as one, or one
// by one as an earlier version did), opened and sealed again as one seal under the process's key
// in the first variable, the checksum the pod template needs in place of the fingerprints; the
// manifests built from it equal those built from the plain values as delivered. Once applied,
// the values leave it (the checksum and a digest stay), and come back when given again.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createSecretKey, randomBytes } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { DesiredResourceSchema, ResourceType, type DesiredResource } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { packValues, secretContext, secretEnvChecksum as checksumOf, secretEnvContext, sealValue } from "@flotilla/runtime/sealed-values";
import { DesiredTable, desiredResource } from "../src/desired-table.ts";
import { buildManifests, SECRET_ENV_CHECKSUM_ANNOTATION, secretEnvData, type KubeObject } from "../src/manifests.ts";
import { secretRequestBody } from "../src/secret-request.ts";
import { openSecretEnv, secretEnvApplied, secretEnvChecksum } from "../src/sealed-secrets.ts";

const REGION_KEY = { id: "k1/r7", key: randomBytes(32) };
// Empty, multi-byte UTF-8, and longer than 127 bytes (a length of two varint bytes).
const VALUES = { EMPTY: "", PASSWORD: `pässwörd-${randomBytes(8).toString("hex")}`, CERT: `-----${randomBytes(150).toString("base64")}-----` };

function deployment(
  id: string,
  secretEnv: { name: string; value?: string; sealed?: Uint8Array; fingerprint?: string }[],
  asOne: { secretEnvSealed: Uint8Array; secretEnvChecksum: string } | undefined = undefined,
): DesiredResource {
  return create(DesiredResourceSchema, {
    type: ResourceType.DEPLOYMENT,
    id,
    namespace: "demo",
    version: 3n,
    spec: { case: "deployment", value: { replicas: 1, workload: { image: "api:1", secretEnv, ...asOne } } },
  });
}

/** A stand-in for ctrl's keyed fingerprint: 16 hex digits, different per name. */
const fingerprint = (name: string) => Buffer.from(name.padEnd(8, "_").slice(0, 8)).toString("hex");

/** As ctrl's stream delivers it: the names, every value sealed as one for the region, the checksum. */
const deliveredAsOne = (id: string, names = Object.keys(VALUES), count = names.length) =>
  deployment(
    id,
    Object.keys(VALUES).map((name) => ({ name })),
    {
      secretEnvSealed: sealValue(
        REGION_KEY.id,
        createSecretKey(REGION_KEY.key),
        randomBytes(12),
        secretEnvContext(id, names),
        packValues(
          Object.values(VALUES)
            .slice(0, count)
            .map((value) => Buffer.from(value)),
        ),
      ),
      secretEnvChecksum: checksumOf(Object.keys(VALUES).map((name) => ({ name, fingerprint: fingerprint(name) }))),
    },
  );

/** As a ctrl of an earlier version delivered it: each value sealed for the region. */
const delivered = (id: string) =>
  deployment(
    id,
    Object.entries(VALUES).map(([name, value]) => ({
      name,
      sealed: sealValue(REGION_KEY.id, createSecretKey(REGION_KEY.key), randomBytes(12), secretContext(id, name), value),
      fingerprint: fingerprint(name),
    })),
  );

/** As a resource handed to a target directly: plain values. */
const plain = (id: string) =>
  deployment(
    id,
    Object.entries(VALUES).map(([name, value]) => ({ name, value, fingerprint: fingerprint(name) })),
  );

const manifestOf = (resource: DesiredResource, kind: string) => buildManifests(resource, "east").apply.find((object) => object.kind === kind)!;
/** An object as the kubernetes target sends it: a Secret with its values, as its request's body. */
const objectOf = (resource: DesiredResource, kind: string): KubeObject => {
  const object = manifestOf(resource, kind);
  return JSON.parse(secretEnvData(object)?.open ? secretRequestBody(object).toString("utf8") : JSON.stringify(object));
};
const templateAnnotations = (object: KubeObject) =>
  (object.spec as { template: { metadata: { annotations: Record<string, string> } } }).template.metadata.annotations;

for (const [form, deliver] of [
  ["sealed as one", deliveredAsOne],
  ["sealed one by one", delivered],
] as const) {
  test(`the table keeps a secret env delivered ${form} as names and one process seal carrying the values and the checksum, and builds the same objects`, () => {
    const table = new DesiredTable(() => {});
    table.secretKeys.set([REGION_KEY]);
    table.upsert(deliver("api"), 3);
    const desired = table.get("deployment/api")!.desired;
    assert.ok(desired.kind === "upsert");
    for (const value of Object.values(VALUES).filter((v) => v !== "")) {
      assert.ok(!Buffer.from(desired.encoded, "latin1").includes(Buffer.from(value)), "no value in the table's encoding");
    }
    const kept = desiredResource(desired);
    const secretEnv = kept.spec.case === "deployment" ? kept.spec.value.workload!.secretEnv : [];
    assert.deepEqual(
      secretEnv.map(({ name, value, fingerprint, sealed }) => ({ name, value, fingerprint, sealed: sealed.length > 0 })),
      Object.keys(VALUES).map((name, i) => ({ name, value: undefined, fingerprint: "", sealed: i === 0 })),
    );
    assert.equal(secretEnv[0]!.sealed[0], 0, "the table's form, told from a ctrl seal by its first byte");
    assert.deepEqual(
      openSecretEnv(secretEnv).map((value) => value.toString("utf8")),
      Object.values(VALUES),
    );

    const direct = plain("api");
    assert.equal(secretEnvChecksum(secretEnv), secretEnvChecksum(direct.spec.case === "deployment" ? direct.spec.value.workload!.secretEnv : []));
    assert.deepEqual(objectOf(kept, "Secret"), objectOf(direct, "Secret"));
    assert.deepEqual(objectOf(kept, "Deployment"), objectOf(direct, "Deployment"));
    assert.match(templateAnnotations(objectOf(kept, "Deployment"))[SECRET_ENV_CHECKSUM_ANNOTATION]!, /^[0-9a-f]{16}$/);
  });
}

test("the table's form is kept as it is when met again, and a broken seal does not open", () => {
  const table = new DesiredTable(() => {});
  table.secretKeys.set([REGION_KEY]);
  table.upsert(delivered("api"), 3);
  const desired = table.get("deployment/api")!.desired;
  assert.ok(desired.kind === "upsert");
  const kept = desiredResource(desired);
  table.upsert(kept, 4);
  const again = table.get("deployment/api")!.desired;
  assert.ok(again.kind === "upsert");
  assert.deepEqual(desiredResource(again), desiredResource(desired), "not sealed a second time");

  const secretEnv = kept.spec.case === "deployment" ? kept.spec.value.workload!.secretEnv : [];
  secretEnv[0]!.sealed[30]! ^= 1;
  assert.throws(() => openSecretEnv(secretEnv));
});

test("once applied, the values leave the table: its Secret comes without data, checked against a live Secret by digest, and the values given again build it as before", () => {
  const table = new DesiredTable(() => {});
  table.secretKeys.set([REGION_KEY]);
  table.upsert(deliveredAsOne("api"), 3);
  const held = desiredResource(table.get("deployment/api")!.desired as { encoded: string });
  const heldSecret = objectOf(held, "Secret") as KubeObject & { data: Record<string, string> };
  const encodedLength = () => (table.get("deployment/api")!.desired as { encoded: string }).encoded.length;
  const heldLength = encodedLength();

  table.dropSecretEnvValues("deployment/api", 2);
  assert.deepEqual(desiredResource(table.get("deployment/api")!.desired as { encoded: string }), held, "a version not the entry's keeps its values");
  table.dropSecretEnvValues("deployment/api", 3);
  const entry = table.get("deployment/api")!;
  assert.equal(entry.status, "pending", "no change to apply: the entry is as it was");
  const applied = desiredResource(entry.desired as { encoded: string });
  const secretEnv = applied.spec.case === "deployment" ? applied.spec.value.workload!.secretEnv : [];
  assert.ok(secretEnvApplied(secretEnv));
  assert.equal(secretEnv[0]!.sealed.length, 25, "the checksum and the digest only");
  assert.ok(encodedLength() < heldLength - 100, "the table holds fewer bytes");
  assert.throws(() => openSecretEnv(secretEnv), /left the agent's memory once applied/);
  assert.equal(secretEnvChecksum(secretEnv), secretEnvChecksum(held.spec.case === "deployment" ? held.spec.value.workload!.secretEnv : []));
  assert.deepEqual(objectOf(applied, "Deployment"), objectOf(held, "Deployment"), "the same pod template checksum");

  const secret = manifestOf(applied, "Secret");
  assert.throws(() => secretRequestBody(secret), /without values to write/, "no data: the values are not held");
  assert.equal(JSON.stringify(secret), JSON.stringify({ ...heldSecret, data: undefined }), "the rest of the Secret as before");
  const withheld = secretEnvData(secret)!;
  assert.equal(withheld.open, undefined);
  assert.deepEqual(withheld.keys, Object.keys(VALUES));
  assert.ok(withheld.heldBy(heldSecret.data), "a live Secret with the values holds them");
  assert.ok(withheld.heldBy({ ...heldSecret.data, OTHER: "eA==" }), "keys beyond ours do not count");
  assert.ok(!withheld.heldBy({ ...heldSecret.data, PASSWORD: Buffer.from("edited").toString("base64") }), "an edited value");
  const { CERT: _cert, ...missing } = heldSecret.data;
  assert.ok(!withheld.heldBy(missing), "a missing key");
  assert.ok(!withheld.heldBy(undefined), "no data");
  assert.ok(secretEnvData(manifestOf(held, "Secret"))?.open, "a Secret with its values can open them");

  // Given again (GetSecretEnvSeals), the values build the same Secret until the next apply.
  const again = deliveredAsOne("api");
  const restored = table.restoreSecretEnvValues(
    "deployment/api",
    3,
    again.spec.case === "deployment" ? again.spec.value.workload!.secretEnvSealed : new Uint8Array(),
  );
  assert.ok(restored);
  assert.deepEqual(objectOf(restored, "Secret"), heldSecret);
  assert.deepEqual(objectOf(desiredResource(table.get("deployment/api")!.desired as { encoded: string }), "Secret"), heldSecret, "held in the table again");
  assert.equal(table.restoreSecretEnvValues("deployment/api", 2, new Uint8Array()), undefined, "a version replaced meanwhile");

  // Values other than those applied are refused, not taken for them.
  table.dropSecretEnvValues("deployment/api", 3);
  const other = deployment("api", [], {
    secretEnvSealed: sealValue(
      REGION_KEY.id,
      createSecretKey(REGION_KEY.key),
      randomBytes(12),
      secretEnvContext("api", Object.keys(VALUES)),
      packValues(Object.keys(VALUES).map((name) => Buffer.from(`other ${name}`))),
    ),
    secretEnvChecksum: "",
  });
  assert.throws(
    () => table.restoreSecretEnvValues("deployment/api", 3, other.spec.case === "deployment" ? other.spec.value.workload!.secretEnvSealed : new Uint8Array()),
    /are not the ones applied/,
  );
});

test("values sealed as one open only with the names they were sealed with, all of them, and with the checksum", () => {
  const table = new DesiredTable(() => {});
  table.secretKeys.set([REGION_KEY]);
  const reordered = Object.keys(VALUES).reverse();
  assert.throws(() => table.upsert(deliveredAsOne("api", reordered), 3), /does not open/, "names in another order");
  const moved = deliveredAsOne("api");
  moved.id = "web";
  assert.throws(() => table.upsert(moved, 3), /does not open/, "another deployment's");
  assert.throws(() => table.upsert(deliveredAsOne("api", Object.keys(VALUES), 2), 3), /holds 2 values, want 3/);
  const withoutChecksum = deliveredAsOne("api");
  if (withoutChecksum.spec.case === "deployment") withoutChecksum.spec.value.workload!.secretEnvChecksum = "";
  assert.throws(() => table.upsert(withoutChecksum, 3), /came sealed without its checksum/);
});

test("a value sealed under a key the agent lacks is refused, naming it", () => {
  const table = new DesiredTable(() => {});
  assert.throws(() => table.upsert(delivered("api"), 3), /sealed under key "k1\/r7"/);
});

/** As a snapshot page delivers it: the names and the checksum, no seal (GetSecretEnvSeals gives it). */
const paged = (id: string, version: bigint) => {
  const resource = deliveredAsOne(id);
  resource.version = version;
  const workload = resource.spec.case === "deployment" ? resource.spec.value.workload! : undefined;
  const sealed = workload!.secretEnvSealed;
  workload!.secretEnvSealed = new Uint8Array(0);
  return { resource, sealed };
};

test("a snapshot batch fetches the values it lacks in one call, reuses those the table holds under the same checksum, and keeps without values one whose version was replaced", async () => {
  const table = new DesiredTable(() => {});
  table.secretKeys.set([REGION_KEY]);
  const asked: { id: string; version: bigint }[][] = [];
  const fetchFrom = (seals: Map<string, Uint8Array>) => async (wanted: { id: string; version: bigint }[]) => {
    asked.push(wanted);
    return seals;
  };
  const api = paged("api", 3n);
  const web = paged("web", 3n);
  const gone = paged("gone", 3n);
  const first = table.stage();
  // ctrl has moved "gone" on to a newer version: no seal for it.
  await first.addBatch(
    [api, web, gone].map(({ resource }) => resource),
    fetchFrom(
      new Map([
        ["api", api.sealed],
        ["web", web.sealed],
      ]),
    ),
  );
  await first.staged();
  assert.deepEqual(asked, [["api", "web", "gone"].map((id) => ({ id, version: 3n }))], "one call, naming each deployment's version");
  table.replaceAll(first, 3);
  for (const id of ["api", "web"]) {
    const kept = desiredResource(table.get(`deployment/${id}`)!.desired as { encoded: string });
    const secretEnv = kept.spec.case === "deployment" ? kept.spec.value.workload!.secretEnv : [];
    assert.deepEqual(
      openSecretEnv(secretEnv).map((value) => value.toString("utf8")),
      Object.values(VALUES),
    );
  }
  const without = desiredResource(table.get("deployment/gone")!.desired as { encoded: string });
  assert.throws(
    () => openSecretEnv(without.spec.case === "deployment" ? without.spec.value.workload!.secretEnv : []),
    /came without its value: .*a version replaced before its values were fetched gets them with the next/,
  );

  // A full sync later: api at a new version with the same values, web unchanged; nothing to fetch.
  asked.length = 0;
  const second = table.stage();
  await second.addBatch([paged("api", 5n).resource, paged("web", 3n).resource], fetchFrom(new Map()));
  await second.staged();
  assert.deepEqual(asked, [], "the table's values serve a new version under the same checksum");
  table.replaceAll(second, 5);
  const api5 = desiredResource(table.get("deployment/api")!.desired as { encoded: string });
  assert.equal(table.get("deployment/api")!.version, 5);
  assert.deepEqual(
    openSecretEnv(api5.spec.case === "deployment" ? api5.spec.value.workload!.secretEnv : []).map((value) => value.toString("utf8")),
    Object.values(VALUES),
  );

  // A changed value changes the checksum: fetched again.
  const changed = paged("api", 6n);
  if (changed.resource.spec.case === "deployment") changed.resource.spec.value.workload!.secretEnvChecksum = "0123456789abcdef";
  const third = table.stage();
  await third.addBatch([changed.resource], fetchFrom(new Map()));
  await third.staged();
  assert.deepEqual(asked, [[{ id: "api", version: 6n }]]);
});

test("a batch's values are fetched while the next batch is read: both calls run at once, the batches are staged in their order, and a failed call fails the snapshot", async () => {
  const table = new DesiredTable(() => {});
  table.secretKeys.set([REGION_KEY]);
  const api = paged("api", 3n);
  const web = paged("web", 3n);
  const calls: { wanted: string[]; answer(seals: Map<string, Uint8Array>): void; fail(error: Error): void }[] = [];
  const fetch = (wanted: { id: string; version: bigint }[]) =>
    new Promise<Map<string, Uint8Array>>((answer, fail) => calls.push({ wanted: wanted.map((w) => w.id), answer, fail }));

  const stage = table.stage();
  await stage.addBatch([api.resource], fetch); // nothing before it to wait for
  const second = stage.addBatch([web.resource], fetch);
  assert.deepEqual(
    calls.map((c) => c.wanted),
    [["api"], ["web"]],
    "the second batch's call starts while the first is unanswered",
  );
  calls[1]!.answer(new Map([["web", web.sealed]]));
  let secondReturned = false;
  void second.then(() => (secondReturned = true));
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(secondReturned, false, "the next batch is not read before the one before it is staged");
  assert.equal(stage.added, 0, "nothing is staged ahead of the first batch");
  calls[0]!.answer(new Map([["api", api.sealed]]));
  await second;
  await stage.staged();
  assert.deepEqual([...stage.resources.keys()], ["deployment/api", "deployment/web"], "staged in the snapshot's order");

  const failing = table.stage();
  calls.length = 0;
  await failing.addBatch([paged("api", 3n).resource], fetch);
  const next = failing.addBatch([paged("web", 3n).resource], fetch);
  calls[0]!.fail(new Error("ctrl went away"));
  await assert.rejects(next, /ctrl went away/);
  await assert.rejects(failing.staged(), /ctrl went away/);
});

test("a Secret's request body writes every value in base64 from bytes, the values zeroed once written; a plain form is checked value by value", () => {
  // Every remainder of three (no, two and one padding characters), empty and multi-byte values.
  const values = ["", "a", "ab", "abc", "abcd", "äöü€", randomBytes(200).toString("latin1")];
  const resource = deployment(
    "api",
    values.map((value, i) => ({ name: `V${i}`, value })),
  );
  const secret = manifestOf(resource, "Secret");
  const opened: Buffer[] = [];
  const data = secretEnvData(secret)!;
  const open = data.open!;
  data.open = () => {
    const bytes = open();
    opened.push(...bytes);
    return bytes;
  };
  const body = JSON.parse(secretRequestBody(secret).toString("utf8")) as { data: Record<string, string>; metadata: { name: string } };
  assert.deepEqual(body.data, Object.fromEntries(values.map((value, i) => [`V${i}`, Buffer.from(value, "utf8").toString("base64")])));
  assert.equal(body.metadata.name, secret.metadata.name);
  assert.ok(opened.length === values.length && opened.every((bytes) => bytes.every((byte) => byte === 0)), "the opened values are zeroed");
  assert.ok(data.heldBy(body.data), "the live Secret holds them");
  assert.ok(!data.heldBy({ ...body.data, V1: "Yg==" }), "an edited value");
});
