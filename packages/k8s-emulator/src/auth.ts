// Authentication: who a request is, in the API server's order: a client certificate signed by
// the client CA (user CN, groups O; only when serving TLS with one), then a bearer token: the
// admin token of the kubeconfig the emulator writes (group system:masters), or a ServiceAccount
// token the emulator issued (TokenRequest, or a kubernetes.io/service-account-token Secret it
// populated). No credentials is the anonymous user, as with the default --anonymous-auth=true.
import { randomBytes } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { TLSSocket } from "node:tls";
import { ApiError, invalid } from "./errors.ts";
import type { Registry } from "./registry.ts";
import type { StoreEvent } from "./store.ts";
import { findByPath } from "./kinds/index.ts";
import { isObject, type JsonObject, type KubeObject } from "./util.ts";

/** k8s.io/apiserver/pkg/authentication/user.Info. */
export interface UserInfo {
  name: string;
  groups: string[];
}

/** The token of the kubeconfig the emulator writes. */
export const ADMIN_TOKEN = "emulator-token";

/** The admin: system:masters, which the API server allows everything before RBAC is asked. */
export const ADMIN: UserInfo = { name: "emulator-admin", groups: ["system:masters", "system:authenticated"] };

const ANONYMOUS: UserInfo = { name: "system:anonymous", groups: ["system:unauthenticated"] };

/** The issuer's default audience (kube-apiserver --api-audiences defaults to the issuer). */
const AUDIENCE = "https://kubernetes.default.svc.cluster.local";

/** TokenRequest bounds (pkg/apis/authentication/validation: at least 10 minutes, less than 2^32 s). */
const MIN_EXPIRATION_SECONDS = 600;
const MAX_EXPIRATION_SECONDS = 2 ** 32;
const DEFAULT_EXPIRATION_SECONDS = 3600;

const TOKEN_SECRET_TYPE = "kubernetes.io/service-account-token";
const SA_NAME_ANNOTATION = "kubernetes.io/service-account.name";
const SA_UID_ANNOTATION = "kubernetes.io/service-account.uid";

const SERVICE_ACCOUNTS = findByPath("", "v1", "serviceaccounts")!;
const SECRETS = findByPath("", "v1", "secrets")!;

/** What a token stands for: a ServiceAccount (by uid: a re-created account's old tokens fail), until it expires or its Secret goes. */
interface IssuedToken {
  namespace: string;
  serviceAccount: string;
  uid: string;
  expiresAt?: number;
  /** The service-account-token Secret of a legacy token. */
  secret?: { name: string; uid: string };
}

/** A 401 as the API server writes it (no details). */
export function unauthorized(): ApiError {
  return new ApiError(401, "Unauthorized");
}

/** The user name of a ServiceAccount (apiserver/pkg/authentication/serviceaccount.MakeUsername). */
export function serviceAccountUser(namespace: string, name: string): UserInfo {
  return {
    name: `system:serviceaccount:${namespace}:${name}`,
    groups: ["system:serviceaccounts", `system:serviceaccounts:${namespace}`, "system:authenticated"],
  };
}

/** x509 authentication (apiserver/pkg/authentication/request/x509 CommonNameUserConversion). */
function clientCertificateUser(req: IncomingMessage): UserInfo | undefined {
  const socket = req.socket;
  if (!(socket instanceof TLSSocket) || !socket.authorized) return undefined;
  const { subject } = socket.getPeerCertificate();
  if (!subject?.CN) return undefined;
  const organizations = subject.O === undefined ? [] : ([] as string[]).concat(subject.O);
  return { name: String(subject.CN), groups: [...organizations, "system:authenticated"] };
}

/** Issues ServiceAccount tokens and tells who a bearer token is. */
export class Authenticator {
  readonly #registry: Registry;
  readonly #tokens = new Map<string, IssuedToken>();
  #unsubscribe: (() => void) | undefined;

  constructor(registry: Registry) {
    this.#registry = registry;
  }

  /** Starts the token controller: it fills in the token of service-account-token Secrets. */
  start(): void {
    this.#unsubscribe = this.#registry.store.subscribe((event) => this.#onEvent(event));
  }

  stop(): void {
    this.#unsubscribe?.();
    this.#tokens.clear();
  }

  /** The user of a request; undefined for a token nobody issued or no longer valid (401). */
  authenticate(req: IncomingMessage): UserInfo | undefined {
    const certificateUser = clientCertificateUser(req);
    if (certificateUser) return certificateUser;
    const header = req.headers.authorization;
    if (header === undefined) return ANONYMOUS;
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match) return undefined;
    const token = match[1];
    if (token === ADMIN_TOKEN) return ADMIN;
    const issued = this.#tokens.get(token);
    if (!issued || !this.#valid(issued)) return undefined;
    return serviceAccountUser(issued.namespace, issued.serviceAccount);
  }

  /**
   * POST serviceaccounts/<name>/token (pkg/registry/core/serviceaccount/storage/token.go): a token
   * bound to the account's uid, expiring after spec.expirationSeconds (default one hour).
   */
  tokenRequest(serviceAccount: KubeObject, body: unknown): JsonObject {
    const spec = isObject(body) && isObject(body.spec) ? body.spec : {};
    const seconds = spec.expirationSeconds ?? DEFAULT_EXPIRATION_SECONDS;
    if (typeof seconds !== "number" || !Number.isInteger(seconds) || seconds < MIN_EXPIRATION_SECONDS || seconds > MAX_EXPIRATION_SECONDS) {
      const detail =
        typeof seconds === "number" && seconds > MAX_EXPIRATION_SECONDS
          ? "may not specify a duration larger than 2^32 seconds"
          : "may not specify a duration less than 10 minutes";
      throw invalid("TokenRequest", "authentication.k8s.io", serviceAccount.metadata.name ?? "", [
        { field: "spec.expirationSeconds", type: "Invalid value", value: seconds, detail },
      ]);
    }
    const expiresAt = Date.now() + seconds * 1000;
    const token = this.#issue({ ...this.#accountOf(serviceAccount), expiresAt });
    const { name, namespace } = serviceAccount.metadata;
    return {
      kind: "TokenRequest",
      apiVersion: "authentication.k8s.io/v1",
      metadata: { name, namespace, creationTimestamp: null },
      spec: {
        audiences: Array.isArray(spec.audiences) && spec.audiences.length ? spec.audiences : [AUDIENCE],
        expirationSeconds: seconds,
        boundObjectRef: spec.boundObjectRef ?? null,
      },
      status: { token, expirationTimestamp: new Date(expiresAt).toISOString().replace(/\.\d+Z$/, "Z") },
    };
  }

  #accountOf(serviceAccount: KubeObject): Omit<IssuedToken, "expiresAt" | "secret"> {
    return { namespace: serviceAccount.metadata.namespace ?? "", serviceAccount: serviceAccount.metadata.name ?? "", uid: serviceAccount.metadata.uid ?? "" };
  }

  #issue(issued: IssuedToken): string {
    const token = randomBytes(32).toString("base64url");
    this.#tokens.set(token, issued);
    return token;
  }

  #valid(issued: IssuedToken): boolean {
    if (issued.expiresAt !== undefined && Date.now() >= issued.expiresAt) return false;
    const account = this.#registry.store.get(SERVICE_ACCOUNTS, issued.namespace, issued.serviceAccount);
    if (account?.metadata.uid !== issued.uid) return false;
    return issued.secret === undefined || this.#registry.store.get(SECRETS, issued.namespace, issued.secret.name)?.metadata.uid === issued.secret.uid;
  }

  /**
   * The legacy token controller (pkg/controller/serviceaccount/tokens_controller.go): a Secret of
   * type service-account-token naming an existing account gets the account's uid annotation and
   * data.token and data.namespace; the token never expires and dies with the Secret or the account.
   */
  #onEvent(event: StoreEvent): void {
    if (event.rt !== SECRETS || event.type === "DELETED") return;
    const secret = event.object;
    const name = secret.metadata.annotations?.[SA_NAME_ANNOTATION];
    if (secret.type !== TOKEN_SECRET_TYPE || !name || (isObject(secret.data) && secret.data.token)) return;
    const namespace = secret.metadata.namespace ?? "";
    const account = this.#registry.store.get(SERVICE_ACCOUNTS, namespace, name);
    if (!account) return;
    const base64 = (text: string) => Buffer.from(text).toString("base64");
    // After the write that triggered it, as a controller would.
    queueMicrotask(() => {
      const current = this.#registry.store.get(SECRETS, namespace, secret.metadata.name ?? "");
      if (!current || current.metadata.uid !== secret.metadata.uid) return;
      const token = this.#issue({ ...this.#accountOf(account), secret: { name: current.metadata.name ?? "", uid: current.metadata.uid ?? "" } });
      this.#registry.put({
        ...current,
        metadata: { ...current.metadata, annotations: { ...current.metadata.annotations, [SA_UID_ANNOTATION]: account.metadata.uid ?? "" } },
        data: { ...(isObject(current.data) ? current.data : {}), token: base64(token), namespace: base64(namespace) },
      });
    });
  }
}
