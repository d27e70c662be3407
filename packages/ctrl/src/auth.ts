// Bearer-token authentication, and the call's authorization decision (authorization/): the
// admin token may call everything; an operator token what its roles allow, fleet-wide and per
// project; an agent token only ClusterService, and only for its own region row (checked by the
// handler, which knows it). With mTLS, every ClusterService call must also present a client
// certificate; an agent's certificate must name its token's region.
import { hash, timingSafeEqual } from "node:crypto";
import { Code, ConnectError, createContextKey, type ContextValues, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import type { OperatorGrant, RegionRow, TokenGrant } from "@flotilla/store";
import type { CatalogSnapshot, ProjectCatalog } from "./authorization/catalog.ts";
import { decide, ProjectAccess } from "./authorization/decide.ts";
import { permissionOf } from "./authorization/permissions.ts";
import { LruCache } from "./lru-cache.ts";
import { CSRF_HEADER, type SessionCodec } from "./oidc/session.ts";
import { OidcRefusal, OidcVerifier } from "./oidc/verifier.ts";

export type Principal =
  | { kind: "anonymous" }
  | { kind: "admin" }
  /**
   * `role`: fleet-wide (UNSPECIFIED: none); `groups`: the identity provider's groups (none for a static token);
   * `subject`: the OIDC subject of a signed-in person (then `name` is "oidc:<subject>", which no account can be named),
   * and `expireTime` when their token or session ends (ms).
   */
  | { kind: "operator"; name: string; role: Role; groups: readonly string[]; subject?: string; expireTime?: number }
  | { kind: "agent"; region: string; regionId: number };

/** The actor a principal's writes are recorded under: "admin", the operator's name, or "agent:<region>". */
export function actorOf(principal: Principal): string {
  switch (principal.kind) {
    case "operator":
      return principal.name;
    case "agent":
      return `agent:${principal.region}`;
    default:
      return principal.kind;
  }
}

export const principalKey = createContextKey<Principal>({ kind: "anonymous" }, { description: "authenticated caller" });

/** Of a ClusterService call: whether mTLS is on, and then the verified client certificate it presented. */
export type CallCertificate = { mtls: false } | { mtls: true; certificate: ClientCertificate | undefined };
export const callCertificateKey = createContextKey<CallCertificate>({ mtls: false }, { description: "client certificate of a ClusterService call" });

/**
 * ClusterService methods that answer with secret values or the keys to them. Without a client
 * certificate the interceptor lets them through to their handler, which refuses with
 * PERMISSION_DENIED (authorizeSecretValues): the token may be valid, it is not enough.
 */
const SECRET_VALUE_METHODS: ReadonlySet<string> = new Set([ClusterService.method.getSecretKeys.name, ClusterService.method.getSecretEnvSeals.name]);

/** A project-scoped call's access (authorization/decide.ts); unset for other calls. */
export const projectAccessKey = createContextKey<ProjectAccess | undefined>(undefined, { description: "project access of the call" });

/**
 * Runs around the handler (authentication runs before the body is read, so before it): fails
 * closed when a project-scoped unary handler answered without naming a project, which would
 * be an answer nothing checked.
 */
export const projectCheckedInterceptor: Interceptor = (next) => async (req) => {
  const response = await next(req);
  const access = req.contextValues.get(projectAccessKey);
  if (access && !access.consulted && !response.stream) {
    throw new ConnectError(`authorization: ${req.method.name} answered without checking its project`, Code.Internal);
  }
  return response;
};

/**
 * Runs around the handler: a call its handler refused PERMISSION_DENIED (a project the caller
 * holds no role in) is recorded by `onDenied` (the audit trail) before the refusal is sent.
 */
export function deniedCallsInterceptor(onDenied: NonNullable<AuthOptions["onDenied"]>): Interceptor {
  return (next) => async (req) => {
    try {
      return await next(req);
    } catch (error) {
      const principal = req.contextValues.get(principalKey);
      if (error instanceof ConnectError && error.code === Code.PermissionDenied && principal.kind === "operator") {
        const id = req.stream ? undefined : requestedObject(req.message as unknown as Record<string, unknown>);
        // DeploymentService → deployment, NetworkPolicyService → network_policy: the kinds the audit trail names.
        const kind = req.service.name
          .replace(/Service$/, "")
          .replace(/(?<=[a-z])(?=[A-Z])/g, "_")
          .toLowerCase();
        await onDenied(principal, req.method.name, req.contextValues.get(projectAccessKey)?.deniedProject ?? "", error, { kind, id: id ?? "" });
      }
      throw error;
    }
  };
}

/** The id or name a request names (its own `id`, or its resource's), for the audit trail; undefined if none. */
function requestedObject(message: Record<string, unknown>): string | undefined {
  for (const key of ["id", "name"]) if (typeof message[key] === "string" && message[key]) return message[key];
  for (const value of Object.values(message)) {
    if (value && typeof value === "object" && !Array.isArray(value)) {
      const inner = value as Record<string, unknown>;
      for (const key of ["id", "name"]) if (typeof inner[key] === "string" && inner[key]) return inner[key];
    }
  }
  return undefined;
}

/** The access of a project-scoped call; throws if the call is not one (a handler outside the table's project scope). */
export function projectAccess(ctx: { values: ContextValues }): ProjectAccess {
  const access = ctx.values.get(projectAccessKey);
  if (!access) throw new ConnectError("authorization: this RPC is not project-scoped in the permission table", Code.Internal);
  return access;
}

/** A client certificate that chained to the client CA; `region` from its SPIFFE URI SAN, if it names one. */
export interface ClientCertificate {
  region: string | undefined;
}

export interface AuthOptions {
  adminToken: string;
  /** False for a token that cannot be an agent token of this deployment (a forgery): refused without a lookup. */
  mayBeAgentToken(token: string): boolean;
  /** What an agent token grants, or undefined if it is unknown or expired. */
  authenticateAgent(token: string): Promise<TokenGrant | undefined>;
  /** False for a token that cannot be an operator token of this deployment (a forgery): refused without a lookup. */
  mayBeOperatorToken(token: string): boolean;
  /** What an operator token grants, or undefined if it is unknown, expired or revoked. */
  authenticateOperator(token: string): Promise<OperatorGrant | undefined>;
  /** Services anyone may call (reflection, health). */
  publicServices: ReadonlySet<string>;
  /** The projects project-scoped calls are decided by; absent: none (fleet-wide roles only). */
  catalog?: ProjectCatalog;
  /** Entries of each token cache (known and unknown tokens), at most. */
  tokenCacheSize: number;
  /** How long a known token's grant is cached before it is looked up again. */
  knownTokenCacheMs: number;
  /** Called for every streaming call an agent or operator token authorized (to end it if the token is revoked); `ended` aborts when the call ends. */
  onTokenStream?(token: string, values: ContextValues, ended: AbortSignal): void;
  /** Set when mTLS is required: the verified client certificate under a call, or undefined if none was presented. */
  clientCertificate?(values: ContextValues): ClientCertificate | undefined;
  /** Called for every streaming call of a person signed in with OIDC: it must end at `expireTime` (ms). */
  onExpiringStream?(expireTime: number, values: ContextValues, ended: AbortSignal): void;
  /** Set with single sign-on: verifies the issuer's ID tokens (bearer tokens that are JWTs). */
  oidc?: OidcVerifier;
  /** Set with the console's sign-in: reads session cookies (each call must carry its CSRF token). */
  sessions?: SessionCodec;
  /** Called for each call refused PERMISSION_DENIED after its caller was authenticated (the audit trail records it). */
  onDenied?(principal: Principal, rpc: string, project: string, error: ConnectError, object?: { kind: string; id: string }): Promise<void>;
}

/** The principal of a person signed in with OIDC. */
export function oidcPrincipal(subject: string, groups: readonly string[], expireTime: number): Principal {
  return { kind: "operator", name: `oidc:${subject}`, role: Role.UNSPECIFIED, groups, subject, expireTime };
}

export const DEFAULT_TOKEN_CACHE_SIZE = 10_000;
/** A known token is looked up again after this long: revocation (of agent and operator tokens) and region deletion reach every replica within 1 s. */
export const DEFAULT_TOKEN_RECHECK_MS = 500;

export interface Authenticator {
  interceptor: Interceptor;
  /**
   * The refusal an Authorization header earns on its own (no bearer token; neither the admin
   * token nor a possible agent or operator token), as the interceptor would throw it; undefined when
   * the call may go on to the interceptor.
   */
  refusal(authorization: string | null | undefined, cookie?: string | null, csrf?: string | null): ConnectError | undefined;
  /** Entries in the known- and unknown-token caches. */
  cacheSize(): { known: number; unknown: number };
}

export function createAuthenticator(options: AuthOptions): Authenticator {
  const adminDigest = digest(options.adminToken);
  const known = new LruCache<string, Principal>(options.tokenCacheSize);
  const unknown = new LruCache<string, true>(options.tokenCacheSize);
  /** The token's principal and until when (ms) it may be cached. */
  const lookUp = async (token: string, now: number): Promise<{ principal: Principal; cacheUntil: number } | OidcRefusal | undefined> => {
    const recheck = now + options.knownTokenCacheMs;
    if (options.oidc && OidcVerifier.looksLikeJwt(token)) {
      const identity = await options.oidc.verify(token).catch((error: unknown) => {
        if (error instanceof OidcRefusal) return error;
        throw error;
      });
      if (identity instanceof OidcRefusal) return identity;
      // A verified ID token stays valid until it expires: nothing at ctrl revokes it, so unlike
      // a stored token it is not looked up again every knownTokenCacheMs. Verifying one (ES256)
      // took 74 µs at the median and 240 µs at p99 (bench/diag/oidc-cost.ts); a cache hit is a
      // map lookup. It is kept no longer than the key set it was verified with is used, so a
      // key the issuer withdraws stops letting its tokens in when the keys are fetched again.
      const cacheUntil = Math.min(identity.expireTime, options.oidc.keysDueAt());
      return { principal: oidcPrincipal(identity.subject, identity.groups, identity.expireTime), cacheUntil };
    }
    if (options.mayBeOperatorToken(token)) {
      const grant = await options.authenticateOperator(token);
      return (
        grant && {
          principal: { kind: "operator", name: grant.name, role: grant.role, groups: [] },
          cacheUntil: Math.min(recheck, grant.expireTime ?? Infinity),
        }
      );
    }
    const grant = await options.authenticateAgent(token);
    return (
      grant && { principal: { kind: "agent", region: grant.region, regionId: grant.regionId }, cacheUntil: Math.min(recheck, grant.expireTime ?? Infinity) }
    );
  };
  const tokenPrincipal = async (token: string): Promise<Principal | OidcRefusal | undefined> => {
    const now = Date.now();
    if (unknown.get(token, now)) return undefined;
    const cached = known.get(token, now);
    if (cached) return cached.value;
    const found = await lookUp(token, now);
    if (found instanceof OidcRefusal) {
      // A refusal that may pass later (the issuer's keys could not be fetched) is not remembered.
      if (found.lasting) unknown.set(token, true, Infinity);
      return found;
    }
    if (found) known.set(token, found.principal, found.cacheUntil);
    // Tokens are random and committed before they are handed out, and a revoked or expired one
    // never comes back: an unknown token stays unknown, so it leaves only by the cache's bound.
    else unknown.set(token, true, Infinity);
    return found?.principal;
  };
  /** Why the header is refused, or the token to look up (undefined: the admin token). */
  const credential = (
    authorization: string | null | undefined,
    cookie: string | null | undefined,
    csrf: string | null | undefined,
  ): Refusal | { token: string | undefined } | { principal: Principal } => {
    const token = bearerToken(authorization);
    if (!token) {
      // The console's session cookie, with its CSRF token (never without: another site's form could send the cookie).
      const check = options.sessions?.check(cookie, csrf);
      if (check && "refusal" in check) return check.refusal;
      if (check) return { principal: oidcPrincipal(check.session.subject, check.session.groups, check.session.expireTime) };
      return "missing";
    }
    if (timingSafeEqual(digest(token), adminDigest)) return { token: undefined };
    if (options.oidc && OidcVerifier.looksLikeJwt(token)) return { token };
    // Forgeries are refused here, and not cached: the screen is as cheap as a cache hit, and would fill the cache.
    if (!options.mayBeAgentToken(token) && !options.mayBeOperatorToken(token)) return "invalid";
    return { token };
  };
  const interceptor: Interceptor = (next) => async (req) => {
    if (options.publicServices.has(req.service.typeName)) return next(req);
    const presented = credential(req.header.get("authorization"), req.header.get("cookie"), req.header.get(CSRF_HEADER));
    if (typeof presented === "string") throw refusalError(presented);
    const token = "token" in presented ? presented.token : undefined;
    const principal = "principal" in presented ? presented.principal : token === undefined ? ({ kind: "admin" } as const) : await tokenPrincipal(token);
    if (principal === undefined) throw refusalError("invalid");
    if (principal instanceof OidcRefusal) throw new ConnectError(`invalid token: ${principal.message}`, Code.Unauthenticated);
    let access: ProjectAccess | undefined;
    try {
      access = await authorize(principal, req.service.typeName, req.method.localName, req.method.name);
    } catch (error) {
      if (error instanceof ConnectError && error.code === Code.PermissionDenied) await options.onDenied?.(principal, req.method.name, "", error);
      throw error;
    }
    const isCluster = req.service.typeName === ClusterService.typeName;
    if (isCluster && options.clientCertificate) {
      const certificate = options.clientCertificate(req.contextValues);
      if (certificate || !SECRET_VALUE_METHODS.has(req.method.name)) checkClientCertificate(certificate, principal);
      req.contextValues.set(callCertificateKey, { mtls: true, certificate });
    }
    req.contextValues.set(principalKey, principal);
    req.contextValues.set(projectAccessKey, access);
    // A stream of an OIDC token or a session ends when it does; static tokens' streams are re-checked against the store.
    if (req.stream && principal.kind === "operator" && principal.expireTime !== undefined) {
      options.onExpiringStream?.(principal.expireTime, req.contextValues, req.signal);
    } else if (token !== undefined && req.stream) {
      options.onTokenStream?.(token, req.contextValues, req.signal);
    }
    return next(req);
  };
  /** The call's decision (authorization/decide.ts), and for a project-scoped RPC the access its handler completes it with. */
  const authorize = async (principal: Principal, service: string, localName: string, rpc: string): Promise<ProjectAccess | undefined> => {
    const permission = permissionOf(service, localName);
    if (!permission) throw new ConnectError(`${rpc} has no entry in the permission table: refused`, Code.PermissionDenied);
    const projectScoped = permission.scope === "project" || permission.scope === "any-project";
    const catalog = projectScoped && principal.kind !== "agent" ? await catalogNow() : undefined;
    decide(principal, permission, rpc, catalog);
    if (permission.scope !== "project") return undefined;
    return new ProjectAccess(principal, rpc, permission.role, catalog!, refreshCatalog);
  };
  const catalogNow = (): Promise<CatalogSnapshot> => options.catalog?.current() ?? Promise.resolve(NO_PROJECTS);
  const refreshCatalog = (): Promise<CatalogSnapshot> => {
    options.catalog?.invalidate();
    return catalogNow();
  };
  return {
    interceptor,
    refusal: (authorization, cookie, csrf) => {
      const presented = credential(authorization, cookie, csrf);
      // Shared instances: only read, and a new error (its stack) would cost more than the rest of a refusal.
      return typeof presented === "string" ? REFUSALS[presented] : undefined;
    },
    cacheSize: () => ({ known: known.size, unknown: unknown.size }),
  };
}

const NO_PROJECTS: CatalogSnapshot = { projects: new Map(), regionLabels: new Map() };

/**
 * The token of an `Authorization: Bearer <token>` header (RFC 6750: the scheme is
 * case-insensitive; whitespace around the token is not part of it), or undefined. The one
 * rule for every path that reads the header.
 */
export function bearerToken(authorization: string | null | undefined): string | undefined {
  return /^\s*Bearer\s+(\S+)\s*$/i.exec(authorization ?? "")?.[1];
}

type Refusal = "missing" | "invalid" | "session" | "csrf";

const REFUSAL_MESSAGES: Record<Refusal, string> = {
  missing: "missing bearer token (Authorization: Bearer <token>)",
  invalid: "invalid token",
  session: "the console session has expired or is not valid: sign in again",
  csrf: `a call with the session cookie needs its CSRF token (header ${CSRF_HEADER}): refused`,
};

function refusalError(refusal: Refusal): ConnectError {
  return new ConnectError(REFUSAL_MESSAGES[refusal], Code.Unauthenticated);
}

const REFUSALS: Record<Refusal, ConnectError> = {
  missing: Object.freeze(refusalError("missing")),
  invalid: Object.freeze(refusalError("invalid")),
  session: Object.freeze(refusalError("session")),
  csrf: Object.freeze(refusalError("csrf")),
};

function checkClientCertificate(certificate: ClientCertificate | undefined, principal: Principal): void {
  if (!certificate) throw new ConnectError("ClusterService requires a client certificate (mTLS)", Code.Unauthenticated);
  if (certificate.region === undefined) {
    throw new ConnectError("the client certificate names no region (URI SAN spiffe://<trust-domain>/region/<region>)", Code.PermissionDenied);
  }
  if (principal.kind === "agent" && principal.region !== certificate.region) {
    throw new ConnectError(
      `the client certificate is for region ${JSON.stringify(certificate.region)}, the token for ${JSON.stringify(principal.region)}`,
      Code.PermissionDenied,
    );
  }
}

/**
 * Whether the caller may receive region row `region`'s secret values, or the keys that open
 * them: the region's own agent token and, with mTLS on, the region's own client certificate
 * too. Never the admin token, nor a token alone where certificates are required: whoever can
 * create an agent token must not thereby read the region's values.
 */
export function maySeeSecretValues(ctx: { values: ContextValues }, region: RegionRow): boolean {
  const principal = ctx.values.get(principalKey);
  if (principal.kind !== "agent" || principal.regionId !== region.id) return false;
  const call = ctx.values.get(callCertificateKey);
  return !call.mtls || call.certificate?.region === region.name;
}

/** Throws PERMISSION_DENIED, saying what is needed, unless maySeeSecretValues(). */
export function authorizeSecretValues(ctx: HandlerContext, region: RegionRow): void {
  if (maySeeSecretValues(ctx, region)) return;
  const certificate = ctx.values.get(callCertificateKey).mtls ? " and its client certificate" : "";
  throw new ConnectError(`only region ${JSON.stringify(region.name)}'s agent, with its token${certificate}, may have its secret values`, Code.PermissionDenied);
}

/** Throws PERMISSION_DENIED unless the caller may act for `region`. */
export function authorizeRegion(ctx: HandlerContext, region: string): void {
  const principal = ctx.values.get(principalKey);
  if (principal.kind === "admin") return;
  if (principal.kind === "agent" && principal.region === region) return;
  throw new ConnectError(`this token may not act for region ${JSON.stringify(region)}`, Code.PermissionDenied);
}

/** Resolves a region the caller may act for: an agent only the very region row its token was issued for, not a namesake created since. */
export async function resolveAuthorizedRegion(ctx: HandlerContext, regions: { resolve(name: string): Promise<RegionRow> }, name: string): Promise<RegionRow> {
  authorizeRegion(ctx, name);
  const region = await regions.resolve(name);
  const principal = ctx.values.get(principalKey);
  if (principal.kind === "agent" && principal.regionId !== region.id) {
    throw new ConnectError(`this token was issued for an earlier region ${JSON.stringify(name)}, since deleted`, Code.PermissionDenied);
  }
  return region;
}

function digest(token: string): Buffer {
  // Comparing fixed-length digests keeps the comparison constant-time whatever the length.
  return hash("sha256", token, "buffer");
}
