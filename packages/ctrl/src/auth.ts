// Bearer-token authentication and authorization. The admin token may call everything; an
// operator token what its role allows (roles.ts); an agent token only ClusterService, and
// only for its own region row (checked by the handler, which knows it). With mTLS, every
// ClusterService call must also present a client certificate; an agent's certificate must
// name its token's region.
import { hash, timingSafeEqual } from "node:crypto";
import { Code, ConnectError, createContextKey, type ContextValues, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import type { OperatorGrant, RegionRow, TokenGrant } from "@flotilla/store";
import { LruCache } from "./lru-cache.ts";
import { requiredRole, roleAllows, roleName } from "./roles.ts";

export type Principal =
  | { kind: "anonymous" }
  | { kind: "admin" }
  | { kind: "operator"; name: string; role: Role }
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

/** The role a principal holds (agents and anonymous callers hold none). */
export function roleOf(principal: Principal): Role {
  if (principal.kind === "admin") return Role.ADMIN;
  return principal.kind === "operator" ? principal.role : Role.UNSPECIFIED;
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
  /** Entries of each token cache (known and unknown tokens), at most. */
  tokenCacheSize: number;
  /** How long a known token's grant is cached before it is looked up again. */
  knownTokenCacheMs: number;
  /** Called for every streaming call an agent or operator token authorized (to end it if the token is revoked); `ended` aborts when the call ends. */
  onTokenStream?(token: string, values: ContextValues, ended: AbortSignal): void;
  /** Set when mTLS is required: the verified client certificate under a call, or undefined if none was presented. */
  clientCertificate?(values: ContextValues): ClientCertificate | undefined;
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
  refusal(authorization: string | null | undefined): ConnectError | undefined;
  /** Entries in the known- and unknown-token caches. */
  cacheSize(): { known: number; unknown: number };
}

export function createAuthenticator(options: AuthOptions): Authenticator {
  const adminDigest = digest(options.adminToken);
  const known = new LruCache<string, Principal>(options.tokenCacheSize);
  const unknown = new LruCache<string, true>(options.tokenCacheSize);
  const lookUp = async (token: string): Promise<{ principal: Principal; expireTime: number | undefined } | undefined> => {
    if (options.mayBeOperatorToken(token)) {
      const grant = await options.authenticateOperator(token);
      return grant && { principal: { kind: "operator", name: grant.name, role: grant.role }, expireTime: grant.expireTime };
    }
    const grant = await options.authenticateAgent(token);
    return grant && { principal: { kind: "agent", region: grant.region, regionId: grant.regionId }, expireTime: grant.expireTime };
  };
  const tokenPrincipal = async (token: string): Promise<Principal | undefined> => {
    const now = Date.now();
    if (unknown.get(token, now)) return undefined;
    const cached = known.get(token, now);
    if (cached) return cached.value;
    const found = await lookUp(token);
    if (found) known.set(token, found.principal, Math.min(now + options.knownTokenCacheMs, found.expireTime ?? Infinity));
    // Tokens are random and committed before they are handed out, and a revoked or expired one
    // never comes back: an unknown token stays unknown, so it leaves only by the cache's bound.
    else unknown.set(token, true, Infinity);
    return found?.principal;
  };
  /** Why the header is refused, or the token to look up (undefined: the admin token). */
  const credential = (authorization: string | null | undefined): Refusal | { token: string | undefined } => {
    const token = bearerToken(authorization);
    if (!token) return "missing";
    if (timingSafeEqual(digest(token), adminDigest)) return { token: undefined };
    // Forgeries are refused here, and not cached: the screen is as cheap as a cache hit, and would fill the cache.
    if (!options.mayBeAgentToken(token) && !options.mayBeOperatorToken(token)) return "invalid";
    return { token };
  };
  const interceptor: Interceptor = (next) => async (req) => {
    if (options.publicServices.has(req.service.typeName)) return next(req);
    const presented = credential(req.header.get("authorization"));
    if (typeof presented === "string") throw refusalError(presented);
    const { token } = presented;
    const principal = token === undefined ? ({ kind: "admin" } as const) : await tokenPrincipal(token);
    if (principal === undefined) throw refusalError("invalid");
    authorize(principal, req.service.typeName, req.method.name);
    const isCluster = req.service.typeName === ClusterService.typeName;
    if (isCluster && options.clientCertificate) {
      const certificate = options.clientCertificate(req.contextValues);
      if (certificate || !SECRET_VALUE_METHODS.has(req.method.name)) checkClientCertificate(certificate, principal);
      req.contextValues.set(callCertificateKey, { mtls: true, certificate });
    }
    req.contextValues.set(principalKey, principal);
    if (token !== undefined && req.stream) options.onTokenStream?.(token, req.contextValues, req.signal);
    return next(req);
  };
  return {
    interceptor,
    refusal: (authorization) => {
      const presented = credential(authorization);
      // Shared instances: only read, and a new error (its stack) would cost more than the rest of a refusal.
      return typeof presented === "string" ? REFUSALS[presented] : undefined;
    },
    cacheSize: () => ({ known: known.size, unknown: unknown.size }),
  };
}

/** Throws PERMISSION_DENIED, naming the role needed, unless `principal` may call the method. */
export function authorize(principal: Principal, service: string, method: string): void {
  const needed = requiredRole(service, method);
  if (principal.kind === "admin") return;
  if (needed === "agent") {
    if (principal.kind === "agent") return;
    throw new ConnectError(`${method} is for agents: call it with an agent token (or the admin token)`, Code.PermissionDenied);
  }
  if (principal.kind === "agent") throw new ConnectError(`agent tokens may not call ${service}; use an operator token`, Code.PermissionDenied);
  const held = roleOf(principal);
  if (!roleAllows(held, needed)) {
    const who = principal.kind === "operator" ? `operator ${JSON.stringify(principal.name)} has role ${roleName(held)}` : "the caller has no role";
    throw new ConnectError(`${method} needs role ${roleName(needed)}; ${who}`, Code.PermissionDenied);
  }
}

/**
 * The token of an `Authorization: Bearer <token>` header (RFC 6750: the scheme is
 * case-insensitive; whitespace around the token is not part of it), or undefined. The one
 * rule for every path that reads the header.
 */
export function bearerToken(authorization: string | null | undefined): string | undefined {
  return /^\s*Bearer\s+(\S+)\s*$/i.exec(authorization ?? "")?.[1];
}

type Refusal = "missing" | "invalid";

const REFUSAL_MESSAGES: Record<Refusal, string> = {
  missing: "missing bearer token (Authorization: Bearer <token>)",
  invalid: "invalid token",
};

function refusalError(refusal: Refusal): ConnectError {
  return new ConnectError(REFUSAL_MESSAGES[refusal], Code.Unauthenticated);
}

const REFUSALS: Record<Refusal, ConnectError> = { missing: Object.freeze(refusalError("missing")), invalid: Object.freeze(refusalError("invalid")) };

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
