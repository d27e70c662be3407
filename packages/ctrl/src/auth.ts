// Bearer-token authentication. The admin token may call everything; an agent token only
// ClusterService, and only for its own region row (checked by the handler, which knows it).
// With mTLS, every ClusterService call must also present a client certificate; an agent's
// certificate must name its token's region.
import { hash, timingSafeEqual } from "node:crypto";
import { Code, ConnectError, createContextKey, type ContextValues, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import type { RegionRow, TokenGrant } from "@flotilla/store";
import { LruCache } from "./lru-cache.ts";

export type Principal = { kind: "anonymous" } | { kind: "admin" } | { kind: "agent"; region: string; regionId: number };

export const principalKey = createContextKey<Principal>({ kind: "anonymous" }, { description: "authenticated caller" });

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
  /** Services anyone may call (reflection, health). */
  publicServices: ReadonlySet<string>;
  /** Entries of each token cache (known and unknown tokens), at most. */
  tokenCacheSize: number;
  /** How long a known token's grant is cached before it is looked up again. */
  knownTokenCacheMs: number;
  /** Called for every streaming call an agent token authorized (to end it if the token is revoked); `ended` aborts when the call ends. */
  onAgentStream?(token: string, values: ContextValues, ended: AbortSignal): void;
  /** Set when mTLS is required: the verified client certificate under a call, or undefined if none was presented. */
  clientCertificate?(values: ContextValues): ClientCertificate | undefined;
}

export const DEFAULT_TOKEN_CACHE_SIZE = 10_000;
/** A known token is looked up again after this long: revocation and region deletion reach every replica within 1 s. */
export const DEFAULT_TOKEN_RECHECK_MS = 500;

export interface Authenticator {
  interceptor: Interceptor;
  /**
   * The refusal an Authorization header earns on its own (no bearer token; neither the admin
   * token nor a possible agent token), as the interceptor would throw it; undefined when
   * the call may go on to the interceptor.
   */
  refusal(authorization: string | null | undefined): ConnectError | undefined;
  /** Entries in the known- and unknown-token caches. */
  cacheSize(): { known: number; unknown: number };
}

export function createAuthenticator(options: AuthOptions): Authenticator {
  const adminDigest = digest(options.adminToken);
  const known = new LruCache<string, TokenGrant>(options.tokenCacheSize);
  const unknown = new LruCache<string, true>(options.tokenCacheSize);
  const agentGrant = async (token: string): Promise<TokenGrant | undefined> => {
    const now = Date.now();
    if (unknown.get(token, now)) return undefined;
    const cached = known.get(token, now);
    if (cached) return cached.value;
    const grant = await options.authenticateAgent(token);
    if (grant) known.set(token, grant, Math.min(now + options.knownTokenCacheMs, grant.expireTime ?? Infinity));
    // Tokens are random and committed before they are handed out, and a revoked or expired one
    // never comes back: an unknown token stays unknown, so it leaves only by the cache's bound.
    else unknown.set(token, true, Infinity);
    return grant;
  };
  /** Why the header is refused, or the agent token to look up (undefined: the admin token). */
  const credential = (authorization: string | null | undefined): Refusal | { agentToken: string | undefined } => {
    const token = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? "")?.[1];
    if (!token) return "missing";
    if (timingSafeEqual(digest(token), adminDigest)) return { agentToken: undefined };
    // Forgeries are refused here, and not cached: the screen is as cheap as a cache hit, and would fill the cache.
    if (!options.mayBeAgentToken(token)) return "invalid";
    return { agentToken: token };
  };
  const interceptor: Interceptor = (next) => async (req) => {
    if (options.publicServices.has(req.service.typeName)) return next(req);
    const presented = credential(req.header.get("authorization"));
    if (typeof presented === "string") throw refusalError(presented);
    const token = presented.agentToken;
    let principal: Principal;
    if (token === undefined) {
      principal = { kind: "admin" };
    } else {
      const grant = await agentGrant(token);
      if (grant === undefined) throw refusalError("invalid");
      principal = { kind: "agent", region: grant.region, regionId: grant.regionId };
    }
    const isCluster = req.service.typeName === ClusterService.typeName;
    if (principal.kind === "agent" && !isCluster) {
      throw new ConnectError(`agent tokens may not call ${req.service.typeName}; use the admin token`, Code.PermissionDenied);
    }
    if (isCluster && options.clientCertificate) checkClientCertificate(options.clientCertificate(req.contextValues), principal);
    req.contextValues.set(principalKey, principal);
    if (token !== undefined && req.stream) options.onAgentStream?.(token, req.contextValues, req.signal);
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
