// Authorization: request attributes as the API server's RequestInfoFactory reads them from the
// URL (k8s.io/apiserver/pkg/endpoints/request/requestinfo.go), system:masters allowed outright
// (the privileged-group authorizer before RBAC), then the RBAC authorizer
// (plugin/pkg/auth/authorizer/rbac/rbac.go, rbac/v1 helpers' RuleAllows), and the 403 that
// responsewriters.Forbidden writes.
import type { UserInfo } from "./auth.ts";
import { ApiError, invalid } from "./errors.ts";
import type { Registry } from "./registry.ts";
import { findByPath } from "./kinds/index.ts";
import { isObject, type JsonObject, type KubeObject } from "./util.ts";

/** authorizer.Attributes: a resource request, or a non-resource one (then only verb and path). */
export interface RequestAttributes {
  verb: string;
  path: string;
  resourceRequest: boolean;
  group: string;
  version: string;
  resource: string;
  subresource: string;
  namespace: string;
  name: string;
}

export interface Decision {
  allowed: boolean;
  /** Why not, when RBAC met errors (a binding to a missing role): `RBAC: ...`, else "". */
  reason: string;
}

interface PolicyRule {
  verbs?: string[];
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

interface Subject {
  kind?: string;
  name?: string;
  namespace?: string;
}

const RBAC_GROUP = "rbac.authorization.k8s.io";
const [ROLES, CLUSTER_ROLES, ROLE_BINDINGS, CLUSTER_ROLE_BINDINGS] = ["roles", "clusterroles", "rolebindings", "clusterrolebindings"].map(
  (resource) => findByPath(RBAC_GROUP, "v1", resource)!,
);

/** Namespace subresources: /namespaces/<ns>/status is not a collection named "status". */
const NAMESPACE_SUBRESOURCES = ["status", "finalize"];

const METHOD_VERBS: Record<string, string> = { POST: "create", GET: "get", HEAD: "get", PUT: "update", PATCH: "patch", DELETE: "delete" };

/** The attributes of a request that names no resource (discovery, /healthz, /openapi/v3). */
function nonResourceAttributes(verb: string, path: string): RequestAttributes {
  return { verb, path, resourceRequest: false, group: "", version: "", resource: "", subresource: "", namespace: "", name: "" };
}

/** RequestInfoFactory.NewRequestInfo on a path split into segments. */
export function requestAttributes(method: string, path: string, segs: string[], query: Record<string, string>): RequestAttributes {
  const attributes = nonResourceAttributes(method.toLowerCase(), path);
  // /api/<version>/<rest> or /apis/<group>/<version>/<rest>, with something after the version.
  const grouped = segs[0] === "apis";
  if ((segs[0] !== "api" && !grouped) || segs.length < (grouped ? 4 : 3)) return attributes;
  let parts = segs.slice(grouped ? 3 : 2);
  Object.assign(attributes, { resourceRequest: true, group: grouped ? segs[1] : "", version: grouped ? segs[2] : segs[1] });
  if (parts[0] === "watch" && parts.length >= 2) {
    attributes.verb = "watch";
    parts = parts.slice(1);
  } else {
    attributes.verb = METHOD_VERBS[method] ?? "";
  }
  if (parts[0] === "namespaces" && parts.length > 1) {
    attributes.namespace = parts[1];
    if (parts.length > 2 && !NAMESPACE_SUBRESOURCES.includes(parts[2])) parts = parts.slice(2);
  }
  [attributes.resource = "", attributes.name = "", attributes.subresource = ""] = parts;
  if (!attributes.name && attributes.verb === "get") {
    attributes.verb = query.watch === "true" || query.watch === "1" ? "watch" : "list";
    // A list or watch of one object by field selector is authorized by that name.
    const byName = /^metadata\.name==?([^,]+)$/.exec(query.fieldSelector ?? "");
    if (byName && !byName[1].includes("/") && !byName[1].includes("%")) attributes.name = byName[1];
  }
  if (!attributes.name && attributes.verb === "delete") attributes.verb = "deletecollection";
  return attributes;
}

/** `*` or the value itself (rbac/v1 helpers VerbMatches, APIGroupMatches). */
const matches = (values: string[] | undefined, value: string) => (values ?? []).some((v) => v === "*" || v === value);

function resourceMatches(rule: PolicyRule, combined: string, subresource: string): boolean {
  return (rule.resources ?? []).some((r) => r === "*" || r === combined || (subresource !== "" && r === `*/${subresource}`));
}

function nonResourceURLMatches(rule: PolicyRule, path: string): boolean {
  return (rule.nonResourceURLs ?? []).some((url) => url === "*" || url === path || (url.endsWith("*") && path.startsWith(url.slice(0, -1))));
}

/** rbac/v1 helpers RuleAllows. */
export function ruleAllows(attributes: RequestAttributes, rule: PolicyRule): boolean {
  if (!matches(rule.verbs, attributes.verb)) return false;
  if (!attributes.resourceRequest) return nonResourceURLMatches(rule, attributes.path);
  const combined = attributes.subresource ? `${attributes.resource}/${attributes.subresource}` : attributes.resource;
  return (
    matches(rule.apiGroups, attributes.group) &&
    resourceMatches(rule, combined, attributes.subresource) &&
    (!rule.resourceNames?.length || rule.resourceNames.includes(attributes.name))
  );
}

/** Whether a binding's subject is this user (rbac.go appliesToUser); a ServiceAccount's namespace defaults to the binding's. */
function appliesTo(user: UserInfo, subject: Subject, bindingNamespace: string): boolean {
  switch (subject.kind) {
    case "User":
      return user.name === subject.name;
    case "Group":
      return user.groups.includes(subject.name ?? "");
    case "ServiceAccount":
      return user.name === `system:serviceaccount:${subject.namespace || bindingNamespace}:${subject.name}`;
    default:
      return false;
  }
}

/** Authorizes against the stored roles and bindings. */
export class RbacAuthorizer {
  readonly #registry: Registry;

  constructor(registry: Registry) {
    this.#registry = registry;
  }

  /**
   * system:masters is allowed; others are allowed when a ClusterRoleBinding, or a RoleBinding in
   * the request's namespace, grants them a role with a rule that allows the request.
   */
  authorize(user: UserInfo, attributes: RequestAttributes): Decision {
    if (user.groups.includes("system:masters")) return { allowed: true, reason: "" };
    const errors: string[] = [];
    const store = this.#registry.store;
    const bindings: KubeObject[] = store.list(CLUSTER_ROLE_BINDINGS);
    if (attributes.namespace) bindings.push(...store.list(ROLE_BINDINGS, attributes.namespace));
    for (const binding of bindings) {
      const namespace = binding.metadata.namespace ?? "";
      const subjects = Array.isArray(binding.subjects) ? (binding.subjects as Subject[]) : [];
      if (!subjects.some((subject) => isObject(subject) && appliesTo(user, subject, namespace))) continue;
      const roleRef = isObject(binding.roleRef) ? binding.roleRef : {};
      const roleName = String(roleRef.name ?? "");
      // A ClusterRoleBinding may only refer to a ClusterRole; a RoleBinding to either.
      const role =
        roleRef.kind === "Role" && namespace
          ? store.get(ROLES, namespace, roleName)
          : roleRef.kind === "ClusterRole"
            ? store.get(CLUSTER_ROLES, undefined, roleName)
            : undefined;
      if (!role) {
        errors.push(`${roleRef.kind === "Role" ? "role" : "clusterrole"}.${RBAC_GROUP} "${roleName}" not found`);
        continue;
      }
      const rules = Array.isArray(role.rules) ? (role.rules as PolicyRule[]) : [];
      if (rules.some((rule) => isObject(rule) && ruleAllows(attributes, rule))) return { allowed: true, reason: "" };
    }
    // utilerrors.NewAggregate prints one error as is, several as [a, b].
    const reason = errors.length === 0 ? "" : `RBAC: ${errors.length === 1 ? errors[0] : `[${errors.join(", ")}]`}`;
    return { allowed: false, reason };
  }
}

/**
 * The 403 of responsewriters.Forbidden: apierrors.NewForbidden of the group-resource and name,
 * with forbiddenMessage() and the authorizer's reason.
 */
export function forbiddenRequest(user: UserInfo, attributes: RequestAttributes, reason: string): ApiError {
  let message: string;
  if (!attributes.resourceRequest) {
    message = `User "${user.name}" cannot ${attributes.verb} path "${attributes.path}"`;
  } else {
    const resource = attributes.subresource ? `${attributes.resource}/${attributes.subresource}` : attributes.resource;
    const scope = attributes.namespace ? `in the namespace "${attributes.namespace}"` : "at the cluster scope";
    message = `User "${user.name}" cannot ${attributes.verb} resource "${resource}" in API group "${attributes.group}" ${scope}`;
  }
  return forbiddenError(attributes, reason ? `${message}: ${reason}` : message);
}

/** apierrors.NewForbidden(groupResource, name, why). */
export function forbiddenError(attributes: RequestAttributes, why: string): ApiError {
  const { group, resource, name } = attributes;
  if (!resource) return new ApiError(403, `forbidden: ${why}`, { details: {} });
  const qualified = group ? `${resource}.${group}` : resource;
  const message = name ? `${qualified} "${name}" is forbidden: ${why}` : `${qualified} is forbidden: ${why}`;
  return new ApiError(403, message, { details: { ...(name ? { name } : {}), group, kind: resource } });
}

/** The path of SelfSubjectAccessReview, the question `kubectl auth can-i` asks. */
export const SELF_SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";

const text = (value: unknown) => (typeof value === "string" ? value : "");

/**
 * POST selfsubjectaccessreviews (pkg/registry/authorization/selfsubjectaccessreview): may the
 * requesting user do what the spec describes? Without an authorizer (RBAC off) everything is allowed.
 */
export function selfSubjectAccessReview(user: UserInfo, authorizer: RbacAuthorizer | undefined, body: unknown): JsonObject {
  const spec = isObject(body) && isObject(body.spec) ? body.spec : {};
  const resource = isObject(spec.resourceAttributes) ? spec.resourceAttributes : undefined;
  const nonResource = isObject(spec.nonResourceAttributes) ? spec.nonResourceAttributes : undefined;
  if (!resource === !nonResource) {
    throw invalid("SelfSubjectAccessReview", "authorization.k8s.io", "", [
      {
        field: "spec.resourceAttributes",
        type: "Invalid value",
        value: "null",
        detail: "exactly one of nonResourceAttributes or resourceAttributes must be specified",
      },
    ]);
  }
  const attributes: RequestAttributes = resource
    ? {
        verb: text(resource.verb),
        path: "",
        resourceRequest: true,
        group: text(resource.group),
        version: text(resource.version),
        resource: text(resource.resource),
        subresource: text(resource.subresource),
        namespace: text(resource.namespace),
        name: text(resource.name),
      }
    : nonResourceAttributes(text(nonResource!.verb), text(nonResource!.path));
  const decision = authorizer ? authorizer.authorize(user, attributes) : { allowed: true, reason: "" };
  return {
    kind: "SelfSubjectAccessReview",
    apiVersion: "authorization.k8s.io/v1",
    metadata: { creationTimestamp: null },
    spec,
    status: { allowed: decision.allowed, ...(decision.reason ? { reason: decision.reason } : {}) },
  };
}

const BOOTSTRAP = { "kubernetes.io/bootstrapping": "rbac-defaults" };
const AUTOUPDATE = { "rbac.authorization.kubernetes.io/autoupdate": "true" };

function clusterRole(name: string, rules: PolicyRule[]): object {
  return { apiVersion: `${RBAC_GROUP}/v1`, kind: "ClusterRole", metadata: { name, labels: BOOTSTRAP, annotations: AUTOUPDATE }, rules };
}

function clusterRoleBinding(name: string, groups: string[]): object {
  return {
    apiVersion: `${RBAC_GROUP}/v1`,
    kind: "ClusterRoleBinding",
    metadata: { name, labels: BOOTSTRAP, annotations: AUTOUPDATE },
    roleRef: { apiGroup: RBAC_GROUP, kind: "ClusterRole", name },
    subjects: groups.map((group) => ({ apiGroup: RBAC_GROUP, kind: "Group", name: group })),
  };
}

/**
 * The bootstrap policy the emulator's RBAC starts with (bootstrappolicy/policy.go): cluster-admin
 * for system:masters, discovery and access reviews for authenticated users, health and version
 * for everyone.
 */
export const BOOTSTRAP_POLICY: readonly object[] = [
  clusterRole("cluster-admin", [
    { apiGroups: ["*"], resources: ["*"], verbs: ["*"] },
    { nonResourceURLs: ["*"], verbs: ["*"] },
  ]),
  clusterRoleBinding("cluster-admin", ["system:masters"]),
  clusterRole("system:discovery", [
    { nonResourceURLs: ["/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*", "/version", "/version/"], verbs: ["get"] },
  ]),
  clusterRoleBinding("system:discovery", ["system:authenticated"]),
  clusterRole("system:public-info-viewer", [{ nonResourceURLs: ["/healthz", "/livez", "/readyz", "/version", "/version/"], verbs: ["get"] }]),
  clusterRoleBinding("system:public-info-viewer", ["system:authenticated", "system:unauthenticated"]),
  clusterRole("system:basic-user", [
    { apiGroups: ["authorization.k8s.io"], resources: ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], verbs: ["create"] },
  ]),
  clusterRoleBinding("system:basic-user", ["system:authenticated"]),
];
