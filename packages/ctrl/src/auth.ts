// Bearer-token authentication. The admin token may call everything; an agent token only
// ClusterService, and only for its own region (checked by the handler, which knows it).
import { createHash, timingSafeEqual } from "node:crypto";
import { Code, ConnectError, createContextKey, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";

export type Principal = { kind: "anonymous" } | { kind: "admin" } | { kind: "agent"; region: string };

export const principalKey = createContextKey<Principal>({ kind: "anonymous" }, { description: "authenticated caller" });

export interface AuthOptions {
  adminToken: string;
  /** The region of an agent token, or undefined if the token is unknown. */
  agentRegion(token: string): Promise<string | undefined>;
  /** Services anyone may call (reflection, health). */
  publicServices: ReadonlySet<string>;
}

const AGENT_TOKEN_CACHE_MS = 30_000;

export function authInterceptor(options: AuthOptions): Interceptor {
  const adminDigest = digest(options.adminToken);
  const agentCache = new Map<string, { region: string | undefined; expires: number }>();
  const agentRegion = async (token: string) => {
    const cached = agentCache.get(token);
    if (cached && cached.expires > Date.now()) return cached.region;
    const region = await options.agentRegion(token);
    if (agentCache.size > 10_000) agentCache.clear();
    agentCache.set(token, { region, expires: Date.now() + AGENT_TOKEN_CACHE_MS });
    return region;
  };
  return (next) => async (req) => {
    if (options.publicServices.has(req.service.typeName)) return next(req);
    const token = /^Bearer\s+(\S+)\s*$/i.exec(req.header.get("authorization") ?? "")?.[1];
    if (!token) throw new ConnectError("missing bearer token (Authorization: Bearer <token>)", Code.Unauthenticated);
    let principal: Principal;
    if (timingSafeEqual(digest(token), adminDigest)) {
      principal = { kind: "admin" };
    } else {
      const region = await agentRegion(token);
      if (region === undefined) throw new ConnectError("invalid token", Code.Unauthenticated);
      principal = { kind: "agent", region };
    }
    if (principal.kind === "agent" && req.service.typeName !== ClusterService.typeName) {
      throw new ConnectError(`agent tokens may not call ${req.service.typeName}; use the admin token`, Code.PermissionDenied);
    }
    req.contextValues.set(principalKey, principal);
    return next(req);
  };
}

/** Throws PERMISSION_DENIED unless the caller may act for `region`. */
export function authorizeRegion(ctx: HandlerContext, region: string): void {
  const principal = ctx.values.get(principalKey);
  if (principal.kind === "admin") return;
  if (principal.kind === "agent" && principal.region === region) return;
  throw new ConnectError(`this token may not act for region ${JSON.stringify(region)}`, Code.PermissionDenied);
}

function digest(token: string): Buffer {
  // Comparing fixed-length digests keeps the comparison constant-time whatever the length.
  return createHash("sha256").update(token).digest();
}
