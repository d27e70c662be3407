// The real kubectl against the emulator, through a kubeconfig the emulator
// writes (never the user's): client-side and server-side apply, canonical
// values in `get -o yaml`, `get -w`, `rollout status` through a multi-step rollout,
// namespace deletion through Terminating, `explain`, CRD validation, Leases, and what a
// rollout makes: pods, ReplicaSets (scaled by hand and back), rollout history and undo,
// Events (a repeat counted).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { KubernetesEmulator } from "../src/index.ts";

function findKubectl(): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    const candidate = join(dir, "kubectl");
    if (dir && existsSync(candidate)) return candidate;
  }
  return undefined;
}

const KUBECTL = findKubectl();
const skip = KUBECTL === undefined && process.env.CI !== "true" ? "kubectl not found on PATH (required when CI=true)" : false;

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

describe("kubectl against the emulator", { skip }, () => {
  let emu: KubernetesEmulator;
  let dir: string;

  /**
   * Runs kubectl with the emulator's kubeconfig, its own cache and HOME, and `input` on stdin;
   * `onOutput` sees its standard output so far whenever more arrives; `signal` ends it.
   */
  function kubectl(args: string[], input?: string, onOutput?: (stdout: string) => void, signal?: AbortSignal): Promise<Result> {
    assert.ok(KUBECTL, "kubectl is required when CI=true");
    return new Promise((resolve) => {
      const child = execFile(
        KUBECTL,
        ["--kubeconfig", join(dir, "kubeconfig"), "--cache-dir", join(dir, "cache"), ...args],
        { env: { PATH: process.env.PATH, HOME: dir }, timeout: 60_000, signal },
        (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === "number" ? err.code : 1) : 0, stdout, stderr }),
      );
      let output = "";
      if (onOutput) child.stdout?.on("data", (chunk: string) => onOutput((output += chunk)));
      if (input !== undefined) child.stdin?.end(input);
    });
  }

  async function ok(args: string[], input?: string): Promise<string> {
    const r = await kubectl(args, input);
    assert.equal(r.code, 0, `kubectl ${args.join(" ")} failed: ${r.stderr}`);
    return r.stdout;
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "kubectl-emu-"));
    emu = await KubernetesEmulator.start({ rolloutDelayMs: 150, progressDeadlineSecondMs: 5, namespaceDeletionDelayMs: 1000 });
    await emu.writeKubeconfig(join(dir, "kubeconfig"));
  });
  after(async () => {
    await emu?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const web = (replicas: number, env: string) => `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: ${replicas}
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: registry.example/web:1
        env: [${env}]
        resources:
          requests: {cpu: 1000m, memory: 1024Mi}
          limits: {cpu: "0.5"}
`;

  it("apply (client-side): creates, then patches with a three-way strategic merge from last-applied-configuration", async () => {
    assert.match(await ok(["apply", "-f", "-"], web(2, '{name: EMPTY, value: ""}, {name: GONE, value: x}')), /deployment\.apps\/web created/);
    const created: any = emu.get("apps/v1", "Deployment", "default", "web");
    assert.ok(created.metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]);
    emu.clearRequestLog();
    assert.match(await ok(["apply", "-f", "-"], web(3, '{name: EMPTY, value: ""}')), /deployment\.apps\/web configured/);
    const patch = emu.requestLog.find((e) => e.verb === "patch");
    assert.equal(patch?.query.fieldManager, "kubectl-client-side-apply");
    assert.equal(patch?.query.fieldValidation, "Strict", "kubectl found fieldValidation in /openapi/v3 and left validation to the server");
    const patched: any = emu.get("apps/v1", "Deployment", "default", "web");
    assert.equal(patched.spec.replicas, 3);
    assert.equal(patched.metadata.generation, 2);
    assert.deepEqual(patched.spec.template.spec.containers[0].env, [{ name: "EMPTY" }], "GONE removed: it was in last-applied but not in the new manifest");
  });

  it("get -o yaml shows the canonical, defaulted object", async () => {
    const yaml = await ok(["get", "deployment", "web", "-o", "yaml"]);
    assert.match(yaml, /requests:\n\s+cpu: "1"\n\s+memory: 1Gi/);
    assert.match(yaml, /limits:\n\s+cpu: 500m/);
    assert.match(yaml, /- name: EMPTY\n/);
    assert.doesNotMatch(yaml, /value: ""/);
    for (const line of [
      "imagePullPolicy: IfNotPresent",
      "terminationMessagePath: /dev/termination-log",
      "restartPolicy: Always",
      "schedulerName: default-scheduler",
      "progressDeadlineSeconds: 600",
      "maxSurge: 25%",
    ]) {
      assert.ok(yaml.includes(line), `${line} in:\n${yaml}`);
    }
  });

  it("apply --server-side: creates, re-applies as a no-op, owns the fields as manager kubectl", async () => {
    const svc =
      "apiVersion: v1\nkind: Service\nmetadata: {name: api, namespace: default}\nspec:\n  selector: {app: api}\n  ports: [{port: 80, targetPort: http}]\n";
    assert.match(await ok(["apply", "--server-side", "-f", "-"], svc), /service\/api serverside-applied/);
    const first: any = emu.get("v1", "Service", "default", "api");
    await ok(["apply", "--server-side", "-f", "-"], svc);
    const second: any = emu.get("v1", "Service", "default", "api");
    assert.equal(second.metadata.resourceVersion, first.metadata.resourceVersion);
    assert.ok(second.metadata.managedFields.some((m: any) => m.manager === "kubectl" && m.operation === "Apply"));
    assert.equal(second.spec.ports[0].targetPort, "http");
  });

  it("apply --server-side after client-side apply migrates the ownership to kubectl", async () => {
    const cm = "apiVersion: v1\nkind: Service\nmetadata: {name: moved, namespace: default, labels: {tier: web}}\nspec:\n  ports: [{port: 80}]\n";
    await ok(["apply", "-f", "-"], cm);
    assert.match(await ok(["apply", "--server-side", "-f", "-"], cm), /service\/moved serverside-applied/);
    const managers = (emu.get("v1", "Service", "default", "moved") as any).metadata.managedFields.map((m: any) => `${m.manager}/${m.operation}`);
    assert.ok(managers.includes("kubectl/Apply"), managers.join(", "));
    assert.ok(!managers.includes("kubectl-client-side-apply/Update"), `client-side ownership migrated: ${managers.join(", ")}`);
  });

  it("rollout status waits through a multi-step rollout, and fails on the progress deadline", async () => {
    const manifest = (image: string, progressDeadlineSeconds = 600) => `
apiVersion: apps/v1
kind: Deployment
metadata: {name: steps, namespace: default}
spec:
  replicas: 4
  progressDeadlineSeconds: ${progressDeadlineSeconds}
  strategy: {rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}
  selector: {matchLabels: {app: steps}}
  template:
    metadata: {labels: {app: steps}}
    spec: {containers: [{name: app, image: ${image}}]}
`;
    await ok(["apply", "-f", "-"], manifest("registry.example/steps:1"));
    await ok(["rollout", "status", "deployment/steps", "--timeout=60s"]);
    // A rollout stuck at its first step (its new pod never gets ready, no deadline within the
    // test) holds still until kubectl has reported it; only then does a good image let it go on.
    // However slowly kubectl starts, it sees the rollout in progress and waits through it.
    await ok(["apply", "-f", "-"], manifest("registry.example/steps:fail-1", 100_000));
    const reported = Promise.withResolvers<void>();
    const status = kubectl(["rollout", "status", "deployment/steps", "--timeout=60s"], undefined, (stdout) => {
      if (/1 out of 4 new replicas have been updated/.test(stdout)) reported.resolve();
    });
    await Promise.race([reported.promise, status]);
    await ok(["apply", "-f", "-"], manifest("registry.example/steps:2"));
    const { code, stdout: out, stderr } = await status;
    assert.equal(code, 0, stderr);
    assert.match(out, /Waiting for deployment "steps" rollout to finish: 1 out of 4 new replicas have been updated/);
    assert.match(out, /deployment "steps" successfully rolled out/);
    const done: any = emu.get("apps/v1", "Deployment", "default", "steps");
    assert.equal(done.metadata.annotations["deployment.kubernetes.io/revision"], "3");
    assert.equal(done.status.updatedReplicas, 4);

    await ok(["set", "image", "deployment/steps", "app=registry.example/steps:fail"]);
    const failed = await kubectl(["rollout", "status", "deployment/steps", "--timeout=60s"]);
    assert.notEqual(failed.code, 0);
    assert.match(failed.stderr, /deployment "steps" exceeded its progress deadline/);
  });

  it("delete namespace goes through Terminating; new content is refused meanwhile", async () => {
    await ok(["create", "namespace", "doomed"]);
    await ok(["-n", "doomed", "create", "deployment", "x", "--image=registry.example/x:1"]);
    // Held in Terminating while kubectl looks, however slowly it starts.
    const release = emu.holdNamespaceDeletion();
    assert.match(await ok(["delete", "namespace", "doomed", "--wait=false"]), /namespace "doomed" deleted/);
    assert.equal(await ok(["get", "namespace", "doomed", "-o", "jsonpath={.status.phase}"]), "Terminating");
    const refused = await kubectl(["-n", "doomed", "create", "deployment", "y", "--image=registry.example/y:1"]);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /deployments\.apps "y" is forbidden: unable to create new content in namespace doomed because it is being terminated/);
    release();
    await ok(["wait", "--for=delete", "namespace/doomed", "--timeout=30s"]);
    const gone = await kubectl(["get", "namespace", "doomed"]);
    assert.match(gone.stderr, /NotFound/);
    assert.equal(emu.list("apps/v1", "deployments", "doomed").length, 0);
  });

  it("explain deployment.spec (OpenAPI v3, and v2 in protobuf)", async () => {
    const v3 = await ok(["explain", "deployment.spec"]);
    assert.match(v3, /KIND:\s+Deployment/);
    assert.match(v3, /FIELD: spec <DeploymentSpec>/);
    assert.match(v3, /progressDeadlineSeconds\t<integer>/);
    assert.match(v3, /strategy\t<DeploymentStrategy>/);
    assert.match(v3, /template\t<PodTemplateSpec> -required-/);
    // kube-openapi writes IntOrString and Quantity in v3 as oneOf, so kubectl names them.
    assert.match(await ok(["explain", "deployment.spec.strategy.rollingUpdate"]), /maxSurge\t<IntOrString>/);
    assert.match(await ok(["explain", "deployment.spec.template.spec.containers.resources"]), /requests\t<map\[string\]Quantity>/);
    const v2 = await ok(["explain", "deployment.spec.strategy", "--output", "plaintext-openapiv2"]);
    assert.match(v2, /rollingUpdate\t<Object>/);
    const crd = await ok(["explain", "ciliumnetworkpolicy.spec.ingress.toPorts.ports"]);
    assert.match(crd, /protocol\t<string>/);
  });

  it("apply of a CiliumNetworkPolicy: merge patch (no strategic merge for CRDs) and schema errors", async () => {
    const cnp = (port: string, protocol: string) => `
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: allow, namespace: default}
spec:
  endpointSelector: {matchLabels: {app: web}}
  ingress: [{toPorts: [{ports: [{port: "${port}", protocol: ${protocol}}]}]}]
`;
    await ok(["apply", "-f", "-"], cnp("80", "TCP"));
    assert.match(await ok(["apply", "-f", "-"], cnp("81", "TCP")), /configured/);
    const invalid = await kubectl(["apply", "-f", "-"], cnp("82", "FOO"));
    assert.notEqual(invalid.code, 0);
    assert.match(invalid.stderr, /spec\.ingress\[0\]\.toPorts\[0\]\.ports\[0\]\.protocol: Unsupported value: "FOO"/);
    const stored: any = emu.get("cilium.io/v2", "CiliumNetworkPolicy", "default", "allow");
    assert.equal(stored.spec.ingress[0].toPorts[0].ports[0].port, "81");
  });

  it('a coordination.k8s.io/v1 Lease: apply, get, explain; a released holder stays ""', async () => {
    const lease = (holder: string) => `
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: agents, namespace: default}
spec: {holderIdentity: "${holder}", leaseDurationSeconds: 15, leaseTransitions: 2, renewTime: "2026-01-02T03:04:05.123456Z"}
`;
    await ok(["apply", "--server-side", "-f", "-"], lease("a"));
    assert.equal(await ok(["get", "lease", "agents", "-o", "jsonpath={.spec.holderIdentity}/{.spec.renewTime}"]), "a/2026-01-02T03:04:05.123456Z");
    await ok(["apply", "--server-side", "-f", "-"], lease(""));
    const stored: any = emu.get("coordination.k8s.io/v1", "Lease", "default", "agents");
    assert.equal(stored.spec.holderIdentity, "", 'a pointer to "" is not omitted');
    assert.match(await ok(["explain", "lease.spec"]), /leaseTransitions/);
  });

  it("client-side apply, then server-side apply of the same manifest with 1000m and 1024Mi: no conflict (typed values compare)", async () => {
    const manifest = [
      "apiVersion: v1",
      "kind: Namespace",
      "metadata: {name: quantities}",
      "---",
      "apiVersion: apps/v1",
      "kind: Deployment",
      "metadata: {name: q, namespace: quantities}",
      "spec:",
      "  replicas: 1",
      "  selector: {matchLabels: {app: q}}",
      "  template:",
      "    metadata: {labels: {app: q}}",
      "    spec: {containers: [{name: app, image: nginx:1.27, resources: {requests: {cpu: 1000m, memory: 1024Mi}}}]}",
    ].join("\n");
    await ok(["apply", "-f", "-"], manifest);
    assert.match(await ok(["apply", "--server-side", "-f", "-"], manifest), /deployment\.apps\/q serverside-applied/);
    const live = JSON.parse(await ok(["get", "deploy", "q", "-n", "quantities", "-o", "json"]));
    assert.deepEqual(live.spec.template.spec.containers[0].resources.requests, { cpu: "1", memory: "1Gi" });
    // A second server-side apply changes nothing: the same typed values are a no-op.
    const before = live.metadata.resourceVersion;
    await ok(["apply", "--server-side", "-f", "-"], manifest);
    assert.equal(JSON.parse(await ok(["get", "deploy", "q", "-n", "quantities", "-o", "json"])).metadata.resourceVersion, before);
  });

  it("kubectl get prints the API server's columns (server-side Table printing)", async () => {
    const manifest = [
      "apiVersion: v1",
      "kind: Namespace",
      "metadata: {name: printing}",
      "---",
      "apiVersion: apps/v1",
      "kind: Deployment",
      "metadata: {name: web, namespace: printing}",
      "spec:",
      "  replicas: 2",
      "  selector: {matchLabels: {app: web}}",
      "  template:",
      "    metadata: {labels: {app: web}}",
      "    spec: {containers: [{name: app, image: nginx:1.27}]}",
      "---",
      "apiVersion: v1",
      "kind: Service",
      "metadata: {name: web, namespace: printing}",
      "spec: {selector: {app: web}, ports: [{port: 80, targetPort: 80}]}",
    ].join("\n");
    await ok(["apply", "-f", "-"], manifest);
    await ok(["rollout", "status", "deployment/web", "-n", "printing", "--timeout=60s"]);
    assert.match(await ok(["get", "deploy", "-n", "printing"]), /^NAME +READY +UP-TO-DATE +AVAILABLE +AGE\nweb +2\/2 +2 +2 +\d+s\n$/);
    assert.match(
      await ok(["get", "deploy", "-n", "printing", "-o", "wide"]),
      /^NAME +READY +UP-TO-DATE +AVAILABLE +AGE +CONTAINERS +IMAGES +SELECTOR\nweb +2\/2 +2 +2 +\S+ +app +nginx:1\.27 +app=web\n$/,
    );
    assert.match(
      await ok(["get", "svc", "web", "-n", "printing"]),
      /^NAME +TYPE +CLUSTER-IP +EXTERNAL-IP +PORT\(S\) +AGE\nweb +ClusterIP +\S+ +<none> +80\/TCP +\S+\n$/,
    );
    assert.match(await ok(["get", "ns", "printing"]), /^NAME +STATUS +AGE\nprinting +Active +\S+\n$/);
    // Secrets and ConfigMaps by their number of keys, never a value.
    await ok(["create", "secret", "generic", "creds", "-n", "printing", "--from-literal=user=u1", "--from-literal=password=p1"]);
    await ok(["create", "configmap", "settings", "-n", "printing", "--from-literal=a=1", "--from-literal=b=2", "--from-literal=c=3"]);
    assert.match(await ok(["get", "secret", "creds", "-n", "printing"]), /^NAME +TYPE +DATA +AGE\ncreds +Opaque +2 +\S+\n$/);
    assert.match(await ok(["get", "configmap", "settings", "-n", "printing"]), /^NAME +DATA +AGE\nsettings +3 +\S+\n$/);
    assert.match(await ok(["get", "deploy", "-A"]), /^NAMESPACE +NAME +READY +UP-TO-DATE +AVAILABLE +AGE\n/);
    // The scale subresource, as kubectl scale patches it.
    assert.equal(await ok(["scale", "deployment", "web", "-n", "printing", "--replicas=3"]), "deployment.apps/web scaled\n");
    await ok(["rollout", "status", "deployment/web", "-n", "printing", "--timeout=60s"]);
    assert.match(await ok(["get", "deploy", "web", "-n", "printing"]), /\nweb +3\/3 +3 +3 /);
    assert.match(await ok(["get", "--raw", "/apis/apps/v1/namespaces/printing/deployments/web/scale"]), /"kind":"Scale".*"replicas":3/);
  });
  it("get -w prints each watch event with the kind's columns, as kubectl get does", async () => {
    const n = ["-n", "watching"];
    await ok(["create", "namespace", "watching"]);
    await ok([...n, "create", "deployment", "web", "--image=nginx:1.27", "--replicas=2"]);
    await ok([...n, "rollout", "status", "deployment/web", "--timeout=60s"]);
    const stop = new AbortController();
    const listed = Promise.withResolvers<void>();
    const scaled = Promise.withResolvers<void>();
    const watching = kubectl(
      [...n, "get", "deploy", "-w"],
      undefined,
      (stdout) => {
        if (/\nweb +2\/2 /.test(stdout)) listed.resolve();
        if (/\nweb +3\/3 +3 +3 +\d+s\n/.test(stdout)) scaled.resolve();
      },
      // A watch never ends by itself: at most 20 s, so a missing row fails on the lines printed.
      AbortSignal.any([stop.signal, AbortSignal.timeout(20_000)]),
    );
    // The list first (a Table), then the watch from its resourceVersion: the scale-up's events.
    await Promise.race([listed.promise, watching]);
    await ok([...n, "scale", "deployment", "web", "--replicas=3"]);
    await Promise.race([scaled.promise, watching]);
    stop.abort();
    const lines = (await watching).stdout.trim().split("\n");
    assert.match(lines[0]!, /^NAME +READY +UP-TO-DATE +AVAILABLE +AGE$/);
    assert.ok(lines.length > 2, lines.join("\n"));
    for (const line of lines.slice(1)) assert.match(line, /^web +\d\/[23] +\d +\d +\d+s$/);
  });

  it("scale rs on a Deployment's ReplicaSet is undone; the repeated event's count shows in get events and events", async () => {
    const n = ["-n", "handscale"];
    await ok(["create", "namespace", "handscale"]);
    await ok([...n, "create", "deployment", "web", "--image=nginx:1.27", "--replicas=2"]);
    await ok([...n, "rollout", "status", "deployment/web", "--timeout=60s"]);
    const rs = (await ok([...n, "get", "rs", "-o", "name"])).trim();
    const name = rs.replace("replicaset.apps/", "");
    const scaledBack = new RegExp(`\\bScaled down replica set ${name} from 5 to 2 +\\S+ +(\\d+) +web\\.`);
    for (const count of ["1", "2"]) {
      assert.equal(await ok([...n, "scale", rs, "--replicas=5"]), `${rs} scaled\n`);
      for (let i = 0; ; i++) {
        const events = await ok([...n, "get", "events", "-o", "wide"]);
        if (scaledBack.exec(events)?.[1] === count) break;
        assert.ok(i < 100, `no "Scaled down ... from 5 to 2" with count ${count}:\n${events}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      // The scale-back, its event and the pods' deletion are one reconcile: all done by now.
      assert.match(await ok([...n, "get", rs, "--no-headers"]), new RegExp(`^${name} +2 +2 +2 `));
      // Only ready pods: the three the ReplicaSet controller made for the 5 were deleted again.
      assert.equal((await ok([...n, "get", "pods", "--no-headers"])).trim().split("\n").length, 2);
    }
    assert.match(await ok([...n, "get", "events", "-o", "wide"]), /^LAST SEEN +TYPE +REASON +OBJECT +SUBOBJECT +SOURCE +MESSAGE +FIRST SEEN +COUNT +NAME\n/);
    assert.match(
      await ok([...n, "events", "--for", "deployment/web"]),
      new RegExp(`\\(x2 over \\S+\\) +Normal +ScalingReplicaSet +Deployment/web +Scaled down replica set ${name} from 5 to 2`),
    );
  });

  it("create, then the rollout's pods, ReplicaSets and Events; rollout history and undo", async () => {
    const n = ["-n", "history"];
    await ok(["create", "namespace", "history"]);
    assert.equal(await ok([...n, "create", "deployment", "web", "--image=nginx:1.26", "--replicas=2"]), "deployment.apps/web created\n");
    assert.equal(await ok([...n, "create", "configmap", "settings", "--from-literal=mode=fast"]), "configmap/settings created\n");
    assert.equal(await ok([...n, "create", "secret", "generic", "token", "--from-literal=key=s3cret"]), "secret/token created\n");
    await ok([...n, "rollout", "status", "deployment/web", "--timeout=60s"]);
    const pods = (await ok([...n, "get", "pods"])).trim().split("\n");
    assert.match(pods[0], /^NAME +READY +STATUS +RESTARTS +AGE$/);
    assert.equal(pods.length, 3, pods.join("\n"));
    for (const row of pods.slice(1)) assert.match(row, /^web-[b-z2-9]+-[b-z2-9]{5} +1\/1 +Running +0 +\S+$/);

    // A second revision with a change-cause, then back to the first.
    await ok([...n, "annotate", "deployment", "web", "kubernetes.io/change-cause=nginx 1.27"]);
    await ok([...n, "set", "image", "deployment/web", "nginx=nginx:1.27"]);
    await ok([...n, "rollout", "status", "deployment/web", "--timeout=60s"]);
    assert.match(await ok([...n, "rollout", "history", "deployment/web"]), /REVISION +CHANGE-CAUSE\n1 +nginx 1\.27\n2 +nginx 1\.27\n/);
    assert.match(await ok([...n, "rollout", "history", "deployment/web", "--revision=1"]), /Image:\s+nginx:1\.26/);
    const sets = (await ok([...n, "get", "rs", "-o", "wide"])).trim().split("\n");
    assert.match(sets[0], /^NAME +DESIRED +CURRENT +READY +AGE +CONTAINERS +IMAGES +SELECTOR$/);
    assert.deepEqual(
      sets
        .slice(1)
        .map((row) => row.split(/ +/).slice(1, 4).join(" "))
        .sort(),
      ["0 0 0", "2 2 2"],
    );
    assert.equal(await ok([...n, "rollout", "undo", "deployment/web"]), "deployment.apps/web rolled back\n");
    await ok([...n, "rollout", "status", "deployment/web", "--timeout=60s"]);
    assert.equal(await ok([...n, "get", "deployment", "web", "-o", "jsonpath={.spec.template.spec.containers[0].image}"]), "nginx:1.26");
    // The first revision's ReplicaSet is the current one again, as revision 3.
    assert.match(await ok([...n, "rollout", "history", "deployment/web"]), /REVISION +CHANGE-CAUSE\n2 +nginx 1\.27\n3 +/);
    const current = await ok([
      ...n,
      "get",
      "rs",
      "-l",
      "app=web",
      "-o",
      "jsonpath={range .items[?(@.spec.replicas==2)]}{.spec.template.spec.containers[0].image}{end}",
    ]);
    assert.equal(current, "nginx:1.26");

    // Events of the rollout, as kubectl get events and kubectl events show them.
    const events = await ok([...n, "get", "events"]);
    assert.match(events, /^LAST SEEN +TYPE +REASON +OBJECT +MESSAGE\n/);
    assert.match(events, /Normal +ScalingReplicaSet +deployment\/web +Scaled up replica set web-\S+ from 0 to 2/);
    assert.match(events, /Normal +SuccessfulCreate +replicaset\/web-\S+ +Created pod: web-/);
    assert.match(events, /Normal +Scheduled +pod\/web-\S+ +Successfully assigned history\/web-\S+ to emulator-node/);
    assert.match(await ok([...n, "events", "--for", "deployment/web"]), /ScalingReplicaSet +Deployment\/web +Scaled down replica set web-/);

    // A deleted pod is replaced; an image that cannot be pulled shows as such.
    const [victim] = (await ok([...n, "get", "pods", "-o", "name"])).trim().split("\n");
    await ok([...n, "delete", victim!]);
    await ok([...n, "wait", "--for=condition=Ready", "pod", "-l", "app=web", "--timeout=60s"]);
    const after = (await ok([...n, "get", "pods", "-o", "name"])).trim().split("\n");
    assert.equal(after.length, 2);
    assert.ok(!after.includes(victim!));
    await ok([...n, "create", "deployment", "broken", "--image=registry.example/fail:1"]);
    for (let i = 0; ; i++) {
      const row = await ok([...n, "get", "pods", "-l", "app=broken", "--no-headers"]);
      if (/0\/1 +ImagePullBackOff +0 /.test(row)) break;
      assert.ok(i < 100, `no ImagePullBackOff pod: ${row}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.match(
      await ok([...n, "get", "events", "--field-selector", "type=Warning"]),
      /Warning +Failed +pod\/broken-\S+ +Failed to pull image "registry\.example\/fail:1"/,
    );

    // Deleting the Deployment deletes its ReplicaSets and pods; --cascade=orphan leaves them.
    await ok([...n, "delete", "deployment", "web", "--cascade=orphan"]);
    assert.equal(await ok([...n, "get", "rs", "-l", "app=web", "-o", "jsonpath={.items[*].metadata.ownerReferences}"]), "");
    assert.equal((await ok([...n, "get", "pods", "-l", "app=web", "-o", "name"])).trim().split("\n").length, 2);
    await ok([...n, "delete", "deployment", "broken"]);
    await ok([...n, "wait", "--for=delete", "pod", "-l", "app=broken", "--timeout=60s"]);
    assert.equal(await ok([...n, "get", "rs", "-l", "app=broken", "-o", "name"]), "");
  });

  it("an autoscaling/v2 HPA: get hpa shows its columns, <unknown> without metrics, then the utilization set through the emulator's hook", async () => {
    const n = ["-n", "hpa-demo"];
    await ok(["create", "namespace", "hpa-demo"]);
    await ok([...n, "create", "deployment", "api", "--image=registry.example/api:1"]);
    // kubectl autoscale writes autoscaling/v1, which the emulator does not serve: the v2 manifest instead.
    const manifest = `
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: api}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: api}
  minReplicas: 2
  maxReplicas: 5
  metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}}]
`;
    assert.match(await ok([...n, "apply", "--server-side", "-f", "-"], manifest), /horizontalpodautoscaler\.autoscaling\/api serverside-applied/);
    // Below minReplicas: the controller scales up without metrics; then it cannot compute a count.
    await ok([...n, "wait", "--for=jsonpath={.status.currentReplicas}=2", "hpa/api", "--timeout=30s"]);
    const [header, row] = (await ok([...n, "get", "hpa"])).trim().split("\n");
    assert.match(header!, /^NAME +REFERENCE +TARGETS +MINPODS +MAXPODS +REPLICAS +AGE$/);
    assert.match(row!, /^api +Deployment\/api +cpu: <unknown>\/70% +2 +5 +2 +\d+s$/);
    assert.match(await ok([...n, "get", "hpa", "api", "-o", 'jsonpath={.status.conditions[?(@.type=="ScalingActive")].reason}']), /^FailedGetResourceMetric$/);
    const response = await fetch(`${emu.url}/_emulator/hpa/hpa-demo/api/utilization`, { method: "POST", body: JSON.stringify({ cpu: 140 }) });
    assert.equal(response.status, 200);
    await ok([...n, "wait", "--for=jsonpath={.status.currentReplicas}=5", "hpa/api", "--timeout=30s"]);
    await ok([...n, "wait", "--for=jsonpath={.status.currentMetrics[0].resource.current.averageUtilization}=140", "hpa/api", "--timeout=30s"]);
    assert.match(await ok([...n, "get", "hpa", "api", "--no-headers"]), /^api +Deployment\/api +cpu: 140%\/70% +2 +5 +\d +\d+s/);
    assert.match(
      await ok([...n, "get", "events", "--field-selector", "reason=SuccessfulRescale"]),
      /New size: 2; reason: Current number of replicas below Spec\.MinReplicas/,
    );
    await ok([...n, "delete", "namespace", "hpa-demo", "--wait=false"]);
  });
});
