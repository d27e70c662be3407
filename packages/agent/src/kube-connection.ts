// How the agent reaches a cluster: the API server's URL, a pooled connection, and the
// credentials of each request, from the in-cluster service account or a kubeconfig.
//
// * In-cluster (client-go's rest.InClusterConfig): https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT,
//   the service account's CA, and its token file (the kubelet rotates projected tokens).
// * Kubeconfig files (client-go's clientcmd): $KUBECONFIG as a path list (the first file that
//   names a cluster, user or context wins; the first current-context set wins), or ~/.kube/config.
//   Relative file paths are taken from the directory of the file that names them. What this
//   module implements: server, certificate-authority(-data), insecure-skip-tls-verify,
//   tls-server-name; token, tokenFile, client-certificate(-data), client-key(-data),
//   username/password. Files are read before each request and loaded again when their contents
//   change, so rotated certificates and tokens are used by the next request.
// * Anything else (exec credential plugins — how EKS, GKE and AKS authenticate —, auth-provider,
//   proxy-url, impersonation) loads @kubernetes/client-node (some 40 MB of RSS) on demand and asks
//   its public KubeConfig.applyToHTTPSOptions() for each request's headers and TLS options.
//
// One connection pool (keep-alive Agent) per cluster per process, replaced when the TLS material
// changes, with at most `maxConnections` sockets (KUBE_MAX_CONNECTIONS says why).
import { readFileSync } from "node:fs";
import { Agent as HttpAgent } from "node:http";
import { Agent as HttpsAgent, type RequestOptions } from "node:https";
import { isIPv6 } from "node:net";
import { createSecureContext } from "node:tls";
import { homedir } from "node:os";
import { delimiter, dirname, isAbsolute, join } from "node:path";
import { parse, stringify } from "yaml";
import { ReloadingFiles, silentLogger, type Logger } from "@flotilla/runtime";
import { KUBE_CREDENTIALS_RECHECK_MS, KUBE_MAX_CONNECTIONS } from "./kube-limits.ts";

/** The service account's files in every pod (client-go's rest.InClusterConfig). */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

/** What one request carries besides its method and path. */
export interface RequestCredentials {
  /** The pool the request goes through (http or https, with the cluster's TLS options). */
  agent: HttpAgent;
  /** The Authorization header, if any. */
  headers: Record<string, string>;
  /** user:password for basic authentication. */
  auth?: string;
}

/**
 * A cluster's address and credentials. `credentials()` is asked before every request: tokens
 * and certificates may have been rotated since the last one.
 */
export interface KubeConnection {
  /** The API server's base URL (a path prefix, as some proxies serve, is kept). */
  readonly server: URL;
  /** Connections to the server at most. */
  readonly maxConnections: number;
  credentials(): Promise<RequestCredentials>;
}

export interface ConnectionOptions {
  /** Connections to the server at most. Default KUBE_MAX_CONNECTIONS. */
  maxConnections?: number;
  /** Where rotated credentials are reported. Default: nowhere. */
  log?: Logger;
  /** The credential files are read again at most this often. Default KUBE_CREDENTIALS_RECHECK_MS. */
  credentialsRecheckMs?: number;
}

/**
 * The connection of `kubeconfig` if given, else of the in-cluster service account (in a pod),
 * else of $KUBECONFIG or ~/.kube/config: the agent's --kubeconfig rule, as client-go's.
 */
export async function loadKubeConnection({
  kubeconfig,
  env = process.env,
  ...options
}: ConnectionOptions & { kubeconfig?: string; env?: NodeJS.ProcessEnv } = {}): Promise<KubeConnection> {
  if (kubeconfig) return kubeconfigConnection([kubeconfig], options);
  if (env.KUBERNETES_SERVICE_HOST && env.KUBERNETES_SERVICE_PORT) return inClusterConnection({ env, ...options });
  const paths = (env.KUBECONFIG ?? "").split(delimiter).filter(Boolean);
  if (paths.length > 0) return kubeconfigConnection(paths, options);
  const home = join(homedir(), ".kube", "config");
  const files = [readKubeconfig(home, "no --kubeconfig, not in a cluster (KUBERNETES_SERVICE_HOST unset), no $KUBECONFIG")];
  return connect(selectContext(files), options);
}

/** The service account's connection: KUBERNETES_SERVICE_HOST/PORT, and `dir`'s ca.crt and token. */
export function inClusterConnection({
  env = process.env,
  dir = SERVICE_ACCOUNT_DIR,
  ...options
}: ConnectionOptions & { env?: NodeJS.ProcessEnv; dir?: string } = {}): KubeConnection {
  const host = env.KUBERNETES_SERVICE_HOST ?? "";
  const port = env.KUBERNETES_SERVICE_PORT ?? "";
  if (!host || !port) throw new Error("in-cluster configuration needs KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT");
  const server = new URL(`https://${isIPv6(host) ? `[${host}]` : host}:${port}`);
  const credentials = {
    ca: { path: join(dir, "ca.crt"), field: "the service account's CA" },
    token: { path: join(dir, "token"), field: "the service account's token" },
  };
  return new StaticConnection(server, credentials, options);
}

/** The connection of the current context of these kubeconfig files, merged as client-go merges $KUBECONFIG. */
export async function kubeconfigConnection(paths: readonly string[], options: ConnectionOptions = {}): Promise<KubeConnection> {
  return connect(selectContext(paths.map((path) => readKubeconfig(path))), options);
}

/** Kubeconfig text (e.g. the emulator's), its relative paths taken from `dir`. */
export function kubeconfigConnectionFromString(
  text: string,
  { dir = process.cwd(), ...options }: ConnectionOptions & { dir?: string } = {},
): Promise<KubeConnection> {
  return connect(selectContext([parseKubeconfig(text, join(dir, "(kubeconfig text)"))]), options);
}

async function connect(selected: SelectedContext, options: ConnectionOptions): Promise<KubeConnection> {
  return unsupportedFields(selected).length > 0 ? clientNodeConnection(selected, options) : staticConnection(selected, options);
}

// --- kubeconfig files ---

type Fields = Record<string, unknown>;

/** One kubeconfig file: its named entries, their relative paths resolved against the file's directory. */
interface KubeconfigFile {
  path: string;
  clusters: Map<string, Fields>;
  users: Map<string, Fields>;
  contexts: Map<string, Fields>;
  currentContext: string | undefined;
}

/** The current context's entries, and where each came from (for errors). */
interface SelectedContext {
  contextName: string;
  cluster: Fields;
  clusterName: string;
  user: Fields;
  userName: string;
  context: Fields;
  /** The file the cluster's and the user's entries are in (for errors). */
  clusterFile: string;
  userFile: string;
}

function readKubeconfig(path: string, whyThese?: string): KubeconfigFile {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new Error(`cannot read kubeconfig ${path}: ${messageOf(error)}${whyThese ? ` (${whyThese})` : ""}`);
  }
  return parseKubeconfig(text, path);
}

const FILE_FIELDS = { cluster: ["certificate-authority"], user: ["client-certificate", "client-key", "tokenFile"] } as const;

function parseKubeconfig(text: string, path: string): KubeconfigFile {
  let document: unknown;
  try {
    document = parse(text);
  } catch (error) {
    throw new Error(`kubeconfig ${path} is not valid YAML: ${messageOf(error)}`);
  }
  if (document !== null && !isFields(document)) throw new Error(`kubeconfig ${path}: expected a mapping at the top level`);
  const config = (document ?? {}) as Fields;
  const dir = dirname(path);
  const named = (list: "clusters" | "users" | "contexts", field: "cluster" | "user" | "context") => {
    const entries = new Map<string, Fields>();
    const items = config[list] ?? [];
    if (!Array.isArray(items)) throw new Error(`kubeconfig ${path}: ${list} must be a list`);
    for (const [index, item] of items.entries()) {
      if (!isFields(item) || typeof item.name !== "string") throw new Error(`kubeconfig ${path}: ${list}[${index}] needs a name`);
      const fields = item[field] ?? {};
      if (!isFields(fields)) throw new Error(`kubeconfig ${path}: ${list}[name=${item.name}].${field} must be a mapping`);
      if (entries.has(item.name)) continue;
      entries.set(item.name, field === "context" ? fields : resolvePaths(fields, FILE_FIELDS[field], dir));
    }
    return entries;
  };
  const current = config["current-context"];
  return {
    path,
    clusters: named("clusters", "cluster"),
    users: named("users", "user"),
    contexts: named("contexts", "context"),
    currentContext: typeof current === "string" && current !== "" ? current : undefined,
  };
}

/** client-go's ResolveLocalPaths: file fields, and an exec command given as a path (with a separator). */
function resolvePaths(fields: Fields, names: readonly string[], dir: string): Fields {
  const absolute = (value: unknown) => (typeof value === "string" && value !== "" && !isAbsolute(value) ? join(dir, value) : value);
  const resolved: Fields = { ...fields };
  for (const name of names) if (name in resolved) resolved[name] = absolute(resolved[name]);
  const exec = resolved.exec;
  if (isFields(exec) && typeof exec.command === "string" && exec.command.includes("/")) resolved.exec = { ...exec, command: absolute(exec.command) };
  return resolved;
}

function selectContext(files: KubeconfigFile[]): SelectedContext {
  const where = files.map((file) => file.path).join(", ");
  const first = <T>(pick: (file: KubeconfigFile) => T | undefined) => {
    for (const file of files) {
      const value = pick(file);
      if (value !== undefined) return { value, file: file.path };
    }
    return undefined;
  };
  const contextName = first((file) => file.currentContext)?.value;
  if (!contextName) throw new Error(`kubeconfig ${where}: no current-context`);
  const context = first((file) => file.contexts.get(contextName));
  if (!context) throw new Error(`kubeconfig ${where}: current-context ${JSON.stringify(contextName)} is not among the contexts`);
  const clusterName = String(context.value.cluster ?? "");
  const cluster = first((file) => file.clusters.get(clusterName));
  if (!cluster)
    throw new Error(`kubeconfig ${context.file}: context ${JSON.stringify(contextName)} names cluster ${JSON.stringify(clusterName)}, which is not defined`);
  const userName = String(context.value.user ?? "");
  const user = userName === "" ? { value: {}, file: context.file } : first((file) => file.users.get(userName));
  if (!user) throw new Error(`kubeconfig ${context.file}: context ${JSON.stringify(contextName)} names user ${JSON.stringify(userName)}, which is not defined`);
  return {
    contextName,
    context: context.value,
    clusterName,
    cluster: cluster.value,
    clusterFile: cluster.file,
    userName,
    user: user.value,
    userFile: user.file,
  };
}

const SUPPORTED = {
  cluster: new Set([
    "server",
    "certificate-authority",
    "certificate-authority-data",
    "insecure-skip-tls-verify",
    "tls-server-name",
    "extensions",
    "disable-compression",
  ]),
  user: new Set(["token", "tokenFile", "client-certificate", "client-certificate-data", "client-key", "client-key-data", "username", "password", "extensions"]),
};

/** The fields of the selected cluster and user that this module does not implement (then client-node does). */
function unsupportedFields({ cluster, user }: SelectedContext): string[] {
  const unset = (value: unknown) => value === undefined || value === null || value === "" || (Array.isArray(value) && value.length === 0);
  return [
    ...Object.keys(cluster).filter((name) => !SUPPORTED.cluster.has(name) && !unset(cluster[name])),
    ...Object.keys(user).filter((name) => !SUPPORTED.user.has(name) && !unset(user[name])),
  ];
}

function staticConnection(selected: SelectedContext, options: ConnectionOptions): KubeConnection {
  const { cluster, user, clusterFile, userFile, clusterName, userName } = selected;
  const clusterField = (name: string) => `kubeconfig ${clusterFile}: clusters[name=${clusterName}].cluster.${name}`;
  const userField = (name: string) => `kubeconfig ${userFile}: users[name=${userName}].user.${name}`;
  const server = serverUrl(cluster.server, clusterField("server"));
  /** A `-data` field (base64), else the file one (the data wins, as in client-go). */
  const source = (fields: Fields, file: string, what: (name: string) => string): Source | undefined => {
    const data = fields[`${file}-data`];
    if (typeof data === "string" && data !== "") {
      const decoded = Buffer.from(data, "base64");
      if (decoded.length === 0) throw new Error(`${what(`${file}-data`)}: not base64`);
      return { data: decoded };
    }
    const path = fields[file];
    return typeof path === "string" && path !== "" ? { path, field: what(file) } : undefined;
  };
  const token = typeof user.token === "string" && user.token !== "" ? { data: Buffer.from(user.token) } : source(user, "tokenFile", userField);
  const credentials: Credentials = {
    ca: source(cluster, "certificate-authority", clusterField),
    cert: source(user, "client-certificate", userField),
    key: source(user, "client-key", userField),
    rejectUnauthorized: cluster["insecure-skip-tls-verify"] !== true,
    servername: typeof cluster["tls-server-name"] === "string" && cluster["tls-server-name"] !== "" ? cluster["tls-server-name"] : undefined,
    token,
    basic: typeof user.username === "string" && user.username !== "" ? `${user.username}:${String(user.password ?? "")}` : undefined,
  };
  if ((credentials.cert === undefined) !== (credentials.key === undefined))
    throw new Error(`${userField(credentials.cert ? "client-key" : "client-certificate")}: a client certificate needs both the certificate and its key`);
  if (credentials.basic && token) throw new Error(`${userField("username")}: username/password and a bearer token may not both be set`);
  return new StaticConnection(server, credentials, options);
}

function serverUrl(value: unknown, field: string): URL {
  if (typeof value !== "string" || value === "") throw new Error(`${field}: missing`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error(`${field}: ${JSON.stringify(value)} is not a URL`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw new Error(`${field}: ${JSON.stringify(value)} is neither https nor http`);
  return url;
}

// --- requests ---

/** Inline material (kubeconfig data) or a file, named by its kubeconfig field for errors. */
type Source = { data: Buffer } | { path: string; field: string };

/** What a connection this module computes presents: TLS material, a bearer token or basic auth. */
interface Credentials {
  ca?: Source;
  cert?: Source;
  key?: Source;
  rejectUnauthorized?: boolean;
  servername?: string;
  token?: Source;
  basic?: string;
}

/**
 * A connection whose credentials this module computes. The files (CA, client certificate and key,
 * token) are read again at most every `credentialsRecheckMs` and loaded again when their contents changed, as ctrl's
 * and the ctrl transport's certificates are (ReloadingFiles): a rotated token or certificate is
 * used by the next request (client-go re-reads a token file at least every minute), and a
 * certificate without its matching key yet (mid-rotation) keeps the previous pair.
 */
class StaticConnection implements KubeConnection {
  readonly server: URL;
  readonly maxConnections: number;
  readonly #files: ReloadingFiles<RequestCredentials>;
  readonly #pool: ConnectionPool;

  constructor(
    server: URL,
    credentials: Credentials,
    { maxConnections = KUBE_MAX_CONNECTIONS, log = silentLogger, credentialsRecheckMs = KUBE_CREDENTIALS_RECHECK_MS }: ConnectionOptions,
  ) {
    this.server = server;
    this.maxConnections = maxConnections;
    this.#pool = new ConnectionPool(server, maxConnections);
    const { ca, cert, key, rejectUnauthorized, servername, token, basic } = credentials;
    const files = [ca, cert, key, token].filter((source): source is { path: string; field: string } => source !== undefined && "path" in source);
    // Read once here so that a missing file fails the start, naming its field.
    for (const { path, field } of files) {
      try {
        readFileSync(path);
      } catch (error) {
        throw new Error(`${field}: cannot read ${path}: ${messageOf(error)}`);
      }
    }
    const what = files.map((file) => file.path).join(", ");
    try {
      this.#files = new ReloadingFiles<RequestCredentials>({
        paths: files.map((file) => file.path),
        recheckMs: credentialsRecheckMs,
        load: (contents) => {
          const read = (source: Source | undefined) => (source === undefined ? undefined : "data" in source ? source.data : contents[files.indexOf(source)]);
          const tls = { ca: read(ca), cert: read(cert), key: read(key), rejectUnauthorized, servername };
          // Fails now on a broken pair (a key not matching its certificate), not at a connection.
          if (server.protocol === "https:") createSecureContext(tls);
          const bearer = read(token)?.toString("utf8").trim();
          const headers: Record<string, string> = bearer ? { authorization: `Bearer ${bearer}` } : {};
          return { agent: this.#pool.agent(tls), headers, auth: basic };
        },
        onReloaded: () => log.info(`Kubernetes credentials changed (${what}): the next requests use them`),
        onRejected: (_, error) => log.warn(`Kubernetes credentials changed (${what}) but do not load; keeping the previous ones: ${messageOf(error)}`),
      });
    } catch (error) {
      // E.g. a key not matching its certificate, a file that is not PEM.
      throw new Error(`the Kubernetes credentials (${what || "inline"}) do not load: ${messageOf(error)}`);
    }
  }

  async credentials(): Promise<RequestCredentials> {
    return this.#files.current();
  }
}

async function clientNodeConnection(selected: SelectedContext, { maxConnections = KUBE_MAX_CONNECTIONS }: ConnectionOptions): Promise<KubeConnection> {
  const server = serverUrl(selected.cluster.server, `kubeconfig ${selected.clusterFile}: clusters[name=${selected.clusterName}].cluster.server`);
  const { KubeConfig } = await import("@kubernetes/client-node");
  const kubeConfig = new KubeConfig();
  // The selected entries only, their paths already absolute.
  const name = selected.contextName;
  kubeConfig.loadFromString(
    stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: selected.clusterName, cluster: selected.cluster }],
      users: [{ name: selected.userName || name, user: selected.user }],
      contexts: [{ name, context: { ...selected.context, user: selected.userName || name } }],
      "current-context": name,
    }),
  );
  const pool = new ConnectionPool(server, maxConnections);
  const usesProxy = typeof selected.cluster["proxy-url"] === "string";
  return {
    server,
    maxConnections,
    async credentials() {
      const options: RequestOptions = { headers: {} };
      await kubeConfig.applyToHTTPSOptions(options);
      const headers: Record<string, string> = {};
      for (const [header, value] of Object.entries(options.headers ?? {})) if (typeof value === "string") headers[header.toLowerCase()] = value;
      // Through a proxy, client-node's own (cached) proxy agent; else our pool with its TLS options.
      const agent = usesProxy && options.agent instanceof HttpAgent ? options.agent : pool.agent(tlsOptionsOf(options));
      return { agent, headers, auth: options.auth ?? undefined };
    },
  };
}

function tlsOptionsOf(options: RequestOptions): TlsOptions {
  const buffer = (value: unknown) => (value === undefined || value === null ? undefined : Buffer.isBuffer(value) ? value : Buffer.from(String(value)));
  return {
    ca: buffer(options.ca),
    cert: buffer(options.cert),
    key: buffer(options.key),
    rejectUnauthorized: options.rejectUnauthorized,
    servername: options.servername,
  };
}

interface TlsOptions {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  rejectUnauthorized?: boolean;
  servername?: string;
}

/**
 * One keep-alive Agent for the cluster, as long as the TLS options stay the same; a new one
 * when they change (a rotated client certificate), the old one closing its connections as
 * their requests end.
 */
class ConnectionPool {
  readonly #https: boolean;
  readonly #maxSockets: number;
  #current: { options: TlsOptions; agent: HttpAgent } | undefined;

  constructor(server: URL, maxSockets: number) {
    this.#https = server.protocol === "https:";
    this.#maxSockets = maxSockets;
  }

  agent(options: TlsOptions): HttpAgent {
    if (this.#current && sameTls(this.#current.options, options)) return this.#current.agent;
    if (this.#current) retire(this.#current.agent);
    const common = { keepAlive: true, maxSockets: this.#maxSockets, maxTotalSockets: this.#maxSockets };
    const agent = this.#https ? new HttpsAgent({ ...common, ...options }) : new HttpAgent(common);
    this.#current = { options, agent };
    return agent;
  }
}

function sameTls(a: TlsOptions, b: TlsOptions): boolean {
  const same = (x: Buffer | undefined, y: Buffer | undefined) => x === y || (x !== undefined && y !== undefined && x.equals(y));
  return same(a.ca, b.ca) && same(a.cert, b.cert) && same(a.key, b.key) && a.rejectUnauthorized === b.rejectUnauthorized && a.servername === b.servername;
}

/** Closes an Agent's idle connections now and the others once their requests end (until then they count beside the new pool's). */
function retire(agent: HttpAgent): void {
  // A non-keep-alive Agent destroys each socket its request frees.
  (agent as HttpAgent & { keepAlive: boolean }).keepAlive = false;
  for (const sockets of Object.values(agent.freeSockets)) for (const socket of sockets ?? []) socket.destroy();
}

function isFields(value: unknown): value is Fields {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
