// User impersonation (Impersonate-User, -Group, -Uid, -Extra-* headers), as the API server's
// filter does it (apiserver/pkg/endpoints/filters/impersonation.go): the requester must be
// allowed the verb "impersonate" on each thing it asks for (users, groups, serviceaccounts,
// uids, userextras); then the request runs as the impersonated user, who is authenticated
// (system:authenticated) unless it is system:anonymous. Without RBAC every request may.
import type { IncomingMessage } from "node:http";
import type { UserInfo } from "./auth.ts";
import { internalError } from "./errors.ts";
import { forbiddenRequest, type RbacAuthorizer, type RequestAttributes } from "./rbac.ts";

const SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:";
const ANONYMOUS = "system:anonymous";
const AUTHENTICATED = "system:authenticated";
const UNAUTHENTICATED = "system:unauthenticated";

function actingAs(group: string, resource: string, name: string, namespace = "", subresource = ""): RequestAttributes {
  return { verb: "impersonate", path: "", resourceRequest: true, group, version: "", resource, subresource, namespace, name };
}

/**
 * The user a request runs as: `user` itself without impersonation headers, else the user it
 * impersonates, once `authorizer` (when RBAC is on) allows each part. Throws the API server's
 * errors: 500 for groups, extras or a uid without a user; 403 naming what may not be impersonated.
 */
export function impersonatedUser(req: IncomingMessage, user: UserInfo, authorizer: RbacAuthorizer | undefined): UserInfo {
  const headers = req.headersDistinct;
  const name = headers["impersonate-user"]?.[0];
  const groups = headers["impersonate-group"] ?? [];
  const uid = headers["impersonate-uid"]?.[0];
  const extras = Object.entries(headers).filter(([key]) => key.startsWith("impersonate-extra-"));
  if (name === undefined) {
    if (groups.length > 0 || uid !== undefined || extras.length > 0)
      throw internalError("requested impersonation of groups, a uid or extras without impersonating a user");
    return user;
  }

  const checks: RequestAttributes[] = [];
  const impersonatedGroups = [...groups];
  if (name.startsWith(SERVICE_ACCOUNT_PREFIX) && name.split(":").length === 4) {
    const [, , namespace, account] = name.split(":") as [string, string, string, string];
    checks.push(actingAs("", "serviceaccounts", account, namespace));
    impersonatedGroups.push("system:serviceaccounts", `system:serviceaccounts:${namespace}`);
  } else {
    checks.push(actingAs("", "users", name));
  }
  for (const group of groups) checks.push(actingAs("", "groups", group));
  if (uid !== undefined) checks.push(actingAs("authentication.k8s.io", "uids", uid));
  for (const [key, values] of extras) {
    for (const value of values ?? [])
      checks.push(actingAs("authentication.k8s.io", "userextras", value, "", decodeURIComponent(key.slice("impersonate-extra-".length))));
  }
  for (const attributes of checks) {
    const decision = authorizer?.authorize(user, attributes) ?? { allowed: true, reason: "" };
    if (!decision.allowed) throw forbiddenRequest(user, attributes, decision.reason);
  }

  if (name !== ANONYMOUS) {
    if (!impersonatedGroups.includes(AUTHENTICATED) && !impersonatedGroups.includes(UNAUTHENTICATED)) impersonatedGroups.push(AUTHENTICATED);
  } else if (!impersonatedGroups.includes(UNAUTHENTICATED)) {
    impersonatedGroups.push(UNAUTHENTICATED);
  }
  return { name, groups: impersonatedGroups };
}
