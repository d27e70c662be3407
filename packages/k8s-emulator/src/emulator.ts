// KubernetesEmulator: wires the store, registry, watches, controllers,
// fault injection and the HTTP server together, and offers direct state
// access for tests.
import { randomUUID } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createTlsServer, type Server as TlsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { Authenticator } from "./auth.ts";
import { AutoscalerController, type Utilization } from "./autoscaler.ts";
import { DisruptionController } from "./disruption.ts";
import { badRequest } from "./errors.ts";
import { FaultInjector } from "./faults.ts";
import { podMetricsText } from "./pod-metrics.ts";
import { createRequestHandler, type RequestLogEntry } from "./http.ts";
import { kubeconfigYaml } from "./kubeconfig.ts";
import { NamespaceController } from "./namespaces.ts";
import { BOOTSTRAP_POLICY, RbacAuthorizer } from "./rbac.ts";
import { Registry } from "./registry.ts";
import { KINDS, findType } from "./kinds/index.ts";
import type { KindStrategy } from "./kinds/strategy.ts";
import { groupVersion } from "./resources.ts";
import { DeploymentController } from "./rollout/deployment-controller.ts";
import { ObjectStore } from "./store.ts";
import { isObject, type KubeObject } from "./util.ts";
import { WatchHub } from "./watch.ts";
import { EventRecorder, PODS } from "./workloads.ts";

export interface EmulatorOptions {
  host?: string;
  /** 0 (default) picks a free port. */
  port?: number;
  /** Time a new pod takes to become ready; a rollout takes one such delay per step. Default 300. */
  rolloutDelayMs?: number;
  /**
   * Length in ms of one second of a Deployment's progressDeadlineSeconds.
   * Default rolloutDelayMs / 100, so the default 600 s deadline passes after
   * six readiness delays without progress.
   */
  progressDeadlineSecondMs?: number;
  /** Time the namespace controller takes to empty and remove a Terminating namespace. Default 300. */
  namespaceDeletionDelayMs?: number;
  /** Deployments with a container image matching this never become available. Default /fail/. */
  failingImagePattern?: RegExp;
  /**
   * Pods with a container image matching this become ready (their probes pass) but answer 20%
   * of their requests with 500 in their metrics (/_emulator/metrics, pod-metrics.ts). Default /err/.
   */
  erroringImagePattern?: RegExp;
  /** Event objects (of rollouts: scaling, pods created, started) kept, the oldest removed first. Default 1000. */
  eventLimit?: number;
  /** Events kept per resource type for resuming watches; older resourceVersions get 410 Expired. Default 1000. */
  watchHistory?: number;
  /** Interval of BOOKMARK events on watches with allowWatchBookmarks=true. Default 1000. */
  bookmarkIntervalMs?: number;
  /** Request log entries kept (oldest dropped first). Default 10000. */
  requestLogLimit?: number;
  /**
   * Authenticate every request (the kubeconfig's admin token, issued ServiceAccount tokens,
   * anonymous) and authorize it with RBAC over the stored roles and bindings. Default false:
   * every request is allowed, whatever its token.
   */
  rbac?: boolean;
  /**
   * Serve HTTPS with this certificate and key (PEM) instead of plain HTTP. kubectl (client-go)
   * sends a kubeconfig's credentials only over TLS, so RBAC with kubectl needs it. With
   * `clientCa`, client certificates it signed authenticate as user CN, groups O.
   */
  tls?: { cert: string | Buffer; key: string | Buffer; clientCa?: string | Buffer };
}

/** Namespaces every cluster starts with. */
const INITIAL_NAMESPACES = ["default", "kube-node-lease", "kube-public", "kube-system"];

/** Identifies a type for the direct API: a KindStrategy, an object with apiVersion/kind, or (apiVersion, kind-or-resource). */
export type TypeRef = KindStrategy | { apiVersion: string; kind: string };

function resolveType(ref: TypeRef | string, kindOrResource?: string): KindStrategy {
  let rt: KindStrategy | undefined;
  if (typeof ref === "string") rt = findType(ref, kindOrResource ?? "");
  else if ("resource" in ref) rt = ref;
  else rt = findType(ref.apiVersion, ref.kind);
  if (!rt) throw new TypeError(`unknown type: ${typeof ref === "string" ? `${ref} ${kindOrResource}` : JSON.stringify(ref)}`);
  return rt;
}

export class KubernetesEmulator {
  readonly url: string;
  readonly faults: FaultInjector;
  requestLog: RequestLogEntry[] = [];
  /** TCP connections accepted since start (a client that reuses connections opens few). */
  connectionCount = 0;
  readonly options: Required<Omit<EmulatorOptions, "host" | "port" | "tls">>;
  private readonly server: Server | TlsServer;
  private readonly store: ObjectStore;
  private readonly registry: Registry;
  private readonly watches: WatchHub;
  private readonly rollout: DeploymentController;
  private readonly namespaceController: NamespaceController;
  private readonly disruption: DisruptionController;
  private readonly autoscaler: AutoscalerController;
  private readonly authenticator: Authenticator;
  private stopped = false;

  private constructor(server: Server | TlsServer, url: string, options: KubernetesEmulator["options"]) {
    this.server = server;
    this.url = url;
    this.options = options;
    this.store = new ObjectStore(options.watchHistory);
    this.registry = new Registry(this.store);
    this.watches = new WatchHub(this.store, options.bookmarkIntervalMs);
    this.faults = new FaultInjector(this.watches);
    this.rollout = new DeploymentController(this.registry, {
      podReadyDelayMs: options.rolloutDelayMs,
      deadlineSecondMs: options.progressDeadlineSecondMs,
      failingImage: options.failingImagePattern,
      eventLimit: options.eventLimit,
    });
    this.rollout.start();
    this.autoscaler = new AutoscalerController(this.registry, new EventRecorder(this.registry, options.eventLimit));
    this.autoscaler.start();
    this.namespaceController = new NamespaceController(this.registry, options.namespaceDeletionDelayMs);
    this.namespaceController.start();
    this.disruption = new DisruptionController(this.registry);
    this.disruption.start();
    this.authenticator = new Authenticator(this.registry);
    this.authenticator.start();
    this.seed();
  }

  static async start(opts: EmulatorOptions = {}): Promise<KubernetesEmulator> {
    const host = opts.host ?? "127.0.0.1";
    const { tls } = opts;
    // Client certificates are asked for, and checked against clientCa per request (auth.ts), not required.
    const server = tls
      ? createTlsServer({ cert: tls.cert, key: tls.key, ...(tls.clientCa ? { ca: tls.clientCa, requestCert: true, rejectUnauthorized: false } : {}) })
      : createServer();
    // Watches are long-lived; don't let Node's request timeouts cut them.
    server.requestTimeout = 0;
    server.headersTimeout = 60_000;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(opts.port ?? 0, host, () => {
        server.off("error", reject);
        resolve();
      });
    });
    const { port } = server.address() as AddressInfo;
    const urlHost = host.includes(":") ? `[${host}]` : host === "0.0.0.0" ? "127.0.0.1" : host;
    const rolloutDelayMs = opts.rolloutDelayMs ?? 300;
    const emulator = new KubernetesEmulator(server, `${tls ? "https" : "http"}://${urlHost}:${port}`, {
      rolloutDelayMs,
      progressDeadlineSecondMs: opts.progressDeadlineSecondMs ?? rolloutDelayMs / 100,
      namespaceDeletionDelayMs: opts.namespaceDeletionDelayMs ?? 300,
      failingImagePattern: opts.failingImagePattern ?? /fail/,
      erroringImagePattern: opts.erroringImagePattern ?? /err/,
      eventLimit: opts.eventLimit ?? 1000,
      watchHistory: opts.watchHistory ?? 1000,
      bookmarkIntervalMs: opts.bookmarkIntervalMs ?? 1000,
      requestLogLimit: opts.requestLogLimit ?? 10_000,
      rbac: opts.rbac ?? false,
    });
    server.on("connection", () => emulator.connectionCount++);
    server.on(
      "request",
      createRequestHandler({
        registry: emulator.registry,
        watches: emulator.watches,
        faults: emulator.faults,
        authenticator: emulator.authenticator,
        ...(emulator.options.rbac ? { authorizer: new RbacAuthorizer(emulator.registry) } : {}),
        log: (entry) => emulator.record(entry),
        admin: (req, res, path, body) => emulator.admin(req, res, path, body),
        serverAddress: () => `${urlHost}:${port}`,
      }),
    );
    return emulator;
  }

  private seed(): void {
    for (const name of INITIAL_NAMESPACES) this.registry.put({ apiVersion: "v1", kind: "Namespace", metadata: { name } });
    if (this.options.rbac) for (const object of BOOTSTRAP_POLICY) this.registry.put(object);
  }

  private record(entry: RequestLogEntry): void {
    this.requestLog.push(entry);
    const excess = this.requestLog.length - this.options.requestLogLimit;
    if (excess > 0) this.requestLog.splice(0, excess);
  }

  clearRequestLog(): void {
    this.requestLog = [];
  }

  kubeconfigYaml(token?: string): string {
    return kubeconfigYaml(this.url, token);
  }

  async writeKubeconfig(path: string): Promise<void> {
    await writeFile(path, this.kubeconfigYaml(), { mode: 0o600 });
  }

  /** Number of watch connections currently open. */
  get openWatches(): number {
    return this.watches.openCount;
  }

  /** Current global resourceVersion. */
  get resourceVersion(): string {
    return String(this.store.resourceVersion);
  }

  // --- direct state access (no HTTP, no faults; watches and resourceVersions behave as for API writes) ---

  get(type: TypeRef | string, kindOrResourceOrNamespace?: string, ...rest: (string | undefined)[]): KubeObject | undefined {
    const [rt, namespace, name] = this.args(type, kindOrResourceOrNamespace, rest);
    return name === undefined ? undefined : this.store.get(rt, namespace, name);
  }

  list(type: TypeRef | string, kindOrResourceOrNamespace?: string, ...rest: (string | undefined)[]): KubeObject[] {
    const [rt, namespace] = this.args(type, kindOrResourceOrNamespace, rest);
    return this.store.list(rt, namespace);
  }

  /** Creates or replaces an object as given (status included), canonicalized and defaulted like a write, without validation. */
  put(obj: object): KubeObject {
    return this.registry.put(obj);
  }

  /**
   * Server-side apply of `obj` by `manager`, as a PATCH with application/apply-patch+yaml does it
   * (namespace lifecycle, defaults, validation, managedFields, conflicts unless `force`), without
   * HTTP and faults: how a benchmark fills a cluster with what a client would have applied.
   */
  apply(obj: KubeObject, options: { manager: string; force?: boolean }): KubeObject {
    const rt = resolveType(obj);
    const { namespace, name = "" } = obj.metadata;
    return this.registry.patch(rt, namespace, name, "apply", obj, { manager: options.manager }, options.force ?? false).object;
  }

  /** Creates `obj` as a POST by `manager` does (namespace lifecycle, defaults, validation, managedFields), without HTTP and faults. */
  create(obj: KubeObject, options: { manager: string }): KubeObject {
    return this.registry.create(resolveType(obj), obj.metadata.namespace, obj, { manager: options.manager });
  }

  delete(type: TypeRef | string, kindOrResourceOrNamespace?: string, ...rest: (string | undefined)[]): boolean {
    const [rt, namespace, name] = this.args(type, kindOrResourceOrNamespace, rest);
    return name !== undefined && this.registry.remove(rt, namespace, name);
  }

  /**
   * Accepts (typeRef, namespace, name) or (apiVersion, kindOrResource, namespace, name);
   * cluster-scoped types skip the namespace: (typeRef, name) / (apiVersion, kind, name).
   */
  private args(type: TypeRef | string, second: string | undefined, rest: (string | undefined)[]): [KindStrategy, string | undefined, string | undefined] {
    const rt = typeof type === "string" ? resolveType(type, second) : resolveType(type);
    const remaining = typeof type === "string" ? rest : [second, ...rest];
    if (!rt.namespaced) return [rt, undefined, remaining[0]];
    return [rt, remaining[0], remaining[1]];
  }

  /**
   * Holds the namespace controller: Terminating namespaces stay, content included, until the
   * returned function is called (then those whose deletion delay has passed go at once).
   */
  holdNamespaceDeletion(): () => void {
    return this.namespaceController.hold();
  }

  /** Holds pod readiness and progress deadlines of rollouts until the returned function is called (DeploymentController.hold). */
  holdRollouts(): () => void {
    return this.rollout.hold();
  }

  /**
   * Stands in for the resource metrics API (metrics-server) for one HorizontalPodAutoscaler:
   * from now on its pods' average utilization per resource, in percent of their requests, is
   * `utilization` (e.g. {cpu: 140}), and it scales its Deployment from that; {} takes the
   * metrics away again. Without this an HPA behaves as in a cluster without metrics-server.
   */
  setAutoscalerUtilization(namespace: string, name: string, utilization: Utilization): void {
    this.autoscaler.setUtilization(namespace, name, utilization);
  }

  /** Resets faults, the request log, issued tokens and all objects (back to the initial namespaces and, with RBAC, the bootstrap policy); open watches are closed. */
  /**
   * What a restart of a real API server does to its clients' watches: every watch is closed, the
   * server's identity Lease is renewed (a real one writes it as it starts, which moves the
   * resourceVersion on), and the watch cache starts anew from a list at the current
   * resourceVersion, so a watch resumed from an older one gets 410 Gone and its client relists.
   * Objects are kept, as etcd keeps them.
   */
  restartApiServer(): void {
    this.watches.dropAll();
    this.registry.put({
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: "apiserver-emulator", namespace: "kube-system", labels: { "apiserver.kubernetes.io/identity": "kube-apiserver" } },
      spec: { holderIdentity: `apiserver-emulator_${randomUUID()}`, leaseDurationSeconds: 3600, renewTime: new Date().toISOString().replace("Z", "000Z") },
    });
    this.store.forgetHistory();
  }

  reset(): void {
    this.faults.clear();
    this.clearRequestLog();
    this.watches.dropAll();
    this.rollout.stop();
    this.autoscaler.stop();
    this.namespaceController.stop();
    this.disruption.stop();
    this.authenticator.stop();
    this.store.reset();
    this.rollout.start();
    this.autoscaler.start();
    this.namespaceController.start();
    this.disruption.start();
    this.authenticator.start();
    this.seed();
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.rollout.stop();
    this.autoscaler.stop();
    this.namespaceController.stop();
    this.disruption.stop();
    this.authenticator.stop();
    this.watches.stop();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }

  // --- /_emulator endpoints ---

  private admin(req: IncomingMessage, res: ServerResponse, path: string, body: string): void {
    const method = req.method ?? "GET";
    const json = (status: number, payload: unknown) => {
      const text = JSON.stringify(payload);
      res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
      res.end(text);
    };
    const parse = (): Record<string, unknown> => {
      if (!body.trim()) return {};
      let v: unknown;
      try {
        v = JSON.parse(body);
      } catch (err) {
        throw badRequest(`invalid JSON: ${(err as Error).message}`);
      }
      if (!isObject(v)) throw badRequest("expected a JSON object");
      return v;
    };
    const notAllowed = () => json(405, { error: `${method} not allowed on ${path}` });
    switch (path) {
      case "/_emulator/faults":
        if (method === "GET") return json(200, this.faults.snapshot());
        if (method === "PUT" || method === "POST") {
          this.faults.configure(parse(), method === "PUT");
          return json(200, this.faults.snapshot());
        }
        if (method === "DELETE") {
          this.faults.clear();
          return json(200, this.faults.snapshot());
        }
        return notAllowed();
      case "/_emulator/requests":
        if (method === "GET") return json(200, this.requestLog);
        if (method === "DELETE") {
          this.clearRequestLog();
          return json(200, []);
        }
        return notAllowed();
      case "/_emulator/reset":
        if (method !== "POST" && method !== "PUT") return notAllowed();
        this.reset();
        return json(200, { ok: true });
      case "/_emulator/metrics": {
        // The pods' traffic metrics, for a Prometheus to scrape (pod-metrics.ts).
        if (method !== "GET") return notAllowed();
        const text = podMetricsText(this.store.list(PODS), this.options.erroringImagePattern, Date.now());
        res.writeHead(200, { "Content-Type": "text/plain; version=0.0.4; charset=utf-8", "Content-Length": Buffer.byteLength(text) });
        res.end(text);
        return;
      }
      case "/_emulator/objects": {
        // A dump of everything stored, handy when debugging the local stack.
        if (method !== "GET") return notAllowed();
        const out: Record<string, KubeObject[]> = {};
        for (const rt of KINDS) out[`${groupVersion(rt)}/${rt.resource}`] = this.store.list(rt);
        return json(200, out);
      }
      default: {
        // /_emulator/hpa/<namespace>/<name>/utilization, body {"cpu": 140}: see setAutoscalerUtilization().
        const hpa = /^\/_emulator\/hpa\/([^/]+)\/([^/]+)\/utilization$/.exec(path);
        if (!hpa) return json(404, { error: `unknown emulator endpoint ${path}` });
        if (method !== "POST" && method !== "PUT") return notAllowed();
        const utilization = parse();
        for (const [resource, value] of Object.entries(utilization)) {
          if (typeof value !== "number" || !(value >= 0)) throw badRequest(`${resource}: utilization must be a number of percent, at least 0`);
        }
        this.setAutoscalerUtilization(decodeURIComponent(hpa[1]!), decodeURIComponent(hpa[2]!), utilization as Utilization);
        return json(200, utilization);
      }
    }
  }
}
