// deploy/kubernetes: every overlay renders with `kubectl kustomize`; every pod it renders meets
// the Pod Security "restricted" profile (and runs on a read-only root filesystem); RBAC names
// no wildcard and grants the agent exactly what packages/agent uses; every flag passed in
// `args` exists; the kinds our emulator stores apply to it with the real kubectl.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { APPLIED_KINDS } from "@flotilla/agent";
import { readDockerfile } from "./dockerfile.ts";
import { kubectl, kubectlMissing } from "./kubectl.ts";
import { mainOf, REPO_ROOT, startProcess } from "./processes.ts";

type AnyObject = Record<string, any>;

const OVERLAYS_DIR = join(REPO_ROOT, "deploy/kubernetes/overlays");
const OVERLAYS = readdirSync(OVERLAYS_DIR);
const skip = kubectlMissing();

function render(overlay: string): AnyObject[] {
  return parseAllDocuments(kubectl(["kustomize", join(OVERLAYS_DIR, overlay)])).map((document) => document.toJSON() as AnyObject);
}

/** The pod specs of workload objects. */
function podSpecs(objects: AnyObject[]): { owner: string; spec: AnyObject }[] {
  return objects.flatMap((object) => {
    const spec = object.kind === "Pod" ? object.spec : object.kind === "CronJob" ? object.spec?.jobTemplate?.spec?.template?.spec : object.spec?.template?.spec;
    return spec ? [{ owner: `${object.kind}/${object.metadata.name}`, spec }] : [];
  });
}

// The "restricted" profile as k8s.io/pod-security-admission/policy checks it (baseline and
// restricted checks, latest version), plus a read-only root filesystem.
const RESTRICTED_VOLUME_TYPES = new Set(["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"]);
function restrictedViolations(spec: AnyObject): string[] {
  const violations: string[] = [];
  const pod = spec.securityContext ?? {};
  for (const host of ["hostNetwork", "hostPID", "hostIPC"]) if (spec[host]) violations.push(`${host}`);
  for (const volume of spec.volumes ?? []) {
    const type = Object.keys(volume).find((key) => key !== "name");
    if (!RESTRICTED_VOLUME_TYPES.has(type!)) violations.push(`volume ${volume.name} of type ${type}`);
  }
  if (pod.runAsUser === 0) violations.push("pod runAsUser 0");
  const seccomp = (context: AnyObject) => context.seccompProfile?.type;
  if (seccomp(pod) !== undefined && !["RuntimeDefault", "Localhost"].includes(seccomp(pod))) violations.push(`pod seccomp ${seccomp(pod)}`);
  for (const container of [...(spec.initContainers ?? []), ...spec.containers, ...(spec.ephemeralContainers ?? [])]) {
    const context: AnyObject = container.securityContext ?? {};
    const where = `container ${container.name}`;
    if (context.privileged) violations.push(`${where}: privileged`);
    if (context.allowPrivilegeEscalation !== false) violations.push(`${where}: allowPrivilegeEscalation is not false`);
    if (!(context.runAsNonRoot ?? pod.runAsNonRoot)) violations.push(`${where}: runAsNonRoot is not true`);
    if (context.runAsUser === 0) violations.push(`${where}: runAsUser 0`);
    const profile = seccomp(context) ?? seccomp(pod);
    if (!["RuntimeDefault", "Localhost"].includes(profile)) violations.push(`${where}: seccompProfile ${profile ?? "unset"}`);
    if (!context.capabilities?.drop?.includes("ALL")) violations.push(`${where}: capabilities not dropping ALL`);
    for (const added of context.capabilities?.add ?? []) if (added !== "NET_BIND_SERVICE") violations.push(`${where}: adds capability ${added}`);
    for (const port of container.ports ?? []) if (port.hostPort) violations.push(`${where}: hostPort ${port.hostPort}`);
    if (context.readOnlyRootFilesystem !== true) violations.push(`${where}: root filesystem not read-only`);
  }
  return violations;
}

for (const overlay of OVERLAYS) {
  test(`overlay ${overlay}: renders, restricted pods, no RBAC wildcards`, { skip }, () => {
    const objects = render(overlay);
    assert.ok(objects.length > 0);
    const pods = podSpecs(objects);
    assert.ok(pods.length > 0, "the overlay renders workloads");
    const imageUser = readDockerfile().get("runtime")!.user;
    for (const { owner, spec } of pods) {
      assert.deepEqual(restrictedViolations(spec), [], `${owner} meets the restricted profile`);
      assert.equal(`${spec.securityContext?.runAsUser}:${spec.securityContext?.runAsGroup}`, imageUser, `${owner} runs as the images' user`);
      for (const container of spec.containers) {
        assert.ok(container.livenessProbe && container.readinessProbe, `${owner}/${container.name} has liveness and readiness probes`);
        assert.ok(container.resources?.requests?.memory && container.resources?.limits?.memory, `${owner}/${container.name} has memory requests and limits`);
      }
    }
    for (const role of objects.filter((object) => object.kind === "ClusterRole" || object.kind === "Role")) {
      for (const rule of role.rules) {
        for (const field of ["apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"]) {
          assert.ok(!(rule[field] ?? []).some((value: string) => value.includes("*")), `${role.kind}/${role.metadata.name}: no wildcard in ${field}`);
        }
      }
    }
    const namespace = objects.find((object) => object.kind === "Namespace");
    assert.equal(namespace?.metadata.labels?.["pod-security.kubernetes.io/enforce"], "restricted", "the namespace enforces the restricted profile");
  });
}

test("the agent's ClusterRole grants exactly what the agent uses", { skip }, () => {
  const objects = render("agent");
  const role = objects.find((object) => object.kind === "ClusterRole" && object.metadata.name === "flotilla-agent")!;
  const granted = new Map<string, Set<string>>();
  for (const rule of role.rules)
    for (const group of rule.apiGroups) for (const resource of rule.resources) granted.set(`${group}/${resource}`, new Set(rule.verbs));
  // Secrets are written and deleted by name, never listed or watched: the agent reads no Secret it did not write.
  const expected = new Map<string, string[]>([
    ["/namespaces", ["get", "create"]],
    ["/secrets", ["get", "create", "patch", "delete"]],
  ]);
  for (const kind of APPLIED_KINDS) {
    const group = kind.apiVersion.includes("/") ? kind.apiVersion.split("/")[0]! : "";
    expected.set(`${group}/${kind.path.split("/").at(-1)}`, ["get", "list", "watch", "create", "patch", "delete"]);
  }
  assert.deepEqual(
    Object.fromEntries([...granted].map(([resource, verbs]) => [resource, [...verbs].sort()])),
    Object.fromEntries([...expected].map(([resource, verbs]) => [resource, [...verbs].sort()])),
  );
  const binding = objects.find((object) => object.kind === "ClusterRoleBinding")!;
  const account = objects.find((object) => object.kind === "ServiceAccount")!;
  assert.deepEqual(binding.subjects, [{ kind: "ServiceAccount", name: account.metadata.name, namespace: account.metadata.namespace }]);
  const deployment = objects.find((object) => object.kind === "Deployment")!;
  assert.equal(deployment.spec.template.spec.serviceAccountName, account.metadata.name);
});

test("ctrl runs two replicas with a PodDisruptionBudget and its secrets from a Secret", { skip }, () => {
  const objects = render("ctrl");
  const deployment = objects.find((object) => object.kind === "Deployment")!;
  assert.equal(deployment.spec.replicas, 2);
  const budget = objects.find((object) => object.kind === "PodDisruptionBudget")!;
  assert.deepEqual(budget.spec.selector.matchLabels, deployment.spec.selector.matchLabels);
  const service = objects.find((object) => object.kind === "Service")!;
  assert.deepEqual(service.spec.selector, deployment.spec.selector.matchLabels);
  const env = deployment.spec.template.spec.containers[0].env as AnyObject[];
  for (const name of ["FLOTILLA_CTRL_DATABASE_URL", "FLOTILLA_CTRL_ADMIN_TOKEN"]) {
    assert.ok(env.find((variable) => variable.name === name)?.valueFrom?.secretKeyRef, `${name} comes from a Secret`);
  }
});

test("every flag the manifests pass exists in the program's --help", { skip }, () => {
  const help = Object.fromEntries(
    (["ctrl", "agent"] as const).map((name) => [name, execFileSync(process.execPath, [mainOf(name), "--help"], { encoding: "utf8" })]),
  );
  for (const overlay of OVERLAYS) {
    for (const { owner, spec } of podSpecs(render(overlay))) {
      for (const container of spec.containers) {
        for (const arg of container.args ?? []) {
          const flag = /^(--[\w-]+)/.exec(arg)?.[1];
          assert.ok(flag && help[container.name]!.includes(flag), `${overlay}: ${owner}/${container.name} passes ${arg}, which --help lists`);
        }
      }
    }
  }
});

test("the all-in-one overlay applies to the emulator with kubectl (the kinds it stores)", { skip, timeout: 60_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "flotilla-kustomize-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const kubeconfig = join(dir, "kubeconfig");
  const emulator = startProcess(["node", mainOf("k8s-emulator"), "--listen", "127.0.0.1:0", "--kubeconfig-out", kubeconfig], { env: {}, cwd: dir });
  t.after(() => emulator.stop());
  const [, url] = await emulator.waitFor(/listening on (http:\/\/\S+)/);
  const objects = render("all-in-one");
  // The kinds the emulator's discovery lists, per apiVersion.
  const kinds = new Map<string, Set<string>>();
  for (const apiVersion of new Set(objects.map((object) => object.apiVersion as string))) {
    const response = await fetch(`${url}/${apiVersion.includes("/") ? "apis" : "api"}/${apiVersion}`);
    const list = response.ok ? ((await response.json()) as { resources: { name: string; kind: string }[] }) : { resources: [] };
    kinds.set(apiVersion, new Set(list.resources.filter((resource) => !resource.name.includes("/")).map((resource) => resource.kind)));
  }
  const stored = objects.filter((object) => kinds.get(object.apiVersion)!.has(object.kind));
  const unsupported = [...new Set(objects.filter((object) => !stored.includes(object)).map((object) => object.kind))];
  t.diagnostic(`not stored by the emulator (not applied): ${unsupported.join(", ")}`);
  assert.ok(
    stored.some((object) => object.kind === "Deployment"),
    "the emulator stores Deployments",
  );
  const input = stored.map((object) => JSON.stringify(object)).join("\n");
  const cluster = ["--kubeconfig", kubeconfig, "--cache-dir", join(dir, "cache")];
  kubectl(["apply", "--server-side", "--field-manager", "flotilla-deploy-test", ...cluster, "-f", "-"], input);
  for (const object of stored) {
    const namespace = object.metadata.namespace ? ["-n", object.metadata.namespace] : [];
    const group = object.apiVersion.includes("/") ? `.${object.apiVersion.split("/")[0]}` : "";
    const live = JSON.parse(kubectl(["get", ...cluster, ...namespace, `${object.kind}${group}`, object.metadata.name, "-o", "json"])) as AnyObject;
    assert.ok(live.metadata.uid, `${object.kind}/${object.metadata.name} is stored`);
  }
});
