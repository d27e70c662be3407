// rbac.authorization.k8s.io/v1 Role, ClusterRole, RoleBinding and ClusterRoleBinding:
// pkg/registry/rbac/{role,clusterrole,rolebinding,clusterrolebinding}/strategy.go, alike but
// for their scope: stored as given, names any path segment (ValidateRBACName). The
// authorizer that reads them is rbac.ts.
import { RBAC, TYPE_META, list, obj, openObject, ref, str, strList } from "../openapi-schemas.ts";
import type { Schema } from "../schema.ts";
import { defineKind, type KindStrategy } from "./strategy.ts";

function rbacKind(kind: string, definitions: Record<string, Schema>): KindStrategy {
  return defineKind({
    group: "rbac.authorization.k8s.io",
    version: "v1",
    kind,
    resource: `${kind.toLowerCase()}s`,
    namespaced: !kind.startsWith("Cluster"),
    nameRule: "path",
    definitions,
  });
}

export const roles = rbacKind("Role", {
  [`${RBAC}.Role`]: obj("A namespaced set of PolicyRules.", { ...TYPE_META, rules: list(`${RBAC}.PolicyRule`, "The rules of this role.") }),
  [`${RBAC}.PolicyRule`]: obj(
    "What a rule allows: verbs on resources of API groups (or on non-resource URLs).",
    {
      verbs: strList("Verbs the rule allows; * is all."),
      apiGroups: strList('API groups of the resources; "" is the core group, * is all.'),
      resources: strList("Resources (and resource/subresource) the rule applies to; * is all."),
      resourceNames: strList("Names the rule is restricted to; empty is all."),
      nonResourceURLs: strList("URL paths (a trailing * is a prefix) for cluster-wide rules."),
    },
    ["verbs"],
  ),
});
export const clusterRoles = rbacKind("ClusterRole", {
  [`${RBAC}.ClusterRole`]: obj("A cluster-level set of PolicyRules.", {
    ...TYPE_META,
    rules: list(`${RBAC}.PolicyRule`, "The rules of this role."),
    aggregationRule: openObject("How to build the rules of an aggregated role (not evaluated by the emulator)."),
  }),
});
export const roleBindings = rbacKind("RoleBinding", {
  [`${RBAC}.RoleBinding`]: obj(
    "Grants a Role or ClusterRole to subjects in a namespace.",
    {
      ...TYPE_META,
      subjects: list(`${RBAC}.Subject`, "Who the role is granted to."),
      roleRef: ref(`${RBAC}.RoleRef`, "The role granted."),
    },
    ["roleRef"],
  ),
  [`${RBAC}.Subject`]: obj(
    "A user, group or service account a binding applies to.",
    {
      kind: str("User, Group or ServiceAccount."),
      apiGroup: str('rbac.authorization.k8s.io for User and Group, "" for ServiceAccount.'),
      name: str("Name of the subject."),
      namespace: str("Namespace of a ServiceAccount subject."),
    },
    ["kind", "name"],
  ),
  [`${RBAC}.RoleRef`]: obj(
    "The role a binding grants.",
    {
      apiGroup: str("rbac.authorization.k8s.io"),
      kind: str("Role or ClusterRole."),
      name: str("Name of the role."),
    },
    ["apiGroup", "kind", "name"],
  ),
});
export const clusterRoleBindings = rbacKind("ClusterRoleBinding", {
  [`${RBAC}.ClusterRoleBinding`]: obj(
    "Grants a ClusterRole to subjects cluster-wide.",
    {
      ...TYPE_META,
      subjects: list(`${RBAC}.Subject`, "Who the role is granted to."),
      roleRef: ref(`${RBAC}.RoleRef`, "The role granted."),
    },
    ["roleRef"],
  ),
});
